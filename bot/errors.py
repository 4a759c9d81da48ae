"""The one error hierarchy. Only the edges (CLI, Slack) turn these into exit codes or messages.

NcclbotError            every expected failure; `hint` says what to do next
├── InputError          a log we cannot read (binary, empty, too big, unreadable archive)
├── ConfigError         bad settings or config file
├── KnowledgeError      a defective card or taxonomy
├── NodeError           a node agent that is unknown, unreachable, refuses or is busy
└── StateError          the state database cannot be reached
"""

from __future__ import annotations


class NcclbotError(Exception):
    """An expected failure with a message for people and a hint of what to do next."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n{self.hint}" if self.hint else self.message


class InputError(NcclbotError):
    exit_code = 2


class ConfigError(NcclbotError):
    exit_code = 2


class KnowledgeError(NcclbotError):
    exit_code = 1


class NodeError(NcclbotError):
    exit_code = 3


class StateError(NcclbotError):
    exit_code = 3

"""What the tools of one conversation turn share (`ToolContext`), and the invocation text."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from bot.agent.backends import Analysis, NodeBackend
from bot.agent.redact import Redactor
from bot.answering.contract import ToolCall
from bot.config import Settings
from bot.knowledge.cards import Card
from bot.state.threads import ThreadState

#: analyze(path, settings, cards) -> (LogReport, Diagnosis); injectable for tests.
Analyze = Callable[[str, Settings, list[Card]], Analysis]


@dataclass
class ToolContext:
    """What the tools share within one conversation turn."""

    settings: Settings
    cards: dict[str, Card]
    state: ThreadState
    redactor: Redactor
    nodes: NodeBackend
    lang: str = "both"
    trace: list[ToolCall] = field(default_factory=list)
    analyze: Analyze | None = None
    #: attachment name -> (report, diagnosis), or the exception analysing it raised.
    analysed: dict[str, Analysis | Exception] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def invocation(name: str, args: Mapping[str, object]) -> str:
    return f"{name}({json.dumps(args, ensure_ascii=False, sort_keys=True)})"

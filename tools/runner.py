"""The one seam for subprocesses: fixed argument lists, a timeout, never a shell.

`SubprocessRunner` runs real commands; `RecordedRunner` replays recorded
outputs in tests and evals. Both return a `CommandOutput` and never raise:
a missing command, a permission error or a timeout is an output with a reason.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class CommandOutput:
    """What one command produced. `error` is set when it did not run to completion."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str = ""
    stderr: str = ""
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.returncode == 0


class CommandRunner(Protocol):
    def __call__(self, argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandOutput:
        """Run `argv` (no shell) and return its output; never raises."""
        ...


def render_argv(argv: Sequence[str]) -> str:
    """The argv as a copy-pasteable command line (for `invocation`)."""
    return shlex.join(argv)


class SubprocessRunner:
    """Runs commands with `subprocess.run`, bounded by a timeout, output capped."""

    def __init__(self, max_output: int = 4_000_000, env: Mapping[str, str] | None = None) -> None:
        self.max_output = max_output
        self.env = dict(env) if env is not None else None

    def __call__(self, argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandOutput:
        args = tuple(str(a) for a in argv)
        try:
            proc = subprocess.run(  # fixed argument list, no shell
                args,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                check=False,
                env=self.env,
            )
        except FileNotFoundError:
            return CommandOutput(args, 127, error=f"command not found: {args[0]}")
        except PermissionError as exc:
            return CommandOutput(args, 126, error=f"permission denied: {exc}")
        except subprocess.TimeoutExpired:
            return CommandOutput(args, 124, error=f"timed out after {timeout:g} s")
        except OSError as exc:
            return CommandOutput(args, 1, error=f"could not run {args[0]}: {exc}")
        return CommandOutput(
            args, proc.returncode, proc.stdout[: self.max_output], proc.stderr[: self.max_output]
        )


class RecordedRunner:
    """Replays recorded outputs keyed by argv; unknown commands are 'not found'."""

    def __init__(self, outputs: Mapping[tuple[str, ...], CommandOutput | str]) -> None:
        self.outputs = dict(outputs)
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandOutput:
        args = tuple(argv)
        self.calls.append(args)
        out = self.outputs.get(args)
        if out is None:
            return CommandOutput(args, 127, error=f"command not found: {args[0]}")
        if isinstance(out, str):
            return CommandOutput(args, 0, stdout=out)
        return out

"""Thin adapters to the parts the agent calls (hybrid retrieval, the node inventory and
node agents) and what it gives back when it cannot answer (`AgentDeclined`).

Nothing here falls back silently: a retrieval failure raises (the tool layer turns it
into a tool error the model sees, with the invocation), and node access is an
injectable `NodeBackend` (tests pass recorded outputs) that returns results, never raises.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from bot.config import Settings
from bot.errors import NcclbotError
from tools.result import ToolResult

if TYPE_CHECKING:
    from bot.diagnosis.engine import Diagnosis
    from bot.logs.model import LogReport
    from bot.nodes.inventory import Inventory
    from bot.retrieval.search import Hit

#: (report, diagnosis) of a set of logs, as `bot.answering.analysis.analyze_sources` makes them
Analysis = tuple["LogReport", "Diagnosis"]


def search_cards(query: str, k: int = 5, settings: Settings | None = None,
                 log_diagnosis: Diagnosis | None = None) -> list[Hit]:
    """Hybrid retrieval (BM25 + dense + the log's signatures) for `query`, best first.
    Raises when retrieval fails."""
    from bot.retrieval.search import search

    return search(query, k, log_diagnosis, settings=settings)


@dataclass(frozen=True)
class AgentDeclined:
    """The agent could not answer (no provider, the `llm` extra missing, the LLM unreachable,
    too slow, ungrounded...): why, as notes, each ending in "this is the deterministic
    answer."; the logs the deterministic answer is to read (the thread's, which may be more
    than this turn's); and `record(summary)`, which records the turn in the thread's memory
    with the summary of the answer given instead (None when the caller stopped waiting).
    The Troubleshooter builds that answer: the agent does not."""

    notes: tuple[str, ...]
    logs: tuple[str, ...] = ()
    record: Callable[[str], None] | None = None


class LlmWatch:
    """One LLM answer as its caller sees it: when its first request went out, whether a
    response came back, and whether the caller stopped waiting (`abandon`). The guarded
    chat model reports to it; an abandoned answer makes no further calls."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.sent_at: float | None = None
        self.answered = threading.Event()
        self.abandoned = threading.Event()

    def sending(self) -> None:
        """A request is about to go out (raises once the caller has stopped waiting)."""
        if self.abandoned.is_set():
            raise TimeoutError("the caller stopped waiting for this answer")
        if self.sent_at is None:
            self.sent_at = self.clock()

    def received(self) -> None:
        self.answered.set()

    def waiting_s(self) -> float:
        """Seconds the first request has waited for its response (0 before it is sent,
        and once it is answered)."""
        if self.sent_at is None or self.answered.is_set():
            return 0.0
        return self.clock() - self.sent_at

    def abandon(self) -> None:
        self.abandoned.set()


#: How every fallback note ends, and the note when no provider is configured.
DETERMINISTIC = "this is the deterministic answer."
NO_PROVIDER = "LLM unavailable (no provider configured: set NCCLBOT_LLM_PROVIDER)"


def load_nodes(settings: Settings) -> Inventory:
    """The node inventory (NCCLBOT_NODES_FILE); NcclbotError when there is none or it is bad."""
    from bot.nodes.inventory import load_inventory

    return load_inventory(settings.nodes_file)


def error_text(exc: NcclbotError) -> str:
    """An NcclbotError as one line for the model: the message and what to do next."""
    return f"{exc.message}. {exc.hint}" if exc.hint else str(exc.message)


def inventory_names(inv: Inventory | None) -> list[str]:
    """Node names, their hosts and group names (to hide from the model); none without an
    inventory."""
    if inv is None:
        return []
    return [*inv.nodes, *(n.host for n in inv.nodes.values()), *inv.groups]


class NodeBackend(Protocol):
    """Runs one read-only diagnostic (or a confirmed probe) on a node; never raises."""

    def run(self, node: str, tool: str, params: dict[str, Any] | None = None) -> ToolResult: ...


class ClientNodeBackend:
    """Node agents through `bot.nodes.runner.NodeRunner` (the inventory in
    NCCLBOT_NODES_FILE), waiting as long as each tool's spec says: a confirmed probe's own
    timeout, not a fixed 30 s."""

    def __init__(self, settings: Settings, user: str = "ncclbot-llm-agent") -> None:
        self.settings = settings
        self.user = user

    def run(self, node: str, tool: str, params: dict[str, Any] | None = None) -> ToolResult:
        invocation = f"node {tool} --node {node} {params or {}}"
        from bot.nodes.runner import NodeRunner

        try:
            return NodeRunner(self.settings, self.user).run(node, tool, params)
        except NcclbotError as exc:
            return ToolResult.failed(tool, invocation, error_text(exc))
        except Exception as exc:  # noqa: BLE001 - a node failure is a result for the model
            return ToolResult.failed(tool, invocation, f"{type(exc).__name__}: {exc}")

"""Thin adapters to the parts the agent calls: hybrid retrieval, the deterministic answer,
the node inventory and node agents.

Nothing here falls back silently: a retrieval failure raises (the tool layer turns it
into a tool error the model sees, with the invocation), and node access is an
injectable `NodeBackend` (tests pass recorded outputs) that returns results, never raises.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from bot.config import Settings
from bot.contract import Answer, LlmUse
from bot.errors import NcclbotError
from tools.result import ToolResult

if TYPE_CHECKING:
    from bot.diagnosis.engine import Diagnosis
    from bot.logs.model import LogReport
    from bot.nodes.inventory import Inventory
    from bot.retrieval.search import Hit


def search_cards(query: str, k: int = 5, settings: Settings | None = None,
                 log_diagnosis: Diagnosis | None = None) -> list[Hit]:
    """Hybrid retrieval (BM25 + dense + the log's signatures) for `query`, best first.
    Raises when retrieval fails."""
    from bot.retrieval.search import search

    return search(query, k, log_diagnosis, settings=settings)


#: (report, diagnosis) of a set of logs, as `bot.service.analyze_sources` returns them.
Analysis = tuple["LogReport", "Diagnosis"]
#: the analysis, made when first asked for (None without logs)
LazyAnalysis = Callable[[], "Analysis | None"]


def deterministic_answer(question: str, log_paths: Sequence[str] = (), lang: str = "both",
                         settings: Settings | None = None,
                         analysis: Analysis | None = None) -> Answer:
    """The answer without an LLM: `bot.ask.answer_question` (over `analysis` when given)."""
    from bot.ask import answer_question

    return answer_question(question, log_paths=tuple(log_paths), lang=lang, settings=settings,
                           analysis=analysis)


def fallback_answer(question: str, log_paths: Sequence[str], lang: str, settings: Settings,
                    notes: Sequence[str], analysis: LazyAnalysis | None = None) -> Answer:
    """The deterministic answer, marked as not from the LLM, with the notes saying why
    (over `analysis()` when given, so the logs are not read again)."""
    answer = deterministic_answer(question, log_paths, lang, settings,
                                  analysis() if analysis is not None else None)
    answer = answer.with_notes(*notes)
    answer.llm = LlmUse(used=False)
    return answer


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

"""Thin adapters to the parts the agent calls: retrieval, the deterministic answer, node agents.

Each prefers the real module (`bot.retrieval`, `bot.ask`, `bot.nodes.client`) and falls
back to a small local equivalent while that module is missing, so the agent works in
any checkout. Node access is an injectable `NodeBackend` (tests pass recorded outputs).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

from bot.config import Settings
from bot.knowledge.cards import Card
from tools.result import ToolResult

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}|[\u4e00-\u9fff]{2,}")


def _card_id(hit: Any) -> str | None:
    if isinstance(hit, str):
        return hit
    if isinstance(hit, dict):
        return hit.get("card") or hit.get("card_id") or hit.get("id")
    for attr in ("card_id", "id"):
        if isinstance(getattr(hit, attr, None), str):
            return str(getattr(hit, attr))
    card = getattr(hit, "card", None)
    return card if isinstance(card, str) else getattr(card, "id", None)


def _score(hit: Any) -> float | None:
    value = hit.get("score") if isinstance(hit, dict) else getattr(hit, "score", None)
    return float(value) if isinstance(value, (int, float)) else None


def keyword_search(query: str, cards: Sequence[Card], k: int = 5) -> list[tuple[str, float]]:
    """A small lexical ranking, used only while `bot.retrieval` is absent."""
    terms = {w.lower() for w in _WORD.findall(query)}
    scored = []
    for card in cards:
        words = {w.lower() for w in _WORD.findall(card.text("both") + " " + card.id)}
        hits = len(terms & words)
        if hits:
            scored.append((card.id, hits / max(1, len(terms))))
    return sorted(scored, key=lambda x: -x[1])[:k]


def search_cards(query: str, cards: Sequence[Card], k: int = 5,
                 settings: Settings | None = None) -> list[tuple[str, float | None]]:
    """(card id, score) pairs for `query`, best first."""
    try:
        from bot.retrieval import search
    except ImportError:
        return list(keyword_search(query, cards, k))
    try:
        try:
            hits = search(query, k=k, settings=settings)
        except TypeError:
            hits = search(query, k=k)
    except Exception:  # noqa: BLE001 - no index yet or a retrieval bug: still answer lexically
        return list(keyword_search(query, cards, k))
    known = {c.id for c in cards}
    out = []
    for hit in hits:
        cid = _card_id(hit)
        if cid in known:
            out.append((cid, _score(hit)))
    return out


def deterministic_answer(question: str, log_paths: Sequence[str] = (), lang: str = "both",
                         settings: Settings | None = None) -> dict[str, Any]:
    """The answer without an LLM: `bot.ask.answer_question`, or analyze/keyword as a stand-in."""
    try:
        from bot.ask import answer_question
    except ImportError:
        return _fallback_answer(question, log_paths, lang, settings)
    return dict(answer_question(question, log_paths=tuple(log_paths), lang=lang,
                                settings=settings))


def _fallback_answer(question: str, log_paths: Sequence[str], lang: str,
                     settings: Settings | None) -> dict[str, Any]:
    from bot.answer import card_brief
    from bot.service import analyze_paths, bundled_cards

    if log_paths:
        return analyze_paths(list(log_paths), settings, lang)
    cards = {c.id: c for c in bundled_cards()}
    found = [cards[cid] for cid, _ in keyword_search(question, list(cards.values()), 3)]
    return {
        "verdict": "unknown",
        "summary": f"Related: {found[0].title.en}." if found else "No matching card found.",
        "diagnosis": {"verdict": "unknown", "root_causes": [], "suspects": []},
        "remediation": {lg: [] for lg in (("en", "zh") if lang == "both" else (lang,))},
        "citations": [card_brief(c, lang) for c in found],
        "probes": [],
    }


class NodeBackend(Protocol):
    """Runs one read-only diagnostic (or a confirmed probe) on a node; never raises."""

    def run(self, node: str, tool: str, params: dict[str, Any] | None = None) -> ToolResult: ...


class ClientNodeBackend:
    """Node agents through `bot.nodes.client` and the inventory in NCCLBOT_NODES_FILE."""

    def __init__(self, settings: Settings, user: str = "ncclbot-llm-agent") -> None:
        self.settings = settings
        self.user = user

    def run(self, node: str, tool: str, params: dict[str, Any] | None = None) -> ToolResult:
        invocation = f"node {tool} --node {node} {params or {}}"
        try:
            from bot.errors import NcclbotError
            from bot.nodes.client import client_for
            from bot.nodes.inventory import load_inventory
        except ImportError as exc:
            return ToolResult.unavailable(tool, invocation, f"node client not installed: {exc}")
        try:
            target = load_inventory(self.settings.nodes_file).get(node)
            with client_for(self.settings, target, self.user) as client:
                return client.run(tool, params)
        except NcclbotError as exc:
            return ToolResult.failed(tool, invocation, str(exc))
        except Exception as exc:  # noqa: BLE001 - a node failure is a result for the model
            return ToolResult.failed(tool, invocation, f"{type(exc).__name__}: {exc}")

"""The bundled knowledge, loaded once per process (and kept on disk between processes):
the cards, the incidents, the nearest-incident index and the questions index."""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from bot.diagnosis import asked, nearest
from bot.diagnosis.asked import QuestionIndex
from bot.diagnosis.nearest import IncidentIndex
from bot.errors import KnowledgeError
from bot.knowledge import cards as cards_module
from bot.knowledge.cards import Card, card_files, load_cards
from bot.knowledge.incidents import Incident, incident_files, load_incidents
from bot.logs import salient
from bot.retrieval import tokenize

T = TypeVar("T")


def _bundled(load: Callable[[], list[T]], what: str) -> tuple[T, ...]:
    try:
        return tuple(load())
    except ValueError as exc:
        raise KnowledgeError(
            f"the knowledge base has a defective {what}: {exc}",
            hint="Run `ncclbot knowledge check` for the full list.",
        ) from exc


@lru_cache(maxsize=1)
def bundled_cards() -> tuple[Card, ...]:
    return _bundled(load_cards, "card")


@lru_cache(maxsize=1)
def bundled_incidents() -> tuple[Incident, ...]:
    return _bundled(load_incidents, "incident")


def _disk_cached(name: str, files: Sequence[Path], build: Callable[[], T],
                 cache_dir: Path | None, code: Sequence[ModuleType] = ()) -> T:
    """`build()`, kept on disk in `cache_dir` for the next process (a pickle of our own,
    keyed by the files it is built from and the code that builds it)."""
    if cache_dir is None:
        return build()
    h = hashlib.sha1(f"ncclbot-{name}-v1".encode())
    for module in code:
        h.update(Path(str(module.__file__)).read_bytes())
    for path in files:
        st = path.stat()
        h.update(f"{path.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    cached = Path(cache_dir) / f"{name}-{h.hexdigest()[:20]}.pickle"
    try:
        return pickle.loads(cached.read_bytes())  # type: ignore[no-any-return]
    except (OSError, pickle.PickleError, EOFError, AttributeError, ImportError, TypeError):
        pass
    value = build()
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        tmp.replace(cached)
    except OSError:
        pass  # a read-only cache dir: build on every start instead
    return value


@lru_cache(maxsize=2)
def knowledge_for(cache_dir: Path | None) -> tuple[tuple[Card, ...], IncidentIndex]:
    """The cards and the nearest-incident index over every bundled incident and card, once
    per process (and, with `cache_dir`, once per change of the knowledge files)."""
    def build() -> tuple[tuple[Card, ...], IncidentIndex]:
        return bundled_cards(), IncidentIndex(bundled_incidents(), bundled_cards())

    return _disk_cached("knowledge", [*incident_files(), *card_files()], build, cache_dir,
                        (nearest, salient, cards_module))


@lru_cache(maxsize=2)
def question_index(cache_dir: Path | None) -> QuestionIndex:
    """The incidents by the questions asked about them (`bot.diagnosis.asked`)."""
    return _disk_cached("questions", incident_files(), lambda: QuestionIndex(bundled_incidents()),
                        cache_dir, (asked, tokenize))


def bundled_index(cache_dir: Path | None = None) -> IncidentIndex:
    return knowledge_for(cache_dir)[1]

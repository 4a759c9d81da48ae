"""The dense index in chromadb: chunks, content hash, build and incremental rebuild.

Each card gives one chunk per language (title + symptoms; ROOT_CAUSE_CHARS of the root cause,
0 by default: embedding time grows quickly with length and BM25 covers the prose), so a
question in either language meets text in its own language and the model's 512-token window
is never exceeded. The index's content hash (format, model, every chunk's text) is stored in
the collection's metadata and in `index/ncclbot-index.json` next to an embedded store; when the
cards change, only new or changed chunks are embedded again.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bot.config import Settings
from bot.knowledge.cards import Card
from bot.retrieval.dense import Embedder, chroma_function, collection_name, make_embedder

INDEX_FORMAT = 3
LANGS = ("en", "zh")
ROOT_CAUSE_CHARS = {"en": 0, "zh": 0}

if TYPE_CHECKING:
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID


@dataclass(frozen=True)
class Chunk:
    id: str
    card: str
    lang: str
    text: str

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:16]


def chunks(cards: Sequence[Card]) -> list[Chunk]:
    out = []
    for card in cards:
        for lg in LANGS:
            rc = getattr(card.root_cause, lg)[: ROOT_CAUSE_CHARS[lg]]
            text = "\n".join([getattr(card.title, lg), *getattr(card.symptoms, lg), rc]).strip()
            out.append(Chunk(f"{card.id}::{lg}", card.id, lg, text))
    return out


SHIPPED = Path(__file__).with_name("data") / "card-vectors-{model}.json"


def shipped_vectors(model: str) -> dict[str, list[float]]:
    """Vectors of the bundled cards' chunks, computed when the cards last changed
    (`scripts/build_card_vectors.py`), by chunk text hash; empty for another model."""
    path = Path(str(SHIPPED).format(model=model))
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("model") != model:
        return {}
    return {h: list(np.frombuffer(base64.b64decode(v), dtype="<f4").astype(float))
            for h, v in data["vectors"].items()}


def content_hash(cards: Sequence[Card], model: str) -> str:
    h = hashlib.sha256(f"format={INDEX_FORMAT}\nmodel={model}\n".encode())
    for c in sorted(chunks(cards), key=lambda c: c.id):
        h.update(f"{c.id}\0{c.text}\0".encode())
    return h.hexdigest()


def index_dir(settings: Settings) -> Path:
    return settings.index_path


def open_client(settings: Settings) -> Any:
    """An embedded PersistentClient in the index dir, or an HttpClient when chroma_host is set."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    if settings.chroma_host:
        return chromadb.HttpClient(host=settings.chroma_host, port=settings.chroma_port,
                                   settings=chroma_settings)
    path = index_dir(settings)
    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=chroma_settings)


Progress = Callable[[int, int], None]


@dataclass
class BuildResult:
    collection: Any
    hash: str
    built: bool  # False: the stored index was current
    embedded: int  # chunks embedded in this call


def ensure_index(settings: Settings, cards: Sequence[Card], embedder: Embedder | None = None,
                 rebuild: bool = False, client: Any = None, progress: bool = True) -> BuildResult:
    """Open the card collection; (re)build it when missing, stale, or when `rebuild`."""
    embedder = embedder or make_embedder(settings.embedding_model)
    client = client or open_client(settings)
    name = collection_name(embedder.name)
    want = content_hash(cards, embedder.name)
    ef = chroma_function(embedder)
    if rebuild:
        _drop(client, name)
    coll = client.get_or_create_collection(name, embedding_function=ef,
                                           configuration={"hnsw": {"space": "cosine"}})
    if not rebuild and (coll.metadata or {}).get("content_hash") == want:
        return BuildResult(coll, want, False, 0)
    embedded = _sync(coll, chunks(cards), embedder, progress)
    coll.modify(metadata={"content_hash": want, "model": embedder.name, "format": INDEX_FORMAT})
    if not settings.chroma_host:
        _write_marker(index_dir(settings), name, want, embedder.name, len(cards))
    return BuildResult(coll, want, True, embedded)


def _drop(client: Any, name: str) -> None:
    try:
        client.delete_collection(name)
    except Exception:  # noqa: BLE001 - absent collection: nothing to drop
        pass


def _sync(coll: Any, wanted: list[Chunk], embedder: Embedder, progress: bool) -> int:
    """Delete stale chunks, embed new or changed ones; returns how many were embedded."""
    have = coll.get(include=["metadatas"])
    metas = have["metadatas"] or [None] * len(have["ids"])
    stored = {i: (m or {}).get("hash") for i, m in zip(have["ids"], metas, strict=True)}
    by_id = {c.id: c for c in wanted}
    stale = [i for i in stored if i not in by_id]
    if stale:
        coll.delete(ids=stale)
    todo = [c for c in wanted if stored.get(c.id) != c.hash]
    if not todo:
        return 0
    shipped = shipped_vectors(embedder.name)
    ready = [c for c in todo if c.hash in shipped]
    if ready:  # the bundled cards' vectors ship with the package: nothing to embed for them
        coll.upsert(ids=[c.id for c in ready], embeddings=[shipped[c.hash] for c in ready],
                    documents=[c.text for c in ready],
                    metadatas=[{"card": c.card, "lang": c.lang, "hash": c.hash} for c in ready])
    todo = [c for c in todo if c.hash not in shipped]
    if not todo:
        return 0
    with _Bar(len(todo), progress) as advance:
        for start in range(0, len(todo), 16):
            batch = todo[start:start + 16]
            vectors = embedder.passages([c.text for c in batch])
            coll.upsert(ids=[c.id for c in batch],
                        embeddings=[list(map(float, v)) for v in vectors],
                        documents=[c.text for c in batch],
                        metadatas=[{"card": c.card, "lang": c.lang, "hash": c.hash} for c in batch])
            advance(len(batch))
    return len(todo)


class _Bar:
    """A rich progress bar on stderr (a no-op when disabled)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled = total, enabled
        self._progress: RichProgress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> Callable[[int], None]:
        if self.enabled:
            from rich.console import Console
            from rich.progress import Progress

            progress = Progress(console=Console(stderr=True), transient=False)
            progress.start()
            self._task = progress.add_task("embedding knowledge cards", total=self.total)
            self._progress = progress
        return self._advance

    def _advance(self, n: int) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, n)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


def _write_marker(path: Path, name: str, digest: str, model: str, count: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    marker = path / "ncclbot-index.json"
    data = json.loads(marker.read_text()) if marker.is_file() else {}
    data[name] = {"content_hash": digest, "model": model, "cards": count, "format": INDEX_FORMAT}
    marker.write_text(json.dumps(data, indent=2) + "\n")


def stored_hash(settings: Settings, model: str) -> str | None:
    """The content hash recorded next to an embedded index (None when never built)."""
    marker = index_dir(settings) / "ncclbot-index.json"
    if not marker.is_file():
        return None
    found: str | None = json.loads(marker.read_text()).get(collection_name(model), {}).get(
        "content_hash")
    return found

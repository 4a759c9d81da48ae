"""Pairwise localization on scripted group runs (the logic; the real runs are in
test_multinode)."""

from __future__ import annotations

from bot.nodes.multiprobe import GroupRun, localize


def _runner(slow: set[str] = frozenset(), broken_link: frozenset[str] = frozenset()):
    calls: list[tuple[str, ...]] = []

    def run(group: tuple[str, ...]) -> GroupRun:
        calls.append(group)
        if broken_link and broken_link <= set(group):
            return GroupRun(group, False, None, 10.0, "timeout")
        bw = 2.0 if slow & set(group) else 10.0
        return GroupRun(group, True, bw, 3.0)
    return run, calls


def test_slow_node_is_the_outlier_among_its_peers() -> None:
    run, calls = _runner(slow={"e"})
    loc = localize(run, list("abcdef"), expected_busbw=9.0)
    assert loc.verdict == "node" and loc.culprits == ["e"]
    assert loc.nodes["f"]["verdict"] == "ok"
    for pairs in calls[1:]:
        assert len(pairs) == 2


def test_broken_link_between_two_good_nodes() -> None:
    run, _ = _runner(broken_link=frozenset({"a", "b"}))
    loc = localize(run, list("abcd"))
    assert loc.verdict == "link" and loc.culprits == ["a <-> b"]


def test_healthy_group_skips_pairwise_rounds() -> None:
    run, calls = _runner()
    loc = localize(run, list("abcd"))
    assert loc.verdict == "healthy" and calls == [tuple("abcd")]

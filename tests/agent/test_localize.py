"""Pairwise localization on scripted group runs (the logic; the real runs are in
test_multinode)."""

from __future__ import annotations

from bot.nodes.localize import GroupRun, MemberOutcome, localize
from tools.probe.params import ProbeParams


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
    assert loc.nodes["f"].verdict == "ok"
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


def test_four_nodes_slow_node_named_relative_to_its_peers() -> None:
    run, _ = _runner(slow={"c"})
    loc = localize(run, list("abcd"), mode="always")  # no expected busbw: peers only
    assert loc.verdict == "node" and loc.culprits == ["c"], loc.as_dict()
    assert {n: s.verdict for n, s in loc.nodes.items()} == {
        "a": "ok", "b": "ok", "c": "culprit", "d": "ok"}
    assert [p.nodes for p in loc.pairs if p.bad] == [("c", "d"), ("c", "a")]
    assert loc.nodes["c"].median_busbw_gbps == 2.0
    assert loc.nodes["c"].peers_median_busbw_gbps == 10.0


def test_three_nodes_slow_node_named() -> None:
    run, _ = _runner(slow={"c"})
    loc = localize(run, list("abc"), mode="always")
    assert loc.verdict == "node" and loc.culprits == ["c"], loc.as_dict()


def test_noise_between_healthy_pairs_blames_nobody() -> None:
    speeds = {"a": 10.0, "b": 6.0, "c": 9.0, "d": 5.5}  # up to 1.8x apart, none slow

    def run(group: tuple[str, ...]) -> GroupRun:
        return GroupRun(group, True, min(speeds[n] for n in group), 3.0)

    loc = localize(run, list("abcd"), mode="always")
    assert loc.verdict == "healthy" and loc.culprits == [], loc.as_dict()


def test_busy_node_in_a_round_is_reported_not_blamed() -> None:
    def run(group: tuple[str, ...]) -> GroupRun:
        if "b" in group and len(group) == 2:
            return GroupRun(group, False, None, 0.1, "b: node b is busy", busy=["b"])
        return GroupRun(group, True, 2.0 if "d" in group else 10.0, 3.0)

    loc = localize(run, list("abcd"), mode="always")
    assert loc.nodes["b"].verdict == "busy" and "b" not in loc.culprits
    assert all(not p.bad for p in loc.pairs if p.busy)
    assert "busy, not judged: b" in loc.summary

    def all_busy(group: tuple[str, ...]) -> GroupRun:
        return GroupRun(group, False, None, 0.1, "c: busy", busy=["c"])

    loc = localize(all_busy, list("abcd"))
    assert loc.verdict == "busy" and loc.culprits == [] and not loc.pairs
    assert "c" in loc.summary


def _h100(group: tuple[str, ...], bw: float, ports: int = 8) -> GroupRun:
    hw = {"gpu_name": "NVIDIA H100 80GB HBM3", "gpus": 8,
          "ib_port_rates": ["400 Gb/sec (4X NDR)"] * ports}
    return GroupRun(group, True, bw, 20.0,
                    per_node={n: MemberOutcome("success", hardware=hw) for n in group})


def test_auto_mode_defaults_expected_busbw_from_the_baselines() -> None:
    from bot.nodes.multiprobe import baseline_for

    calls: list[tuple[str, ...]] = []

    def run(group: tuple[str, ...]) -> GroupRun:
        calls.append(group)
        return _h100(group, 90.0 if "c" in group else 370.0)

    params = ProbeParams(backend="nccl", nproc=8, max_bytes=2**30)
    loc = localize(run, list("abcd"), baseline=baseline_for(params))
    assert loc.expected_busbw == 8 * 47.0 and "NDR" in (loc.expected_source or "")
    assert len(calls) > 1 and loc.verdict == "node" and loc.culprits == ["c"]
    assert "of the expected 376.0 GB/s" in loc.summary
    # a sweep too small for peak busbw, or unknown hardware: no default, no rounds
    calls.clear()
    small = localize(run, list("abcd"), baseline=baseline_for(
        params.model_copy(update={"max_bytes": 2**20})))
    assert small.expected_busbw is None and calls == [tuple("abcd")]
    gloo = localize(run, list("abcd"), baseline=baseline_for(
        params.model_copy(update={"backend": "gloo"})))
    assert gloo.verdict == "healthy" and gloo.expected_busbw is None


def test_expected_busbw_from_hardware() -> None:
    from tools.probe.baselines import expected_busbw

    assert expected_busbw("nccl", "NVIDIA H100 80GB HBM3", 8)[0] == 480.0
    assert expected_busbw("nccl", "NVIDIA H100 80GB HBM3", 8, 2, ["400 Gb/sec (4X NDR)"] * 4
                          )[0] == 4 * 47.0
    assert expected_busbw("nccl", "NVIDIA H100 80GB HBM3", 8, 2, ["200 Gb/sec (4X HDR)"]) is None
    assert expected_busbw("nccl", "NVIDIA A100-SXM4-80GB", 4) is None
    assert expected_busbw("gloo", None, 2) is None


def test_localization_renders_agent_text_as_text() -> None:
    from rich.console import Console

    from bot.nodes.commands import render_localization

    def run(group: tuple[str, ...]) -> GroupRun:
        if "c" in group:
            return GroupRun(group, False, None, 9.0, "c: RuntimeError [/evil] [red]x[/red]",
                            {"c": MemberOutcome("error", ranks_not_finished=[1])})
        return GroupRun(group, True, 10.0, 3.0)

    loc = localize(run, ["a", "b", "c"], mode="auto")
    con = Console(record=True, width=250)
    render_localization(loc, con)
    text = con.export_text()
    assert loc.culprits == ["c"] and "[/evil] [red]x[/red]" in text and "culprit" in text

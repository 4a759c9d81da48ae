"""Naming the slow or broken node (or link) of a multi-node probe (pure logic).

`localize` runs the whole group, then, when it failed, is below the expected busbw
(given, or from the hardware baselines), or always if asked, pairwise rounds:
node-disjoint pairs in parallel, then each member of a bad pair with a different
healthy peer. A pair is bad when it failed, is below `slow_ratio` x the expected
busbw, or when its busbw (or duration) is an outlier against the other pairs: below
`slow_ratio` x their median (the final judgement needs two other finished pairs to
compare with: one alone is as noisy as the pair judged). One slow node is in at most
half of the pairs, so for a pair that includes it the other pairs' median is a healthy
figure, while a healthy pair is measured against a median pulled down by the slow
ones and is not blamed for noise. With 4 nodes (a, b, c slow, d) the rounds are a-b,
c-d, then c-a, d-b: c is bad with both its partners while a-b and d-b are fine. A node
bad with every partner (at least two) is the culprit; a bad pair whose ends are fine
with other peers is a bad link. Runs where an agent answered busy judge nothing and
are reported.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Literal

from tools.probe.model import Hardware

Group = tuple[str, ...]
Mode = Literal["auto", "always", "never"]
#: (expected busbw in GB/s, where the figure comes from) for a finished full run.
Baseline = Callable[["GroupRun"], "tuple[float, str] | None"]


@dataclass(frozen=True)
class MemberOutcome:
    """What one node's agent said about its share of a group run."""

    status: str  # success | error | unavailable | busy | unreachable
    error: str | None = None
    duration_s: float | None = None
    busbw_gbps: float | None = None
    hardware: Hardware = field(default_factory=lambda: Hardware())
    ranks_not_finished: list[int] = field(default_factory=list)


@dataclass
class NodeStats:
    """One node over the pairwise rounds."""

    pairs: int
    bad_pairs: int
    median_busbw_gbps: float | None
    peers_median_busbw_gbps: float | None
    hung_here: bool
    busy: bool
    verdict: str = ""


@dataclass
class GroupRun:
    nodes: Group
    ok: bool
    busbw_gbps: float | None
    duration_s: float
    error: str | None = None
    per_node: dict[str, MemberOutcome] = field(default_factory=dict)
    bad: bool = False
    #: Members whose agent answered 409 (probe running, GPUs in use): nothing is judged.
    busy: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {"nodes": list(self.nodes), "ok": self.ok, "bad": self.bad,
                "busbw_gbps": self.busbw_gbps, "duration_s": round(self.duration_s, 2),
                "error": self.error, "busy": self.busy,
                "per_node": {n: asdict(o) for n, o in self.per_node.items()}}


def _reference(values: list[float]) -> float | None:
    """The figure a run is measured against: the median of the other runs."""
    return statistics.median(values) if values else None


def judge(runs: Sequence[GroupRun], slow_ratio: float = 0.5,
          expected_busbw: float | None = None, min_refs: int = 1) -> None:
    """Mark failed runs, and busbw/duration outliers among `runs`, as bad (in place).

    A run is compared with the other finished runs only when there are `min_refs` of
    them: one is enough to pick pairs worth a second look, but one other pair can be as
    noisy as the run itself, so the final judgement asks for two.
    """
    for r in runs:
        if r.busy:
            r.bad = False
            continue
        peers = [q for q in runs if q is not r and q.ok and not q.busy]
        bws = [q.busbw_gbps for q in peers if q.busbw_gbps is not None]
        ref_bw = _reference(bws) if len(bws) >= min_refs else None
        ref_t = _reference([q.duration_s for q in peers]) if len(peers) >= min_refs else None
        bw = r.busbw_gbps
        slow_bw = bool(ref_bw and bw is not None and bw < slow_ratio * ref_bw)
        below = bool(expected_busbw and bw is not None and bw < slow_ratio * expected_busbw)
        slow_t = bool(ref_t and r.duration_s > max(2.0 * ref_t, ref_t + 5.0))
        r.bad = not r.ok or slow_bw or below or slow_t


@dataclass
class Localization:
    verdict: str  # healthy | node | link | busy | inconclusive
    culprits: list[str]
    summary: str
    full: GroupRun
    pairs: list[GroupRun] = field(default_factory=list)
    nodes: dict[str, NodeStats] = field(default_factory=dict)
    expected_busbw: float | None = None
    expected_source: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {"verdict": self.verdict, "culprits": self.culprits, "summary": self.summary,
                "expected_busbw_gbps": self.expected_busbw,
                "expected_source": self.expected_source, "full": self.full.as_dict(),
                "pairs": [p.as_dict() for p in self.pairs],
                "nodes": {n: asdict(st) for n, st in self.nodes.items()}}


def localize(run: Callable[[Group], GroupRun], nodes: Sequence[str], *,
             expected_busbw: float | None = None, mode: Mode = "auto",
             slow_ratio: float = 0.5, baseline: Baseline | None = None) -> Localization:
    """Full-group run, then (if it is slow or failed, or mode "always") pairwise rounds.

    `expected_busbw` wins over `baseline`, which derives it from the full run's hardware.
    """
    names = list(nodes)
    full = run(tuple(names))
    source = "--expected-busbw" if expected_busbw else None
    if expected_busbw is None and baseline is not None and (found := baseline(full)):
        expected_busbw, source = found
    below = bool(expected_busbw and full.busbw_gbps is not None
                 and full.busbw_gbps < expected_busbw * slow_ratio)
    full.bad = not full.busy and (not full.ok or below)

    def result(verdict: str, culprits: list[str], summary: str, pairs: list[GroupRun],
               table: dict[str, NodeStats]) -> Localization:
        return Localization(verdict, culprits, summary, full, pairs, table, expected_busbw,
                            source)

    if full.busy:
        return result("busy", [], f"busy: {', '.join(full.busy)} (a probe or job holds them); "
                      "nothing was judged", [], {})
    ratio = (f"; {full.busbw_gbps / expected_busbw:.0%} of the expected "
             f"{expected_busbw:.1f} GB/s ({source})"
             if expected_busbw and full.busbw_gbps is not None else "")
    if mode == "never" or (not full.bad and mode == "auto") or len(names) < 2:
        verdict = "inconclusive" if full.bad else "healthy"
        why = (full.error or "below the expected busbw") if full.bad else "all ranks finished"
        return result(verdict, [], f"{len(names)} node(s): {why}{ratio}", [], {})
    first: list[Group] = [(names[i], names[i + 1]) for i in range(0, len(names) - 1, 2)]
    if len(names) % 2:
        first.append((names[-1], names[0]))
    done = _run_rounds(run, first)
    judge(done, slow_ratio, expected_busbw)
    good_nodes = [n for n in names if any(n in p.nodes and not p.bad and not p.busy
                                          for p in done)]
    second: list[Group] = []
    for pair in (p for p in done if p.bad):
        refs = [g for g in good_nodes if g not in pair.nodes]
        for k, member in enumerate(pair.nodes):
            if refs and not _tested(done, member, exclude=pair.nodes, planned=second):
                second.append((member, refs[k % len(refs)]))
    pairs = done + _run_rounds(run, second)
    judge(pairs, slow_ratio, expected_busbw, min_refs=2)
    loc = _verdict(names, pairs)
    return result(loc[0], loc[1], loc[2] + ratio, pairs, loc[3])


def _tested(runs: Sequence[GroupRun], node: str, exclude: Group, planned: list[Group]) -> bool:
    groups = [r.nodes for r in runs] + planned
    return any(node in g and set(g) != set(exclude) for g in groups)


def _run_rounds(run: Callable[[Group], GroupRun], pairs: list[Group]) -> list[GroupRun]:
    out: list[GroupRun] = []
    for rnd in _schedule(pairs):
        with ThreadPoolExecutor(len(rnd)) as pool:
            out.extend(pool.map(run, rnd))
    return out


def _schedule(pairs: list[Group]) -> list[list[Group]]:
    """Pack pairs into rounds of node-disjoint pairs (one probe per node at a time)."""
    rounds: list[list[Group]] = []
    for pair in pairs:
        for r in rounds:
            if not any(set(pair) & set(q) for q in r):
                r.append(pair)
                break
        else:
            rounds.append([pair])
    return rounds


def _node_table(names: list[str], pairs: list[GroupRun]) -> dict[str, NodeStats]:
    table: dict[str, NodeStats] = {}
    judged = [p for p in pairs if not p.busy]
    for n in names:
        mine = [p for p in judged if n in p.nodes]
        others = [p.busbw_gbps for p in judged if n not in p.nodes and p.busbw_gbps is not None]
        bws = [p.busbw_gbps for p in mine if p.busbw_gbps is not None]
        table[n] = NodeStats(
            pairs=len(mine), bad_pairs=sum(p.bad for p in mine),
            median_busbw_gbps=statistics.median(bws) if bws else None,
            peers_median_busbw_gbps=statistics.median(others) if others else None,
            hung_here=any(bool(p.per_node[n].ranks_not_finished) for p in mine
                          if n in p.per_node),
            busy=any(n in p.busy for p in pairs))
    return table


def _verdict(names: list[str], pairs: list[GroupRun]
             ) -> tuple[str, list[str], str, dict[str, NodeStats]]:
    nodes = _node_table(names, pairs)
    busy = [n for n, s in nodes.items() if s.busy]
    note = f"; busy, not judged: {', '.join(busy)}" if busy else ""
    culprits = [n for n, s in nodes.items() if s.pairs >= 2 and s.bad_pairs == s.pairs]
    if culprits:
        for n in names:
            nodes[n].verdict = "culprit" if n in culprits else "busy" if n in busy else "ok"
        return ("node", culprits, f"{', '.join(culprits)} is bad with every partner; its "
                "peers are fine with each other" + note, nodes)
    links = [p for p in pairs if p.bad and all(
        nodes[m].bad_pairs < nodes[m].pairs for m in p.nodes)]
    if links:
        ends = sorted({m for p in links for m in p.nodes})
        for n in names:
            nodes[n].verdict = "link" if n in ends else "busy" if n in busy else "ok"
        text = ", ".join(" <-> ".join(p.nodes) for p in links)
        return ("link", [text], f"link {text} is bad; each end is fine with other peers" + note,
                nodes)
    suspects = [n for n, s in nodes.items() if s.bad_pairs]
    for n in names:
        nodes[n].verdict = ("suspect" if n in suspects else "busy" if n in busy else "ok")
    if not suspects:
        if busy:
            return "busy", [], f"no bad pair among those judged{note}", nodes
        return "healthy", [], "every pair is healthy", nodes
    return ("inconclusive", suspects, "not enough healthy peers to separate "
            f"{', '.join(suspects)}{note}", nodes)

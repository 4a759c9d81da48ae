"""Multi-node probes: one sweep across several agents, then pairwise rounds to name the
slow or broken node (or link) when the whole group is slow or hangs.

The first node's agent hosts the rendezvous (its rank 0 opens the TCP store on a port
that agent reports free); every agent launches its ranks into it (env:// rendezvous).
Pairs are judged against each other: a pair is bad when it failed, or its busbw or
duration is an outlier among the pairs. A node bad with every partner is the culprit;
a pair bad together whose members are fine with others is a bad link.
"""

from __future__ import annotations

import secrets
import statistics
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from bot.errors import NodeError
from bot.nodes.client import NodeClient
from tools.result import ToolResult

Group = tuple[str, ...]


@dataclass
class GroupRun:
    nodes: Group
    ok: bool
    busbw_gbps: float | None
    duration_s: float
    error: str | None = None
    per_node: dict[str, dict[str, Any]] = field(default_factory=dict)
    bad: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"nodes": list(self.nodes), "ok": self.ok, "bad": self.bad,
                "busbw_gbps": self.busbw_gbps, "duration_s": round(self.duration_s, 2),
                "error": self.error, "per_node": self.per_node}


def _largest_busbw(result: ToolResult) -> float | None:
    rows = result.data.get("results") or []
    if not rows:
        return None
    top = max(r["bytes"] for r in rows)
    vals = [r["busbw_gbps"] for r in rows if r["bytes"] == top]
    return sum(vals) / len(vals)


def run_group(clients: Mapping[str, NodeClient], nodes: Sequence[str],
              params: dict[str, Any]) -> GroupRun:
    """One sweep across `nodes` (node 0 hosts the rendezvous); never raises NodeError."""
    group = tuple(nodes)
    host = clients[group[0]]
    try:
        port = host.probe_port()
    except NodeError as exc:
        return GroupRun(group, False, None, 0.0, f"{group[0]}: {exc.message}",
                        {group[0]: {"status": "unreachable", "error": exc.message}})
    gid = secrets.token_hex(4)
    http_timeout = float(params.get("timeout", 600.0)) + 30.0

    def member(i: int, name: str) -> ToolResult | NodeError:
        body = {**params, "rendezvous": {"master_addr": host.node.host, "master_port": port,
                                         "node_rank": i, "nnodes": len(group), "group_id": gid}}
        try:
            return clients[name].run("probe", body, timeout=http_timeout)
        except NodeError as exc:
            return exc

    with ThreadPoolExecutor(len(group)) as pool:
        outcomes = list(pool.map(member, range(len(group)), group))
    per_node: dict[str, dict[str, Any]] = {}
    errors, bws, durations = [], [], []
    for name, out in zip(group, outcomes, strict=True):
        if isinstance(out, NodeError):
            per_node[name] = {"status": "unreachable", "error": out.message}
            errors.append(f"{name}: {out.message}")
            continue
        hang = out.data.get("hang") or {}
        per_node[name] = {"status": out.status, "error": out.error,
                          "duration_s": out.data.get("duration_s"),
                          "busbw_gbps": _largest_busbw(out),
                          "ranks_not_finished": hang.get("ranks_not_finished", [])}
        durations.append(float(out.data.get("duration_s") or 0.0))
        if out.status != "success":
            errors.append(f"{name}: {out.error}")
        elif (bw := _largest_busbw(out)) is not None:
            bws.append(bw)
    ok = not errors
    return GroupRun(group, ok, min(bws) if ok and bws else None, max(durations, default=0.0),
                    "; ".join(errors) or None, per_node)


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


def judge(runs: Sequence[GroupRun], slow_ratio: float = 0.5,
          expected_busbw: float | None = None, min_peers: int = 3) -> None:
    """Mark failed runs, and busbw/duration outliers among `runs`, as bad (in place).

    Relative judgement needs `min_peers` healthy runs (with fewer, one noisy run would be
    called slow); `expected_busbw` adds an absolute floor.
    """
    healthy = [r for r in runs if r.ok]
    bws = [r.busbw_gbps for r in healthy if r.busbw_gbps]
    relative = len(healthy) >= min_peers
    med_bw = statistics.median(bws) if relative and bws else None
    med_dur = statistics.median(r.duration_s for r in healthy) if relative else None
    for r in runs:
        bw = r.busbw_gbps
        slow_bw = bool(med_bw and bw is not None and bw < slow_ratio * med_bw)
        below = bool(expected_busbw and bw is not None and bw < slow_ratio * expected_busbw)
        slow_t = bool(med_dur and r.duration_s > max(2.0 * med_dur, med_dur + 5.0))
        r.bad = not r.ok or slow_bw or below or slow_t


@dataclass
class Localization:
    verdict: str  # healthy | node | link | inconclusive
    culprits: list[str]
    summary: str
    full: GroupRun
    pairs: list[GroupRun] = field(default_factory=list)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "culprits": self.culprits, "summary": self.summary,
                "full": self.full.as_dict(), "pairs": [p.as_dict() for p in self.pairs],
                "nodes": self.nodes}


def localize(run: Callable[[Group], GroupRun], nodes: Sequence[str], *,
             expected_busbw: float | None = None, always: bool = False,
             slow_ratio: float = 0.5) -> Localization:
    """Full-group run, then (if it is slow or failed, or `always`) pairwise rounds."""
    names = list(nodes)
    full = run(tuple(names))
    full.bad = not full.ok or bool(expected_busbw and full.busbw_gbps is not None
                                   and full.busbw_gbps < expected_busbw * slow_ratio)
    if (not full.bad and not always) or len(names) < 2:
        verdict = "inconclusive" if full.bad else "healthy"
        return Localization(verdict, [], f"{len(names)} node(s): "
                            + (full.error or "group too small to localize" if full.bad
                               else "all ranks finished"), full)
    first = [(names[i], names[i + 1]) for i in range(0, len(names) - 1, 2)]
    if len(names) % 2:
        first.append((names[-1], names[0]))
    done = _run_rounds(run, first)
    judge(done, slow_ratio, expected_busbw)
    good_nodes = [n for n in names if any(n in p.nodes and not p.bad for p in done)]
    second: list[Group] = []
    for pair in (p for p in done if p.bad):
        refs = [g for g in good_nodes if g not in pair.nodes]
        for k, member in enumerate(pair.nodes):
            if refs and not _tested(done, member, exclude=pair.nodes):
                second.append((member, refs[k % len(refs)]))
    more = _run_rounds(run, second)
    pairs = done + more
    judge(pairs, slow_ratio, expected_busbw)
    return _verdict(names, full, pairs)


def _tested(runs: Sequence[GroupRun], node: str, exclude: Group) -> bool:
    return any(node in r.nodes and set(r.nodes) != set(exclude) for r in runs)


def _run_rounds(run: Callable[[Group], GroupRun], pairs: list[Group]) -> list[GroupRun]:
    out: list[GroupRun] = []
    for rnd in _schedule(pairs):
        with ThreadPoolExecutor(len(rnd)) as pool:
            out.extend(pool.map(run, rnd))
    return out


def _verdict(names: list[str], full: GroupRun, pairs: list[GroupRun]) -> Localization:
    nodes: dict[str, dict[str, Any]] = {}
    for n in names:
        mine = [p for p in pairs if n in p.nodes]
        bws = [p.busbw_gbps for p in mine if p.busbw_gbps is not None]
        nodes[n] = {"pairs": len(mine), "bad_pairs": sum(p.bad for p in mine),
                    "median_busbw_gbps": statistics.median(bws) if bws else None,
                    "hung_here": any(p.per_node.get(n, {}).get("ranks_not_finished")
                                     for p in mine)}
    culprits = [n for n, s in nodes.items() if s["pairs"] >= 2 and s["bad_pairs"] == s["pairs"]]
    if culprits:
        for n in names:
            nodes[n]["verdict"] = "culprit" if n in culprits else "ok"
        return Localization("node", culprits, f"{', '.join(culprits)} is bad with every "
                            "partner; its peers are fine with each other", full, pairs, nodes)
    links = [p for p in pairs if p.bad and all(
        nodes[m]["bad_pairs"] < nodes[m]["pairs"] for m in p.nodes)]
    if links:
        ends = sorted({m for p in links for m in p.nodes})
        for n in names:
            nodes[n]["verdict"] = "link" if n in ends else "ok"
        text = ", ".join(" <-> ".join(p.nodes) for p in links)
        return Localization("link", [text], f"link {text} is bad; each end is fine with "
                            "other peers", full, pairs, nodes)
    suspects = [n for n, s in nodes.items() if s["bad_pairs"]]
    for n in names:
        nodes[n]["verdict"] = "suspect" if n in suspects else "ok"
    if not suspects:
        return Localization("healthy", [], "every pair is healthy"
                            + ("; the full group was not" if full.bad else ""), full, pairs, nodes)
    return Localization("inconclusive", suspects, "not enough healthy peers to separate "
                        f"{', '.join(suspects)}", full, pairs, nodes)

"""Multi-node probes through the agents: one sweep across several nodes, then pairwise
rounds (`bot.nodes.localize`) to name the slow or broken node or link.

The first node's agent hosts the rendezvous (its rank 0 opens the TCP store on a port
that agent reports free); every agent launches its ranks into it (env:// rendezvous).
Before anything runs, every agent is asked whether a probe would start (`preflight`):
a busy node aborts the run with its name instead of being blamed for the hang its
absence would cause.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bot.errors import NodeError
from bot.nodes.client import AgentError, NodeBusyError, NodeClient
from bot.nodes.localize import GroupRun
from tools.probe.baselines import LARGE_ENOUGH, expected_busbw
from tools.result import ToolResult

#: Agent errors that stop a multi-node probe before it starts (unreachable and timed-out
#: agents do not: the rounds then name them).
ABORT_KINDS = ("busy", "auth", "refused", "rejected")


def largest_busbw(result: ToolResult) -> float | None:
    """busbw at the largest size: all_reduce's when measured, else the collectives' mean."""
    rows = result.data.get("results") or []
    top: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["collective"] not in top or r["bytes"] > top[r["collective"]]["bytes"]:
            top[r["collective"]] = r
    if not top:
        return None
    if "all_reduce" in top:
        return float(top["all_reduce"]["busbw_gbps"])
    return float(sum(r["busbw_gbps"] for r in top.values())) / len(top)


def preflight(clients: Mapping[str, NodeClient], force: bool = False) -> None:
    """Ask every agent whether a probe would start; NodeError naming every busy node."""
    def check(name: str) -> AgentError | None:
        try:
            clients[name].probe_check(force)
        except AgentError as exc:
            return exc if exc.kind in ABORT_KINDS else None
        return None

    with ThreadPoolExecutor(min(16, len(clients))) as pool:
        problems = [e for e in pool.map(check, list(clients)) if e is not None]
    if not problems:
        return
    busy = [e for e in problems if isinstance(e, NodeBusyError)]
    if busy:
        raise NodeError("not starting the multi-node probe: busy node(s) "
                        + "; ".join(f"{e.node} ({e.body.get('detail') or e.message})"
                                    for e in busy),
                        hint="A busy node is not a bad node: wait for its probe or job to "
                        "finish, leave it out of --nodes, or (on-call only) pass --force when "
                        "processes hold its GPUs.")
    raise NodeError("not starting the multi-node probe: "
                    + "; ".join(e.message for e in problems), hint=problems[0].hint)


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
    from bot.nodes.runner import NodeRunner

    http_timeout = NodeRunner().timeout("probe", params)  # the probe's limit + the way back

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
    errors, bws, durations, busy = [], [], [], []
    for name, out in zip(group, outcomes, strict=True):
        if isinstance(out, NodeError):
            status = "busy" if isinstance(out, NodeBusyError) else "unreachable"
            per_node[name] = {"status": status, "error": out.message}
            errors.append(f"{name}: {out.message}")
            if status == "busy":
                busy.append(name)
            continue
        hang = out.data.get("hang") or {}
        per_node[name] = {"status": out.status, "error": out.error,
                          "duration_s": out.data.get("duration_s"),
                          "busbw_gbps": largest_busbw(out),
                          "hardware": out.data.get("hardware") or {},
                          "ranks_not_finished": hang.get("ranks_not_finished", [])}
        durations.append(float(out.data.get("duration_s") or 0.0))
        if out.status != "success":
            errors.append(f"{name}: {out.error}")
        elif (bw := largest_busbw(out)) is not None:
            bws.append(bw)
    ok = not errors
    return GroupRun(group, ok, min(bws) if ok and bws else None, max(durations, default=0.0),
                    "; ".join(errors) or None, per_node, busy=busy)


def baseline_for(params: dict[str, Any]) -> Any:
    """A `localize` baseline: the expected busbw for the full run's hardware, when every
    node reported the same known GPUs (and, across nodes, NDR InfiniBand ports) and the
    sweep reaches sizes where peak busbw is measured."""
    def baseline(full: GroupRun) -> tuple[float, str] | None:
        if not full.ok or int(params.get("max_bytes") or 0) < LARGE_ENOUGH:
            return None
        hw = [s.get("hardware") or {} for s in full.per_node.values()]
        names = {h.get("gpu_name") for h in hw}
        if len(names) != 1 or None in names:
            return None
        ports = min((h.get("ib_port_rates") or [] for h in hw), key=len)
        return expected_busbw(str(params.get("backend", "nccl")), names.pop(),
                              int(params.get("nproc") or 0), len(full.nodes), ports)
    return baseline

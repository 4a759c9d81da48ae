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

from pydantic import ValidationError

from bot.errors import NodeError
from bot.nodes.client import AgentError, NodeBusyError, NodeClient
from bot.nodes.localize import Baseline, GroupRun, MemberOutcome
from tools.probe.baselines import group_baseline
from tools.probe.model import ProbeData
from tools.probe.params import ProbeParams
from tools.probe.remote import ProbeRequest
from tools.result import ToolResult

#: Agent errors that stop a multi-node probe before it starts (unreachable and timed-out
#: agents do not: the rounds then name them).
ABORT_KINDS = ("busy", "auth", "refused", "rejected")


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
              request: ProbeRequest) -> GroupRun:
    """One sweep across `nodes` (node 0 hosts the rendezvous); never raises NodeError."""
    group = tuple(nodes)
    host = clients[group[0]]
    try:
        port = host.probe_port()
    except NodeError as exc:
        return GroupRun(group, False, None, 0.0, f"{group[0]}: {exc.message}",
                        {group[0]: MemberOutcome("unreachable", exc.message)})
    gid = secrets.token_hex(4)
    from bot.nodes.runner import NodeRunner

    # the probe's limit + the way back
    http_timeout = NodeRunner().timeout("probe", request.body())

    def member(i: int, name: str) -> ToolResult | NodeError:
        body = request.joining(host.node.host, port, i, len(group), gid).body()
        try:
            return clients[name].run("probe", body, timeout=http_timeout)
        except NodeError as exc:
            return exc

    with ThreadPoolExecutor(len(group)) as pool:
        outcomes = list(pool.map(member, range(len(group)), group))
    per_node: dict[str, MemberOutcome] = {}
    errors, bws, durations, busy = [], [], [], []
    for name, out in zip(group, outcomes, strict=True):
        if isinstance(out, NodeError):
            status = "busy" if isinstance(out, NodeBusyError) else "unreachable"
            per_node[name] = MemberOutcome(status, out.message)
            errors.append(f"{name}: {out.message}")
            if status == "busy":
                busy.append(name)
            continue
        try:
            data = ProbeData.model_validate(out.data)
        except ValidationError as exc:
            per_node[name] = MemberOutcome("error", f"malformed probe result: {exc}")
            errors.append(f"{name}: malformed probe result")
            continue
        bw = data.largest_busbw()
        per_node[name] = MemberOutcome(
            out.status, out.error, data.duration_s, bw, data.hardware,
            data.hang.ranks_not_finished if data.hang else [])
        durations.append(data.duration_s or 0.0)
        if out.status != "success":
            errors.append(f"{name}: {out.error}")
        elif bw is not None:
            bws.append(bw)
    ok = not errors
    return GroupRun(group, ok, min(bws) if ok and bws else None, max(durations, default=0.0),
                    "; ".join(errors) or None, per_node, busy=busy)


def baseline_for(request: ProbeParams) -> Baseline:
    """A `localize` baseline: the expected busbw for the full run's hardware, when every
    node reported the same known GPUs (and, across nodes, NDR InfiniBand ports) and the
    sweep reaches sizes where peak busbw is measured."""
    def baseline(full: GroupRun) -> tuple[float, str] | None:
        if not full.ok:
            return None
        hw = [s.hardware for s in full.per_node.values()]
        return group_baseline(request, [h.get("gpu_name") for h in hw],
                              [h.get("ib_port_rates") or [] for h in hw])
    return baseline

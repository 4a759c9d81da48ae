"""From structured evidence to root-cause categories (pure).

Card signatures recognise specific incidents; these rules read the structure
of a failure: who crashed first, what NCCL's error trace says about the
subsystem that failed, whether the group ever formed. Each rule emits
`Signal`s: a category, a strength in (0, 1], the reason and the lines behind it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from bot.logs.crossrank import EXITED_SILENTLY, KILLED_OUTSIDE, CrossRank
from bot.logs.extract import BENIGN_NCCL_WARN, RAN_COLLECTIVES, is_comm_exception
from bot.logs.model import Evidence, Fact, LogReport
from tools.xid.catalog import explain


@dataclass
class Signal:
    category: str
    strength: float
    reason: str
    evidence: list[Evidence] = field(default_factory=list)
    #: inferred from what the log does not show (no progress after set-up), which a healthy
    #: excerpt shows just the same: a candidate, not evidence that the job failed
    from_silence: bool = False


Rule = Callable[[LogReport, CrossRank], list[Signal]]
TIMEOUT_CATEGORIES = ("straggler_or_imbalance", "timeout_too_short", "collective_mismatch")

#: NCCL source files in an error trace (`NCCL INFO misc/socket.cc:567 -> 2`) and the
#: subsystem, hence the category, they point to.
NCCL_SOURCE_CATEGORY: tuple[tuple[str, str, float], ...] = (
    ("bootstrap", "network_interface", 0.5),
    ("socket", "network_interface", 0.45),
    ("net_socket", "network_interface", 0.45),
    ("net_ib", "infiniband_roce", 0.5),
    ("ibvwrap", "infiniband_roce", 0.45),
    ("ibvcore", "infiniband_roce", 0.4),
    ("gdr", "gpudirect_rdma", 0.45),
    ("shm", "shm_ipc_container", 0.5),
    ("p2p", "p2p_pcie_topology", 0.4),
    ("nvls", "nvswitch_fabric", 0.5),
    ("alloc", "gpu_memory_pressure", 0.4),
    ("cudawrap", "version_incompatibility", 0.25),
)

def _failing_warns(report: LogReport) -> list[Fact]:
    """NCCL's warnings less those that only say an optional component is absent (NCCL falls
    back; `extract.BENIGN_NCCL_WARN`)."""
    return [f for f in report.facts.get("nccl_warn", [])
            if not BENIGN_NCCL_WARN.search(str(f.fields.get("message", "")))]


def _ev(facts: list[Fact] | None, n: int = 2) -> list[Evidence]:
    return [f.ev for f in (facts or [])[:n]]


def _timed_out(report: LogReport) -> bool:
    """A collective timed out somewhere (watchdog, its backtrace, or Horovod's stall check)."""
    return bool(report.timeouts) or any(
        report.has(k) for k in ("heartbeat", "some_failed", "watchdog_frame", "hvd_stall"))


def _multi_node(report: LogReport) -> bool:
    return len(report.hosts) > 1


#: Memory managers of colocated RL rollout engines (vLLM sleep mode, SGLang's memory saver):
#: an OOM there is the rollout and the trainer competing for one GPU.
RL_ALLOCATOR = re.compile(r"torch_memory_saver|cumem_allocator|wake_up|memory_saver")


def crash_rule(report: LogReport, cr: CrossRank) -> list[Signal]:
    """A rank that died (OOM, exception, signal) before the others timed out."""
    out: list[Signal] = []
    timeouts = _timed_out(report)
    boost = 0.15 if timeouts else 0.0
    if report.has("oom"):
        facts = report.facts["oom"]
        nccl_alloc = all("calloc" in str(f.fields.get("message", "")) for f in facts)
        rl = [f for f in facts if RL_ALLOCATOR.search(f.ev.text)]
        if rl:
            out.append(Signal("rl_weight_sync", 0.8, "out of memory in a colocated rollout "
                              "engine's memory pool (vLLM sleep/wake_up, SGLang memory saver)",
                              _ev(rl)))
            out.append(Signal("rank_crashed", 0.4, "a rank ran out of GPU memory", _ev(rl)))
        elif not nccl_alloc:
            out.append(
                Signal("rank_crashed", 0.75 + boost, "CUDA out of memory on a rank", _ev(facts))
            )
    sig = report.facts.get("signal", [])
    kill = [
        f
        for f in sig
        if f.fields.get("signal") in ("SIGKILL", "Killed process", "Out of memory: Killed")
        or f.fields.get("signo") == 9
    ]
    # SIGABRT after a timeout is PyTorch tearing the process down, not the cause; after gloo
    # found a collective of another size ("Received data size doesn't match expected size",
    # an uncaught gloo::EnforceNotMet: std::terminate) it is that detection.
    aborts_explained = timeouts or report.has("mismatch")
    fatal = ("SIGSEGV", "Segmentation fault", "SIGILL", "SIGFPE") + (
        () if aborts_explained else ("SIGABRT",)
    )
    segv = [
        f
        for f in sig
        if f.fields.get("signal") in fatal
        or f.fields.get("signo") in ((11,) if aborts_explained else (11, 6))
    ]
    codes = report.facts.get("exit_code", [])
    killed_codes = [f for f in codes if f.fields.get("code") in (-9, 137)]
    if kill or killed_codes:
        out.append(
            Signal(
                "rank_crashed",
                0.6 + boost,
                "a rank was killed (SIGKILL / exit -9 or 137: often the host OOM killer)",
                _ev(kill or killed_codes),
            )
        )
    if segv:
        out.append(
            Signal(
                "rank_crashed",
                0.5 + boost,
                "a rank crashed with a signal (SIGSEGV and the like)",
                _ev(segv),
            )
        )
    if report.has("peer_died"):
        out.append(Signal("rank_crashed", 0.55, "the launcher or Horovod reports that another "
                          "rank failed first", _ev(report.facts["peer_died"])))
    bus = [f for f in sig if f.fields.get("signal") in ("SIGBUS", "Bus error")
           or f.fields.get("signo") == 7]
    if bus:
        # NCCL's SHM transport and DataLoader workers map /dev/shm: touching a page the
        # filesystem cannot back raises SIGBUS (a full or 64 MB container /dev/shm).
        out.append(Signal("shm_ipc_container", 0.6, "a process died of SIGBUS (bus error): "
                          "shared memory (/dev/shm) ran out", _ev(bus)))
        out.append(Signal("rank_crashed", 0.3, "a rank died of SIGBUS", _ev(bus)))
    for r in cr.killed_outside[:2]:
        rec = next(f for f in report.failures if f.rank == r and f.root)
        out.append(Signal("rank_crashed", 0.7 + boost, f"rank {r} was ended by a signal "
                          f"(exitcode {rec.exitcode}) {KILLED_OUTSIDE}: torchrun never sent it "
                          "one, and the other ranks failed after it", [rec.ev]))
    first = cr.first_failure
    if first is not None and EXITED_SILENTLY in first.reason:
        out.append(Signal("rank_crashed", 0.55 + boost, f"rank {first.rank} {first.reason}",
                          first.evidence))
    rs = report.ranks.get(first.rank) if first and first.rank is not None else None
    first_fact = rs.first_error if rs is not None else None
    if first is not None and first_fact is not None and first_fact.kind == "exception":
        # the others then lost it (a peer closed the connection, a timeout): the cause
        lost = 0.15 if cr.victims and first.rank not in cr.victims else 0.0
        out.append(
            Signal(
                "rank_crashed",
                0.45 + max(2 * boost, lost),
                f"rank {first.rank} {first.reason}",
                first.evidence,
            )
        )
    app_exc = [e for e in report.exceptions if not is_comm_exception(e.type, e.message)]
    if app_exc and timeouts and not cr.first_failure:
        out.append(
            Signal(
                "rank_crashed",
                0.5,
                f"{app_exc[0].type} raised while other ranks timed out",
                [app_exc[0].ev],
            )
        )
    roots = [r for r in report.failures if r.root and r.exitcode not in (None, 0)
             and r.rank not in cr.victims]
    if roots and not out:
        rec = roots[0]
        out.append(
            Signal(
                "rank_crashed",
                0.3,
                f"torchrun recorded rank {rec.rank} on {rec.host} as the "
                f"first failure (exitcode {rec.exitcode})",
                [rec.ev],
            )
        )
    return out


def vanished_rule(report: LogReport, cr: CrossRank) -> list[Signal]:
    """A rank with no error of its own that the others lost or waited for. Alive afterwards
    (it then lost a peer itself) or waited out by the others' timeouts: it was busy elsewhere
    (a straggler); gone with not a word while the others only lost its connection: it left the
    job early (exited, even with code 0, or was killed)."""
    out: list[Signal] = []
    if cr.other_path:
        ev = [e.ev for e in report.exceptions if e.ev.rank in cr.other_path][:1]
        out.append(Signal("collective_mismatch", 0.7, f"rank(s) {cr.other_path[:8]} waited in "
                          "another collective call than the other ranks: a code path only "
                          "some ranks take", ev))
    for host in cr.finished_hosts[:2]:
        ev = _ev([f for f in report.facts.get("exit_barrier", []) if f.ev.host == host], 1)
        out.append(Signal("rank_crashed", 0.7, f"every worker on {host} exited with code 0 "
                          "(its torchrun agent waited at the exit barrier) while the other "
                          "ranks lost or waited for them: they left the job early", ev))
        out.append(Signal("collective_mismatch", 0.35, f"the ranks on {host} may have taken "
                          "another code path (fewer steps) and finished early", ev))
    if cr.left_cleanly and not cr.vanished:
        ev = [f.ev for f in report.failures[:1]]
        out.append(Signal("rank_crashed", 0.65, "torchrun's one failure is a rank that lost a "
                          "peer, and no other worker was left to stop: the others had exited "
                          "with code 0, leaving the job early", ev))
        out.append(Signal("collective_mismatch", 0.3, "a rank that exits cleanly while the "
                          "others still run collectives took another code path (fewer steps)",
                          ev))
    for r in cr.vanished[:4]:
        ev = [t.ev for t in report.timeouts[:1]] or [
            e.ev for e in report.exceptions if e.ev.rank in cr.victims][:1]
        if r in cr.still_running or cr.peers_timed_out:
            out.append(Signal("straggler_or_imbalance", 0.6, f"rank {r} did not reach the "
                              "collective in time while the others waited for it", ev))
            out.append(Signal("timeout_too_short", 0.35, f"rank {r} may have been busy with "
                              "a long step of its own", ev))
        elif report.has("mismatch"):
            # a size mismatch was detected: the rank that left was aborted by it
            out.append(Signal("collective_mismatch", 0.6, f"rank {r} left the job while a "
                              "collective of another size was detected", ev))
            out.append(Signal("rank_crashed", 0.35, f"rank {r} left the job without an error "
                              "of its own", ev))
        else:
            out.append(Signal("rank_crashed", 0.65, f"rank {r} left the job without an error of "
                              "its own (it exited early, even cleanly, or was killed): the "
                              "others lost its connection", ev))
            out.append(Signal("collective_mismatch", 0.3, f"rank {r} may have taken another "
                              "code path (fewer steps) and finished early", ev))
    return out


def mismatch_rule(report: LogReport, cr: CrossRank) -> list[Signal]:
    """PyTorch (TORCH_DISTRIBUTED_DEBUG=DETAIL) or DeepSpeed compared the ranks' collectives."""
    if not report.has("mismatch"):
        return []
    return [Signal("collective_mismatch", 0.8, "the framework detected that ranks issued "
                   "different collectives (or different sizes)", _ev(report.facts["mismatch"]))]


def timeout_rule(report: LogReport, cr: CrossRank) -> list[Signal]:
    """Watchdog timeouts: read the collectives across ranks."""
    if not _timed_out(report):
        return []
    ev = [t.ev for t in report.timeouts[:2]] or _ev(
        report.facts.get("heartbeat") or report.facts.get("hvd_stall")
        or report.facts.get("watchdog_frame"))
    out = []
    waiting = _waited_for(report, cr)
    if waiting == [0]:
        # Rank 0 alone did not reach the collective: it was busy with work only it does
        # (saving, evaluating, preprocessing, downloading) while the others waited. Weaker
        # when the log holds one rank's timeout only (rank 0's lines may just be missing).
        strength = 0.5 if len(cr.timeout_ranks) >= 2 or report.has("hvd_stall") else 0.35
        out.append(Signal("timeout_too_short", strength, "the other ranks timed out but rank 0 "
                          "did not: it was busy with work of its own (save, eval, "
                          "preprocessing)", ev))
        out.append(Signal("straggler_or_imbalance", 0.3, "rank 0 fell behind the others", ev))
        out.append(Signal("rank_crashed", 0.25, "rank 0 never reported the timeout: it may have "
                          "died (look for its traceback)", ev))
    busy = report.facts.get("long_step", [])
    if busy:
        out.append(Signal("timeout_too_short", 0.3, "the log shows a long step (save, eval, "
                          "preprocessing) around the timeout", _ev(busy)))
    if cr.mismatches:
        mm = cr.mismatches[0]
        out.append(
            Signal(
                "collective_mismatch",
                0.85,
                f"ranks ran different collectives at SeqNum={mm.seq}",
                mm.evidence,
            )
        )
    if (cr.lagging or cr.silent_ranks) and waiting != [0]:
        who = cr.lagging or cr.silent_ranks
        out.append(
            Signal("straggler_or_imbalance", 0.45, f"rank(s) {who[:8]} lag behind the others", ev)
        )
        if cr.silent_ranks:
            out.append(Signal("rank_crashed", 0.2, f"silent rank(s) {cr.silent_ranks[:8]} may "
                              "have died", ev))
        out.append(
            Signal(
                "collective_mismatch", 0.35, "a lagging rank may be in a different code path", ev
            )
        )
    out.append(
        Signal("straggler_or_imbalance", 0.3, "collective timed out waiting for other ranks", ev)
    )
    out.append(
        Signal("timeout_too_short", 0.25, "a long step on some ranks may exceed the timeout", ev)
    )
    out.append(
        Signal("collective_mismatch", 0.25, "ranks may have issued different collectives", ev)
    )
    short = [t for t in report.timeouts if t.timeout_ms and t.timeout_ms < 300_000]
    if short:
        out.append(
            Signal(
                "timeout_too_short",
                0.4,
                f"the process-group timeout is only {(short[0].timeout_ms or 0) // 1000} s",
                [short[0].ev],
            )
        )
    small = [t for t in report.timeouts if t.numel_in == 1 and t.op in ("ALLREDUCE", "BARRIER")]
    if small and len(report.timeouts) <= 2:
        # barrier() is a one-element ALLREDUCE. Rank 0 stuck in it: rank 0 issued a barrier
        # (or metric sync) the others never reach, e.g. inside `if rank == 0:`. Another rank
        # stuck in it: it waited for rank 0, still busy with work only rank 0 does.
        if 0 in cr.timeout_ranks:
            mismatch, rank0_busy = 0.35, 0.2
        else:
            mismatch, rank0_busy = 0.25, 0.3
        out.append(Signal("collective_mismatch", mismatch, "a one-element ALLREDUCE/BARRIER "
                          "timed out: a barrier or metric sync issued on some ranks only",
                          [small[0].ev]))
        out.append(Signal("timeout_too_short", rank0_busy, "a one-element ALLREDUCE/BARRIER "
                          "timed out: "
                          "ranks waited at a barrier for a rank still working", [small[0].ev]))
    return out


def _waited_for(report: LogReport, cr: CrossRank) -> list[int]:
    """The ranks the others were waiting for, where the log says (silent, lagging, or not
    among Horovod's ready ranks)."""
    stalls = report.facts.get("hvd_stall", [])
    ready = sorted({r for f in stalls for r in f.fields.get("ready", [])})
    if ready:
        return [r for r in range(max(ready) + 1) if r not in ready]
    timed = cr.timeout_ranks
    if timed and 0 not in timed and (cr.silent_ranks == [0] or cr.lagging == [0]
                                     or (not cr.silent_ranks and min(timed) > 0)):
        return [0]
    return cr.lagging or cr.silent_ranks


def _teardown_lines(report: LogReport) -> dict[str, int]:
    """Per file, the line where the launcher began tearing the job down (it stopped workers
    with SIGTERM, or recorded a worker's failure): what the store and the rendezvous say after
    it is the job ending, not why it ended."""
    out: dict[str, int] = {}
    for kind in ("sigterm_sent", "exit_code", "exit_barrier"):
        for f in report.facts.get(kind, []):
            if kind == "exit_code" and f.fields.get("code") in (None, 0):
                continue
            out[f.ev.file] = min(out.get(f.ev.file, f.ev.line), f.ev.line)
    return out


#: the launcher's own rendezvous (torchrun's agents: torch/distributed/elastic/rendezvous,
#: "RendezvousConnectionError: The connection to the C10d store has failed", "The node ... has
#: failed to shutdown the rendezvous ...", the store's "Failed to recv, got 0 bytes"), not a
#: worker's process-group store (DistStoreError "wait timeout ... keys")
AGENT_RDZV = re.compile(r"Rendezvous(?:Connection|Closed|Timeout)Error|dynamic_rendezvous|"
                        r"elastic/(?:rendezvous|agent)|C10d store has failed|"
                        r"Failed to recv, got 0 bytes")


def _agent_teardown_line(ev: Evidence, text: str, ran: dict[str, int]) -> bool:
    """An agent's rendezvous error (no rank; `text` matches `AGENT_RDZV`) after the workers of
    its file ran collectives (`_group_ran_lines`): the store's host leaving, not a failed
    rendezvous."""
    return ev.rank is None and ev.line > ran.get(ev.file, 1 << 62) and bool(
        AGENT_RDZV.search(text))


def _agent_teardown(facts: list[Fact], ran: dict[str, int]) -> list[Fact]:
    """Without the agents' rendezvous errors that came after the workers ran collectives
    (the agents' rendezvous had completed: it is the store's host leaving)."""
    return [f for f in facts if not _agent_teardown_line(f.ev, f.ev.text, ran)]


def _group_ran_lines(report: LogReport) -> dict[str, int]:
    """Per file, the first line showing that the process group had formed and run
    collectives (a collective's timeout or lost peer, DETAIL's checks): a rendezvous or store
    error after it is the job ending (the store's host left), not why it never started."""
    out: dict[str, int] = {}
    evs = [t.ev for t in report.timeouts] + [
        e.ev for e in report.exceptions if RAN_COLLECTIVES.search(e.message)] + [
        f.ev for kind in ("fingerprint", "barrier_blame", "gloo_size")
        for f in report.facts.get(kind, [])]
    for ev in evs:
        out[ev.file] = min(out.get(ev.file, ev.line), ev.line)
    # an agent whose keep-alive heartbeat failed had completed the rendezvous (its workers
    # ran): every rendezvous error of its file is the store's host leaving
    for f in report.facts.get("rdzv_keepalive_failed", []):
        out[f.ev.file] = 0
    return out


def _before_teardown(facts: list[Fact], ends: dict[str, int]) -> list[Fact]:
    return [f for f in facts if f.ev.line < ends.get(f.ev.file, 1 << 62)]


def launch_rule(report: LogReport, cr: CrossRank) -> list[Signal]:
    """The group never formed: rendezvous, store, ports."""
    out = []
    ends = _teardown_lines(report)
    ran = _group_ran_lines(report)
    if report.has("gloo_iface"):
        facts = report.facts["gloo_iface"]
        out.append(Signal("network_interface", 0.85, "gloo found no address for the network "
                          f"interface {facts[0].fields.get('iface')!r} (GLOO_SOCKET_IFNAME "
                          "names an interface this host does not have)", _ev(facts)))
    if report.has("clients_joined"):
        f = report.first("clients_joined")
        assert f is not None
        out.append(
            Signal(
                "rendezvous_failure",
                0.8,
                f"only {f.fields.get('joined')}/{f.fields.get('expected')} "
                "processes joined the store",
                _ev(report.facts["clients_joined"]),
            )
        )
    if report.has("socket_timeout"):
        f = report.first("socket_timeout")
        assert f is not None
        out.append(
            Signal(
                "rendezvous_failure",
                0.7,
                f"could not connect to the store at {f.fields.get('addr')}:{f.fields.get('port')}",
                _ev(report.facts["socket_timeout"]),
            )
        )
    waits = [f for f in report.facts.get("store_wait", []) if f.fields.get("key_rank") is not None]
    if waits:
        # gloo's connect waited out the store for a peer's address (extract.store_wait): the
        # group never formed, whichever rank then exited first
        out.append(Signal("rendezvous_failure", 0.75, "a rank waited out the store for rank "
                          f"{waits[0].fields['key_rank']}'s address: the process group never "
                          "formed (that rank never joined this store, or the waiting rank "
                          "expects more ranks than the job has)", _ev(waits)))
    inits: dict[int, list[Fact]] = {}
    for f in report.facts.get("ddp_init_rank", []):
        inits.setdefault(f.fields["rank"], []).append(f)
    twice = {r: fs for r, fs in inits.items() if len(fs) > 1}
    if twice:
        facts = next(iter(twice.values()))
        out.append(Signal("rendezvous_failure", 0.55, f"rank(s) {sorted(twice)[:8]} were "
                          "initialised by two processes: the launcher's task count and the "
                          "framework's world size disagree", _ev(facts)))
        out.append(Signal("device_assignment", 0.3, "two processes claim the same rank",
                          _ev(facts)))
    in_rdzv = [e for e in report.exceptions
               if e.frame and re.search(r"rendezvous|TCPStore|c10d_store|_store_based_barrier",
                                        e.frame)
               and e.ev.line < ends.get(e.ev.file, 1 << 62)
               and not _agent_teardown_line(e.ev, f"{e.type}: {e.message} {e.frame}", ran)]
    if in_rdzv:
        out.append(Signal("rendezvous_failure", 0.5, f"{in_rdzv[0].type} raised inside the "
                          "rendezvous code", [in_rdzv[0].ev]))
    if report.has("store_connect"):
        f = report.first("store_connect")
        assert f is not None
        out.append(Signal("rendezvous_failure", 0.65, "could not connect to the rendezvous "
                          f"store at {f.fields.get('addr')}:{f.fields.get('port')}",
                          _ev(report.facts["store_connect"])))
    if report.has("store_resolve"):
        f = report.first("store_resolve")
        assert f is not None
        out.append(Signal("rendezvous_failure", 0.6, f"the rendezvous host name "
                          f"{f.fields.get('addr')!r} does not resolve",
                          _ev(report.facts["store_resolve"])))
    if report.has("addr_in_use"):
        out.append(
            Signal(
                "rendezvous_failure",
                0.75,
                "the rendezvous port is already in use",
                _ev(report.facts["addr_in_use"]),
            )
        )
    rdzv = _agent_teardown(_before_teardown(report.facts.get("rendezvous", []), ends), ran)
    if rdzv:
        out.append(
            Signal(
                "rendezvous_failure",
                0.6,
                "torch.distributed rendezvous error",
                _ev(rdzv),
            )
        )
    facts = _before_teardown(report.facts.get("conn_error", []), ends)
    if facts:
        refused = [
            f
            for f in facts
            if "refused" in str(f.fields.get("message", ""))
            or "resolution" in str(f.fields.get("message", ""))
            or "not known" in str(f.fields.get("message", ""))
        ]
        if refused:
            out.append(
                Signal(
                    "rendezvous_failure",
                    0.45,
                    "connection refused / name not resolved",
                    _ev(refused),
                )
            )
        reset = [f for f in facts if f not in refused]
        if reset:
            out.append(
                Signal(
                    "rank_crashed",
                    0.25,
                    "a peer closed its connection (it may have died)",
                    _ev(reset),
                )
            )
            out.append(
                Signal("network_interface", 0.2, "connection errors between peers", _ev(reset))
            )
    return out


def nccl_rule(report: LogReport, cr: CrossRank) -> list[Signal]:
    """NCCL's own error codes and its error trace."""
    out = []
    for f in report.facts.get("nccl_trace", []):
        src = str(f.fields.get("src", "")).rsplit("/", 1)[-1].lower()
        for key, category, strength in NCCL_SOURCE_CATEGORY:
            if src.startswith(key):
                out.append(
                    Signal(
                        category,
                        strength,
                        f"NCCL's error trace starts in {f.fields['src']}",
                        [f.ev],
                    )
                )
                break
    codes = {str(f.fields.get("code")) for f in report.facts.get("nccl_code", [])}
    ev_codes = _ev(report.facts.get("nccl_code"))
    if "ncclRemoteError" in codes:
        # "remote process exited or there was a network error": across nodes with no rank
        # seen dying, the network is the likelier half.
        crashed = bool(cr.crashed_ranks)
        across = _multi_node(report) and not crashed
        out.append(Signal("rank_crashed", 0.25 if across else 0.3,
                          "ncclRemoteError: a remote peer failed or exited", ev_codes))
        out.append(Signal("infiniband_roce", 0.3 if report.has("net_ib") else 0.2,
                          "ncclRemoteError can be a network fault", ev_codes))
        if across:
            out.append(Signal("network_interface", 0.3, "ncclRemoteError across nodes: the peer "
                              "was unreachable on the interface NCCL chose", ev_codes))
    if "ncclSystemError" in codes:
        # A failed system call: sockets across nodes, /dev/shm within one. Let the context
        # decide which is likelier; with none, both stay open.
        shm_ctx = report.has("shm") or report.transports.get("SHM", 0) > 0
        # Without either, /dev/shm (a container's default 64 MB) is the commoner cause.
        net, shm = ((0.35, 0.15) if _multi_node(report) else (0.15, 0.35) if shm_ctx
                    else (0.2, 0.25))
        reason = "ncclSystemError: a system call (socket, shm) failed"
        out.append(Signal("network_interface", net, reason, ev_codes))
        out.append(Signal("shm_ipc_container", shm, reason, ev_codes))
    if "ncclUnhandledCudaError" in codes:
        reason = "ncclUnhandledCudaError: a CUDA call inside NCCL failed"
        out.append(Signal("version_incompatibility", 0.3, reason + " (most often a CUDA "
                          "runtime, driver and NCCL build that do not match)", ev_codes))
        out.append(Signal("gpu_hardware_fault", 0.15, reason, ev_codes))
    if "ncclInvalidArgument" in codes:
        out.append(Signal("version_incompatibility", 0.3, "ncclInvalidArgument: the NCCL library "
                          "rejected its arguments (often a different NCCL than the caller was "
                          "built for)", ev_codes))
    if "ncclInvalidUsage" in codes:
        out.append(
            Signal(
                "device_assignment",
                0.3,
                "ncclInvalidUsage: the communicator was set up wrongly",
                ev_codes,
            )
        )
    if "ncclInternalError" in codes:
        out.append(Signal("network_interface", 0.3 if _multi_node(report) else 0.2,
                          "ncclInternalError", ev_codes))
    ib = report.facts.get("ib_completion", [])
    prot = [f for f in ib if f.fields.get("status") == 4]
    if prot:
        # IBV_WC_LOC_PROT_ERR: the NIC could not access the registered (GPU) memory; with
        # GPUDirect RDMA that is PCIe ACS/IOMMU or a broken peer-memory registration.
        out.append(Signal("gpudirect_rdma", 0.6, "IB completion error 4 (local protection): "
                          "the NIC could not access GPU memory (GPUDirect RDMA path)", _ev(prot)))
    if ib:
        out.append(
            Signal(
                "infiniband_roce",
                0.45 if len(prot) == len(ib) else 0.8,
                "InfiniBand/RoCE completion error",
                _ev(ib),
            )
        )
    if report.has("duplicate_gpu"):
        out.append(
            Signal(
                "device_assignment", 0.9, "two ranks on one GPU", _ev(report.facts["duplicate_gpu"])
            )
        )
    if report.has("shm") and (codes or report.has("signal")):
        out.append(
            Signal("shm_ipc_container", 0.35, "shared-memory errors", _ev(report.facts["shm"]))
        )
    versions = report.version_values.get("nccl", set())
    if len(versions) > 1:
        out.append(
            Signal(
                "version_incompatibility",
                0.6,
                f"ranks report different NCCL versions: {sorted(versions)}",
                _ev(report.facts.get("nccl_version")),
            )
        )
    return out


def hardware_rule(report: LogReport, cr: CrossRank) -> list[Signal]:
    out = []
    for f in report.facts.get("xid", []):
        code = f.fields.get("xid")
        info = explain(code) if isinstance(code, int) else None
        cause = info.cause if info else None
        name = f"Xid {code} ({info.name})" if info and cause else f"Xid {code}"
        if cause == "hardware":
            out.append(
                Signal("gpu_hardware_fault", 0.85, f"{name}: a GPU/NVLink hardware fault", [f.ev])
            )
        elif cause == "application":
            out.append(
                Signal("rank_crashed", 0.4, f"{name}: usually an application fault", [f.ev])
            )
        else:
            out.append(
                Signal("gpu_hardware_fault", 0.5, f"Xid {code} reported by the driver", [f.ev])
            )
    stuck = [f for f in report.facts.get("heartbeat", []) if f.fields.get("stuck_s")]
    if stuck:
        out.append(
            Signal(
                "gpu_hardware_fault",
                0.15,
                "the NCCL watchdog itself got stuck (a CUDA call hung)",
                _ev(stuck),
            )
        )
    return out


#: The scale of the hang rule's strengths: its strongest (0.45) lands just below the
#: diagnosed line (0.3); the ratios between its causes stay those of the fitted rule.
SILENT = 0.29 / 0.45


def hang_rule(report: LogReport, cr: CrossRank) -> list[Signal]:
    """NCCL started but the log shows no progress and no error: a hang in the transport.

    Inferred from silence, which an excerpt of a healthy run (NCCL's INFO lines up to
    "Connected all rings") shows just the same: every strength stays below the diagnosed
    line (`SILENT`), so alone it is a weak candidate, never a diagnosis, and its signals are
    marked `from_silence` (no evidence that the job failed)."""
    failure_kinds = (
        "watchdog_timeout",
        "nccl_error",
        "nccl_code",
        "oom",
        "exception",
        "signal",
        "clients_joined",
        "socket_timeout",
        "xid",
        "ib_completion",
        "nccl_trace",
    )
    started_kinds = ("nccl_version", "comm_init", "net_socket", "net_ib", "bootstrap_if",
                     "nccl_setup", "nccl_tests", "nccl_tests_rank")
    progress_kinds = (*started_kinds, "nccl_tests_row")
    started = any(report.has(k) for k in started_kinds)
    finished = report.has("nccl_tests_avg")  # nccl-tests printed its summary: no hang
    if (not started or finished or any(report.has(k) for k in failure_kinds)
            or _failing_warns(report)):
        return []
    last_nccl = max((f.ev.line for k in progress_kinds for f in _all_facts(report, k)),
                    default=0)
    total = max((s.lines for s in report.sources), default=0)
    if total - last_nccl > 5:
        return []  # the job went on printing after NCCL started: no sign of a hang
    ev = _ev(report.facts.get("net_socket") or report.facts.get("nccl_version")
             or report.facts.get("nccl_tests_row") or report.facts.get("nccl_tests"))
    return [replace(s, strength=SILENT * s.strength, from_silence=True)
            for s in _hang_signals(report, ev)]


def _hang_signals(report: LogReport, ev: list[Evidence]) -> list[Signal]:
    if len(report.hosts) <= 1:
        if report.has("nvls"):  # NVLink SHARP: the NVSwitch fabric is in the path
            return [Signal("nvswitch_fabric", 0.45, "NCCL set up NVLS (NVSwitch multicast) on "
                           "one node and then made no progress", _ev(report.facts["nvls"])),
                    Signal("p2p_pcie_topology", 0.2, "NCCL initialised on one node and then "
                           "made no progress", ev)]
        return [
            Signal(
                "p2p_pcie_topology",
                0.35,
                "NCCL initialised on one node and then made no progress "
                "(intra-node P2P transport hang: ACS/IOMMU)",
                ev,
            )
        ]
    return [
        Signal(
            "network_interface", 0.3, "NCCL initialised across nodes and then made no progress", ev
        ),
        Signal(
            "infiniband_roce", 0.2, "NCCL initialised across nodes and then made no progress", ev
        ),
    ]


def warn_rule(report: LogReport, cr: CrossRank) -> list[Signal]:
    """NCCL WARN lines name the failing subsystem even without a card for the exact text."""
    out = []
    for f in _failing_warns(report)[:16]:
        msg = str(f.fields.get("message", ""))
        low = msg.lower()
        if "got completion from peer" in low:
            continue  # an IB completion error: scored by nccl_rule from its status
        if "net/ib" in low or "ibv_" in low:
            out.append(Signal("infiniband_roce", 0.35, "NCCL WARN from the IB transport", [f.ev]))
        elif "connect to" in low or "socket" in low or "bootstrap" in low:
            out.append(
                Signal("network_interface", 0.35, "NCCL WARN about sockets/bootstrap", [f.ev])
            )
        elif "shm" in low or "shared memory" in low:
            out.append(Signal("shm_ipc_container", 0.4, "NCCL WARN about shared memory", [f.ev]))
        elif "cuda failure" in low or "cuda error" in low:
            out.append(
                Signal("version_incompatibility", 0.15, "NCCL WARN: a CUDA call failed", [f.ev])
            )
    return out


def _all_facts(report: LogReport, kind: str) -> list[Fact]:
    """The kept facts of a kind, with the last one too (long runs keep only the first 64)."""
    facts = report.facts.get(kind, [])
    last = report.last_fact.get(kind)
    return [*facts, last] if last is not None and (not facts or last is not facts[-1]) else facts


def gdr_rule(report: LogReport, cr: CrossRank) -> list[Signal]:
    """IB channels without /GDRDMA: GPUDirect RDMA is off on some or all of them."""
    with_gdr = report.transports.get("NET/IB+GDRDMA", 0)
    without = report.transports.get("NET/IB-noGDR", 0)
    if not without:
        return []
    ev = _ev(report.facts.get("net_ib"))
    if with_gdr:
        return [Signal("gpudirect_rdma", 0.45, f"{without} IB channel(s) run without GPUDirect "
                       f"RDMA while {with_gdr} use it: peer memory is missing on some nodes", ev)]
    return [Signal("gpudirect_rdma", 0.25, "no IB channel uses GPUDirect RDMA (/GDRDMA)", ev)]


def node_facts_rule(report: LogReport, cr: CrossRank) -> list[Signal]:
    """What people paste from the node: nvidia-smi's process list, the topology, lspci."""
    out = []
    per_gpu: dict[int, list[Fact]] = {}
    for f in report.facts.get("gpu_process", []):
        per_gpu.setdefault(f.fields["gpu"], []).append(f)
    crowded = {g: fs for g, fs in per_gpu.items() if len({f.fields["pid"] for f in fs}) >= 3}
    if crowded:
        gpu, facts = max(crowded.items(), key=lambda kv: len(kv[1]))
        out.append(Signal("device_assignment", 0.55, f"{len(facts)} processes hold memory on "
                          f"GPU {gpu}: ranks did not select their own device", _ev(facts, 3)))
    failing = any(report.has(k) for k in ("watchdog_timeout", "nccl_code", "oom", "signal",
                                         "xid", "ib_completion"))
    if report.has("acs_enabled"):
        out.append(Signal("p2p_pcie_topology", 0.6, "PCIe ACS is enabled on a bridge "
                          "(ACSCtl SrcValid+): P2P traffic is routed through the root complex",
                          _ev(report.facts["acs_enabled"])))
    if not failing and report.has("p2p_test"):
        out.append(Signal("p2p_pcie_topology", 0.4, "CUDA's P2P bandwidth/latency test was run "
                          "on the GPUs: P2P between them is in question",
                          _ev(report.facts["p2p_test"])))
    elif not failing and (report.has("topo_matrix") or report.has("lspci_gpu")):
        facts = report.facts.get("topo_matrix") or report.facts.get("lspci_gpu") or []
        out.append(Signal("p2p_pcie_topology", 0.3, "the GPUs' PCIe topology was shared "
                          "(nvidia-smi topo -m / lspci): P2P between them is in question",
                          _ev(facts)))
    return out


RULES: tuple[Rule, ...] = (
    crash_rule,
    vanished_rule,
    mismatch_rule,
    timeout_rule,
    launch_rule,
    nccl_rule,
    hardware_rule,
    hang_rule,
    warn_rule,
    gdr_rule,
    node_facts_rule,
)


def flight_recorder(report: LogReport, cr: CrossRank) -> list[Signal]:
    """Flight Recorder dumps: ranks calling different collectives at one sequence id are a
    desync; a rank that never entered a collective the others entered skipped it (a code
    path or uneven data on that rank), or was stuck or dead before it."""
    out = []
    for f in report.flight_recorder:
        ev = [Evidence(f.dump, 0, f.text, f.ranks[0] if f.ranks else None)]
        # with text logs of the same job: did those ranks fail, or wait on another rank?
        failed = any(r in cr.crashed_ranks for r in f.ranks)
        quiet = bool(report.sources) and not failed and not any(r in cr.victims
                                                                for r in f.ranks)
        if f.kind == "mismatch":
            out.append(Signal("collective_mismatch", 0.85, "the Flight Recorder dumps show "
                              "ranks calling different collectives at the same point", ev))
        elif f.kind == "late":
            out.append(Signal("straggler_or_imbalance", 0.5, "a rank scheduled a collective "
                              "seconds after the others, which waited in it for that rank "
                              "(Flight Recorder)", ev))
        elif f.kind == "no_dump":
            if quiet:
                out.append(Signal("straggler_or_imbalance", 0.5, "a rank wrote no dump and no "
                                  "error while the others waited for it in a collective: it "
                                  "was busy or stuck elsewhere (Flight Recorder)", ev))
            elif not failed:
                out += [Signal("straggler_or_imbalance", 0.3, "a rank left no Flight Recorder "
                               "dump while the others waited for it", ev),
                        Signal("rank_crashed", 0.3, "a rank left no Flight Recorder dump: it "
                               "may have died", ev)]
        elif quiet:
            # It wrote a dump, so it was alive, reported nothing wrong, and never called the
            # collective the others are in: a code path or data that differs on that rank.
            out += [Signal("collective_mismatch", 0.7, "a rank never called a collective the "
                           "others entered, and reported no error of its own (uneven data or a "
                           "rank-dependent code path; Flight Recorder)", ev),
                    Signal("straggler_or_imbalance", 0.35, "a rank fell behind the others "
                           "(Flight Recorder)", ev)]
        else:
            out += [Signal("collective_mismatch", 0.5, "a rank never entered a collective the "
                           "others entered (Flight Recorder)", ev),
                    Signal("straggler_or_imbalance", 0.35, "a rank fell behind the others "
                           "(Flight Recorder)", ev),
                    Signal("rank_crashed", 0.25, "a rank stopped before a collective the others "
                           "entered (Flight Recorder)", ev)]
    return out


def signals(report: LogReport, cr: CrossRank) -> list[Signal]:
    return [s for rule in (*RULES, flight_recorder) for s in rule(report, cr)]

"""Cross-rank reasoning (pure): what people cannot do by eye across 1024 ranks.

Which ranks timed out and which stayed silent, which rank failed first, whose
collective sequence number lags, whether ranks disagree on the collective at
the same sequence number, and what torchrun recorded as the root cause.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bot.answering.contract import SuspectOut
from bot.logs.analyze import global_rank_of_file, host_of_file, rank_of_file
from bot.logs.extract import GLOO_CONNECT_TIMEOUT, GLOO_PEER_LOST, is_comm_exception
from bot.logs.model import Evidence, Fact, LogReport, RankState, TimeoutRecord

#: How a first failure reads when a local rank exited without reporting the timeout the
#: others reported (rules match on it: keep the wording in this one place).
EXITED_SILENTLY = "without reporting a watchdog timeout"
#: How a rank killed from outside the launcher reads (rules match on it).
KILLED_OUTSIDE = "from outside the launcher (preempted or killed)"


@dataclass
class Suspect:
    rank: int | None
    host: str | None
    reason: str
    weight: float
    evidence: list[Evidence] = field(default_factory=list)

    def out(self) -> SuspectOut:
        """The suspect as an answer names it."""
        return SuspectOut(rank=self.rank, host=self.host, reason=self.reason)


@dataclass
class Mismatch:
    seq: int
    variants: dict[str, list[int]]  # "ALLREDUCE numel=1" -> ranks
    evidence: list[Evidence]


@dataclass
class CrossRank:
    suspects: list[Suspect] = field(default_factory=list)
    timeout_ranks: list[int] = field(default_factory=list)
    silent_ranks: list[int] = field(default_factory=list)
    crashed_ranks: list[int] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)
    lagging: list[int] = field(default_factory=list)
    #: ranks whose only failure is a collective timeout or a communication error: they were
    #: waiting for, or cut off by, another rank
    victims: list[int] = field(default_factory=list)
    first_failure: Suspect | None = None
    #: ranks that left the collective without an error of their own while others reported
    #: losing or waiting for them: named by rank 0's monitored barrier, or silent
    vanished: list[int] = field(default_factory=list)
    #: of the other ranks' symptoms, whether any waited out a timeout (the missing rank was
    #: alive but elsewhere) or only lost the connection (it was gone)
    peers_timed_out: bool = False
    #: of the vanished ranks, those alive after the others gave up on them (they lost a peer
    #: themselves later, or torchrun had to stop them)
    still_running: list[int] = field(default_factory=list)
    #: ranks whose timeout came from another call than most ranks' (barrier vs all_reduce)
    other_path: list[int] = field(default_factory=list)
    #: ranks torchrun recorded first as ended by a signal it never sent them: killed from
    #: outside the launcher (a preemption, a health check, a person), not stopped by it
    killed_outside: list[int] = field(default_factory=list)
    #: nodes whose workers all exited with code 0 while the others failed (torchrun's exit
    #: barrier): their ranks left early
    finished_hosts: list[str] = field(default_factory=list)
    #: one torchrun agent whose only failure was a rank that lost a peer, with no other
    #: failure and no worker left to stop: every other worker there had exited with code 0
    left_cleanly: bool = False


def _ranges(ranks: list[int], limit: int = 12) -> str:
    if len(ranks) <= limit:
        return ", ".join(map(str, ranks))
    return ", ".join(map(str, ranks[:limit])) + f" ... ({len(ranks)} ranks)"


def analyze_ranks(report: LogReport) -> CrossRank:
    out = CrossRank()
    by_rank: dict[int, TimeoutRecord] = {t.rank: t for t in report.timeouts if t.rank is not None}
    out.timeout_ranks = sorted(by_rank)
    out.crashed_ranks = sorted(r for r, s in report.ranks.items() if s.first_error is not None)
    suspects: dict[object, Suspect] = {}
    unplaced = unplaced_hosts(report)

    def add(rank: int | None, host: str | None, reason: str, weight: float,
            ev: list[Evidence]) -> None:
        if rank is not None and host is None and rank in report.ranks:
            host = report.ranks[rank].host
        if rank is not None and host is None and len(unplaced) == 1:
            host = unplaced[0]  # the one node no line placed any rank on: where it must run
        key: object = rank if rank is not None else f"host:{host}"
        s = suspects.get(key)
        if s is None:
            suspects[key] = Suspect(rank, host, reason, weight, list(ev))
        else:
            s.weight = min(1.0, max(s.weight, weight) + 0.1)
            s.reason += "; " + reason
            s.evidence.extend(ev[:2])
            s.host = s.host or host

    def lead(rank: int, reason: str) -> None:
        """Put `reason` first among what is said of `rank` (what the one-screen answer shows):
        an either-or that must not hide behind an earlier, weaker reason."""
        s = suspects.get(rank)
        if s is not None and not s.reason.startswith(reason):
            s.reason = "; ".join([reason, *(p for p in s.reason.split("; ") if p != reason)])

    def prefer(first: object, other: object) -> None:
        """Rank suspect `first` ahead of `other`."""
        s1, s2 = suspects.get(first), suspects.get(other)
        if s1 is not None and s2 is not None and s1.weight <= s2.weight:
            s1.weight = min(1.0, s2.weight + 0.05)
            s2.weight = min(s2.weight, s1.weight - 0.01)

    out.victims = victim_ranks(report, by_rank)
    out.killed_outside = killed_outside(report)

    # 1. torchrun's own record of the first observed failure; a rank that only timed out or
    # lost a peer there was the first to notice, not the cause. A rank ended by a signal
    # torchrun never sent it was killed from outside (each node's torchrun records its own
    # first failure: the others' are what followed).
    for rec in report.failures:
        if rec.root and rec.rank in out.killed_outside:
            why = f"ended by a signal (exitcode {rec.exitcode}) {KILLED_OUTSIDE}"
            add(rec.rank, rec.host, why, 0.9, [rec.ev])
            if out.first_failure is None:
                out.first_failure = Suspect(rec.rank, rec.host, why, 0.9, [rec.ev])
    # Each node's agent records its own first observed failure: on a multi-node job the
    # first agent's may be a victim (it lost or waited for a peer) while another node's is
    # the cause (its workers died by a signal: a lost node). Of the roots whose rank has no
    # timeout or lost peer of its own, and that this node's torchrun did not stop itself, the
    # earliest (the summary's `time : %Y-%m-%d_%H:%M:%S`) is named.
    stopped_pids = {f.fields.get("pid") for f in report.facts.get("sigterm_sent", [])}
    roots = [rec for rec in ([] if out.killed_outside else report.failures)
             if rec.root and (rec.rank is not None or rec.host)]
    own = [rec for rec in roots if rec.rank not in out.victims
           and not (rec.pid is not None and rec.pid in stopped_pids)]
    if own:
        rec = min(own, key=lambda r: r.time or "")
        code = f"exitcode {rec.exitcode}" if rec.exitcode is not None else "failed"
        add(rec.rank, rec.host, f"torchrun's first observed failure ({code})", 0.8, [rec.ev])
    elif roots:
        rec = roots[0]
        code = f"exitcode {rec.exitcode}" if rec.exitcode is not None else "failed"
        add(rec.rank, rec.host, f"torchrun's first observed failure ({code}), but its "
            "own error is a timeout or a lost peer: it was waiting for another rank",
            0.35, [rec.ev])

    # 2. The rank that failed first (crash, exception, signal), by time where known.
    crashed = [report.ranks[r] for r in out.crashed_ranks]
    if crashed:
        with_ts = [s for s in crashed if s.first_error and s.first_error.ev.ts is not None]
        first = min(with_ts, key=_first_error_ts) if with_ts else crashed[0]
        fact = first.first_error
        assert fact is not None
        what = (
            fact.fields.get("message")
            or fact.fields.get("type")
            or fact.fields.get("signal")
            or fact.kind
        )
        reason = f"failed first: {fact.kind} ({str(what)[:120]})"
        if len(crashed) == 1 or with_ts:
            out.first_failure = Suspect(first.rank, first.host, reason, 0.9, [fact.ev])
            add(first.rank, first.host, reason, 0.9, [fact.ev])

    # 2b. torchrun's agent saw a local rank exit that never reported a timeout itself, while
    # others did: it died first (on one node the local rank is the rank).
    if by_rank and len(report.hosts) <= 1 and out.first_failure is None:
        for fact in report.facts.get("exit_code", []):
            local: int | None = fact.fields.get("local_rank")
            exit_code: int | None = fact.fields.get("code")
            if local is not None and exit_code not in (None, 0) and local not in by_rank \
                    and local not in out.victims:
                why = f"exited with code {exit_code} {EXITED_SILENTLY}"
                out.first_failure = Suspect(local, None, why, 0.85, [fact.ev])
                add(local, None, why, 0.85, [fact.ev])
                break

    # 2c. Ranks that could not reach the store (master) while the others reached it: the
    # others then wait for their keys ("wait timeout ... keys"), and any of them may be the
    # first torchrun records.
    unreachable: dict[int, Fact] = {}
    for kind in ("socket_timeout", "store_connect", "store_resolve"):
        for fact in report.facts.get(kind, []):
            if fact.ev.rank is not None:
                unreachable.setdefault(fact.ev.rank, fact)
    if unreachable and len(report.ranks) >= 2 * len(unreachable):
        for r, fact in sorted(unreachable.items()):
            where = fact.fields.get("addr")
            add(r, None, "could not connect to the store" + (f" at {where}" if where else "")
                + " while the other ranks did", 0.85, [fact.ev])
    elif unreachable and len(report.ranks) > len(unreachable) and 0 not in unreachable:
        # most ranks could not reach the store and rank 0 could: with env:// rank 0 hosts it
        # (TCPStore is_master), so its address or port is what differs from theirs
        fact = unreachable[min(unreachable)]
        add(0, None, f"{len(unreachable)} of {len(report.ranks)} ranks could not connect to the "
            "store it hosts (MASTER_ADDR/MASTER_PORT as they see it) while it could", 0.8,
            [fact.ev])
    elif len(unreachable) >= 2 and set(unreachable) == set(report.ranks) and 0 in unreachable \
            and not report.failures:
        # every rank, rank 0 too, failed to connect as a client, and no torchrun agent (whose
        # own store the workers would use) recorded anything: with env:// the process with
        # RANK 0 starts the store (torch 2.13.0, torch/distributed/rendezvous.py
        # _create_c10d_store: `start_daemon = rank == 0`), so none did: the process launched as
        # rank 0 ran with another RANK, or every rank's MASTER_ADDR/MASTER_PORT points where no
        # rank runs
        fact = unreachable[0]
        where = fact.fields.get("addr")
        add(0, None, f"all {len(unreachable)} ranks, itself too, failed to connect to the store"
            + (f" at {where}" if where else "") + ", which with env:// the process with RANK 0 "
            "starts: either it ran with another RANK than 0 or MASTER_ADDR/MASTER_PORT point "
            "where no rank runs", 0.75, [fact.ev])
    # a rank other than 0 that tried to start the store and found its port taken ("The server
    # socket has failed to listen on any local network address. port: {}, useIpv6: {}, code:
    # {}, name: {}, message: {}", torch 2.13.0, c10d/socket.cpp, as libtorch_cpu.so holds it):
    # with env:// only RANK 0 starts it (`start_daemon = rank == 0`, quoted above), so this
    # process ran as RANK 0 beside the real rank 0, whose store holds the port
    for e in report.exceptions:
        if e.ev.rank and "server socket has failed to listen" in e.message \
                and "EADDRINUSE" in e.message and len(report.ranks) >= 2:
            add(e.ev.rank, e.ev.host, f"its launcher gives it rank {e.ev.rank}, yet it tried to "
                "start the store, which with env:// only RANK 0 does, and found the port taken: "
                "it ran as RANK 0 beside the real rank 0 (a duplicated rank)", 0.95, [e.ev])
            break
    # the same from a node whose lines name local ranks only: the node is the suspect
    node_unreachable: dict[str, Fact] = {}
    for kind in ("socket_timeout", "store_connect", "store_resolve"):
        for fact in report.facts.get(kind, []):
            if fact.ev.rank is None and fact.ev.host and not unreachable:
                node_unreachable.setdefault(fact.ev.host, fact)
    if node_unreachable and len(report.hosts) > len(node_unreachable):
        for host, fact in sorted(node_unreachable.items()):
            where = fact.fields.get("addr")
            add(None, host, "its ranks could not connect to the store"
                + (f" at {where}" if where else "") + " while the other nodes did", 0.85,
                [fact.ev])

    # 2c'. gloo's connect waits for each peer's address under the peer's rank (the key of a
    # "wait timeout ... keys:" store error, extract.store_wait): the rank whose key never came
    # did not join with this store (another MASTER_ADDR/PORT, or it never started); a key at
    # or past the job's world size means the waiting rank itself expects more ranks (its
    # WORLD_SIZE differs). Either way the waiting ranks are victims.
    # at least the ranks seen, and a rank on every node that left logs
    world_seen = max(report.world_size or (max(report.ranks) + 1 if report.ranks else 0),
                     len(report.hosts))
    waiters: dict[int, list[Fact]] = defaultdict(list)
    for fact in report.facts.get("store_wait", []):
        key_rank: int | None = fact.fields.get("key_rank")
        if key_rank is not None and key_rank != fact.ev.rank:
            waiters[key_rank].append(fact)
    # ranks whose own failure is waiting for others: the store's host counting clients
    # ("Timed out after 6 seconds waiting for clients. 2/3 clients joined.", TCPStore.cpp
    # waitForWorkers) or a wait for another rank's key: their keys are missing as a consequence
    waiting_for_others = {f.ev.rank for kind in ("clients_joined", "store_wait")
                          for f in report.facts.get(kind, []) if f.ev.rank is not None}
    # ... or gloo's own wait for a peer to connect (extract.GLOO_CONNECT_TIMEOUT): a rank still
    # connecting its first group never published its key for the next (DETAIL's wrapper)
    waiting_for_others |= {e.ev.rank for e in report.exceptions if e.ev.rank is not None
                           and GLOO_CONNECT_TIMEOUT in e.message.lower()}
    # a rank its own node's torchrun stopped (it names the pid: "Sending process %s closing
    # signal", step 1) after another worker of that node failed first, while the ranks that
    # wait for its key run on other nodes (an agent stops only its own workers, so their wait
    # did not cause the stop): its missing key is a consequence of that node's failure
    stopped_at: dict[int, str] = {rec.rank: rec.host for rec in report.failures
                                  if rec.pid is not None and rec.pid in stopped_pids
                                  and rec.rank is not None and rec.host}
    failed_first_at = {rec.host: rec.rank for rec in report.failures if rec.root and rec.host}
    # The env:// store host counts the clients that joined against its own WORLD_SIZE
    # (TCPStore.cpp waitForWorkers, quoted above); when the job left one file per rank
    # (rank-N.log, as `srun --output=%t` writes) and as many files as clients joined, no
    # rank is missing: the host expects more ranks than the job has.
    per_rank_files = {frank for src in report.sources
                      if (frank := global_rank_of_file(src.name)) is not None}
    for fact in report.facts.get("clients_joined", []):
        joined, expected = fact.fields.get("joined"), fact.fields.get("expected")
        if fact.ev.rank is not None and joined is not None and expected is not None \
                and per_rank_files == set(range(joined)) and expected > joined:
            add(fact.ev.rank, fact.ev.host, f"it hosts the store and waited for {expected} "
                f"ranks, but the job left {joined} rank files and all {joined} joined: its "
                "WORLD_SIZE is larger than the others'", 0.9, [fact.ev])
        elif fact.ev.rank is not None and joined is not None and expected == joined + 1 \
                and not per_rank_files and set(report.ranks) == set(range(joined)):
            # one file of every rank's lines: as many ranks left lines as joined, and nothing
            # in the text says whether the job has one rank more (that never started) or the
            # host counts one too many; it is named beside the rank the others' lines miss
            add(fact.ev.rank, fact.ev.host, f"it hosts the store and waited for {expected} "
                f"ranks while the {joined} ranks that left lines all joined: either its "
                f"WORLD_SIZE is larger than the others' or rank {joined} never started", 0.6,
                [fact.ev])
    # A rank waiting for its own key: gloo publishes a rank's address under its own rank
    # before it waits for every rank's in order (pytorch/gloo 70dc360, gloo/transport/tcp/
    # context.cc `Context::createAndConnectAllPairs`: `store->set(std::to_string(rank),
    # currentRankInfo.bytes());`, then `store->wait_get(keyStr, getTimeout())` for keys 0 to
    # size - 1), so a process its launcher (torchrun's record, its rank file) calls rank k that
    # still waits for key k published its address under another rank: its RANK is not the one
    # its launcher gave it (a duplicated rank: RANK from LOCAL_RANK, a neighbour's RANK). The
    # others wait for the same key as a consequence.
    for fact in report.facts.get("store_wait", []):
        own_key: int | None = fact.fields.get("key_rank")
        if own_key is not None and own_key == fact.ev.rank:
            add(own_key, fact.ev.host, f"its launcher gives it rank {own_key}, yet it waited for "
                f"rank {own_key}'s own address in the store (gloo's key "
                f"{fact.fields.get('key')!r}), which a rank publishes before it waits: it joined "
                "under another RANK than its launcher's (a duplicated rank)", 0.95, [fact.ev])
    exact_world = logdir_world(report)
    for key_rank, facts in sorted(waiters.items()):
        if key_rank in waiting_for_others:
            continue
        node = stopped_at.get(key_rank)
        if node is not None and failed_first_at.get(node, key_rank) != key_rank and all(
                f.ev.host and f.ev.host != node for f in facts):
            continue
        who = {f.ev.rank if f.ev.rank is not None else f.ev.host for f in facts}
        waiter = facts[0].ev.rank
        if waiter is None and facts[0].ev.host:  # a node's file of local ranks: the one placed
            on_host = [r for r, st in report.ranks.items() if st.host == facts[0].ev.host]
            waiter = on_host[0] if len(on_host) == 1 else None
        node_of_waiter = facts[0].ev.host
        if exact_world is not None and key_rank >= exact_world and node_of_waiter and \
                waiter is None and who == {node_of_waiter}:
            # no such rank: the waiter expects more ranks than the job has; its global rank is
            # not in its node's lines, its node is
            add(None, node_of_waiter, f"a rank there waited for rank {key_rank}'s address in the "
                f"store, but the job has {exact_world} ranks (torchrun's --log-dir folders): its "
                "WORLD_SIZE is larger than the others'", 0.9, [facts[0].ev])
            continue
        if len(who) == 1 and key_rank >= world_seen and waiter is None and not unplaced:
            continue  # no such rank; the one rank that waits for it is not known by its lines
        if len(who) == 1 and waiter is not None and key_rank >= world_seen:
            add(waiter, facts[0].ev.host, f"waited for rank {key_rank}'s address in the store, "
                f"but the job has {world_seen} ranks: its WORLD_SIZE is larger than the others'",
                0.9, [facts[0].ev])
        else:
            add(key_rank, None, "never published its address to the store (gloo's key "
                f"{facts[0].fields.get('key')!r}) while {len(who)} rank(s) waited for it: it "
                "did not reach the same store (MASTER_ADDR/MASTER_PORT/WORLD_SIZE) or did not "
                "start", 0.9, [f.ev for f in facts[:2]])

    # 2h. A node whose torchrun agent waited at its exit barrier (extract.exit_barrier: every
    # worker there exited with code 0) while no rank failed on its own and others lost or
    # waited for peers: that node's ranks left the job early; the rest is the consequence.
    if out.victims and not out.crashed_ranks and not out.killed_outside:
        failed_hosts = {rec.host for rec in report.failures if rec.exitcode not in (None, 0)}
        for fact in report.facts.get("exit_barrier", []):
            node = fact.ev.host
            if node is None or node in failed_hosts or node in out.finished_hosts:
                continue
            out.finished_hosts.append(node)
            there: list[int | None] = [r for r, st in report.ranks.items() if st.host == node]
            if not there and unplaced == [node]:
                there = [r for r in range(world_seen) if r not in report.ranks]
            for left in there[:8] or [None]:
                add(left, node, "its node's torchrun agent waited at the exit barrier (every "
                    "worker there exited with code 0) while ranks elsewhere lost or waited for "
                    "peers: it left the job early", 0.85, [fact.ev])

    # 2i. One agent summarised one failure, a rank that lost a peer, "<NO_OTHER_FAILURES>"
    # (torch 2.13.0, torch/distributed/elastic/multiprocessing/errors/__init__.py:
    # `other_failures="\n".join(other_failures_fmt or ["  <NO_OTHER_FAILURES>"])`), and sent
    # no closing signal (it signals every worker still running, `_close`, quoted in
    # `killed_outside`): the workers it lost had exited with code 0, which torchrun does not
    # count as a failure. They left the job early (a rank-only `return`, fewer batches).
    if len(report.hosts) <= 1 and len(report.failures) == 1 and report.failures[0].root \
            and report.failures[0].rank in out.victims and not out.crashed_ranks \
            and not report.facts.get("sigterm_sent") and not by_rank:
        out.left_cleanly = True
        rec = report.failures[0]
        # every other worker of the job exited 0; a job whose size the log does not state (no
        # rank prefix, as under `accelerate launch`) has at least one other rank: 1, or 0
        world_left = report.world_size or 0
        others = [r for r in range(world_left) if r != rec.rank] if world_left >= 2 else \
            [1 if rec.rank == 0 else 0]
        for left in others[:8] if rec.rank is not None else []:
            add(left, rec.host, f"exited with code 0 while rank {rec.rank} still ran "
                "collectives: torchrun's one failure is rank "
                f"{rec.rank}, which lost a peer, with no other failure and no worker left to "
                "stop: it left the job early", 0.8, [rec.ev])

    # 2d. Rank 0 named the ranks that never reached its monitored barrier (DETAIL mode, or
    # dist.monitored_barrier): those few are where to look. When it names every other rank,
    # rank 0 itself came late (the others gave up on it first).
    blamed: set[int] = set()
    for fact in report.facts.get("barrier_blame", []):
        blamed.update(fact.fields.get("ranks", []))
    world_now = report.world_size or (max(report.ranks) + 1 if report.ranks else 0)
    if blamed:
        # the ranks rank 0 names are ranks of the job (a node's torchrun prints its own local
        # world size; the ranks of a node that left no rank line are not in report.ranks)
        world_now = max(world_now, max(blamed) + 1)
        fact = report.facts["barrier_blame"][0]
        if world_now > 2 and len(blamed) >= world_now - 1:
            add(0, None, "every other rank gave up on it at the monitored barrier: rank 0 came "
                "late", 0.7, [fact.ev])
        elif len(blamed) <= max(1, world_now // 4) or (
                len(blamed) < world_now - 1 and _whole_node(report, blamed, world_now)):
            # a few ranks, or every rank of one node (a node lost or slow as a whole: the
            # ranks the others wait for are that node's)
            for r in sorted(blamed):
                add(r, None, "rank 0 reports that it never reached the monitored barrier "
                    f"({fact.fields.get('timeout_ms')} ms)", 0.8, [fact.ev])

    # 2e. DETAIL mode compared the ranks' collectives: the fingerprint few ranks ran, where
    # more ranks agree on another, is the odd one out.
    # A rank's own fingerprint first ("Rank A is running ..."): what a peer decoded of it
    # ("but Rank B is running ...") can be garbled (a barrier read as GATHER or REDUCE).
    ran: dict[int, str] = {}
    fp_ev: list[Evidence] = []
    for fact in report.facts.get("fingerprint", []):
        ran.setdefault(fact.fields["a"], fact.fields["fp_a"])
        fp_ev.append(fact.ev)
    for fact in report.facts.get("fingerprint", []):
        ran.setdefault(fact.fields["b"], fact.fields["fp_b"])
    by_fp: dict[str, list[int]] = defaultdict(list)
    for r, fp in sorted(ran.items()):
        by_fp[fp].append(r)
    if len(by_fp) > 1:
        ordered = sorted(by_fp.values(), key=len, reverse=True)
        if len(ordered[0]) > len(ordered[1]):
            common_fp = next(fp for fp, rs in by_fp.items() if rs is ordered[0])
            for fp, rs in by_fp.items():
                if rs is not ordered[0] and len(rs) <= 4:
                    for r in rs:
                        add(r, None, f"ran {fp} where {len(ordered[0])} ranks ran {common_fp}",
                            0.85, fp_ev[:2])
        elif len(by_fp) == 2:
            (fp1, rs1), (fp2, rs2) = by_fp.items()
            odd = bookkeeping_side(fp1, fp2)
            if odd is not None:
                fp, rs, other = (fp1, rs1, fp2) if odd == 0 else (fp2, rs2, fp1)
                for r in rs:
                    add(r, None, f"ran {fp} (a barrier or one-element collective) where as many "
                        f"ranks ran {other}: {BOOKKEEPING}", 0.85, fp_ev[:2])
            elif len(rs1) == len(rs2) == 1:
                # two ranks, two collectives, neither a barrier nor a metric: either may be the
                # one off the common path; both are named, each saying so (the one whose dtype
                # is not torch's default first, `non_default_side`)
                a, b = sorted((rs1[0], rs2[0]))
                said = {rs1[0]: fp1, rs2[0]: fp2}
                tie = (f"rank {a} or rank {b}: rank {a} ran {said[a]} where rank {b} ran "
                       f"{said[b]}, and with two ranks the logs cannot tell which one's "
                       "collective is the odd one")
                nd = non_default_side(said[a], said[b])
                for r in ((b, a) if nd == 1 else (a, b)):
                    add(r, None, tie, 0.7, fp_ev[:2])
                    lead(r, tie)
                    if nd is not None and r == (a, b)[nd]:
                        add(r, None, non_default_reason(said[r]), 0.7, [])
                if nd is not None:  # ahead of what else was said of the other (torchrun's
                    prefer((a, b)[nd], (b, a)[nd])  # first record: a DETAIL pair fails at once)
            elif len(rs1) == len(rs2) and (hosts := _node_split(report, rs1, rs2, world_now)):
                # as many ranks on each side, each side exactly one node's ranks: a setting that
                # differs by node (its environment, its image); nothing in the mismatch says
                # which node's is the odd one, so both nodes are named, the one whose dtype is
                # not torch's default first
                nd = non_default_side(fp1, fp2)
                sides = [(hosts[0], rs1, fp1), (hosts[1], rs2, fp2)]
                if nd == 1:
                    sides.reverse()
                (h1, r1, f1), (h2, r2, f2) = sides
                tie = (f"node {h1} or node {h2}: ranks {_ranges(r1)} (all of {h1}) ran {f1} "
                       f"where ranks {_ranges(r2)} (all of {h2}) ran {f2}: a setting that "
                       "differs by node, and the mismatch cannot tell which node's is the "
                       "odd one")
                for host, _rs, fp in sides:
                    add(None, host, tie, 0.8, fp_ev[:2])
                    if nd is not None and host == h1:
                        add(None, host, non_default_reason(fp), 0.8, [])
                if nd is not None:
                    prefer(f"host:{h1}", f"host:{h2}")

    # 2f. A rank that cannot use its network interface (gloo's device set-up): its own
    # configuration, not a peer.
    for fact in report.facts.get("gloo_iface", []):
        if fact.ev.rank is not None or fact.ev.host:
            add(fact.ev.rank, fact.ev.host, f"gloo found no address for interface "
                f"{fact.fields.get('iface')!r} here (GLOO_SOCKET_IFNAME)", 0.9, [fact.ev])

    # 2g. gloo aborted a rank whose buffer was smaller than what arrived (extract.gloo_size).
    # gloo's ring allreduce receives from rank + 1 (pytorch/gloo gloo/allreduce.cc, `recvRank =
    # (context->size + context->rank + 1) % context->size`): either this rank's tensor is the
    # smaller one, or that neighbour's is the larger (another shape or dtype). The Flight
    # Recorder dumps (a third rank's call against theirs) or the ranks' own tracebacks (a third
    # rank's call site against theirs) may tell which; otherwise the text cannot, and both are
    # named, the aborted rank first, its reason saying "rank A or rank B".
    for fact in report.facts.get("gloo_size", []):
        grank = fact.ev.rank
        if grank is None and fact.ev.host:  # a node's file of one rank (torchrun's what():)
            on_host = [r for r, st in report.ranks.items() if st.host == fact.ev.host]
            grank = on_host[0] if len(on_host) == 1 else None
        aborted = [rec.rank for rec in report.failures if rec.exitcode == -6]
        if grank is None and len(set(aborted)) == 1:
            # a line with no rank (accelerate prints none before its own): gloo's exception
            # ends the process through std::terminate ("terminate called after throwing an
            # instance of 'gloo::EnforceNotMet'", libstdc++'s verbose terminate handler, which
            # then calls abort()), and torchrun records the one rank that died of SIGABRT
            # ("exitcode  : -6 (pid: %d)  (SIGABRT)")
            grank = aborted[0]
        ring = max(world_now, len(report.hosts))  # every node that left logs ran a rank
        if grank is None or ring < 2:
            continue
        got, want = fact.fields.get("received"), fact.fields.get("expected")
        nb = (grank + 1) % ring
        odd = _odd_of_two(report, grank, nb)
        why = ("its collective differs from the other ranks' in the Flight Recorder dumps"
               if odd is not None else "")
        by_site = _odd_call_site(report, grank, nb) if odd is None else None
        if by_site is not None:
            odd, mine, theirs = by_site
            why = (f"its traceback calls the collective from {_short_site(mine)} where the "
                   f"other ranks call it from {_short_site(theirs)}")
        if odd == nb:
            add(nb, None, f"its ring neighbour rank {grank} received {got} bytes from it where "
                f"it expected {want}, and {why}: it sent a larger tensor or another dtype", 0.95,
                [fact.ev])
        if odd is None:
            # neither dumps nor tracebacks tell: the aborted rank is named first, and what is
            # said of it leads with both ranks
            either = (f"rank {grank} or rank {nb}: gloo aborted rank {grank}, which received "
                      f"{got} bytes from rank {nb} where its own tensor holds {want}, and the "
                      f"logs cannot tell whether rank {grank}'s tensor is the smaller or rank "
                      f"{nb}'s the larger (another shape or dtype)")
            add(grank, fact.ev.host, either, 0.85, [fact.ev])
            lead(grank, either)  # whatever was said of the rank before
            add(nb, None, f"its ring neighbour rank {grank} received {got} bytes from it where "
                f"it expected {want}: it may have sent a larger tensor or another dtype", 0.6,
                [fact.ev])
        else:
            add(grank, fact.ev.host, f"gloo aborted it: it received {got} bytes where its own "
                f"tensor holds {want} (its tensor is smaller than its peers', or rank {nb} sent "
                "a larger one)", 0.85 if odd != nb else 0.5, [fact.ev])
        break

    # 3. Ranks that did not report a timeout while most others did.
    world = report.world_size
    if world and len(by_rank) >= max(2, world // 2) and len(by_rank) < world:
        out.silent_ranks = [r for r in range(world) if r not in by_rank
                            and r not in out.victims] or (
            # all but one or two timed out; the rest only lost a peer, after the others gave
            # up and left: they came late, they were what the others waited for
            [r for r in range(world) if r not in by_rank] if len(by_rank) >= world - 2 else [])
        if len(out.silent_ranks) <= max(2, world // 8):
            for r in out.silent_ranks:
                add(
                    r,
                    None,
                    f"did not report a watchdog timeout while {len(by_rank)} of {world} "
                    "ranks did (stuck elsewhere or dead)",
                    0.7,
                    [],
                )

    # 3a. The call each rank's timeout or lost peer was raised in (the innermost frame of its
    # traceback): most in one collective (all_reduce), a few in another (barrier) -> those few
    # took another code path.
    in_call: dict[int, str] = {}
    call_ev: dict[int, Evidence] = {}
    for e in report.exceptions:
        erank = e.ev.rank
        # a rank whose own failure is waiting for others at start-up (the env:// store host
        # counting clients) is in the store's code, not on another code path of the job
        if erank in waiting_for_others:
            continue
        if erank is not None and e.frame and " in " in e.frame and is_comm_exception(e.type,
                                                                                e.message):
            # the object collective the program called (all_gather_object) rather than the
            # tensor collective it runs inside (all_gather)
            in_call.setdefault(erank, e.api if e.api in OBJECT_COLLECTIVES
                               else e.frame.rsplit(" in ", 1)[1])
            call_ev.setdefault(erank, e.ev)
    calls: dict[str, list[int]] = defaultdict(list)
    for crank, cname in sorted(in_call.items()):
        calls[cname].append(crank)
    if len(calls) == 2 and len({len(rs) for rs in calls.values()}) == 1:
        # a tie (two ranks, each in another call): the one in a barrier left the common path
        (c1, rs1), (c2, rs2) = sorted(calls.items())
        odd = bookkeeping_side(c1, c2)
        if odd is not None:
            cname, rs, other = (c1, rs1, c2) if odd == 0 else (c2, rs2, c1)
            out.other_path = sorted(set(out.other_path) | set(rs))
            for crank in rs:
                add(crank, None, f"was in {cname}() when it gave up, while as many rank(s) were "
                    f"in {other}(): {BOOKKEEPING}", 0.8, [call_ev[crank]])
    if len(calls) > 1:
        ranked = sorted(calls.items(), key=lambda kv: -len(kv[1]))
        top_call, top_ranks = ranked[0]
        if len(top_ranks) >= 2 and len(top_ranks) > len(ranked[1][1]):
            for other_call, rs in ranked[1:]:
                if len(rs) <= max(1, len(in_call) // 4):
                    out.other_path = sorted(set(out.other_path) | set(rs))
                    for crank in rs:
                        add(crank, None, f"was in {other_call}() when it gave up, while "
                            f"{len(top_ranks)} rank(s) were in {top_call}(): another code path",
                            0.8, [call_ev[crank]])

    # 3b. A rank that logged a long step of its own (saving a checkpoint, evaluating) and did
    # not time out while others did: the others were waiting for it.
    if by_rank:
        for fact in report.facts.get("long_step", []):
            lrank = fact.ev.rank
            if lrank is not None and lrank not in by_rank:
                add(lrank, None, f"busy with {fact.fields.get('activity', 'a long step')!r} while "
                    f"{len(by_rank)} rank(s) timed out waiting", 0.8, [fact.ev])
                break

    # 4. Lagging sequence numbers and 5. mismatched collectives at one SeqNum.
    seqs = {r: t.seq for r, t in by_rank.items() if t.seq is not None}
    if len(set(seqs.values())) > 1:
        common = Counter(seqs.values()).most_common(1)[0][0]
        behind = sorted(r for r, s in seqs.items() if s < common)
        if behind and len(behind) <= max(2, len(seqs) // 4):
            out.lagging = behind
            for r in behind:
                add(
                    r,
                    None,
                    f"its timed-out collective SeqNum={seqs[r]} lags the others (SeqNum={common})",
                    0.75,
                    [by_rank[r].ev],
                )
    enq = {r: t.last_enqueued for r, t in by_rank.items() if t.last_enqueued is not None}
    if len(set(enq.values())) > 1:
        top = max(enq.values())
        behind = sorted(r for r, s in enq.items() if s < top)
        if behind and len(behind) <= max(2, len(enq) // 4):
            for r in behind:
                add(
                    r,
                    None,
                    f"last enqueued NCCL work {enq[r]} lags the others ({top})",
                    0.7,
                    [by_rank[r].ev],
                )
            out.lagging = sorted(set(out.lagging) | set(behind))
    groups: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    evs: dict[int, list[Evidence]] = defaultdict(list)
    for r, t in by_rank.items():
        if t.seq is None or t.op is None:
            continue
        label = f"{t.op} numel={t.numel_in}" if t.numel_in is not None else t.op
        groups[t.seq][label].append(r)
        if len(evs[t.seq]) < 4:
            evs[t.seq].append(t.ev)
    for seq, variants in sorted(groups.items()):
        if len(variants) > 1:
            out.mismatches.append(Mismatch(seq, dict(variants), evs[seq]))
            minority = min(variants.values(), key=len)
            if len(minority) <= 4:
                for r in minority:
                    add(
                        r,
                        None,
                        f"ran a different collective at SeqNum={seq} than the others "
                        f"({', '.join(sorted(variants))})",
                        0.8,
                        [by_rank[r].ev],
                    )

    # 6. A rank with no error of its own while the others lost it or waited for it: it left
    # (exited, even cleanly, or was killed without a word) or it was busy elsewhere. torchrun's
    # SIGTERMs come after, and the rank torchrun saw fail first is one that lost it.
    out.peers_timed_out = bool(by_rank) and not _first_symptom_is_a_lost_peer(report)
    named = sorted(blamed) if blamed and len(blamed) <= max(1, world_now // 4) else []
    if not named and out.victims and world_now > len(out.victims):
        known = set(out.victims) | set(out.crashed_ranks) | set(by_rank) | set(unreachable)
        quiet = [r for r in range(world_now) if r not in known]
        if len(quiet) > max(1, world_now // 4):
            # torchrun's summary lists every worker that failed, and it stops (naming the
            # pid) every one still running (`_close`, quoted in `killed_outside`): of the
            # ranks with no error of their own, those it stopped were still in the job; one it
            # neither stopped nor recorded had already exited with code 0
            quiet = [r for r in quiet if not _stopped(report, r, out.killed_outside)
                     and not any(rec.rank == r for rec in report.failures)] \
                if report.failures and report.facts.get("sigterm_sent") else quiet
        if 0 < len(quiet) <= max(1, world_now // 4):
            named = quiet
            for r in quiet:
                add(r, None, "reported no error while "
                    f"{len(out.victims)} rank(s) lost or waited for a peer: it left the job or "
                    "was busy elsewhere", 0.75, [])
    out.vanished = [r for r in named if r not in out.crashed_ranks]
    out.still_running = [r for r in out.vanished
                         if r in out.victims or _stopped(report, r, out.killed_outside)]

    out.suspects = sorted(suspects.values(), key=lambda s: -s.weight)[:16]
    return out


#: Why, of two sides that disagree, the one in a barrier or a one-element collective is named.
BOOKKEEPING = ("a rank off the training step's path (a rank-only branch, fewer batches, a "
               "skipped step) reaches a barrier or a metric reduction while its peers are still "
               "in the step's collective")


#: torch.distributed's object collectives (torch 2.13.0, torch/distributed/distributed_c10d.py:
#: `def all_gather_object(object_list, obj, group=None):`, `def gather_object(`, `def
#: broadcast_object_list(`, `def scatter_object_list(`, `def send_object_list(`, `def
#: recv_object_list(`): pickled Python objects (metrics, configs, file lists), never a training
#: step's gradients
OBJECT_COLLECTIVES = frozenset({"all_gather_object", "gather_object", "broadcast_object_list",
                                "scatter_object_list", "send_object_list", "recv_object_list"})


def _bookkeeping(what: str) -> bool:
    """A barrier, a one-element collective (a metric, a flag) or an object collective: a
    DETAIL fingerprint ("OpType=BARRIER", "TensorShape=[1]") or the call a rank waited in
    ("barrier", "all_gather_object")."""
    text = what.replace(" ", "")
    return "BARRIER" in text or "TensorShape=[1]," in text + "," or what == "barrier" \
        or "TensorShape=[]," in text + "," or what in OBJECT_COLLECTIVES


#: torch's default floating dtype (`torch.get_default_dtype()` is torch.float32 unless the
#: program sets another); DETAIL prints it as "TensorDtypes=Float" (c10's ScalarType name)
_DEFAULT_DTYPE = "Float"
_DTYPES = re.compile(r"TensorDtypes=(\w+)")


def non_default_side(a: str, b: str) -> int | None:
    """Of two DETAIL fingerprints that differ in their tensors' dtype only where one is torch's
    default (float32, "Float"), the side (0 or 1) whose dtype is not: a cast or a precision
    setting (fp16, bf16, fp64) made there, where the default needs none. None otherwise."""
    da, db = _DTYPES.search(a), _DTYPES.search(b)
    if da is None or db is None or da[1] == db[1] or _DTYPES.sub("", a) != _DTYPES.sub("", b):
        return None
    if db[1] == _DEFAULT_DTYPE:
        return 0
    return 1 if da[1] == _DEFAULT_DTYPE else None


def non_default_reason(fp: str) -> str:
    """Why the side `non_default_side` picked is named first."""
    m = _DTYPES.search(fp)
    return (f"its dtype {m[1] if m else '?'} is not torch's default (float32): a cast or a "
            "precision setting made there, so it is named first")


def _node_split(report: LogReport, a: list[int], b: list[int],
                world: int) -> tuple[str, str] | None:
    """The two nodes when ranks `a` are exactly one node's and `b` exactly another's."""
    ha = {report.ranks[r].host for r in a if r in report.ranks}
    hb = {report.ranks[r].host for r in b if r in report.ranks}
    if len(ha) != 1 or len(hb) != 1 or ha == hb or None in ha | hb:
        return None
    if not (_whole_node(report, set(a), world) and _whole_node(report, set(b), world)):
        return None
    return str(ha.pop()), str(hb.pop())


def bookkeeping_side(a: str, b: str) -> int | None:
    """Of two collectives that as many ranks ran each (a tie: two ranks), the side (0 or 1)
    that is a barrier or a one-element collective while the other is not. A job's repeated
    collective is its step's (gradients); a rank that left that path -- a rank-only branch,
    an early end of its data, a skipped step -- meets a barrier or a metric's reduction first,
    so that side is named. None when both or neither are."""
    ka, kb = _bookkeeping(a), _bookkeeping(b)
    if ka == kb:
        return None
    return 0 if ka else 1


def _odd_of_two(report: LogReport, a: int, b: int) -> int | None:
    """Of two ranks one of which holds an odd tensor (gloo's size check names a pair), the one
    whose call in the Flight Recorder dumps differs from a third rank's at the same sequence
    id (another rank's dump is what the job's collective normally is); None when the dumps
    do not tell."""
    for f in report.flight_recorder:
        if f.kind != "mismatch" or not f.calls:
            continue
        normal = {c for r, c in f.calls.items() if r not in (a, b)}
        if len(normal) != 1:
            continue
        ref = normal.pop()
        for mine, other in ((a, b), (b, a)):
            if mine in f.calls:
                return mine if f.calls[mine] != ref else other
    return None


def _odd_call_site(report: LogReport, a: int, b: int) -> tuple[int, str, str] | None:
    """Of two ranks one of which holds an odd tensor, the one whose own traceback calls the
    failed collective from another line of the program than every other rank's does (their
    tracebacks' innermost frame of the program's own code, `ExceptionRecord.call_site`), with
    that site and the others'; None when no third rank's traceback shows the usual call, or
    when both or neither differ. Python prints each frame as `'  File "{}", line {}, in
    {}\n'.format(frame_summary.filename, frame_summary.lineno, frame_summary.name)` (CPython
    3.11, Lib/traceback.py, StackSummary.format_frame_summary): extract.py's `frame`."""
    sites: dict[int, str] = {}
    for e in report.exceptions:
        if e.ev.rank is not None and e.call_site and is_comm_exception(e.type, e.message):
            sites.setdefault(e.ev.rank, e.call_site)
    usual = {site for r, site in sites.items() if r not in (a, b)}
    if len(usual) != 1:
        return None
    ref = usual.pop()
    odd = [r for r in (a, b) if r in sites and sites[r] != ref]
    return (odd[0], sites[odd[0]], ref) if len(odd) == 1 else None


def _short_site(site: str) -> str:
    """A call site "…/job.py:113 in inject" without its folders: "job.py:113 in inject"."""
    path, _, rest = site.partition(":")
    return path.replace("\\", "/").rsplit("/", 1)[-1] + (":" + rest if rest else "")


def _whole_node(report: LogReport, ranks: set[int], world: int) -> bool:
    """Whether `ranks` are exactly the ranks of one node of a multi-node job: by the hosts
    the lines place ranks on, or, when one node left logs but placed no rank, the ranks no
    line placed (they must run there)."""
    if len(report.hosts) < 2 or not ranks:
        return False
    on: dict[str, set[int]] = defaultdict(set)
    for r, st in report.ranks.items():
        if st.host:
            on[st.host].add(r)
    unplaced = unplaced_hosts(report)
    if len(unplaced) == 1 and world:
        on[unplaced[0]] = {r for r in range(world) if r not in report.ranks
                           or not report.ranks[r].host}
    return any(rs == ranks for rs in on.values())


def _first_symptom_is_a_lost_peer(report: LogReport) -> bool:
    """Whether the first communication error the ranks reported (by time, or by line within
    one interleaved file) was a lost connection rather than a timeout: a process that died
    closes its sockets at once, while one that is alive but elsewhere is waited out first."""
    comm = [e for e in report.exceptions
            if e.ev.rank is not None and is_comm_exception(e.type, e.message)]
    if not comm:
        return False
    if all(e.ev.ts is not None for e in comm):
        first = min(comm, key=lambda e: e.ev.ts or 0.0)
    elif len({e.ev.file for e in comm}) == 1:
        first = min(comm, key=lambda e: e.ev.line)
    else:
        return False
    text = first.message.lower()
    return "timed out" not in text and any(p in text for p in GLOO_PEER_LOST)


def _stopped(report: LogReport, rank: int, outside: Sequence[int]) -> bool:
    """torchrun stopped this rank (SIGTERM after another failed): a bystander, not silent
    (`outside`: the ranks `killed_outside` found, which torchrun did not stop)."""
    return any(rec.rank == rank and rec.exitcode == -15 for rec in report.failures) and \
        rank not in outside


#: signals that end a worker from outside (SIGHUP, SIGINT, SIGTERM) as torchrun's exitcodes
OUTSIDE_SIGNALS = (-1, -2, -15)


def killed_outside(report: LogReport) -> list[int]:
    """Ranks torchrun recorded as its first observed failure, ended by SIGTERM (SIGINT,
    SIGHUP) that torchrun itself never sent them. torchrun names every worker it stops, before
    the failure summary, and only those still running (torch 2.13.0,
    torch/distributed/elastic/multiprocessing/api.py, `_close`: `if handler.proc.poll() is
    None: logger.warning("Sending process %s closing signal %s", handler.proc.pid,
    death_sig.name)`); the summary gives the pid of each failure (errors/__init__.py:
    `f"Signal {-self.exitcode} ({self.signal_name()}) received by PID {self.pid}"`). A root
    failure ended by such a signal whose pid torchrun never named was killed by something
    else (a preemption, a health check, a person's kill) before any other rank failed."""
    sent_in: dict[str, set[int]] = defaultdict(set)
    for fact in report.facts.get("sigterm_sent", []):
        pid: int | None = fact.fields.get("pid")
        if pid is not None:
            sent_in[fact.ev.file].add(pid)
    sent_anywhere = set().union(*sent_in.values()) if sent_in else set()
    out = []
    for rec in report.failures:
        if rec.root and rec.rank is not None and rec.pid is not None \
                and rec.exitcode in OUTSIDE_SIGNALS and rec.pid not in sent_anywhere:
            out.append(rec.rank)
    return sorted(set(out))


def logdir_world(report: LogReport) -> int | None:
    """The job's size from torchrun's --log-dir folders (one per local rank on each node,
    `analyze._TORCHRUN_FILE`'s layout) when every node that left logs left them, numbered
    0..n-1 on each; None otherwise."""
    per_host: dict[str, set[int]] = defaultdict(set)
    for src in report.sources:
        local, host = rank_of_file(src.name), host_of_file(src.name)
        if local is not None and host is not None:
            per_host[host].add(local)
    if not per_host or set(per_host) != set(report.hosts) or any(
            locals_ != set(range(len(locals_))) for locals_ in per_host.values()):
        return None
    return sum(len(locals_) for locals_ in per_host.values())


def unplaced_hosts(report: LogReport) -> list[str]:
    """Hosts (nodes) that left logs but no line placing any rank there: on a multi-node job,
    where the ranks no line names must be."""
    placed = {s.host for s in report.ranks.values() if s.host}
    return sorted(h for h in report.hosts if h not in placed) if len(report.hosts) > 1 else []


def victim_ranks(report: LogReport, timed_out: dict[int, TimeoutRecord]) -> list[int]:
    """Ranks that reported a collective timeout or a communication error (a peer closed the
    connection, ...) and no failure of their own."""
    comm = {e.ev.rank for e in report.exceptions
            if e.ev.rank is not None and is_comm_exception(e.type, e.message)}
    return sorted(r for r in set(timed_out) | comm
                  if r not in report.ranks or report.ranks[r].first_error is None)


def describe(cr: CrossRank, world: int | None, lang: str = "en") -> list[str]:
    """One-line facts about the ranks, for the report (`lang`: en or zh)."""
    zh = lang == "zh"
    lines = []
    if cr.timeout_ranks:
        n = len(cr.timeout_ranks)
        lines.append((f"{n} 个 rank 报告了 watchdog 超时" + (f"（共 {world} 个）" if world else "")
                      if zh else f"{n} rank(s) reported a watchdog timeout"
                      + (f" of {world}" if world else ""))
                     + f"{'：' if zh else ': '}{_ranges(cr.timeout_ranks)}")
    if cr.silent_ranks:
        lines.append(("没有报告超时的 rank：" if zh else "silent ranks (no timeout reported): ")
                     + _ranges(cr.silent_ranks))
    if cr.crashed_ranks:
        lines.append(("崩溃或抛出异常的 rank：" if zh else "rank(s) with a crash/exception: ")
                     + _ranges(cr.crashed_ranks))
    if cr.lagging:
        lines.append(("落后的 rank：" if zh else "lagging rank(s): ") + _ranges(cr.lagging))
    for mm in cr.mismatches[:3]:
        if zh:
            parts = "；".join(f"rank {_ranges(v, 6)} 执行 {k}" for k, v in mm.variants.items())
            lines.append(f"SeqNum={mm.seq} 处集合通信不一致：{parts}")
        else:
            parts = "; ".join(f"{k} on ranks {_ranges(v, 6)}" for k, v in mm.variants.items())
            lines.append(f"collective mismatch at SeqNum={mm.seq}: {parts}")
    return lines


_ZH_BOOKKEEPING = ("偏离训练步骤路径的 rank（只在某些 rank 上执行的分支、数据批次更少、"
                   "跳过一步）会先到达 barrier 或指标归约，而其他 rank 仍在该步骤的集合通信中")


def _zh_code(code: str) -> str:
    return code.replace("exitcode", "退出码") if code != "failed" else "失败"


#: English sentences ncclbot writes, each a pattern and its Chinese built from the match
ZhTable = tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...]


def zh_by(text: str, table: ZhTable) -> str:
    """`text` in Chinese by the first pattern of `table` that matches it; as it is when none
    does."""
    for rx, zh in table:
        m = rx.match(text)
        if m is not None:
            return zh(m)
    return text


#: Each suspect reason `analyze_ranks` writes (the English above), in Chinese.
_ZH_REASONS: ZhTable = tuple(
    (re.compile(p), f) for p, f in (
        (r"^torchrun's first observed failure \((.+?)\), but its own error is a timeout or a "
         r"lost peer: it was waiting for another rank$",
         lambda m: f"torchrun 记录的第一个失败（{_zh_code(m[1])}），但它自己的错误是超时或"
                   "失去对端：它在等待另一个 rank"),
        (r"^torchrun's first observed failure \((.+)\)$",
         lambda m: f"torchrun 记录的第一个失败（{_zh_code(m[1])}）"),
        (r"^failed first: (\S+) \((.*)\)$", lambda m: f"最先出错：{m[1]}（{m[2]}）"),
        (rf"^exited with code (\S+) {EXITED_SILENTLY}$",
         lambda m: f"以退出码 {m[1]} 退出，且没有报告 watchdog 超时"),
        (r"^could not connect to the store(?: at (.+?))? while the other ranks did$",
         lambda m: "无法连接 store" + (f"（{m[1]}）" if m[1] else "") + "，而其他 rank 可以"),
        (r"^its ranks could not connect to the store(?: at (.+?))? while the other nodes did$",
         lambda m: "该节点的 rank 无法连接 store" + (f"（{m[1]}）" if m[1] else "")
                   + "，而其他节点可以"),
        (r"^every other rank gave up on it at the monitored barrier: rank 0 came late$",
         lambda m: "其他所有 rank 都在 monitored barrier 处放弃了等待它：rank 0 来晚了"),
        (r"^rank 0 reports that it never reached the monitored barrier \((.+) ms\)$",
         lambda m: f"rank 0 报告它始终没有到达 monitored barrier（{m[1]} ms）"),
        (r"^ran (.+) where (\d+) ranks ran (.+)$",
         lambda m: f"执行了 {m[1]}，而 {m[2]} 个 rank 执行的是 {m[3]}"),
        (r"^gloo found no address for interface (.+) here \(GLOO_SOCKET_IFNAME\)$",
         lambda m: f"gloo 在这里找不到网卡 {m[1]} 的地址（GLOO_SOCKET_IFNAME）"),
        (r"^did not report a watchdog timeout while (\d+) of (\d+) ranks did "
         r"\(stuck elsewhere or dead\)$",
         lambda m: f"{m[2]} 个 rank 中有 {m[1]} 个报告了 watchdog 超时，它却没有（卡在别处或"
                   "已退出）"),
        (r"^was in (.+)\(\) when it gave up, while (\d+) rank\(s\) were in (.+)\(\): "
         r"another code path$",
         lambda m: f"放弃时停在 {m[1]}()，而 {m[2]} 个 rank 停在 {m[3]}()：走了另一条代码路径"),
        (r"^busy with (.+) while (\d+) rank\(s\) timed out waiting$",
         lambda m: f"正忙于 {m[1]}，而 {m[2]} 个 rank 等它等到超时"),
        (r"^its timed-out collective SeqNum=(\d+) lags the others \(SeqNum=(\d+)\)$",
         lambda m: f"它超时的集合通信 SeqNum={m[1]} 落后于其他 rank（SeqNum={m[2]}）"),
        (r"^last enqueued NCCL work (\S+) lags the others \((\S+)\)$",
         lambda m: f"最后入队的 NCCL work {m[1]} 落后于其他 rank（{m[2]}）"),
        (r"^ran a different collective at SeqNum=(\d+) than the others \((.+)\)$",
         lambda m: f"在 SeqNum={m[1]} 执行的集合通信与其他 rank 不同（{m[2]}）"),
        (r"^ended by a signal \(exitcode (\S+)\) " + re.escape(KILLED_OUTSIDE) + "$",
         lambda m: f"被启动器之外的信号终止（退出码 {m[1]}）：被抢占或被杀死"),
        (r"^its node's torchrun agent waited at the exit barrier \(every worker there exited "
         r"with code 0\) while ranks elsewhere lost or waited for peers: it left the job early$",
         lambda m: "它所在节点的 torchrun agent 在 exit barrier 处等待（该节点的 worker 都以退出码 "
                   "0 退出），而其他 rank 失去了对端或在等待：它提前离开了作业"),
        (r"^ran (.+) \(a barrier or one-element collective\) where as many ranks ran (.+?): "
         + re.escape(BOOKKEEPING) + "$",
         lambda m: f"执行了 {m[1]}（barrier 或单元素集合通信），而同样多的 rank 执行的是 {m[2]}："
                   + _ZH_BOOKKEEPING),
        (r"^was in (.+)\(\) when it gave up, while as many rank\(s\) were in (.+)\(\): "
         + re.escape(BOOKKEEPING) + "$",
         lambda m: f"放弃时停在 {m[1]}()，而同样多的 rank 停在 {m[2]}()：" + _ZH_BOOKKEEPING),
        (r"^(\d+) of (\d+) ranks could not connect to the store it hosts \(MASTER_ADDR/"
         r"MASTER_PORT as they see it\) while it could$",
         lambda m: f"{m[2]} 个 rank 中有 {m[1]} 个无法连接它所承载的 store（按它们看到的 "
                   "MASTER_ADDR/MASTER_PORT），而它自己可以"),
        (r"^a rank there waited for rank (\d+)'s address in the store, but the job has (\d+) "
         r"ranks \(torchrun's --log-dir folders\): its WORLD_SIZE is larger than the others'$",
         lambda m: f"那里的一个 rank 在 store 中等待 rank {m[1]} 的地址，但作业只有 {m[2]} 个 "
                   "rank（按 torchrun 的 --log-dir 目录）：它的 WORLD_SIZE 比其他 rank 的大"),
        (r"^waited for rank (\d+)'s address in the store, but the job has (\d+) ranks: its "
         r"WORLD_SIZE is larger than the others'$",
         lambda m: f"在 store 中等待 rank {m[1]} 的地址，但作业只有 {m[2]} 个 rank：它的 "
                   "WORLD_SIZE 比其他 rank 的大"),
        (r"^never published its address to the store \(gloo's key (.+)\) while (\d+) rank\(s\) "
         r"waited for it: it did not reach the same store \(MASTER_ADDR/MASTER_PORT/WORLD_SIZE\) "
         r"or did not start$",
         lambda m: f"始终没有把自己的地址发布到 store（gloo 的键 {m[1]}），而 {m[2]} 个 rank "
                   "在等它：它没有连到同一个 store（MASTER_ADDR/MASTER_PORT/WORLD_SIZE）或"
                   "没有启动"),
        (r"^gloo aborted it: it received (\S+) bytes where its own tensor holds (\S+) \(its tensor "
         r"is smaller than its peers', or rank (\d+) sent a larger one\)$",
         lambda m: f"gloo 中止了它：它收到 {m[1]} 字节，而它自己的张量只有 {m[2]} 字节（它的张量"
                   f"比其他 rank 的小，或 rank {m[3]} 发来了更大的张量）"),
        (r"^its ring neighbour rank (\d+) received (\S+) bytes from it where it expected (\S+): "
         r"it may have sent a larger tensor or another dtype$",
         lambda m: f"环上的相邻 rank {m[1]} 从它那里收到 {m[2]} 字节，而预期是 {m[3]} 字节：它可能"
                   "发送了更大的张量或不同的 dtype"),
        (r"^rank (\d+) or rank (\d+): gloo aborted rank (\d+), which received (\S+) bytes from "
         r"rank (\d+) where its own tensor holds (\S+), and the logs cannot tell whether rank "
         r"(\d+)'s tensor is the smaller or rank (\d+)'s the larger \(another shape or dtype\)$",
         lambda m: f"rank {m[1]} 或 rank {m[2]}：gloo 中止了 rank {m[3]}，它从 rank {m[5]} 收到 "
                   f"{m[4]} 字节，而它自己的张量只有 {m[6]} 字节；日志无法判断是 rank {m[7]} 的"
                   f"张量更小，还是 rank {m[8]} 的更大（形状或 dtype 不同）"),
        (r"^its launcher gives it rank (\d+), yet it waited for rank (\d+)'s own address in the "
         r"store \(gloo's key (.+)\), which a rank publishes before it waits: it joined under "
         r"another RANK than its launcher's \(a duplicated rank\)$",
         lambda m: f"启动器给它的是 rank {m[1]}，它却在 store 中等待 rank {m[2]} 自己的地址（gloo "
                   f"的 key {m[3]}），而每个 rank 在等待之前都会先发布自己的地址：它用了与启动器"
                   "不同的 RANK 加入（rank 重复）"),
        (r"^all (\d+) ranks, itself too, failed to connect to the store(?: at (.+?))?, which with "
         r"env:// the process with RANK 0 starts: either it ran with another RANK than 0 or "
         r"MASTER_ADDR/MASTER_PORT point where no rank runs$",
         lambda m: f"全部 {m[1]} 个 rank（包括它自己）都无法连接 store" + (f"（{m[2]}）" if m[2]
                   else "") + "，而在 env:// 下 store 由 RANK 0 的进程启动：要么它运行时的 "
                   "RANK 不是 0，要么 MASTER_ADDR/MASTER_PORT 指向没有任何 rank 运行的地方"),
        (r"^its launcher gives it rank (\d+), yet it tried to start the store, which with env:// "
         r"only RANK 0 does, and found the port taken: it ran as RANK 0 beside the real rank 0 "
         r"\(a duplicated rank\)$",
         lambda m: f"启动器给它的是 rank {m[1]}，它却尝试启动 store（在 env:// 下只有 RANK 0 会"
                   "这样做），并发现端口已被占用：它以 RANK 0 的身份运行，与真正的 rank 0 重复"
                   "（rank 重复）"),
        (r"^node (\S+) or node (\S+): ranks (.+) \(all of \S+\) ran (.+) where ranks (.+) "
         r"\(all of \S+\) ran (.+): a setting that differs by node, and the mismatch cannot tell "
         r"which node's is the odd one$",
         lambda m: f"节点 {m[1]} 或节点 {m[2]}：rank {m[3]}（{m[1]} 上的全部 rank）执行了 {m[4]}，"
                   f"而 rank {m[5]}（{m[2]} 上的全部 rank）执行的是 {m[6]}：这是按节点不同的"
                   "设置，集合通信不一致本身无法判断哪个节点的设置是异常的"),
        (r"^its dtype (\S+) is not torch's default \(float32\): a cast or a precision setting "
         r"made there, so it is named first$",
         lambda m: f"它的 dtype {m[1]} 不是 torch 的默认值（float32）：那里做了类型转换或设置了"
                   "精度，因此先列出它"),
        (r"^rank (\d+) or rank (\d+): rank (\d+) ran (.+) where rank (\d+) ran (.+), and with two "
         r"ranks the logs cannot tell which one's collective is the odd one$",
         lambda m: f"rank {m[1]} 或 rank {m[2]}：rank {m[3]} 执行了 {m[4]}，而 rank {m[5]} "
                   f"执行的是 {m[6]}；只有两个 rank，日志无法判断哪一个的集合通信是异常的"),
        (r"^its ring neighbour rank (\d+) received (\S+) bytes from it where it expected (\S+), "
         r"and its collective differs from the other ranks' in the Flight Recorder dumps: it "
         r"sent a larger tensor or another dtype$",
         lambda m: f"环上的相邻 rank {m[1]} 从它那里收到 {m[2]} 字节，而预期是 {m[3]} 字节，且"
                   "它的集合通信在 Flight Recorder dump 中与其他 rank 不同：它发送了更大的张量或"
                   "不同的 dtype"),
        (r"^its ring neighbour rank (\d+) received (\S+) bytes from it where it expected (\S+), "
         r"and its traceback calls the collective from (.+) where the other ranks call it from "
         r"(.+): it sent a larger tensor or another dtype$",
         lambda m: f"环上的相邻 rank {m[1]} 从它那里收到 {m[2]} 字节，而预期是 {m[3]} 字节，且"
                   f"它的 traceback 从 {m[4]} 调用该集合通信，而其他 rank 从 {m[5]} 调用：它发送"
                   "了更大的张量或不同的 dtype"),
        (r"^exited with code 0 while rank (\d+) still ran collectives: torchrun's one failure is "
         r"rank (\d+), which lost a peer, with no other failure and no worker left to stop: it "
         r"left the job early$",
         lambda m: f"在 rank {m[1]} 仍在执行集合通信时以退出码 0 退出：torchrun 唯一记录的失败是"
                   f"失去对端的 rank {m[2]}，没有其他失败，也没有需要停止的 worker：它提前离开了"
                   "作业"),
        (r"^it hosts the store and waited for (\d+) ranks, but the job left (\d+) rank files and "
         r"all (\d+) joined: its WORLD_SIZE is larger than the others'$",
         lambda m: f"它承载 store 并等待 {m[1]} 个 rank，但作业只留下 {m[2]} 个 rank 文件且 "
                   f"{m[3]} 个都已加入：它的 WORLD_SIZE 比其他 rank 的大"),
        (r"^it hosts the store and waited for (\d+) ranks while the (\d+) ranks that left lines "
         r"all joined: either its WORLD_SIZE is larger than the others' or rank (\d+) never "
         r"started$",
         lambda m: f"它承载 store 并等待 {m[1]} 个 rank，而留下日志的 {m[2]} 个 rank 都已加入："
                   f"要么它的 WORLD_SIZE 比其他 rank 的大，要么 rank {m[3]} 从未启动"),
        (r"^reported no error while (\d+) rank\(s\) lost or waited for a peer: it left the "
         r"job or was busy elsewhere$",
         lambda m: f"没有报告错误，而 {m[1]} 个 rank 失去了对端或在等它：它已离开作业或在忙"
                   "别的事"),
    ))

#: The culprit reasons of a live hang (`bot/diagnosis/hang.py`: live stacks, NCCL RAS) and the
#: Flight Recorder's findings (`bot/logs/flight_recorder.py`), each part in Chinese.
_ZH_REASONS += tuple(
    (re.compile(p), f) for p, f in (
        (r"^((?:rank|pid) \d+) on (\S+) is in (\S+) from (.+) while (\d+) of (\d+) ranks "
         r"(wait|are) in (.+)$",
         lambda m: f"{m[1]}（{m[2]}）在 {m[3]} 中（由 {m[4]} 调用），而 {m[6]} 个 rank 中有 "
                   f"{m[5]} 个" + (f"在 {m[8]} 中等待" if m[7] == "wait" else f"停在 {m[8]}")),
        (r"^((?:rank|pid) \d+) on (\S+) is in (.+) while (\d+) of (\d+) ranks (wait|are) in "
         r"(.+)$",
         lambda m: f"{m[1]}（{m[2]}）停在 {m[3]}，而 {m[5]} 个 rank 中有 {m[4]} 个"
                   + (f"在 {m[7]} 中等待" if m[6] == "wait" else f"停在 {m[7]}")),
        (r"^its stack: (.+)$", lambda m: f"它的调用栈：`{m[1]}`"),
        (r"^all (\d+) ranks wait in (\S+)$", lambda m: f"全部 {m[1]} 个 rank 都在 {m[2]} 中等待"),
        (r"^NCCL RAS: (.+)$", lambda m: f"NCCL RAS：{m[1]}"),
        (r"^rank\(s\) (.+) of process group (\S+) left no Flight Recorder dump, while "
         r"rank\(s\) (.+) all reached collective #(\d+) \((.+)\) at (.+)$",
         lambda m: f"进程组 {m[2]} 的 rank {m[1]} 没有留下 Flight Recorder dump，而 rank {m[3]} "
                   f"都到达了集合通信 #{m[4]}（{m[5]}，位置 {m[6]}）"),
        (r"^rank (\d+) never entered collective #(\d+) \((.+)\) of process group (\S+), which "
         r"rank\(s\) (.+) entered at (.+)$",
         lambda m: f"rank {m[1]} 没有进入进程组 {m[4]} 的集合通信 #{m[2]}（{m[3]}），而 "
                   f"rank {m[5]} 已进入（位置 {m[6]}）"),
        (r"^its last was #(\d+)(?: (.+?) at (.+))?$",
         lambda m: f"它的最后一个是 #{m[1]}" + (f"（{m[2]}，位置 {m[3]}）" if m[2] else "")),
        (r"^collective #(\d+) of process group (\S+) differs between ranks: rank\(s\) "
         r"([\d, ]+): (.+?) at (.+)$",
         lambda m: f"进程组 {m[2]} 的集合通信 #{m[1]} 在各 rank 之间不一致：rank {m[3]} "
                   f"执行 {m[4]}（位置 {m[5]}）"),
        (r"^rank\(s\) ([\d, ]+): (.+?) at (.+)$",
         lambda m: f"rank {m[1]} 执行 {m[2]}（位置 {m[3]}）"),
    ))


def reason_in(reason: str, lang: str) -> str:
    """A suspect's reason (parts joined by "; ") in `lang`: each part `analyze_ranks`, a live
    hang or the Flight Recorder wrote, in Chinese for zh; a part from elsewhere as it is. The
    parts stay joined by "; ", which readers of the reason split on."""
    if lang != "zh":
        return reason
    return "; ".join(zh_by(p.strip(), _ZH_REASONS) for p in reason.split("; "))


#: Each line `describe` writes in English, in Chinese (an answer kept in both languages, as
#: Slack keeps its threads' answers, is shown to a Chinese reader with these).
_ZH_RANK_LINES: ZhTable = tuple(
    (re.compile(p), f) for p, f in (
        (r"^(\d+) rank\(s\) reported a watchdog timeout(?: of (\d+))?: (.+)$",
         lambda m: f"{m[1]} 个 rank 报告了 watchdog 超时" + (f"（共 {m[2]} 个）" if m[2] else "")
                   + f"：{m[3]}"),
        (r"^silent ranks \(no timeout reported\): (.+)$", lambda m: f"没有报告超时的 rank：{m[1]}"),
        (r"^rank\(s\) with a crash/exception: (.+)$", lambda m: f"崩溃或抛出异常的 rank：{m[1]}"),
        (r"^lagging rank\(s\): (.+)$", lambda m: f"落后的 rank：{m[1]}"),
        (r"^collective mismatch at SeqNum=(\d+): (.+)$",
         lambda m: f"SeqNum={m[1]} 处集合通信不一致：" + "；".join(
             re.sub(r"^(.+) on ranks (.+)$", r"rank \2 执行 \1", part)
             for part in m[2].split("; "))),
    ))


def rank_line_in(line: str, lang: str) -> str:
    """One of `describe`'s English lines in `lang` (zh: in Chinese; any other as it is)."""
    return zh_by(line, _ZH_RANK_LINES) if lang == "zh" else line


def _first_error_ts(state: RankState) -> float:
    """When a rank's first failure was logged (callers keep only ranks where that is known)."""
    return state.first_error.ev.ts if state.first_error and state.first_error.ev.ts else 0.0

"""Recorded real fault runs (tests/fixtures/faults): torchrun's log folder, its summary and
the Flight Recorder dumps of a gloo job, read together."""

from __future__ import annotations

import shutil
from pathlib import Path

from bot.answering.analysis import analyze_sources
from bot.logs.analyze import rank_of_file
from bot.logs.sources import expand_inputs
from tests.conftest import ROOT

RUNS = ROOT / "tests" / "fixtures" / "faults"


def test_a_file_in_torchruns_log_dir_belongs_to_its_rank() -> None:
    assert rank_of_file("logs/abc_x1/attempt_0/3/stderr.log") == 3
    assert rank_of_file("job.zip:run/attempt_12/0/stdout.log") == 0
    assert rank_of_file("logs/3/stderr.log") is None
    assert rank_of_file("stderr.log") is None
    report, _ = analyze_sources(expand_inputs([str(RUNS / "sleep-rank1")]))
    timed_out = sorted(t.rank for t in report.timeouts if t.rank is not None)
    assert timed_out == [0, 2, 3]  # gloo's own timeouts, each from its rank's file
    assert all("attempt_0/" in t.ev.file for t in report.timeouts)


def test_the_rank_that_never_reached_the_collective_is_the_straggler() -> None:
    _, d = analyze_sources(expand_inputs([str(RUNS / "sleep-rank1")]))
    assert d.root_causes[0].category == "straggler_or_imbalance"
    assert d.suspects[0].rank == 1
    assert "left no Flight Recorder dump" in d.suspects[0].reason
    # torchrun's "first observed failure" timed out itself: it is named, as a victim
    first = next(s for s in d.suspects if "first observed failure" in s.reason)
    assert first.rank != 1 and "waiting for another rank" in first.reason


def test_without_the_dumps_the_silent_rank_is_still_the_suspect(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(RUNS / "sleep-rank1", run)
    shutil.rmtree(run / "dumps")
    _, d = analyze_sources(expand_inputs([str(run)]))
    assert d.root_causes[0].category == "straggler_or_imbalance"
    assert d.suspects[0].rank == 1


def test_the_rank_that_could_not_reach_the_store_is_the_culprit() -> None:
    _, d = analyze_sources(expand_inputs([str(RUNS / "wrong_master-rank1")]))
    assert d.root_causes[0].category == "rendezvous_failure"
    assert d.suspects[0].rank == 1
    assert "could not connect to the store at 10.255.255.1" in d.suspects[0].reason


# --- issue 27: other launch shapes, recorded by benchmarks/faults (README.md there) -------------


def _diagnose(name: str) -> tuple[object, object]:
    return analyze_sources(expand_inputs([str(RUNS / name)]))


def test_a_rank_on_the_second_node_that_exits_cleanly_early_is_the_cause() -> None:
    # two torchrun agents (one log per node); rank 3 (node 2, local rank 1) returns with exit
    # code 0 at its first step; torchrun's first observed failure is rank 0 on node 1, which
    # only lost it at the monitored barrier
    report, d = analyze_sources(expand_inputs([str(RUNS / "2node-exit0_early-rank3")]))
    assert d.root_causes[0].category == "rank_crashed"
    assert (d.suspects[0].rank, d.suspects[0].host) == (3, "gpu-node-02")
    assert "monitored barrier" in d.suspects[0].reason
    first = next(s for s in d.suspects if "first observed failure" in s.reason)
    assert (first.rank, first.host) == (0, "gpu-node-01") and "waiting for" in first.reason
    assert {"gpu-node-01", "gpu-node-02"} <= report.hosts and "localhost" not in report.hosts


def test_a_local_rank_file_on_the_third_node_is_placed_by_its_node() -> None:
    # --log-dir per node: gpu-node-03/logs/.../attempt_0/0/stderr.log is local rank 0 there,
    # global rank 2 (torchrun's summary on that node says "rank : 2 (local_rank: 0)")
    _, d = _diagnose("3node-logdir-value_error-rank2")
    assert d.root_causes[0].category == "rank_crashed"
    assert (d.suspects[0].rank, d.suspects[0].host) == (2, "gpu-node-03")


def test_the_rank_saving_a_checkpoint_is_the_one_the_seven_others_waited_for() -> None:
    _, d = _diagnose("torchrun8-slow_ckpt-rank4")
    assert d.root_causes[0].category in ("timeout_too_short", "straggler_or_imbalance")
    assert d.suspects[0].rank == 4
    assert "Saving" in d.suspects[0].reason or "timed out" in d.suspects[0].reason


def test_rank_0s_monitored_barrier_names_the_slow_rank_and_torchrun_stopped_it() -> None:
    # TORCH_DISTRIBUTED_DEBUG=DETAIL, 2 ranks: rank 1's data loader stalls; rank 0 says
    # "Ranks 1 failed to pass monitoredBarrier"; torchrun then SIGTERMs rank 1 (still alive)
    _, d = _diagnose("torchrun2-detail-slow_loader-rank1")
    assert d.root_causes[0].category in ("straggler_or_imbalance", "timeout_too_short")
    assert d.suspects[0].rank == 1
    assert d.crossrank.still_running == [1]


def test_a_node_whose_ranks_cannot_reach_the_store_is_the_suspect() -> None:
    # every rank of node 2 was given another MASTER_PORT; its lines name local ranks only
    _, d = _diagnose("2node-wrong_port-node2")
    assert d.root_causes[0].category == "rendezvous_failure"
    assert d.suspects[0].host == "gpu-node-02"
    # node 1's ranks waited for rank 2's address (gloo's store key ".../2"): node 2's first rank
    assert d.suspects[0].rank in (None, 2)
    assert any(w in d.suspects[0].reason for w in ("could not connect to the store",
                                                    "never published its address"))
    assert any(s.host == "gpu-node-02" and s.rank is None for s in d.suspects)


def test_srun_prefixes_place_the_rank_that_left_cleanly_among_four() -> None:
    # four processes started by hand with env:// (as srun does), one file interleaved with
    # `srun -l` prefixes; rank 2 exits with code 0 at its first step: it writes no error, the
    # others lose it (closed connections) or time out
    _, d = _diagnose("slurm4-exit0_early-rank2")
    assert d.suspects[0].rank == 2
    assert "reported no error" in d.suspects[0].reason
    assert d.crossrank.vanished == [2]
    assert d.root_causes[0].category in ("rank_crashed", "straggler_or_imbalance",
                                         "collective_mismatch")


def test_the_rank_that_timed_out_in_a_barrier_took_another_code_path() -> None:
    # rank 0 calls barrier() inside its own branch while the others all_reduce: every rank
    # times out, rank 0's traceback ends in barrier, the others' in all_reduce
    _, d = _diagnose("slurm4-barrier_branch-rank0")
    assert d.root_causes[0].category == "collective_mismatch"
    assert d.suspects[0].rank == 0 and d.crossrank.other_path == [0]
    assert "barrier()" in d.suspects[0].reason


def test_one_file_per_rank_names_the_rank_and_the_barrier_names_the_sleeper() -> None:
    # rank-0.log ... rank-2.log, DETAIL: rank 1 sleeps; rank 0's monitored barrier names it;
    # rank 1 wakes to a closed connection ("Monitored Barrier encountered error"), a symptom
    report, d = _diagnose("slurm3-files-detail-sleep-rank1")
    assert sorted(report.ranks) == [0, 1, 2]
    assert d.root_causes[0].category in ("straggler_or_imbalance", "timeout_too_short")
    assert d.suspects[0].rank == 1 and 1 in d.crossrank.victims
    assert d.crossrank.crashed_ranks == []


def test_accelerate_launch_with_an_extra_collective_on_rank_0() -> None:
    # accelerate launch (torchrun underneath, no prefixes on the ranks' own prints); rank 0's
    # extra all_reduce makes gloo abort it ("Received data size doesn't match expected size")
    _, d = _diagnose("accelerate2-extra_collective-rank0")
    assert d.root_causes[0].category == "collective_mismatch"
    assert d.suspects[0].rank == 0


def test_the_rank_that_waits_for_a_rank_past_the_jobs_size_has_the_wrong_world_size() -> None:
    # one node, 4 ranks, torchrun's --log-dir; rank 0 was started with WORLD_SIZE=5: it alone
    # waits for gloo's key of a rank 4 that no one is ("wait timeout ... keys: .../cpu//0/4"),
    # and torchrun records it as the first observed failure with its own store error
    _, d = _diagnose("torchrun4-logdir-wrong_world-rank0")
    assert d.root_causes[0].category == "rendezvous_failure"
    assert d.suspects[0].rank == 0
    assert "WORLD_SIZE" in d.suspects[0].reason


def test_gloos_size_check_names_the_aborted_rank_and_the_ring_neighbour_that_sent() -> None:
    # one node, 8 ranks, --tee 3; rank 7 all_reduces float64 where the others use float32.
    # gloo aborts rank 6, which receives from rank 7 in its ring ("512 vs 256"): the text cannot
    # say which of the two holds the odd tensor, so both are named, the aborted one first
    _, d = _diagnose("torchrun8-dtype-rank7")
    assert d.root_causes[0].category == "collective_mismatch"
    assert [s.rank for s in d.suspects[:2]] == [6, 7]
    assert "ring neighbour rank 6" in d.suspects[1].reason


def test_a_rank_killed_without_a_word_is_a_crash_when_the_others_first_lose_its_connection(
) -> None:
    # four processes started by hand (srun -l prefixes, one file); rank 2 is SIGKILLed at its
    # last step and leaves no line. Its ring neighbours report "Connection closed by peer"
    # first; rank 0 times out later: a dead process closes its sockets at once, a busy one
    # would have been waited out first
    _, d = _diagnose("slurm4-sigkill-rank2")
    assert d.root_causes[0].category == "rank_crashed"
    assert d.suspects[0].rank == 2
    assert not d.crossrank.peers_timed_out


def test_under_accelerate_a_rank_expecting_more_ranks_is_a_rendezvous_failure() -> None:
    # `accelerate launch`, 2 ranks; rank 0 has WORLD_SIZE=3. Its store error comes before any
    # rank prefix ("wait timeout ... keys: .../cpu//0/2"): the group never formed, and no rank
    # 2 is named (there is none); torchrun's first observed failure, rank 0, is the suspect
    _, d = _diagnose("accelerate2-wrong_world-rank0")
    assert d.root_causes[0].category == "rendezvous_failure"
    assert d.suspects[0].rank == 0
    assert all(s.rank != 2 for s in d.suspects)


# --- issue 27, third round: what torchrun's own messages say about the cause ----------------


def test_a_rank_sigtermed_from_outside_the_launcher_is_a_crash_not_a_stop() -> None:
    # accelerate launch, 2 ranks; rank 0 is sent SIGTERM by something else (a preemption):
    # torchrun records it first with exitcode -15, but its "Sending process PID closing signal
    # SIGTERM" names only rank 1's pid, which it stopped after rank 1 lost its peer
    _, d = _diagnose("accelerate2-sigterm_ext-rank0")
    assert d.crossrank.killed_outside == [0]
    assert d.crossrank.still_running == []
    assert d.root_causes[0].category == "rank_crashed"
    assert d.suspects[0].rank == 0 and "from outside the launcher" in d.suspects[0].reason


def test_a_rank_torchrun_stopped_itself_is_not_killed_from_outside() -> None:
    # torchrun SIGTERMed rank 1 (its pid is in "Sending process ... closing signal SIGTERM")
    _, d = _diagnose("torchrun2-detail-slow_loader-rank1")
    assert d.crossrank.killed_outside == []
    _, d = _diagnose("torchrun8-dtype-rank7")
    assert d.crossrank.killed_outside == []


def test_a_node_whose_agent_waited_at_the_exit_barrier_left_early() -> None:
    # three agents, one rank each, --log-dir per node; rank 1 (node 2) exits with code 0 at
    # its last step. Node 2's torchrun prints no summary (its worker succeeded), only "Error
    # waiting on exit barrier" and the rendezvous errors that follow; nodes 1 and 3 lose it.
    # Rank 1 is placed on node 2 (node blocks of world / nodes ranks), not on node 1
    report, d = _diagnose("3node-logdir-exit0_early-rank1")
    assert d.crossrank.finished_hosts == ["gpu-node-02"]
    assert 1 not in report.ranks or report.ranks[1].host != "gpu-node-01"
    assert d.root_causes[0].category == "rank_crashed"
    assert (d.suspects[0].rank, d.suspects[0].host) == (1, "gpu-node-02")
    assert "exit barrier" in d.suspects[0].reason


def test_of_two_ranks_the_one_in_a_barrier_is_named_detail_fingerprints() -> None:
    # DETAIL, 2 ranks: rank 0 calls barrier() in its own branch while rank 1 all_reduces.
    # Each fingerprint disagrees with the other (a tie); rank 1 reads rank 0's as REDUCE, rank
    # 0 states its own: BARRIER
    _, d = _diagnose("torchrun2-detail-barrier_branch-rank0")
    assert d.root_causes[0].category == "collective_mismatch"
    assert d.suspects[0].rank == 0 and "BARRIER" in d.suspects[0].reason


def test_of_two_ranks_the_one_that_timed_out_in_a_barrier_took_another_path() -> None:
    # accelerate launch, 2 ranks, no DETAIL: rank 0 times out in barrier(), rank 1 in
    # all_reduce(); one each, so no majority: the barrier side is the rank off the step's path
    _, d = _diagnose("accelerate2-barrier_branch-rank0")
    assert d.root_causes[0].category == "collective_mismatch"
    assert d.suspects[0].rank == 0 and d.crossrank.other_path == [0]


def test_the_bookkeeping_side_of_a_tie_is_a_barrier_or_a_one_element_collective() -> None:
    from bot.logs.crossrank import bookkeeping_side

    step = "OpType=ALLREDUCE, TensorShape=[1024], TensorDtypes=Float"
    assert bookkeeping_side(step, "OpType=ALLREDUCE, TensorShape=[1], TensorDtypes=Float") == 1
    assert bookkeeping_side("SequenceNumber=0OpType=BARRIER", step) == 0
    assert bookkeeping_side("barrier", "all_reduce") == 0
    # a tensor of another size or dtype is no bookkeeping: no side is preferred
    assert bookkeeping_side(step, "OpType=ALLREDUCE, TensorShape=[1280], TensorDtypes=Float") \
        is None
    assert bookkeeping_side("OpType=BARRIER", "barrier") is None


def test_flight_recorder_dtypes_tell_a_mismatch_and_a_tie_names_no_side() -> None:
    from bot.logs.flight_recorder import FrDump, FrEntry, analyze_dumps

    def dump(rank: int, dtype: str) -> FrDump:
        e = FrEntry("0/default_pg", 3, "gloo:all_reduce", "[[1024]]", "scheduled",
                    "job.py:135 (<module>)", f"['{dtype}']")
        return FrDump(f"fr_trace_{rank}", rank, "2.10", [e])

    three = analyze_dumps([dump(5, "Float"), dump(6, "Float"), dump(7, "Double")])
    mm = [f for f in three if f.kind == "mismatch"]
    assert [f.ranks for f in mm] == [[7]] and "['Double']" in mm[0].text
    assert mm[0].calls[7].endswith("['Double']") and mm[0].calls[5].endswith("['Float']")
    two = [f for f in analyze_dumps([dump(5, "Float"), dump(7, "Double")]) if f.kind == "mismatch"]
    assert [f.ranks for f in two] == [[]] and set(two[0].calls) == {5, 7}


def test_a_lost_third_node_is_the_crash_the_other_nodes_lost() -> None:
    # SEALED-3 `node_lost`, recorded after its one run: three agents, one rank each; every
    # rank of node 3 is SIGKILLed at its first step (its agent survives and records exitcode
    # -9); nodes 1 and 2 lose it and torchrun records each of them first on its own node
    _, d = _diagnose("3node-logdir-node_lost-node3")
    assert d.root_causes[0].category == "rank_crashed"
    assert (d.suspects[0].rank, d.suspects[0].host) == (2, "gpu-node-03")
    assert d.crossrank.victims == [0, 1]


# --- round 4: the misses of round 3, recorded from their one run (README.md there) -------------


def test_a_lost_second_node_is_named_by_its_own_agents_record_not_node_1s() -> None:
    # SEALED-3 `node_lost` on node 2 of two: both of its ranks are SIGKILLed at the last step;
    # node 1's agent records rank 0 first (it lost node 2 at the monitored barrier), node 2's
    # agent records rank 2 first (exitcode -9): each agent's own root is read
    _, d = _diagnose("2node-node_lost-node2")
    assert d.root_causes[0].category == "rank_crashed"
    assert (d.suspects[0].rank, d.suspects[0].host) == (2, "gpu-node-02")
    assert "exitcode -9" in d.suspects[0].reason
    assert d.crossrank.victims and 2 not in d.crossrank.victims
    assert {s.rank for s in d.suspects[:2]} == {2, 3}  # the whole node, rank 0's barrier says


def test_a_slow_second_node_is_named_by_rank_0s_barrier_though_its_ranks_printed_nothing() -> None:
    # SEALED-3 `slow_node`: both ranks of node 2 take 2.5 timeouts at their first step and
    # print no rank line; rank 0's monitored barrier names ranks 2 and 3 (half the job: every
    # rank of one node), and node 2 is the one node no line placed a rank on
    report, d = _diagnose("2node-slow_node-node2")
    assert d.root_causes[0].category in {"timeout_too_short", "straggler_or_imbalance"}
    assert [(s.rank, s.host) for s in d.suspects[:2]] == [(2, "gpu-node-02"), (3, "gpu-node-02")]
    assert 2 not in report.ranks and 3 not in report.ranks


def test_flight_recorders_creation_time_names_the_rank_that_came_15_s_late() -> None:
    # `sleep` on rank 4 of 8 (--offset 1): ranks 1 and 4 both lost a peer instead of timing
    # out, so the text alone ties them; the dumps show rank 4 scheduling the all_reduce 15 s
    # after the seven others
    _, d = _diagnose("torchrun8-sleep-rank4")
    assert d.root_causes[0].category == "straggler_or_imbalance"
    assert d.suspects[0].rank == 4 and "15.0 s after the other 7" in d.suspects[0].reason


def test_a_late_collective_needs_seconds_not_a_steps_jitter() -> None:
    from bot.logs.flight_recorder import FrDump, FrEntry, analyze_dumps

    def dump(rank: int, created_s: float) -> FrDump:
        e = FrEntry("0/default_pg", 1, "gloo:all_reduce", "[[1024]]", "scheduled",
                    "job.py:212 (<module>)", "['Float']", int(created_s * 1e9))
        return FrDump(f"fr_trace_{rank}", rank, "2.10", [e])

    jitter = analyze_dumps([dump(r, 100 + r * 0.2) for r in range(4)])
    assert not [f for f in jitter if f.kind == "late"]
    late = [f for f in analyze_dumps([dump(0, 100), dump(1, 100.1), dump(2, 100.05),
                                      dump(3, 112)]) if f.kind == "late"]
    assert [f.ranks for f in late] == [[3]] and "11.9 s after" in late[0].text
    untimed = [FrDump("fr_trace_0", 0, "2.10", [FrEntry("0/default_pg", 1, "gloo:all_reduce",
                                                        "[[4]]", "scheduled", "x")])] * 2
    assert not [f for f in analyze_dumps(untimed) if f.kind == "late"]


def test_the_store_host_that_expects_more_ranks_than_the_job_left_files_for() -> None:
    # `wrong_world` on rank 0 of three, one file per rank: rank 0 hosts the env:// store and
    # counts "3/4 clients joined"; ranks 1 and 2 wait for rank 0's key. Three rank files,
    # three clients: no rank is missing, rank 0's WORLD_SIZE is larger
    _, d = _diagnose("slurm3-files-wrong_world-rank0")
    assert d.root_causes[0].category == "rendezvous_failure"
    assert d.suspects[0].rank == 0 and "WORLD_SIZE is larger" in d.suspects[0].reason


def test_the_rank_that_never_started_is_named_not_the_store_host_counting_clients() -> None:
    # `nojoin` on rank 3 of four, interleaved `srun -l` output: rank 3 exits before joining
    # and prints nothing; rank 0 counts "3/4 clients joined" in TCPStore's code, which is not
    # another code path of the job
    _, d = _diagnose("slurm4-nojoin-rank3")
    assert d.root_causes[0].category == "rendezvous_failure"
    assert d.suspects[0].rank == 3
    assert not any("another code path" in s.reason for s in d.suspects)


def test_under_accelerate_a_peer_that_exited_with_code_0_is_a_rank_that_left_early() -> None:
    # `exit0_early` on rank 1 of two under accelerate (no rank prefix on rank 1's lines):
    # torchrun's one failure is rank 0, which lost its peer, "<NO_OTHER_FAILURES>", and no
    # worker was left to stop
    _, d = _diagnose("accelerate2-exit0_early-rank1")
    assert d.root_causes[0].category == "rank_crashed"
    assert d.crossrank.left_cleanly
    # every other worker exited 0; the job's size is not in the text, but a job whose rank 0
    # lost a peer has a rank 1: it is named before the victim
    assert [s.rank for s in d.suspects[:2]] == [1, 0]
    assert "exited with code 0 while rank 0 still ran collectives" in d.suspects[0].reason


def test_the_rank_whose_traceback_calls_the_collective_elsewhere_sent_the_odd_tensor() -> None:
    # `dtype` on rank 2 of four, interleaved `srun -l` output (a fresh --offset 2 run): gloo
    # aborts rank 1 ("1024 vs 512"), which receives from rank 2; ranks 0, 2 and 3 print their
    # tracebacks, and rank 2's own frame is another line of job.py (inject's all_reduce of a
    # float64 copy) than ranks 0 and 3's: rank 2 holds the larger tensor, rank 1 was its victim
    report, d = _diagnose("slurm4-dtype-rank2")
    sites = {e.ev.rank: e.call_site for e in report.exceptions if e.call_site}
    assert sites[0] == sites[3] != sites[2] and sites[2].endswith("job.py:113 in inject")
    assert d.root_causes[0].category == "collective_mismatch"
    assert [s.rank for s in d.suspects[:2]] == [2, 1]
    assert "calls the collective from job.py:113 in inject where the other ranks call it from " \
        "job.py:243 in <module>" in d.suspects[0].reason


def test_without_dumps_or_tracebacks_the_ring_pair_is_named_as_either() -> None:
    # `dtype` on rank 7 of eight: torchrun SIGTERMs the others before they print a traceback
    # and the dumps are empty; nothing tells rank 6's smaller tensor from rank 7's larger one,
    # so the first suspect says both
    _, d = _diagnose("torchrun8-dtype-rank7")
    assert d.suspects[0].rank == 6
    assert d.suspects[0].reason.startswith("rank 6 or rank 7: gloo aborted rank 6, which "
                                           "received 512 bytes from rank 7")
    assert "logs cannot tell" in d.suspects[0].reason


def test_a_store_host_counting_one_client_too_many_is_named_beside_the_missing_rank() -> None:
    # `nojoin` (rank 3 never starts) and a store host whose WORLD_SIZE is one larger read the
    # same in one interleaved file: rank 0 counts "3/4 clients joined" and three ranks print
    _, d = _diagnose("slurm4-nojoin-rank3")
    assert [s.rank for s in d.suspects[:2]] == [3, 0]
    assert "either its WORLD_SIZE is larger than the others' or rank 3 never started" in \
        d.suspects[1].reason


def test_a_preempted_second_node_is_the_crash_not_torchruns_stop() -> None:
    # SEALED-4 `node_preempt`, recorded after its one run (the rules were frozen before it):
    # both ranks of node 2 are SIGTERMed from outside at the last step; node 2's agent records
    # them (exitcode -15) without having sent a closing signal, node 1's agent stops rank 1
    # itself ("Sending process ... closing signal SIGTERM") after rank 0 lost node 2
    _, d = _diagnose("2node-node_preempt-node2")
    assert d.root_causes[0].category == "rank_crashed"
    assert (d.suspects[0].rank, d.suspects[0].host) == (2, "gpu-node-02")
    assert "from outside the launcher" in d.suspects[0].reason
    assert 1 not in d.crossrank.killed_outside


def test_the_other_agents_keep_alive_failures_are_the_store_host_leaving() -> None:
    # `exception` on rank 0 (node 1, the c10d store's host) at its first step, before any
    # collective (--offset 2): nodes 2 and 3 print only their agents' store and rendezvous
    # errors, after "failed to send a keep-alive heartbeat": the rendezvous had completed
    report, d = _diagnose("3node-logdir-exception-rank0")
    assert report.facts.get("rdzv_keepalive_failed")
    assert d.root_causes[0].category == "rank_crashed"
    assert (d.suspects[0].rank, d.suspects[0].host) == (0, "gpu-node-01")


def test_a_call_site_is_the_innermost_frame_of_the_programs_own_code(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "<frozen runpy>", line 198, in _run_module_as_main\n'
        '[rank1]:   File "/opt/app/train.py", line 40, in <module>\n'
        '[rank1]:   File "/opt/app/model/step.py", line 12, in step\n'
        '[rank1]:   File "/usr/lib/python3.11/contextlib.py", line 81, in inner\n'
        '[rank1]:   File "/opt/conda/lib/python3.11/site-packages/torch/distributed/'
        'distributed_c10d.py", line 3252, in all_reduce\n'
        "[rank1]: RuntimeError: Connection closed by peer [10.0.0.2]:4711\n"
        "[rank2]: Traceback (most recent call last):\n"
        '[rank2]:   File "/usr/local/lib/python3.10/dist-packages/torch/distributed/run.py", '
        "line 9, in main\n"
        "[rank2]: RuntimeError: Connection closed by peer [10.0.0.3]:4711\n")
    report, _ = analyze_sources(expand_inputs([str(log)]))
    sites = {e.ev.rank: e.call_site for e in report.exceptions}
    assert sites == {1: "/opt/app/model/step.py:12 in step", 2: None}


# --- fifth round: the fresh --offset 3 card's misses, recorded (the rules below came after it) --


def test_the_one_rank_torchrun_neither_stopped_nor_recorded_left_with_code_0() -> None:
    # `exit0_early` on rank 4 of eight at step 0: ranks 3 and 5 lose it, torchrun records
    # rank 5 first and stops six others by pid; rank 4 is in neither list (it had exited 0)
    report, d = _diagnose("torchrun8-exit0_early-rank4")
    assert 4 not in {rec.rank for rec in report.failures}
    assert d.root_causes[0].category == "rank_crashed"
    assert d.suspects[0].rank == 4 and "left the job" in d.suspects[0].reason
    assert d.crossrank.vanished == [4] and d.crossrank.still_running == []


def test_a_rank_its_node_stopped_is_not_the_rank_whose_key_never_came() -> None:
    # `nojoin` on rank 3 (node 2): rank 3 exits with code 3 before joining, node 2's agent
    # stops rank 2 by pid, and node 1's ranks then wait in vain for rank 2's key: rank 2's
    # missing key follows rank 3's failure
    _, d = _diagnose("2node-nojoin-rank3")
    assert d.root_causes[0].category == "rendezvous_failure"
    assert (d.suspects[0].rank, d.suspects[0].host) == (3, "gpu-node-02")
    assert not any(s.rank == 2 and "never published" in s.reason for s in d.suspects)


def test_a_rank_still_connecting_its_first_group_is_waiting_not_the_cause() -> None:
    # `wrong_world` on rank 2 of three (one file per rank, DETAIL): rank 2 waits for a rank
    # 3's key; rank 0 stays in gloo's connect ("Connect timeout") and so never publishes its
    # key of DETAIL's wrapper group, which rank 1 waits for
    report, d = _diagnose("slurm3-files-detail-wrong_world-rank2")
    assert any("Connect timeout" in e.message for e in report.exceptions if e.ev.rank == 0)
    assert d.root_causes[0].category == "rendezvous_failure"
    assert d.suspects[0].rank == 2 and "WORLD_SIZE is larger" in d.suspects[0].reason
    assert 0 in d.crossrank.victims


def test_under_accelerate_the_rank_gloo_aborted_is_the_one_torchrun_saw_die_of_sigabrt() -> None:
    # `dtype` on rank 0 of two under accelerate: the abort line has no rank; torchrun records
    # rank 1 with exitcode -6 (SIGABRT). Two ranks: nothing tells the sides apart, both named
    _, d = _diagnose("accelerate2-dtype-rank0")
    assert d.root_causes[0].category == "collective_mismatch"
    assert [s.rank for s in d.suspects[:2]] == [1, 0]
    assert d.suspects[0].reason.startswith("rank 1 or rank 0: gloo aborted rank 1")


def test_a_two_rank_fingerprint_tie_names_both_ranks_as_either() -> None:
    # `dtype` on rank 0 of two with DETAIL (--offset 2): each rank's fingerprint disagrees
    # with the other's (Double against Float), neither a barrier nor a metric; torchrun's
    # first failure (rank 1) is no tie-breaker, so each suspect leads with both ranks
    _, d = _diagnose("torchrun2-detail-dtype-rank0")
    assert d.root_causes[0].category == "collective_mismatch"
    assert [s.rank for s in d.suspects[:2]] == [0, 1]  # Double is not torch's default dtype
    for s in d.suspects[:2]:
        assert s.reason.startswith("rank 0 or rank 1: rank 0 ran OpType=ALLREDUCE, "
                                   "TensorShape=[1024], TensorDtypes=Double where rank 1 ran")


def test_a_rank_waiting_for_a_rank_past_the_log_dirs_count_names_its_node() -> None:
    # `wrong_world` on rank 0 of three nodes of one rank each, --log-dir per node (a run the
    # harness stopped at its limit): node 1's rank waits for a rank 3's key. The nodes' --log-dir
    # folders hold one local rank each, so the job has 3 ranks and rank 3 does not exist; the
    # waiter's global rank is in no line, its node is
    _, d = _diagnose("3node-logdir-wrong_world-rank0-stopped")
    assert d.root_causes[0].category == "rendezvous_failure"
    assert (d.suspects[0].rank, d.suspects[0].host) == (None, "gpu-node-01")
    assert "but the job has 3 ranks (torchrun's --log-dir folders)" in d.suspects[0].reason
    assert not any(s.rank == 3 for s in d.suspects)


# --- sixth round: SEALED-5's misses, recorded (development now; the rules below came after) ---


def test_of_two_ranks_the_one_in_an_object_collective_left_the_training_path() -> None:
    # `object_collective` on rank 0 of two under accelerate: rank 0 alone calls
    # all_gather_object (its innermost frame is the all_gather it calls) and times out sending,
    # rank 1 times out receiving in all_reduce; torchrun records rank 1 first
    report, d = _diagnose("accelerate2-object_collective-rank0")
    assert {e.ev.rank: e.api for e in report.exceptions} == {0: "all_gather_object",
                                                             1: "all_reduce"}
    assert d.root_causes[0].category == "collective_mismatch"
    assert d.suspects[0].rank == 0
    assert d.suspects[0].reason.startswith("was in all_gather_object() when it gave up")
    assert d.crossrank.other_path == [0]


def test_a_dtype_mismatch_split_exactly_by_node_names_both_nodes_non_default_first() -> None:
    # `precision_env` on node 2 (fp16) of two nodes with DETAIL: ranks 0, 1 see rank 2's Half,
    # ranks 2, 3 see rank 0's Float, two against two; torchrun's first failures are no
    # tie-breaker. Both nodes are named; Half is not torch's default dtype, so node 2 first
    _, d = _diagnose("2node-precision_env-node2")
    assert d.root_causes[0].category == "collective_mismatch"
    assert [(s.rank, s.host) for s in d.suspects[:2]] == [(None, "gpu-node-02"),
                                                        (None, "gpu-node-01")]
    for s in d.suspects[:2]:
        assert s.reason.startswith("node gpu-node-02 or node gpu-node-01: ranks 2, 3 (all of "
                                   "gpu-node-02) ran OpType=ALLREDUCE, TensorShape=[1024], "
                                   "TensorDtypes=Half where ranks 0, 1")
    assert "its dtype Half is not torch's default (float32)" in d.suspects[0].reason
    assert "not torch's default" not in d.suspects[1].reason


def test_the_rank_waiting_for_its_own_key_joined_under_another_rank_two_nodes() -> None:
    # `dup_rank` on node 2 (RANK from LOCAL_RANK): all four processes wait for key 2; node 2's
    # agent records its local rank 0 as rank 2, and that process waits for its own key
    _, d = _diagnose("2node-dup_rank-node2")
    assert d.root_causes[0].category == "rendezvous_failure"
    assert (d.suspects[0].rank, d.suspects[0].host) == (2, "gpu-node-02")
    assert "(a duplicated rank)" in d.suspects[0].reason
    assert not any("never published" in s.reason for s in d.suspects)


def test_the_rank_file_waiting_for_its_own_key_took_a_neighbours_rank() -> None:
    # `dup_rank` on rank 1 of three, one file per rank: rank 1 joined as rank 2, so all three
    # files wait for key 1, rank-1.log among them
    _, d = _diagnose("slurm3-files-dup_rank-rank1")
    assert d.root_causes[0].category == "rendezvous_failure"
    assert [s.rank for s in d.suspects] == [1]
    assert d.suspects[0].reason.startswith("its launcher gives it rank 1, yet it waited for "
                                           "rank 1's own address")


def test_the_non_default_dtype_side_needs_fingerprints_that_differ_in_dtype_only() -> None:
    from bot.logs.crossrank import non_default_side

    fp = "OpType=ALLREDUCE, TensorShape=[1024], TensorDtypes={}"
    assert non_default_side(fp.format("Half"), fp.format("Float")) == 0
    assert non_default_side(fp.format("Float"), fp.format("Double")) == 1
    assert non_default_side(fp.format("Half"), fp.format("BFloat16")) is None  # neither default
    assert non_default_side(fp.format("Float"), fp.format("Float")) is None
    other_shape = "OpType=ALLREDUCE, TensorShape=[512], TensorDtypes=Half"
    assert non_default_side(other_shape, fp.format("Float")) is None  # shape differs too


def test_a_rank_other_than_0_that_tried_to_start_the_store_ran_as_rank_0() -> None:
    # `dup_rank` on rank 3 of four (interleaved `srun -l` output, a development run of this
    # round): rank 3 takes RANK 0, tries to start the env:// store and finds its port taken;
    # the real rank 0 counts 3 of 4 clients, ranks 1 and 2 wait for key 0
    _, d = _diagnose("slurm4-dup_rank-rank3")
    assert d.root_causes[0].category == "rendezvous_failure"
    assert d.suspects[0].rank == 3
    assert d.suspects[0].reason.startswith("its launcher gives it rank 3, yet it tried to start "
                                           "the store")


def test_when_every_rank_rank_0_too_fails_to_reach_the_store_rank_0_is_named() -> None:
    # `dup_rank` on rank 0 of three (one file per rank): rank 0 takes RANK 1, so no process
    # starts the env:// store and all three time out connecting to it
    _, d = _diagnose("slurm3-files-dup_rank-rank0")
    assert d.root_causes[0].category == "rendezvous_failure"
    assert d.suspects[0].rank == 0
    assert "either it ran with another RANK than 0 or MASTER_ADDR/MASTER_PORT" in \
        d.suspects[0].reason


def test_of_a_two_rank_dtype_tie_the_non_default_dtype_leads_over_torchruns_first_record() -> None:
    # `precision_env` on rank 1 of two with DETAIL (a development run of this round): rank 1
    # all_reduces Half, rank 0 Float; torchrun records rank 0 first (both fail at once). Both
    # are named as either; rank 1's Half is not torch's default dtype, so it leads
    report, d = _diagnose("torchrun2-detail-precision_env-rank1")
    assert next(rec.rank for rec in report.failures if rec.root) == 0
    assert [s.rank for s in d.suspects[:2]] == [1, 0]
    assert d.suspects[0].reason.startswith("rank 0 or rank 1: rank 0 ran OpType=ALLREDUCE, "
                                           "TensorShape=[1024], TensorDtypes=Float where rank 1")
    assert "its dtype Half is not torch's default (float32)" in d.suspects[0].reason

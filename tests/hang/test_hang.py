"""Live hang triangulation: recorded py-spy output (pure), then a real hung gloo job sampled
here, through a real node agent, and refused for people who are not on call."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli.main import app
from bot.diagnosis.hang import triangulate
from tests.agent.conftest import SECRET, start_agent, stop_agent
from tests.conftest import ROOT
from tests.hang.jobs import HungJob, hung_job, need_py_spy
from tools.hang.model import Frame, HangSample, RankSample, ThreadStack
from tools.hang.procs import TrainingProcess, parse_environ
from tools.hang.stacks import parse_dump_json

RECORDED = ROOT / "tests" / "fixtures" / "hang"


def _rank(rank: int, recorded: str) -> RankSample:
    threads = parse_dump_json((RECORDED / recorded).read_text())
    return RankSample(pid=1000 + rank, rank=rank, world_size=4, threads=threads)


def test_recorded_stacks_name_the_rank_outside_the_collective() -> None:
    ranks = [_rank(r, "py-spy-rank-in-load_shard.json" if r == 2
                   else "py-spy-rank-in-all_reduce.json") for r in range(4)]
    v = triangulate([HangSample(host="gpu-node07", ranks=ranks)])
    assert v.kind == "host_stuck"
    assert [(c.rank, c.host) for c in v.culprits] == [(2, "gpu-node07")]
    assert "load_shard (job.py:6)" in v.culprits[0].reason
    assert "3 of 4 ranks wait in all_reduce" in v.culprits[0].reason
    assert v.signals[0].category == "straggler_or_imbalance"


def _stack(*frames: tuple[str, str]) -> list[ThreadStack]:
    return [ThreadStack(name="MainThread", frames=[
        Frame(function=fn, file=path, line=10) for fn, path in frames])]


C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


def test_ranks_in_different_collectives_are_a_desync_and_equal_ones_a_device_stall() -> None:
    def rank(r: int, op: str) -> RankSample:
        return RankSample(pid=r, rank=r, world_size=4,
                          threads=_stack((op, C10D), ("step", "/job/train.py")))

    v = triangulate([HangSample(host="n1", ranks=[rank(r, "broadcast" if r == 1 else
                                                        "all_reduce") for r in range(4)])])
    assert v.kind == "desync" and [c.rank for c in v.culprits] == [1]
    assert v.signals[0].category == "collective_mismatch"
    same = triangulate([HangSample(host="n1", ranks=[rank(r, "all_reduce") for r in range(4)])])
    assert same.kind == "device_stall" and not same.culprits
    half = triangulate([HangSample(host="n1", ranks=[
        RankSample(pid=r, rank=r, world_size=8, threads=_stack(("all_reduce", C10D)))
        for r in range(4)])])
    assert half.kind == "unknown"  # ranks 4-7 were not sampled: say so, blame nobody
    assert any("4, 5, 6, 7 were not sampled" in n for n in half.notes)


def test_only_a_ranks_variables_leave_its_environment() -> None:
    env = parse_environ(b"RANK=3\0LOCAL_RANK=3\0HF_TOKEN=hf_secret\0WORLD_SIZE=8\0junk\0")
    assert env == {"RANK": "3", "LOCAL_RANK": "3", "WORLD_SIZE": "8"}
    tp = TrainingProcess(1, {"TORCH_NCCL_DEBUG_INFO_PIPE_FILE": "/../etc/x",
                             "TORCH_NCCL_TRACE_BUFFER_SIZE": "10", **env})
    from tools.hang.pipe import pipe_paths

    assert "without '..'" in str(pipe_paths(tp))


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> HungJob:  # type: ignore[misc]
    need_py_spy()
    with hung_job(tmp_path_factory.mktemp("hang"), stuck_rank=2) as j:
        yield j


def _answer(args: list[str], env: dict[str, str] | None = None) -> dict[str, object]:
    result = CliRunner().invoke(app, ["node", "hang", *args, "--json", "--ras-port", "0"],
                                env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)  # type: ignore[no-any-return]


def test_a_real_hung_job_sampled_here(job: HungJob) -> None:
    assert len(job.pids) == 4
    answer = _answer(["--pids", ",".join(map(str, job.pids))])
    suspect = answer["diagnosis"]["suspects"][0]  # type: ignore[index]
    assert suspect["rank"] == 2 and "load_shard (hang_job.py:" in suspect["reason"]
    top = answer["diagnosis"]["root_causes"][0]  # type: ignore[index]
    assert top["category"] == "straggler_or_imbalance" and answer["verdict"] == "diagnosed"
    texts = [e["text"] for e in top["evidence"]]
    # the Flight Recorder dumps came through the ranks' pipes and agree with the stacks
    assert any("rank 2 never entered collective #2 (gloo:all_reduce" in t for t in texts)
    assert any(stat.S_ISFIFO(p.stat().st_mode) for p in job.pipes.iterdir())


def test_through_the_agent_for_on_call_users_only(job: HungJob, tmp_path: Path) -> None:
    agent = start_agent(tmp_path, "gpu-node07")
    try:
        inv = tmp_path / "nodes.yaml"
        inv.write_text(f'nodes:\n  gpu-node07: {{url: "{agent.url}"}}\n')
        env = {"NCCLBOT_NODES_FILE": str(inv), "NCCLBOT_AGENT_SECRET": SECRET}
        with agent.client(user="slack:ONCALL") as client:
            result = client.run("hang", {"pids": job.pids, "ras_port": None})
        sample = HangSample.model_validate(result.data)
        assert sorted(r.rank for r in sample.ranks) == [0, 1, 2, 3]
        assert all(r.fr_dump_b64 and base64.b64decode(r.fr_dump_b64) for r in sample.ranks)
        assert triangulate([sample]).culprits[0].rank == 2
        # the CLI's user is not on this agent's list: refused, and the refusal is audited
        result = CliRunner().invoke(app, ["node", "hang", "--node", "gpu-node07", "--json"],
                                    env=env)
        assert result.exit_code != 0 and "on-call users" in str(result.exception)
        lines = [json.loads(x) for x in agent.audit_lines()]
        assert any(x.get("path") == "/v1/hang" and x.get("outcome") == "refused"
                   for x in lines), lines
    finally:
        stop_agent(agent)


def _ras_polls(*names: str) -> HangSample:
    """Two polls through the hang diagnostic's RAS step, against a replay of RAS reports."""
    from tests.tools.ras_server import RasReplayServer
    from tools.hang.collect import HangParams, _ras

    reports = [(ROOT / "tests" / "fixtures" / "ras" / n).read_text() for n in names]
    with RasReplayServer(reports) as srv:
        polls, note = _ras(HangParams(ras_port=srv.port, ras_interval_s=0.5), "2.29.2")
    assert note is None and len(polls) == 2
    return HangSample(host="gpu-node07", ras=polls)


def test_ras_counts_tell_a_desync_from_an_equal_stall_and_from_progress() -> None:
    desync = triangulate([_ras_polls("json_2.29.2_desync.json", "json_2.29.2_desync.json")])
    assert desync.kind == "desync" and [c.rank for c in desync.culprits] == [3]
    assert {s.category for s in desync.signals} >= {"collective_mismatch"}
    stall = triangulate([_ras_polls("json_2.29.2_equal_1200.json",
                                    "json_2.29.2_equal_1200.json")])
    assert stall.kind == "device_stall" and not stall.culprits
    moving = triangulate([_ras_polls("json_2.29.2_equal_1200.json",
                                     "json_2.29.2_equal_1260.json")])
    assert moving.kind == "progressing" and not moving.signals
    dead = triangulate([_ras_polls("json_2.29.2_dead_rank.json", "json_2.29.2_dead_rank.json")])
    assert dead.kind == "dead_peer" and dead.signals[0].category == "rank_crashed"
    # every node's RAS reports on the whole job: two nodes' polls are one piece of evidence
    twice = _ras_polls("json_2.29.2_desync.json", "json_2.29.2_desync.json")
    both = triangulate([twice, twice.model_copy(update={"host": "gpu-node08"})])
    assert len(both.signals) == len(desync.signals) and len(both.culprits) == 1


def test_the_nccl_version_comes_from_the_library_a_rank_loaded(tmp_path: Path) -> None:
    from tools.hang.procs import nccl_version_of

    site = "/opt/venv/lib/python3.11/site-packages"
    proc = tmp_path / "proc"
    (proc / "7").mkdir(parents=True)
    (proc / "7" / "maps").write_text(
        f"7f00-7f10 r-xp 00000000 08:01 12 {site}/nvidia/nccl/lib/libnccl.so.2\n")
    (proc / "7" / "root" / site.lstrip("/") / "nvidia_nccl_cu12-2.27.5.dist-info").mkdir(
        parents=True)
    assert nccl_version_of(7, proc) == "2.27.5"
    (proc / "8").mkdir()
    (proc / "8" / "maps").write_text("7f00-7f10 r-xp 0 08:01 12 /usr/lib/libnccl.so.2.21.5\n")
    assert nccl_version_of(8, proc) == "2.21.5"
    assert nccl_version_of(9, proc) is None


def test_ranks_of_two_jobs_are_compared_within_their_own_job() -> None:
    def rank(r: int, job: str, stuck: bool) -> RankSample:
        frames = [("load_shard", "/job/data.py")] if stuck else [("all_reduce", C10D)]
        return RankSample(pid=r + (100 if job == "b" else 0), rank=r, job=job, world_size=4,
                          threads=_stack(*frames))

    ranks = [rank(r, "a", r == 2) for r in range(4)] + [rank(r, "b", r == 1) for r in range(4)]
    v = triangulate([HangSample(host="n1", ranks=ranks)])
    assert v.kind == "host_stuck" and [c.rank for c in v.culprits] == [2]  # job a
    assert any("2 jobs run on these nodes (a, b)" in n for n in v.notes)
    assert any(n.startswith("job b: rank 1 on n1 is in load_shard") for n in v.notes)


FORGED = '''import os
import time


def all_reduce():
    """A forged rank "waiting" in a collective (the file lies under distributed/)."""
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.2)


print("ready", flush=True)
all_reduce()
'''


def _job_env(pid: int) -> dict[str, str]:
    env = parse_environ(Path(f"/proc/{pid}/environ").read_bytes())
    return {k: env[k] for k in ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")}


def test_forged_ranks_do_not_change_the_verdict_on_a_real_hung_job(job: HungJob) -> None:
    """Processes of another user claiming the real job's run id and rendezvous: one says
    RANK=9 of WORLD_SIZE 4, one says it is rank 1, four say they are ranks 4-7 of 8, all
    "waiting" in a function named all_reduce. The verdict is still rank 2 in load_shard while
    3 of 4 ranks wait in all_reduce, and the notes say what was not counted."""
    from tests.hang.jobs import fake_ranks, shared_dir

    real = _job_env(job.pids[0])
    with shared_dir() as d:
        (d / "distributed").mkdir()
        script = d / "distributed" / "forged.py"
        script.write_text(FORGED)
        script.chmod(0o644)
        base = {"PATH": "/usr/bin:/bin", **real}
        envs = [{**base, "RANK": "9", "LOCAL_RANK": "1", "WORLD_SIZE": "4"},
                {**base, "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "4"},
                *({**base, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "8"}
                  for r in range(4, 8))]
        with fake_ranks(envs, script=script) as forged:
            answer = _answer(["--pids", ",".join(map(str, [*job.pids, *(p.pid for p in
                                                                        forged)]))])
    suspect = answer["diagnosis"]["suspects"][0]  # type: ignore[index]
    assert suspect["rank"] == 2 and "load_shard (hang_job.py:" in suspect["reason"]
    assert "3 of 4 ranks wait in all_reduce" in suspect["reason"]
    assert len(answer["diagnosis"]["suspects"]) == 1  # type: ignore[index]
    assert answer["verdict"] == "diagnosed"
    notes = " ".join(answer.get("notes", []))  # type: ignore[arg-type]
    assert "but were not started by its launcher" in notes, notes
    assert "10 processes claim to be ranks" in notes


def test_the_bot_counts_only_ranks_that_can_belong_to_the_job() -> None:
    """Whatever an agent sends (an old one, a forged node): a rank >= WORLD_SIZE and a second
    rank 1 are dropped with notes; four more "ranks" of a bigger WORLD_SIZE are another job,
    and the verdict is about the real one."""
    def rank(r: int, stuck: bool = False, world: int = 4, pid: int = 0) -> RankSample:
        frames = [("load_shard", "/job/data.py")] if stuck else [("all_reduce", C10D)]
        return RankSample(pid=pid or 100 + r, rank=r, job="j1", master="10.0.0.1:29500",
                          world_size=world, threads=_stack(*frames))

    real = [rank(r, stuck=r == 2) for r in range(4)]
    v = triangulate([HangSample(host="n1", ranks=real)])
    assert [c.rank for c in v.culprits] == [2] and "3 of 4 ranks" in v.culprits[0].reason
    forged = [rank(9, pid=900), rank(1, pid=901), *(rank(r, world=8, pid=910 + r)
                                                    for r in range(4, 7))]
    v2 = triangulate([HangSample(host="n1", ranks=real), HangSample(host="n2", ranks=forged)])
    assert [c.rank for c in v2.culprits] == [2] and "3 of 4 ranks" in v2.culprits[0].reason
    assert any("n2 pid 900 says rank 9" in n for n in v2.notes)
    assert any("n2 pid 901 says rank 1" in n and "like n1 pid 101" in n for n in v2.notes)
    assert any("6 processes claim to be ranks of job j1 (10.0.0.1:29500, WORLD_SIZE 4)" in n
               for n in v2.notes), v2.notes
    assert any("this answer is about j1 (10.0.0.1:29500, WORLD_SIZE 4)" in n
               for n in v2.notes), v2.notes


def _tp(pid: int, rank: int, *, world: int = 4, launcher: int = 10, known: bool = True,
        uid: int = 1000, job: str = "r1", ancestors: list[int] | None = None) -> TrainingProcess:
    return TrainingProcess(
        pid, {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
              "TORCHELASTIC_RUN_ID": job, "MASTER_ADDR": "n1", "MASTER_PORT": "29500"},
        uid=uid, ancestors=ancestors or [launcher], launcher=launcher, launcher_known=known,
        launcher_uid=uid)


def test_a_node_groups_processes_by_their_launcher() -> None:
    from tools.hang.procs import assign_jobs

    job = [_tp(100 + r, r) for r in range(4)]
    worker = _tp(200, 1, ancestors=[101, 10])  # a data-loader worker of rank 1
    beyond = _tp(104, 4)  # same launcher, but RANK >= WORLD_SIZE
    twin = _tp(105, 1)  # a second rank 1 of the same launcher
    stray = _tp(300, 3, launcher=50, known=False, uid=4242)  # another user's process
    other_torchrun = [_tp(400, 5, world=8, launcher=60)]  # same run id, other size
    kept, notes = assign_jobs([*job, worker, beyond, twin, stray, *other_torchrun])
    assert [t.pid for t in kept] == [100, 101, 102, 103]
    text = " ".join(notes)
    assert "1 child process(es) of ranks" in text
    assert "pid 104 says RANK=4, not below the WORLD_SIZE 4" in text
    assert "pid 105 says RANK=1 of job r1 (n1:29500, WORLD_SIZE 4), like pid 101" in text
    assert "pid(s) 300 (uid 4242) claim job r1" in text and "pid(s) 400 (uid 1000)" in text
    assert "8 processes claim to be ranks of job r1" in text
    # two torchruns of one job on one node (each with its own ranks) are both the job's
    kept, notes = assign_jobs([*(_tp(100 + r, r, world=8) for r in range(4)),
                               *(_tp(500 + r, r, world=8, launcher=70) for r in range(4, 8))])
    assert sorted(t.rank or 0 for t in kept) == list(range(8)) and not notes


def test_the_reply_is_capped_dumps_first() -> None:
    from tools.hang.collect import cap_reply

    ranks = [RankSample(pid=r, rank=r, fr_dump_b64="A" * (300_000 * (r + 1)),
                        threads=_stack(("all_reduce", C10D)) * 3) for r in range(4)]
    sample = HangSample(host="n1", ranks=ranks)
    cap_reply(sample, limit=800_000)
    assert len(sample.model_dump_json()) <= 800_000
    assert [bool(r.fr_dump_b64) for r in sample.ranks] == [True, False, False, False]
    assert "dropped to keep the reply under" in (sample.ranks[3].fr_note or "")
    bare = sample.model_copy(deep=True)
    bare.ranks[0].fr_dump_b64 = None
    cap_reply(sample, limit=len(bare.model_dump_json()) - 1)  # then one thread per rank
    assert all(r.fr_dump_b64 is None for r in sample.ranks)
    assert all(len(r.threads) == 1 for r in sample.ranks) and sample.notes

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

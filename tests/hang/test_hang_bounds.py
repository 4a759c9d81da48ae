"""The hang diagnostic reads only a rank's own files and stays bounded: fake ranks (real
processes, some of another user) that abuse their debug pipe, fill it, never dump, or come
in dozens; a real node agent (root here) answering concurrent identical requests once."""

from __future__ import annotations

import base64
import json
import os
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.nodes.client import NodeBusyError
from tests.agent.conftest import Agent, start_agent, stop_agent
from tests.hang.jobs import fake_ranks, need_py_spy, rank_env, shared_dir
from tools.hang.collect import HangParams, collect_hang
from tools.hang.model import HangSample, RankSample
from tools.hang.pipe import request_dump
from tools.hang.procs import read_process


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    a = start_agent(tmp_path_factory.mktemp("hang-agent"), "gpu-node07")
    yield a
    stop_agent(a)


def _sample(agent: Agent, params: dict[str, Any], timeout: float = 120.0) -> HangSample:
    with agent.client(user="slack:ONCALL", timeout=timeout) as client:
        result = client.run("hang", {"ras_port": None, "gpu": False, **params})
    assert result.status == "success", result.error
    return HangSample.model_validate(result.data)


def _by_rank(sample: HangSample) -> dict[int | None, RankSample]:
    return {r.rank: r for r in sample.ranks}


@pytest.fixture
def root_only(tmp_path: Path) -> Iterator[Path]:
    """A root-only (0600) file with a secret in it, in a folder anyone may enter."""
    with shared_dir() as folder:
        path = folder / "root-only.key"
        path.write_text(f"ROOT-ONLY-{secrets.token_hex(16)}\n")
        path.chmod(0o600)
        yield path


def test_a_rank_of_another_user_cannot_make_the_root_agent_read_for_it(
        agent: Agent, root_only: Path) -> None:
    """Its dump path is re-pointed (a symbolic link) to a root-only file and to /etc/shadow
    after the agent writes to its pipe: nothing of either comes back, a note says why, and
    an honest rank beside it still gives its dump."""
    need_py_spy()
    secret = root_only.read_bytes()
    with shared_dir() as d:
        envs = [rank_env(d, 0, 3, FAKE_MODE="honest", FAKE_PAYLOAD="rank0-dump"),
                rank_env(d, 1, 3, FAKE_MODE="symlink", FAKE_TARGET=str(root_only)),
                rank_env(d, 2, 3, FAKE_MODE="symlink", FAKE_TARGET="/etc/shadow")]
        with fake_ranks(envs) as procs:
            sample = _sample(agent, {"pids": [p.pid for p in procs], "timeout_s": 5})
            ranks = _by_rank(sample)
            assert base64.b64decode(ranks[0].fr_dump_b64 or "") == b"rank0-dump:1"
            for r in (1, 2):
                assert ranks[r].fr_dump_b64 is None
                assert "symbolic link; not followed" in (ranks[r].fr_note or ""), ranks[r]
                assert ranks[r].uid == 4242
            # the links were made, after the pipe was written to
            assert (d / "dump_1").is_symlink() and (d / "dump_2").is_symlink()
    whole = sample.model_dump_json().encode()
    shadow = Path("/etc/shadow").read_bytes() if Path("/etc/shadow").exists() else b""
    for leaked in (secret, base64.b64encode(secret), shadow, base64.b64encode(shadow)):
        assert not leaked or leaked.strip() not in whole


def test_without_openat2_each_component_is_opened_without_following_links(
        root_only: Path) -> None:
    """The fallback for kernels before 5.6: the same refusals, the same honest dump."""
    with shared_dir() as d:
        envs = [rank_env(d, 0, 2, FAKE_MODE="honest"),
                rank_env(d, 1, 2, FAKE_MODE="symlink", FAKE_TARGET=str(root_only))]
        with fake_ranks(envs) as procs:
            tps = [read_process(p.pid) for p in procs]
            assert tps[0] is not None and tps[1] is not None
            assert request_dump(tps[0], timeout_s=10, openat2=False) == (b"dump:1", None)
            data, note = request_dump(tps[1], timeout_s=10, openat2=False)
            assert data is None and "symbolic link; not followed" in (note or "")
            # a link planted as the pipe itself is not written through either
            os.unlink(d / "pipe_1.pipe")
            os.unlink(d / "dump_1")
            os.symlink(d / "pipe_0.pipe", d / "pipe_1.pipe")
            for openat2 in (True, False):
                data, note = request_dump(tps[1], timeout_s=5, openat2=openat2)
                assert data is None and "pipe_1.pipe is (or lies under) a symbolic" in (
                    note or "")


NO_SETUID = ["setpriv", "--bounding-set", "-sys_chroot,-setuid,-setgid"]


@pytest.mark.parametrize("wrapper", [[], NO_SETUID], ids=["as-the-rank", "root-without-setuid"])
def test_only_files_the_rank_owns_are_used(wrapper: list[str]) -> None:
    """A root agent that may change user reads as the rank; one whose container dropped
    CAP_SETUID / CAP_SYS_CHROOT stays root, and then the ownership checks are what hold: a
    root-owned, world-readable file at a rank's dump path is not read, a link is not
    followed, and the honest rank's own dump still is."""
    import shutil

    if wrapper and shutil.which(wrapper[0]) is None:
        pytest.skip(f"{wrapper[0]} is not installed")
    with shared_dir() as d:
        planted = d / "dump_1"
        planted.write_text("ROOT-OWNED, WORLD-READABLE")
        planted.chmod(0o644)
        envs = [rank_env(d, 0, 3, FAKE_MODE="honest"), rank_env(d, 1, 3, FAKE_MODE="mute"),
                rank_env(d, 2, 3, FAKE_MODE="symlink", FAKE_TARGET="/etc/hostname")]
        with fake_ranks(envs) as procs:
            tps = [read_process(p.pid) for p in procs]
            got = [request_dump(tp, timeout_s=5, wrapper=wrapper) for tp in tps if tp]
    assert got[0] == (b"dump:1", None)
    assert got[1][0] is None and "dump_1 belongs to uid 0, not to the rank's uid 4242" in (
        got[1][1] or "")
    assert got[2][0] is None and "symbolic link; not followed" in (got[2][1] or "")


def test_a_full_pipe_or_a_rank_that_never_dumps_loses_only_its_own_dump() -> None:
    need_py_spy()
    with shared_dir() as d:
        envs = [rank_env(d, 0, 4, FAKE_MODE="honest", FAKE_PAYLOAD="r0"),
                rank_env(d, 1, 4, FAKE_MODE="full"),
                rank_env(d, 2, 4, FAKE_MODE="mute"),
                rank_env(d, 3, 4, FAKE_MODE="honest", FAKE_PAYLOAD="r3")]
        with fake_ranks(envs) as procs:
            result = collect_hang(HangParams(pids=[p.pid for p in procs], ras_port=None,
                                             gpu=False, timeout_s=4, deadline_s=60))
    sample = HangSample.model_validate(result.data)
    ranks = _by_rank(sample)
    assert sorted(ranks) == [0, 1, 2, 3]  # type: ignore[type-var]
    assert all(r.threads for r in ranks.values()), [r.stack_error for r in ranks.values()]
    assert base64.b64decode(ranks[0].fr_dump_b64 or "") == b"r0:1"
    assert base64.b64decode(ranks[3].fr_dump_b64 or "") == b"r3:1"
    assert "pipe_1.pipe is full" in (ranks[1].fr_note or "")
    assert "no dump at dump_2 in time" in (ranks[2].fr_note or "")


def test_72_ranks_are_answered_within_the_requests_deadline(agent: Agent) -> None:
    """72 ranks whose watchdogs never dump (each would hold a worker for its whole Flight
    Recorder wait: 72 x 15 s over 8 workers is 135 s): the answer still comes by the
    deadline, every rank listed, those not reached with a note."""
    need_py_spy()
    # 30 s, not 15: on a busy 2-core machine py-spy may not read one stack of 72 in 15 s;
    # still far below the 135 s the Flight Recorder waits would take without the deadline
    deadline = 30.0
    with shared_dir() as d:
        envs = [rank_env(d, r, 72, FAKE_MODE="mute") for r in range(72)]
        with fake_ranks(envs) as procs:
            started = time.monotonic()
            sample = _sample(agent, {"pids": [p.pid for p in procs], "deadline_s": deadline})
            took = time.monotonic() - started
    assert sorted(r.rank for r in sample.ranks) == list(range(72))  # type: ignore[type-var]
    # each rank is sampled or says why not; the answer came in the deadline (and the way
    # back: a generous bound for a busy machine)
    assert all(r.threads or r.stack_error for r in sample.ranks)
    assert any(r.threads for r in sample.ranks)
    assert took < deadline + 30, took
    # the stacks are read apart from the dumps' waits: the mute pipes do not take them
    assert sum(1 for r in sample.ranks if r.threads) > 8
    late = [r for r in sample.ranks if (r.fr_note or "").startswith("Flight Recorder not")]
    assert late and any(f"{len(late)} Flight Recorder dumps not read within" in n
                        for n in sample.notes), sample.notes
    assert any("no dump at dump_" in (r.fr_note or "") for r in sample.ranks)


def test_concurrent_identical_requests_get_one_sample(agent: Agent) -> None:
    """Three identical requests at once (a client's retries, two people asking): the rank's
    pipe is written once and all three get that one dump; a request with other parameters
    meanwhile is told a sample runs."""
    with shared_dir() as d:
        env = rank_env(d, 0, 1, FAKE_MODE="honest", FAKE_PAYLOAD="once", FAKE_DELAY_S="4")
        with fake_ranks([env]) as procs:
            params = {"pids": [procs[0].pid], "timeout_s": 20}
            got: list[HangSample] = []
            busy: list[NodeBusyError] = []

            def ask() -> None:
                got.append(_sample(agent, params))

            threads = [threading.Thread(target=ask) for _ in range(3)]
            for t in threads:
                t.start()
            asked = time.monotonic() + 60  # the sample runs once the rank was asked
            while not (d / "dump_0.asked").exists() and time.monotonic() < asked:
                time.sleep(0.05)
            try:
                _sample(agent, {**params, "native": True})
            except NodeBusyError as exc:
                busy.append(exc)
            for t in threads:
                t.join(120)
            assert len(got) == 3
            dumps = {base64.b64decode(s.ranks[0].fr_dump_b64 or "") for s in got}
            assert dumps == {b"once:1"}, dumps
            assert busy and "another hang sample runs here" in busy[0].message
            # the next request is a new sample
            again = _sample(agent, params)
            assert base64.b64decode(again.ranks[0].fr_dump_b64 or "") == b"once:2"
    lines = [json.loads(x) for x in agent.audit_lines()]
    joined = [x.get("joined") for x in lines if x.get("path") == "/v1/hang"
              and x.get("params", {}).get("pids") == params["pids"]]
    assert sorted(joined) == [False, False, True, True], joined

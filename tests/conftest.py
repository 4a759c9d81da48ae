"""Shared test set-up: a clean environment and a temporary data directory for every test
(the retrieval index is shared by the session)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"


def _hide_torch() -> None:
    """NCCLBOT_TEST_NO_TORCH=1: run as if torch were not installed, to prove that the tests
    that need it skip (CI installs it, so there they run). `sys.modules["torch"] = None`
    makes `import torch` fail and `importlib.util.find_spec("torch")` return None; a
    sitecustomize on PYTHONPATH does the same in every Python subprocess."""
    sys.modules["torch"] = None  # type: ignore[assignment]
    site = Path(tempfile.mkdtemp(prefix="ncclbot-no-torch-"))
    (site / "sitecustomize.py").write_text('import sys\nsys.modules["torch"] = None\n')
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)


if os.environ.get("NCCLBOT_TEST_NO_TORCH") == "1":
    _hide_torch()


@pytest.fixture(scope="session")
def shared_index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One retrieval index for the whole session (per pytest-xdist worker: chromadb's store
    is not shared between processes); tests that need an index of their own pass
    `index_dir` explicitly. Set NCCLBOT_TEST_INDEX_DIR to keep it between local runs (its
    content hash keeps it current; each xdist worker keeps its own folder in it)."""
    kept = os.environ.get("NCCLBOT_TEST_INDEX_DIR")
    if kept:
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        path = Path(kept) / worker if worker else Path(kept)
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("index")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory,
               shared_index_dir: Path) -> None:
    for name in list(os.environ):
        if name.startswith(("NCCLBOT_", "SLACK_")):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NCCLBOT_DATA_DIR", str(tmp_path_factory.mktemp("data")))
    monkeypatch.setenv("NCCLBOT_INDEX_DIR", str(shared_index_dir))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def fr_job_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run tests/logs/fr_job.py for real, once per session: 4 gloo ranks under torchrun,
    rank 2 skips one all_reduce. Its Flight Recorder dumps (pickle in dumps/, torch's JSON
    in json/), logs and torchrun.log."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("fr")
    (out / "dumps").mkdir()
    (out / "json").mkdir()
    env = {**os.environ, "DUMP_DIR": str(out / "dumps"), "SKIP_RANK": "2",
           "JSON_DIR": str(out / "json"),
           "TORCH_FR_BUFFER_SIZE": "2000", "GLOO_SOCKET_IFNAME": "lo"}
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc-per-node", "4", "--redirects", "3", "--log-dir", str(out / "logs"),
                str(FIXTURES.parent / "logs" / "fr_job.py")]
    proc = subprocess.run(torchrun, env=env, capture_output=True, text=True, timeout=300)
    (out / "torchrun.log").write_text(proc.stdout + proc.stderr)
    assert sorted(p.name for p in (out / "dumps").iterdir()) == [
        f"fr_trace_{r}" for r in range(4)], proc.stderr[-2000:]
    return out


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A throwaway PostgreSQL server for the session (`tests.pg`); its URL. Without
    PostgreSQL (or psycopg) the tests that use it skip, except under CI=true, where they
    fail: CI installs both and must not skip them silently."""
    from tests import pg

    missing = None
    bin_dir = pg.bindir()
    if bin_dir is None:
        missing = "PostgreSQL is not installed (no initdb; apt-get install postgresql)"
    else:
        try:
            import psycopg  # noqa: F401
        except ModuleNotFoundError:
            missing = "psycopg is not installed (pip install 'ncclbot[postgres]')"
    if missing is not None or bin_dir is None:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"{missing} and CI=true: PostgreSQL tests may not be skipped")
        pytest.skip(str(missing))
    with pg.postgres_server(bin_dir) as url:
        yield url


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """An empty database of its own on the session's PostgreSQL server, for one test."""
    from tests import pg

    with pg.fresh_database(postgres_server) as url:
        yield url


#: Test files that start ranks of distributed jobs on this machine (torchrun jobs, fake
#: ranks) or sample every rank they find here (`/nccl hang NODE` and `/nccl libs NODE` take
#: no pids): a hung job of one file next to the other's sampling would be a second job in its
#: answer. Under pytest-xdist they are one work unit: one worker runs them one after another.
RANK_FILES = ("tests/hang/test_hang.py", "tests/hang/test_hang_bounds.py",
              "tests/logs/test_flight_recorder.py", "tests/mcp/test_flight_recorder.py",
              "tests/slack/test_hang_slack.py", "tests/slack/test_libs_slack.py")
RANKS_GROUP = "ranks-on-this-machine"


def work_unit(nodeid: str) -> str:
    """A test's pytest-xdist work unit under `--dist loadgroup`: its file, so that a file's
    module fixtures (agents, servers, jobs) start once; RANKS_GROUP for the RANK_FILES."""
    path = nodeid.split("::", 1)[0]
    return RANKS_GROUP if path in RANK_FILES else path


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before xdist's own; without xdist: unused
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` by `work_unit`. xdist's own loadgroup reads `xdist_group` marks
    into `item._nodeid`, which pytest 9.2 no longer reads: every test was a unit of its own
    (a file's tests ran on both workers, each starting its module fixtures)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkUnit(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ByWorkUnit(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    run_gpu = os.environ.get("NCCLBOT_RUN_GPU") == "1"
    run_live = os.environ.get("NCCLBOT_LIVE_LLM") == "1"
    for item in items:
        if "gpu" in item.keywords and not run_gpu:
            item.add_marker(pytest.mark.skip(reason="needs a GPU (set NCCLBOT_RUN_GPU=1)"))
        if "llm_live" in item.keywords and not run_live:
            item.add_marker(pytest.mark.skip(reason="live LLM run (set NCCLBOT_LIVE_LLM=1)"))

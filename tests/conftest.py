"""Shared test set-up: a clean environment and a temporary data directory for every test
(the retrieval index is shared by the session)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture(scope="session")
def shared_index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One retrieval index for the whole session: embedding every card takes ~40 s here, and
    tests that need an index of their own pass `index_dir` explicitly. Set
    NCCLBOT_TEST_INDEX_DIR to keep it between local runs (its content hash keeps it current)."""
    kept = os.environ.get("NCCLBOT_TEST_INDEX_DIR")
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
        return Path(kept)
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    run_gpu = os.environ.get("NCCLBOT_RUN_GPU") == "1"
    run_live = os.environ.get("NCCLBOT_LIVE_LLM") == "1"
    for item in items:
        if "gpu" in item.keywords and not run_gpu:
            item.add_marker(pytest.mark.skip(reason="needs a GPU (set NCCLBOT_RUN_GPU=1)"))
        if "llm_live" in item.keywords and not run_live:
            item.add_marker(pytest.mark.skip(reason="live LLM run (set NCCLBOT_LIVE_LLM=1)"))

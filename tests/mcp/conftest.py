"""The MCP server as a real `ncclbot serve mcp` process, driven by the real `mcp` client over
stdio and streamable HTTP; the retrieval index is built once per session in a temporary
data dir (the servers find it built)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult

from tests.agent.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sample-8rank-oom.log"
OOM_CARD = "cuda-oom-on-one-rank-others-timeout"
TOKEN = "mcp-test-token-0123456789abcdef"
T = TypeVar("T")
#: generous: the first call of a server loads the scanner and the retrieval index
CALL_TIMEOUT_S = 180.0


def ncclbot_argv() -> list[str]:
    """`ncclbot` as installed beside this Python, or the module when there is no script."""
    script = Path(sys.executable).with_name("ncclbot")
    return [str(script)] if script.exists() else [sys.executable, "-m", "bot.cli.main"]


def server_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """This environment without NCCLBOT_* settings (no LLM, no nodes), this checkout first."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCLBOT_")}
    env.update(PYTHONPATH=str(ROOT), NCCLBOT_DATA_DIR=str(data_dir), **extra)
    return env


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory, shared_index_dir: Path) -> Path:
    """A data dir whose retrieval index is built (by `ncclbot index`), shared by the servers.
    Its index is the session's (a link): built once, by whichever test needs it first."""
    d = tmp_path_factory.mktemp("mcp-data")
    (d / "index").symlink_to(shared_index_dir, target_is_directory=True)
    subprocess.run([*ncclbot_argv(), "index"], env=server_env(d), cwd=ROOT, check=True,
                   capture_output=True, timeout=600)
    return d


@asynccontextmanager
async def stdio_session(env: dict[str, str], *args: str):  # type: ignore[no-untyped-def]
    """A client session with `ncclbot serve mcp ARGS` run as a subprocess over stdio."""
    argv = ncclbot_argv()
    params = StdioServerParameters(command=argv[0], args=[*argv[1:], "serve", "mcp", *args],
                                   env=env, cwd=str(ROOT))
    async with stdio_client(params) as (read, write), ClientSession(
            read, write, read_timeout_seconds=CALL_TIMEOUT_S) as session:
        await session.initialize()
        yield session


def run_stdio(env: dict[str, str], steps: Callable[[ClientSession], Awaitable[T]],
              *args: str) -> T:
    async def main() -> T:
        async with stdio_session(env, *args) as session:
            return await steps(session)

    return anyio.run(main)


def structured(result: CallToolResult) -> dict[str, Any]:
    """A tool's structured result, checked against its text content (the same JSON)."""
    assert not result.is_error, result.content
    assert result.structured_content is not None
    text = "".join(getattr(c, "text", "") for c in result.content)
    assert json.loads(text) == result.structured_content
    return result.structured_content


def everything(result: CallToolResult) -> str:
    """Every byte a tool call sent back, text and structured."""
    return "".join(getattr(c, "text", "") for c in result.content) + json.dumps(
        result.structured_content, ensure_ascii=False)


@dataclass
class HttpServer:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path


def start_http(data_dir: Path, tmp: Path, *args: str, **env: str) -> HttpServer:
    """`ncclbot serve mcp --http` on a free loopback port, waited for."""
    import httpx

    port = free_port()
    log = tmp / f"mcp-http-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([*ncclbot_argv(), "serve", "mcp", "--http", "--host",
                                 "127.0.0.1", "--port", str(port), *args],
                                env=server_env(data_dir, **env), cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 120  # generous: a busy machine
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the MCP server exited: {log.read_text()}")
        try:
            httpx.get(url, timeout=1)
            return HttpServer(url, proc, log)
        except httpx.TransportError:
            time.sleep(0.2)
    stop(proc)
    raise RuntimeError(f"the MCP server did not come up: {log.read_text()}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def http_server(data_dir: Path, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[HttpServer]:
    """One HTTP server with a token that reads files under examples/ by path."""
    tmp = tmp_path_factory.mktemp("mcp-http")
    server = start_http(data_dir, tmp, "--log-root", str(SAMPLE.parent), NCCLBOT_MCP_TOKEN=TOKEN)
    yield server
    stop(server.proc)


@pytest.fixture
def sample_copy(tmp_path: Path) -> Path:
    target = tmp_path / SAMPLE.name
    shutil.copy(SAMPLE, target)
    return target

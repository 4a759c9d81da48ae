"""`ncclbot serve mcp --http`: streamable HTTP through the real `mcp` client, with a bearer
token; calls without it are refused; a bind other machines reach needs one."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.mcp.conftest import (
    CALL_TIMEOUT_S,
    OOM_CARD,
    ROOT,
    SAMPLE,
    TOKEN,
    HttpServer,
    ncclbot_argv,
    server_env,
    structured,
)

T = TypeVar("T")
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "curl", "version": "0"}}}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def run_http(url: str, token: str | None, steps: Callable[[ClientSession], Awaitable[T]]) -> T:
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def main() -> T:
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(
                30, read=CALL_TIMEOUT_S)) as http, streamable_http_client(
                url, http_client=http) as (read, write), ClientSession(
                read, write, read_timeout_seconds=CALL_TIMEOUT_S) as session:
            await session.initialize()
            return await steps(session)

    return anyio.run(main)


def test_tools_answers_and_cards_over_http(http_server: HttpServer) -> None:
    async def steps(s: ClientSession) -> tuple[Any, ...]:
        tools = await s.list_tools()
        analysed = structured(await s.call_tool("analyze_logs", {"paths": [str(SAMPLE)]}))
        asked = structured(await s.call_tool("ask", {
            "question": "训练时 NCCL watchdog 超时，rank 5 报 CUDA out of memory，怎么办？",
            "lang": "auto"}))
        card = await s.read_resource(f"ncclbot://cards/{OOM_CARD}")
        outside = structured(await s.call_tool("analyze_logs", {"paths": [str(ROOT / "README.md")]}))
        return tools, analysed, asked, card, outside

    tools, analysed, asked, card, outside = run_http(http_server.url, TOKEN, steps)
    assert "analyze_logs" in {t.name for t in tools.tools}
    top = analysed["diagnosis"]["root_causes"][0]
    assert top["category"] == "rank_crashed" and top["evidence"]
    assert analysed["diagnosis"]["suspects"][0]["rank"] == 5
    assert asked["lang"] == "zh" and OOM_CARD in [c["card"] for c in asked["citations"]]
    assert json.loads(card.contents[0].text)["id"] == OOM_CARD
    # over HTTP only the --log-root folders are read by path
    assert outside["verdict"] == "error" and "outside the folders" in outside["text"]


def test_unauthenticated_calls_are_refused(http_server: HttpServer) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789abcdef"},
                    {"Authorization": f"Basic {TOKEN}"}):
        resp = httpx.post(http_server.url, json=INITIALIZE, headers={**ACCEPT, **headers},
                          timeout=30)
        assert resp.status_code == 401, headers
        assert resp.headers["www-authenticate"].startswith("Bearer")
        assert "serverInfo" not in resp.text
    ok = httpx.post(http_server.url, json=INITIALIZE, timeout=30,
                    headers={**ACCEPT, "Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200 and "ncclbot" in ok.text

    reached: list[Any] = []

    async def steps(s: ClientSession) -> Any:
        reached.append(await s.list_tools())

    with pytest.raises(BaseException) as failed:  # the SDK's ExceptionGroup
        run_http(http_server.url, None, steps)
    assert reached == []
    assert any(isinstance(e, MCPError) for e in leaves(failed.value)), failed.value


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups."""
    inner = getattr(exc, "exceptions", None)  # an ExceptionGroup (a backport on 3.10)
    if inner:
        return [leaf for e in inner for leaf in leaves(e)]
    return [exc]


def test_a_reachable_bind_needs_a_token(data_dir: Path) -> None:
    base = [*ncclbot_argv(), "serve", "mcp", "--http", "--port", "9"]
    no_token = subprocess.run([*base, "--host", "0.0.0.0"], env=server_env(data_dir),
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
    short = subprocess.run([*base, "--host", "0.0.0.0"], cwd=ROOT, capture_output=True,
                           text=True, timeout=120,
                           env=server_env(data_dir, NCCLBOT_MCP_TOKEN="short"))
    for proc, words in ((no_token, "needs a bearer token: set NCCLBOT_MCP_TOKEN"),
                        (short, "NCCLBOT_MCP_TOKEN is too short")):
        assert proc.returncode == 2, proc.stderr
        assert words in proc.stderr and "Traceback" not in proc.stderr

"""Issue 31 part 6 on a real agent process: slow request heads and idle sockets do not
starve signed requests, idle sockets are closed, refusals are counted and the audit log
grows by a number of lines bounded by time, not by the flood."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agent.conftest import (
    LOOPBACK,
    SECRET,
    Agent,
    free_port,
    start_agent,
    stop_agent,
    wait_healthy,
)
from tests.agent.flood import closed_by_peer, fd_limit, headers_only_flood, idle_sockets
from tools.agent.auth import signed_headers
from tools.agent.door import DETAIL_LINES, SUMMARY_PERIOD_S, guarded_protocol

IDLE = 1100
SLOW = 33
FLOOD_S = 20.0


def signed_env(agent: Agent, tries: int = 3) -> int:
    """One signed /v1/env request (a new one per try); its status, or -1 if none came."""
    for _ in range(tries):
        body = json.dumps({"import_torch": False}).encode()
        headers = signed_headers(SECRET.encode(), "POST", agent.target, "/v1/env", body,
                                 "slack:U1")
        try:
            r = httpx.post(agent.url + "/v1/env", content=body, timeout=60,
                           headers={**headers, "Content-Type": "application/json"})
            return r.status_code
        except httpx.TransportError:
            time.sleep(1)
    return -1


def _lines(agent: Agent, start: int) -> list[dict]:
    return [json.loads(x) for x in agent.audit_lines()[start:]]


def test_slow_heads_and_idle_sockets_do_not_starve_signed_requests(tmp_path: Path) -> None:
    if fd_limit() < IDLE + 3 * SLOW + 400:
        pytest.skip(f"ulimit -n is {fd_limit()}; this test holds {IDLE} idle sockets")
    agent = start_agent(tmp_path)
    port = int(agent.url.rsplit(":", 1)[1])
    try:
        before = len(agent.audit_lines())
        t0 = time.monotonic()
        codes: list[int] = []
        # 33 heads with fresh, well-formed (wrong) signature headers and no body, reopened
        # after each 408; 33 unsigned ones (bounded in count); 1,100 sockets that say nothing
        with idle_sockets(port, IDLE) as idle, \
                headers_only_flood(port, SLOW, FLOOD_S, forged=True) as forged, \
                headers_only_flood(port, SLOW, FLOOD_S, max_rounds=100) as unsigned:
            assert len(idle) == IDLE
            time.sleep(2)
            for _ in range(4):
                codes.append(signed_env(agent))
                time.sleep(1)
            closed = closed_by_peer(idle, wait=40)
        assert codes == [200] * len(codes)
        assert closed == IDLE  # the agent closed every idle socket
        assert forged.statuses.get("408", 0) >= SLOW  # the slow heads ran, and were refused
        assert unsigned.statuses.get("401", 0) >= SLOW

        def counted() -> int:
            """408s accounted for in the audit log: summaries' counts plus full lines."""
            lines = _lines(agent, before)
            return sum(x.get("counts", {}).get("408", 0) for x in lines) + sum(
                1 for x in lines if x.get("status") == 408)

        deadline = time.monotonic() + 4 * SUMMARY_PERIOD_S
        while counted() < forged.statuses["408"] and time.monotonic() < deadline:
            time.sleep(0.5)
        assert counted() >= forged.statuses["408"]  # every refusal counted
        elapsed = time.monotonic() - t0
        lines = _lines(agent, before)
        summaries = [x for x in lines if x.get("event") == "refusal_summary"]
        assert summaries and summaries[0]["remote"] == "127.0.0.1"
        assert "refused" in summaries[0]["message"]
        # one source: at most DETAIL_LINES full lines plus one summary per period, plus
        # one line per allowed request; the floods sent thousands of requests
        bound = len(codes) + (elapsed / SUMMARY_PERIOD_S + 2) * (DETAIL_LINES + 1)
        refused = forged.opened + unsigned.opened + IDLE
        assert len(lines) <= bound < refused
        assert sum(1 for x in lines if x.get("decision") == "allow") == len(codes)
    finally:
        stop_agent(agent)


@contextlib.contextmanager
def guarded_agent(tmp_path: Path, base: type | None = None) -> Iterator[tuple[Agent, Any]]:
    """create_app under uvicorn in a thread behind the door's protocol (as server.py
    serves it), on `base` (uvicorn's HTTP protocol class; default as uvicorn picks)."""
    import uvicorn

    from tools.agent.app import create_app

    app = create_app(secret=SECRET.encode(), audit_log=tmp_path / "audit.jsonl")
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host=LOOPBACK, port=port, log_level="error",
                                           http=guarded_protocol(app.state.door, base)))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    agent = Agent("inproc", f"http://{LOOPBACK}:{port}", tmp_path / "audit.jsonl")
    try:
        wait_healthy(agent.url)
        yield agent, app
    finally:
        server.should_exit = True
        thread.join(10)


def trickle(port: int) -> float | None:
    """A request head sent one header a second: seconds until the server closed it."""
    t0 = time.monotonic()
    with socket.create_connection((LOOPBACK, port), timeout=5) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        for _ in range(40):
            try:
                s.sendall(b"X-Slow: a\r\n")
                s.settimeout(1)
                if s.recv(1) == b"":
                    return time.monotonic() - t0
            except TimeoutError:
                continue
            except OSError:
                return time.monotonic() - t0
    return None


@pytest.mark.parametrize("protocol", ["h11", "httptools"])
def test_both_uvicorn_protocols_close_idle_sockets_and_serve_signed(tmp_path: Path,
                                                                    protocol: str) -> None:
    """The deployed image has plain uvicorn (h11); a dev install may have httptools."""
    if protocol == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol

        base: type = H11Protocol
    else:
        httptools_impl = pytest.importorskip("uvicorn.protocols.http.httptools_impl")
        base = httptools_impl.HttpToolsProtocol
    with guarded_agent(tmp_path, base) as (agent, _):
        port = int(agent.url.rsplit(":", 1)[1])
        with idle_sockets(port, 100) as idle, \
                headers_only_flood(port, 12, 10.0, forged=True, max_rounds=5) as slow:
            time.sleep(1)
            assert signed_env(agent) == 200
            assert closed_by_peer(idle, wait=30) == len(idle) == 100
        assert slow.statuses.get("408", 0) >= 12
        # cut off at the head timeout (10 s), not at the idle one, nor never
        took = trickle(port)
        assert took is not None and took >= 8
        # a head that never ends is cut off at the door's limit
        with socket.create_connection((LOOPBACK, port), timeout=10) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            try:
                for _ in range(100):
                    s.sendall(b"X-Pad: " + b"a" * 4000 + b"\r\n")
            except OSError:
                pass
            answer = s.recv(200)
        assert answer.split(b" ")[1] in (b"431", b"400")


def test_malformed_heads_are_counted(tmp_path: Path) -> None:
    """uvicorn's own 400 for a head it cannot parse is a refusal like the others."""
    with guarded_agent(tmp_path) as (agent, app):
        port = int(agent.url.rsplit(":", 1)[1])
        for _ in range(3):
            with socket.create_connection((LOOPBACK, port), timeout=10) as s:
                s.sendall(b"NOT HTTP AT ALL\r\n\r\n")
                assert s.recv(200).split(b" ")[1] == b"400"
        deadline = time.monotonic() + 10
        while app.state.door.refusals.total < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert app.state.door.refusals.total == 3


def test_denied_signed_requests_are_audited_at_a_bounded_rate(inprocess_agent: Agent) -> None:
    """Part 8: refusals after the signature checked out (403: may not force) and forged
    signatures (401) are written in full up to the budget, then summarised with who."""
    agent = inprocess_agent
    body = json.dumps({"force": True}).encode()
    before = len(agent.audit_lines())
    n = 120
    with httpx.Client(timeout=60) as client:
        for i in range(n):
            secret = SECRET if i % 2 else "not-the-secret-0123456789"
            headers = signed_headers(secret.encode(), "POST", agent.target, "/v1/probe/check",
                                     body, "slack:U1")
            r = client.post(agent.url + "/v1/probe/check", content=body,
                            headers={**headers, "Content-Type": "application/json"})
            assert r.status_code == (403 if i % 2 else 401)
    deadline = time.monotonic() + 4 * SUMMARY_PERIOD_S
    while time.monotonic() < deadline:
        lines = _lines(agent, before)
        summaries = {x["remote"]: x for x in lines if x.get("event") == "refusal_summary"}
        if len(summaries) == 2:
            break
        time.sleep(0.5)
    assert len(lines) == 2 * (DETAIL_LINES + 1)
    verified, forged = summaries["user slack:U1"], summaries["127.0.0.1"]
    assert verified["counts"] == {"403": n // 2} and forged["counts"] == {"401": n // 2}
    assert forged["claimed_users"] == ["slack:U1"] and "bad signature" in " ".join(
        forged["reasons"])
    full = [x for x in lines if "event" not in x]
    assert {x["status"] for x in full} == {401, 403}
    assert all(x["user"] == "slack:U1" for x in full if x["status"] == 403)
    assert all(x["user"] is None and x["claimed_user"] == "slack:U1"
               for x in full if x["status"] == 401)

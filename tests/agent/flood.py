"""Bounded loopback floods against an HTTP door (the agent or Slack's), for tests and by hand.

Every loop stops by itself: at a deadline and after a fixed number of rounds. Run as
`python -m tests.agent.flood` to start a real agent and print what a flood does to it.
"""

from __future__ import annotations

import contextlib
import resource
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

LOOPBACK = "127.0.0.1"


def fd_limit() -> int:
    """This process's soft limit on open files."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


@dataclass
class FloodStats:
    """What the headers-only flood saw: connections opened and the status lines answered."""

    opened: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, status: str) -> None:
        with self.lock:
            self.statuses[status] = self.statuses.get(status, 0) + 1


def _head(port: int, path: str, forged: bool) -> bytes:
    """A request head with `Content-Length: 100`; `forged`: with well-formed, fresh agent
    signature headers (a wrong signature), so only the body could show it is forged."""
    extra = ""
    if forged:
        extra = (f"X-Ncclbot-Timestamp: {int(time.time())}\r\n"
                 f"X-Ncclbot-Nonce: {secrets.token_urlsafe(18)}\r\n"
                 f"X-Ncclbot-User: slack:UFLOOD\r\nX-Ncclbot-Signature: v2={'0' * 64}\r\n")
    return (f"POST {path} HTTP/1.1\r\nHost: {LOOPBACK}:{port}\r\n{extra}"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n").encode()


def _headers_only_worker(port: int, path: str, stop: threading.Event, deadline: float,
                         max_rounds: int, stats: FloodStats, forged: bool) -> None:
    for _ in range(max_rounds):
        if stop.is_set() or time.monotonic() >= deadline:
            return
        try:
            with socket.create_connection((LOOPBACK, port), timeout=5) as s:
                with stats.lock:
                    stats.opened += 1
                s.sendall(_head(port, path, forged))
                s.settimeout(max(0.1, min(30.0, deadline - time.monotonic())))
                first = s.recv(64)
                stats.add(first.split(b" ", 2)[1].decode("latin-1") if first.count(b" ") >= 2
                          else "closed")
        except OSError:
            stats.add("error")
            time.sleep(0.05)


@contextlib.contextmanager
def headers_only_flood(port: int, conns: int = 33, seconds: float = 25.0,
                       path: str = "/v1/env", max_rounds: int = 100_000,
                       forged: bool = False) -> Iterator[FloodStats]:
    """`conns` connections that each send a request head with `Content-Length: 100` and no
    body, wait for the answer (or the close) and reconnect; for at most `seconds` and
    `max_rounds` rounds per connection, or until the block ends. `forged`: the heads carry
    well-formed, fresh (wrong) signature headers."""
    stats, stop = FloodStats(), threading.Event()
    deadline = time.monotonic() + seconds
    threads = [threading.Thread(target=_headers_only_worker, daemon=True,
                                args=(port, path, stop, deadline, max_rounds, stats, forged))
               for _ in range(conns)]
    for t in threads:
        t.start()
    try:
        yield stats
    finally:
        stop.set()
        for t in threads:
            t.join(40)


@contextlib.contextmanager
def idle_sockets(port: int, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections that never send a byte (closed when the block ends)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            try:
                socks.append(socket.create_connection((LOOPBACK, port), timeout=10))
            except OSError:
                break
        yield socks
    finally:
        for s in socks:
            s.close()


def closed_by_peer(socks: list[socket.socket], wait: float = 0.0) -> int:
    """How many of `socks` the server has closed (EOF or reset), waiting up to `wait` s."""
    import selectors

    closed, pending = 0, list(socks)
    deadline = time.monotonic() + wait
    with selectors.DefaultSelector() as sel:
        for s in pending:
            sel.register(s, selectors.EVENT_READ)
        while pending:
            timeout = max(0.0, deadline - time.monotonic())
            ready = sel.select(timeout)
            if not ready:
                break
            for key, _ in ready:
                s = key.fileobj
                assert isinstance(s, socket.socket)
                sel.unregister(s)
                pending.remove(s)
                try:
                    s.setblocking(False)
                    if s.recv(1) == b"":
                        closed += 1
                except BlockingIOError:
                    pass
                except OSError:
                    closed += 1
    return closed


def poll(fn: Callable[[], bool], rounds: int, pause: float = 0.5) -> int:
    """Call `fn` `rounds` times; how many returned True."""
    ok = 0
    for _ in range(rounds):
        ok += bool(fn())
        time.sleep(pause)
    return ok


def _main(forged: bool) -> None:  # pragma: no cover - measurement by hand
    import json
    import tempfile
    from pathlib import Path

    import httpx

    from tests.agent.conftest import SECRET, start_agent, stop_agent
    from tools.agent.auth import signed_headers

    with tempfile.TemporaryDirectory() as tmp:
        agent = start_agent(Path(tmp))
        port = int(agent.url.rsplit(":", 1)[1])

        def signed() -> tuple[int, float]:
            body = json.dumps({"import_torch": False}).encode()
            headers = signed_headers(SECRET.encode(), "POST", agent.target, "/v1/env", body,
                                     "cli:flood")
            t0 = time.monotonic()
            try:
                r = httpx.post(agent.url + "/v1/env", content=body, timeout=30,
                               headers={**headers, "Content-Type": "application/json"})
                return r.status_code, time.monotonic() - t0
            except httpx.HTTPError:
                return -1, time.monotonic() - t0

        try:
            before = len(agent.audit_lines())
            t0 = time.monotonic()
            codes: dict[int, int] = {}
            slowest = 0.0
            with idle_sockets(port, min(1100, fd_limit() - 200)) as idle, \
                    headers_only_flood(port, 33, 25, forged=forged) as stats:
                time.sleep(2)
                while time.monotonic() - t0 < 24:
                    code, took = signed()
                    codes[code] = codes.get(code, 0) + 1
                    slowest = max(slowest, took)
                    time.sleep(0.5)
                closed = closed_by_peer(idle, wait=1)
                print(f"idle sockets open: {len(idle)}, closed by the agent: {closed}")
            elapsed = time.monotonic() - t0
            time.sleep(11)
            grown = len(agent.audit_lines()) - before
            print(f"flood: {stats.opened} connections, answers {stats.statuses}")
            print(f"signed requests during {elapsed:.0f} s: {codes}, slowest {slowest:.1f} s")
            print(f"audit lines written: {grown}")
        finally:
            stop_agent(agent)


if __name__ == "__main__":  # pragma: no cover
    import sys

    _main(forged="--forged" in sys.argv)

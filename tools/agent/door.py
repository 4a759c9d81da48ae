"""The front door of an HTTP service that must not be starved: the node agent and Slack's
Events API endpoint (both served by uvicorn).

Three layers, none of which needs to know what a request is for:

* `Door` tracks every connection by source address. A connection must send a complete
  request head within `head_timeout_s` of connecting (or of its previous answer), and its
  first byte within `idle_timeout_s`; otherwise it is closed. Each source may hold
  `conns_per_source` connections that are not serving a verified request, and the process
  `max_conns` in all; past either, the oldest idle connection (then the oldest unverified
  one) of the heaviest source is closed to make room, so idle sockets cannot crowd out
  a client that has something to say. A request head over `max_head_bytes` is refused.
* `Door.admit` gives an unverified request (its body not read, its signature not checked)
  a lane: the normal lane (`unverified_per_source` and `max_unverified` at a time, the
  whole `body_timeout_s` to send a body up to the service's limit), or, when those are
  full, the fast lane: a body of at most `fast_max_body` bytes that arrives within
  `fast_body_timeout_s`. A signed client sends its head and small body at once, so it is
  verified and served however many slow requests hold the normal lane; the fast lane
  costs an attacker a connection per request and at most `fast_max_body` bytes each.
* `RefusalLog` counts every refusal and writes a bounded number of lines: per source (or
  user) and `period_s`, the first `detail_lines` refusals in full, then one summary line
  with the counts ("refused 5,123 requests from 127.0.0.1 in the last 10 s: 408 x5,001,
  ..."). Lines per period <= (detail_lines + 1) x (max_keys + 1), whatever the rate.

`guarded_protocol` wraps uvicorn's HTTP protocol class (httptools or h11) with the
connection layer; uvicorn's own `limit_concurrency` (503 before any audit) is not used.
"""

from __future__ import annotations

import asyncio
import resource
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: A lane: "normal" or "fast".
Lane = str
#: Seconds a refusal window lasts, and refusals per key and window written in full.
SUMMARY_PERIOD_S = 10.0
DETAIL_LINES = 20


def default_max_conns(reserve: int = 256, ceiling: int = 4096) -> int:
    """Connections the process may hold: half of the open-file limit left after `reserve`
    (subprocesses, log files), at most `ceiling`, at least 64."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        soft = 2 * ceiling + reserve
    return max(64, min(ceiling, (soft - reserve) // 2))


@dataclass(frozen=True)
class DoorLimits:
    """Timeouts and caps of one door (see the module docstring)."""

    idle_timeout_s: float = 5.0
    head_timeout_s: float = 10.0
    max_head_bytes: int = 64 * 1024
    conns_per_source: int = 64
    max_conns: int = field(default_factory=default_max_conns)
    unverified_per_source: int = 8
    max_unverified: int = 32
    body_timeout_s: float = 10.0
    fast_body_timeout_s: float = 2.0
    fast_max_body: int = 64 * 1024


@dataclass
class _Window:
    start: float
    total: int = 0
    detailed: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)
    users: list[str] = field(default_factory=list)


def _summary_text(key: str, total: int, seconds: float, counts: dict[str, int]) -> str:
    parts = ", ".join(f"{code} x{n:,}"
                      for code, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return (f"refused {total:,} requests or connections from {key} in the last "
            f"{seconds:.0f} s: {parts}")


class RefusalLog:
    """Counts refusals per key (a source address, or a verified user) and writes at most
    `detail_lines` full lines plus one summary line per key and period (see module doc).

    `write(**fields)` writes one line (an `AuditLog.write`, or a logger adapter). Summaries
    are written by a timer on the running event loop, or by the next `record` after the
    period when none runs, or by `flush(force=True)`."""

    MAX_REASONS = 10
    MAX_USERS = 5
    REASON_MAX = 160

    def __init__(self, write: Callable[..., None], period_s: float = SUMMARY_PERIOD_S,
                 detail_lines: int = DETAIL_LINES, max_keys: int = 256,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.write, self.period_s, self.detail_lines = write, period_s, detail_lines
        self.max_keys, self.clock = max_keys, clock
        self._windows: dict[str, _Window] = {}
        self._lock = threading.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._flushed = float("-inf")
        self.total = 0

    def record(self, key: str, code: str, reason: str,
               detail: Mapping[str, object] | None = None,
               user: str | None = None) -> None:
        """Count one refusal; write `detail` as its own line while the key's budget lasts."""
        now = self.clock()
        if now - self._flushed >= 1.0:
            self.flush()
        with self._lock:
            self.total += 1
            window = self._windows.get(key)
            if window is None:
                if len(self._windows) >= self.max_keys:
                    key = "(other sources)"
                window = self._windows.setdefault(key, _Window(start=now))
            window.total += 1
            window.counts[code] = window.counts.get(code, 0) + 1
            reason = reason[:self.REASON_MAX]
            if reason in window.reasons or len(window.reasons) < self.MAX_REASONS:
                window.reasons[reason] = window.reasons.get(reason, 0) + 1
            if user and user not in window.users and len(window.users) < self.MAX_USERS:
                window.users.append(user[:128])
            detailed = detail is not None and window.detailed < self.detail_lines
            if detailed:
                window.detailed += 1
        if detailed:
            assert detail is not None
            self.write(**detail)
        self._schedule()

    def flush(self, force: bool = False) -> None:
        """Write the summary of every window older than the period (every one if `force`)
        that counted more than it wrote in full, and start those keys afresh."""
        now = self._flushed = self.clock()
        with self._lock:
            due = [(k, w) for k, w in self._windows.items()
                   if force or now - w.start >= self.period_s]
            for k, _ in due:
                del self._windows[k]
        for key, w in due:
            if w.total <= w.detailed:
                continue
            seconds = max(now - w.start, 0.0)
            self.write(event="refusal_summary", remote=key, refused=w.total,
                       written_in_full=w.detailed, period_s=round(seconds, 1),
                       counts=w.counts, reasons=w.reasons, claimed_users=w.users,
                       message=_summary_text(key, w.total, max(seconds, self.period_s),
                                             w.counts))

    def _schedule(self) -> None:
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._timer = loop.call_later(self.period_s / 2, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self.flush()
        if self._windows:
            self._schedule()


@dataclass(eq=False)
class Conn:
    """One open connection as the door sees it."""

    source: str
    port: int
    opened: float
    close: Callable[[], None]
    busy: bool = False          # a request head is complete and its answer not yet sent
    verified: bool = False      # ... and that request's signature checked out
    since: float = 0.0          # when it last became idle or busy
    cycle: object | None = None


class Door:
    """Connection tracking and unverified-request lanes for one server (one event loop)."""

    def __init__(self, limits: DoorLimits | None = None, refusals: RefusalLog | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits or DoorLimits()
        self.refusals = refusals or RefusalLog(lambda **_: None)
        self.clock = clock
        self.by_source: dict[str, dict[int, Conn]] = {}
        self.by_peer: dict[tuple[str, int], Conn] = {}
        self.count = 0
        self.unverified: dict[str, int] = {}
        self.unverified_total = 0

    # connections
    def open(self, conn: Conn) -> bool:
        """Register `conn`; close others to make room. False: refuse it (nothing evictable)."""
        lim = self.limits
        conns = self.by_source.setdefault(conn.source, {})
        while sum(1 for c in conns.values() if not c.verified) >= lim.conns_per_source:
            if not self._evict(conn.source, f"over {lim.conns_per_source} connections from "
                               "this address"):
                break
        while self.count >= lim.max_conns:
            heaviest = max(self.by_source, key=lambda s: len(self.by_source[s]))
            if not self._evict(heaviest, f"server at {lim.max_conns} connections"):
                break
        # (evicting its last connection may have dropped the source's entry)
        conns = self.by_source.setdefault(conn.source, {})
        if (sum(1 for c in conns.values() if not c.verified) >= lim.conns_per_source
                or self.count >= lim.max_conns):
            self.refusals.record(conn.source, "conn_refused",
                                 "connection refused: every slot serves a request")
            if not conns:
                del self.by_source[conn.source]
            return False
        conn.since = conn.opened
        conns[id(conn)] = conn
        self.by_peer[(conn.source, conn.port)] = conn
        self.count += 1
        return True

    def closed(self, conn: Conn) -> None:
        """Forget `conn` (once; later calls do nothing)."""
        conns = self.by_source.get(conn.source)
        if conns is not None and conns.pop(id(conn), None) is not None:
            self.count -= 1
            if not conns:
                del self.by_source[conn.source]
        if self.by_peer.get((conn.source, conn.port)) is conn:
            del self.by_peer[(conn.source, conn.port)]

    def _evict(self, source: str, why: str) -> bool:
        conns = self.by_source.get(source) or {}
        idle = [c for c in conns.values() if not c.busy]
        pending = [c for c in conns.values() if c.busy and not c.verified]
        victims = sorted(idle, key=lambda c: c.since) or sorted(pending, key=lambda c: c.since)
        if not victims:
            return False
        victim = victims[0]
        self.closed(victim)
        self.refusals.record(source, "conn_evicted", f"connection closed: {why}")
        victim.close()
        return True

    def lookup(self, client: Sequence[object] | None) -> Conn | None:
        """The connection an ASGI scope's `client` (host, port) arrived on, if tracked."""
        if not client:
            return None
        host, port = client[0], client[1]
        return self.by_peer.get((str(host), port if isinstance(port, int) else -1))

    # unverified requests
    def admit(self, source: str, length: int | None) -> Lane | None:
        """A lane for one unverified request with `length` body bytes (None: not said),
        or None when both are full for it (the caller refuses it, 429)."""
        lim = self.limits
        if (self.unverified.get(source, 0) < lim.unverified_per_source
                and self.unverified_total < lim.max_unverified):
            self.unverified[source] = self.unverified.get(source, 0) + 1
            self.unverified_total += 1
            return "normal"
        if length is not None and length <= lim.fast_max_body:
            return "fast"
        return None

    def release(self, source: str, lane: Lane) -> None:
        if lane != "normal":
            return
        self.unverified_total -= 1
        left = self.unverified.get(source, 1) - 1
        if left > 0:
            self.unverified[source] = left
        else:
            self.unverified.pop(source, None)

    def timeout(self, lane: Lane) -> float:
        """Seconds a request in `lane` may take to send its body."""
        return self.limits.body_timeout_s if lane == "normal" else \
            self.limits.fast_body_timeout_s


_HEAD_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                   b"content-type: text/plain; charset=utf-8\r\ncontent-length: 24\r\n"
                   b"connection: close\r\n\r\nrequest head too large\r\n")


def base_protocol() -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class as its "auto" setting picks it (httptools, else h11)."""
    try:
        import httptools  # noqa: F401
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    return HttpToolsProtocol


def guarded_protocol(door: Door, base: type[asyncio.Protocol] | None = None) -> type[Any]:
    """`base` (uvicorn's HTTP protocol class) with `door`'s connection layer: tracked per
    source, closed when idle or slow to send a request head, evicted past the caps."""
    parent: Any = base or base_protocol()
    lim = door.limits

    class GuardedProtocol(parent):  # type: ignore[misc]
        _door_conn: Conn | None = None
        _door_timer: asyncio.TimerHandle | None = None
        _door_bytes = 0
        _door_idle_at = 0.0

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            client = self.client or ("?", 0)
            conn = Conn(source=str(client[0]), port=int(client[1]), opened=door.clock(),
                        close=self._door_close)
            if not door.open(conn):
                transport.abort()
                return
            self._door_conn = conn
            self._door_idle()

        def _door_close(self) -> None:
            self._door_cancel()
            self._door_conn = None  # no longer counted (the door dropped it)
            if not self.transport.is_closing():
                self.transport.close()

        def _door_cancel(self) -> None:
            if self._door_timer is not None:
                self._door_timer.cancel()
                self._door_timer = None

        def _door_idle(self) -> None:
            """Idle from now: a first byte within idle_timeout_s, a head within head_timeout_s."""
            self._door_cancel()
            self._door_bytes, self._door_idle_at = 0, door.clock()
            self._door_timer = self.loop.call_later(lim.idle_timeout_s, self._door_expire)

        def _door_expire(self) -> None:
            self._door_timer = None
            conn = self._door_conn
            if conn is None or conn.busy or self.transport.is_closing():
                return
            waited = door.clock() - self._door_idle_at
            if self._door_bytes and waited < lim.head_timeout_s:
                self._door_timer = self.loop.call_later(lim.head_timeout_s - waited,
                                                         self._door_expire)
                return
            door.refusals.record(conn.source, "conn_timeout",
                                 f"connection closed: no request within {lim.idle_timeout_s:g} s"
                                 if not self._door_bytes else "connection closed: request head "
                                 f"not complete within {lim.head_timeout_s:g} s")
            self.transport.close()

        def data_received(self, data: bytes) -> None:
            conn = self._door_conn
            if conn is not None and not conn.busy:
                self._door_bytes += len(data)
            was_closing = self.transport.is_closing()
            super().data_received(data)
            self._door_sync()
            if conn is not None and not conn.busy and not was_closing \
                    and self.transport.is_closing():
                # uvicorn answered 400 itself (a head it could not parse, or over h11's size)
                door.refusals.record(conn.source, "400", "malformed request head")
                return
            # still no complete head after this many bytes (one read is at most 256 KiB)
            if conn is not None and not conn.busy and self._door_bytes > lim.max_head_bytes \
                    and not self.transport.is_closing():
                door.refusals.record(conn.source, "431", "request head over "
                                     f"{lim.max_head_bytes} bytes")
                self._door_cancel()
                self.transport.write(_HEAD_TOO_LARGE)
                self.transport.close()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._door_sync()

        def _door_sync(self) -> None:
            conn, cycle = self._door_conn, self.cycle
            if conn is None:
                return
            busy = cycle is not None and not cycle.response_complete
            if busy and (not conn.busy or cycle is not conn.cycle):
                conn.busy, conn.verified, conn.cycle = True, False, cycle
                conn.since = door.clock()
                self._door_cancel()
            elif not busy and conn.busy:
                conn.busy = conn.verified = False
                conn.since = door.clock()
                if not self.transport.is_closing():
                    self._door_idle()

        def connection_lost(self, exc: Exception | None) -> None:
            self._door_cancel()
            if self._door_conn is not None:
                door.closed(self._door_conn)
                self._door_conn = None
            super().connection_lost(exc)

    GuardedProtocol.__name__ = GuardedProtocol.__qualname__ = f"Guarded{parent.__name__}"
    return GuardedProtocol

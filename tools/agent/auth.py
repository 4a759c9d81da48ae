"""Request signing shared by the node agent and the bot's client (standard library only).

Every request except health carries four headers::

    X-Ncclbot-Timestamp: <unix seconds>
    X-Ncclbot-Nonce:     <16-128 chars of [A-Za-z0-9_-], unique per request>
    X-Ncclbot-User:      <who asked, e.g. slack:U123 or cli:alice>
    X-Ncclbot-Signature: v2=<hex HMAC-SHA256(secret, canonical string)>

The canonical string is these lines joined by "\\n"::

    ncclbot-v2
    <METHOD upper case>
    <target: the Host header as the client sends it, lower case, e.g. 10.0.0.17:8470>
    <path, plus "?" and the raw query string when there is one>
    <timestamp>
    <nonce>
    <user>
    <hex SHA-256 of the body bytes>

The target binds a request to the node it was meant for: the agent checks that the
signed Host names this agent (`TargetCheck`), so a request captured on its way to node
A is refused by node B even within the replay window. The agent also refuses
timestamps from before it started (minus a small skew): its nonce cache is in memory,
so a request captured before a restart could otherwise be replayed after it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

SCHEME = "ncclbot-v2"
SIG_PREFIX = "v2="
H_TIMESTAMP = "x-ncclbot-timestamp"
H_NONCE = "x-ncclbot-nonce"
H_USER = "x-ncclbot-user"
H_SIGNATURE = "x-ncclbot-signature"
MAX_SKEW_S = 300
#: How far before the agent's start a request's timestamp may be (whole-second timestamps
#: and small clock differences); older ones may predate the in-memory nonce cache.
START_SKEW_S = 2
_NONCE = re.compile(r"^[A-Za-z0-9_-]{16,128}$")
_USER = re.compile(r"^[\w.@:+/-]{1,128}$")


class AuthError(Exception):
    """A request that failed verification; the message says why (safe to return)."""


def canonical(method: str, target: str, path: str, timestamp: str, nonce: str, user: str,
              body: bytes) -> bytes:
    """The exact bytes that are signed."""
    digest = hashlib.sha256(body).hexdigest()
    return "\n".join([SCHEME, method.upper(), target.lower(), path, timestamp, nonce, user,
                      digest]).encode()


def sign(secret: bytes, method: str, target: str, path: str, timestamp: str, nonce: str,
         user: str, body: bytes) -> str:
    """The signature header value for one request."""
    mac = hmac.new(secret, canonical(method, target, path, timestamp, nonce, user, body),
                   hashlib.sha256)
    return SIG_PREFIX + mac.hexdigest()


def signed_headers(secret: bytes, method: str, target: str, path: str, body: bytes, user: str,
                   now: float | None = None, nonce: str | None = None) -> dict[str, str]:
    """The four headers a client adds to one request; `target` is its Host header value."""
    if not _USER.match(user):
        raise AuthError(f"user {user!r} is not a valid identity "
                        "(1-128 of letters, digits, ._@:+/-)")
    ts = str(int(time.time() if now is None else now))
    nonce = nonce or secrets.token_urlsafe(18)
    return {
        "X-Ncclbot-Timestamp": ts,
        "X-Ncclbot-Nonce": nonce,
        "X-Ncclbot-User": user,
        "X-Ncclbot-Signature": sign(secret, method, target, path, ts, nonce, user, body),
    }


class NonceCache:
    """Nonces seen within the timestamp window; bounded, thread-safe."""

    def __init__(self, max_entries: int = 100_000, ttl_s: float = 2 * MAX_SKEW_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.max_entries, self.ttl_s, self.clock = max_entries, ttl_s, clock
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, nonce: str) -> None:
        """Remember `nonce`; AuthError when it was seen before or the cache is full."""
        now = self.clock()
        with self._lock:
            while self._seen and next(iter(self._seen.values())) < now:
                self._seen.popitem(last=False)
            if nonce in self._seen:
                raise AuthError("replayed request: nonce already used")
            if len(self._seen) >= self.max_entries:
                raise AuthError("too many requests in the replay window; retry later")
            self._seen[nonce] = now + self.ttl_s

    def __len__(self) -> int:
        return len(self._seen)


@dataclass(frozen=True)
class Verified:
    user: str
    timestamp: int
    nonce: str


def verify(secret: bytes, method: str, target: str, path: str, headers: Mapping[str, str],
           body: bytes, nonces: NonceCache, now: float | None = None,
           max_skew_s: int = MAX_SKEW_S, not_before: float | None = None) -> Verified:
    """Check one request; `headers` keys lower case, `target` its Host header. AuthError
    says what is wrong. `not_before`: refuse timestamps older than this (the agent's start
    minus START_SKEW_S). Whether `target` names this agent is the caller's check."""
    ts, nonce, user, sig = precheck(headers, now, max_skew_s, not_before)
    expected = sign(secret, method, target, path, ts, nonce, user, body)
    if not hmac.compare_digest(expected, sig):
        raise AuthError("bad signature (is the shared secret the same on bot and agent, and "
                        "was the request signed for this node?)")
    nonces.add(nonce)
    return Verified(user=user, timestamp=int(ts), nonce=nonce)


def precheck(headers: Mapping[str, str], now: float | None = None,
             max_skew_s: int = MAX_SKEW_S, not_before: float | None = None
             ) -> tuple[str, str, str, str]:
    """Everything `verify` checks that needs neither the secret nor the body: the four
    headers present and well formed, the timestamp fresh. AuthError says what is wrong;
    otherwise (timestamp, nonce, user, signature). The agent runs this before it reads a
    body, so an unsigned or stale request costs no body read."""
    ts, nonce = headers.get(H_TIMESTAMP), headers.get(H_NONCE)
    user, sig = headers.get(H_USER), headers.get(H_SIGNATURE)
    if not (ts and nonce and user and sig):
        raise AuthError("unsigned request: X-Ncclbot-Timestamp, -Nonce, -User and -Signature "
                        "headers are required")
    if not ts.isdigit() or len(ts) > 12:
        raise AuthError("malformed timestamp")
    if not _NONCE.match(nonce):
        raise AuthError("malformed nonce")
    if not _USER.match(user):
        raise AuthError("malformed user")
    if not sig.startswith(SIG_PREFIX):
        raise AuthError(f"unsupported signature scheme (expected {SIG_PREFIX}...; the bot and "
                        "the agent must run the same ncclbot version)")
    clock = time.time() if now is None else now
    skew = abs(clock - int(ts))
    if skew > max_skew_s:
        raise AuthError(f"stale request: timestamp {skew:.0f} s off (limit {max_skew_s} s); "
                        "check the clocks (NTP)")
    if not_before is not None and int(ts) < not_before:
        raise AuthError("stale request: signed before this agent started (a replay across a "
                        "restart?); send a new request")
    return ts, nonce, user, sig


MIN_SECRET_BYTES = 16


def load_secret(secret: str | None, secret_file: str | os.PathLike[str] | None) -> bytes:
    """The shared secret from a value or a file (first line); ValueError when missing/short."""
    if secret is None and secret_file is not None:
        try:
            with open(secret_file, encoding="utf-8") as fh:
                secret = fh.readline().strip()
        except OSError as exc:
            raise ValueError(f"cannot read the agent secret file {secret_file}: "
                             f"{exc.strerror}") from exc
    if not secret:
        raise ValueError("no agent secret: set NCCLBOT_AGENT_SECRET or NCCLBOT_AGENT_SECRET_FILE")
    raw = secret.encode()
    if len(raw) < MIN_SECRET_BYTES:
        raise ValueError(f"the agent secret is too short (under {MIN_SECRET_BYTES} bytes); "
                         "generate one with `python -c 'import secrets; "
                         "print(secrets.token_urlsafe(32))'`")
    return raw

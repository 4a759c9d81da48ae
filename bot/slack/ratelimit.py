"""Sliding-window rate limits, keyed by user or node (in memory, thread-safe)."""

from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.config import Settings


class RateLimiter:
    """At most `limit` events per `window_s` seconds for each key."""

    def __init__(self, limit: int, window_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.window_s = window_s
        self._clock = clock
        self._events: dict[str, deque[float]] = defaultdict(deque)
        self._lock = threading.Lock()

    def hit(self, key: str) -> float:
        """Record an event; return 0 when allowed, else the seconds to wait."""
        now = self._clock()
        with self._lock:
            q = self._events[key]
            while q and q[0] <= now - self.window_s:
                q.popleft()
            if len(q) >= self.limit:
                return max(0.1, q[0] + self.window_s - now)
            q.append(now)
            return 0.0


class Limits:
    """The bot's limits: analyses per user, probes per user, probes per node."""

    def __init__(self, asks_per_user: tuple[int, float] = (30, 600.0),
                 probes_per_user: tuple[int, float] = (6, 600.0),
                 probes_per_node: tuple[int, float] = (4, 600.0)) -> None:
        self.asks_per_user = RateLimiter(*asks_per_user)
        self.probes_per_user = RateLimiter(*probes_per_user)
        self.probes_per_node = RateLimiter(*probes_per_node)
        self._busy: set[str] = set()
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        """NCCLBOT_SLACK_ASKS_PER_USER, _PROBES_PER_USER, _PROBES_PER_NODE per
        NCCLBOT_SLACK_RATE_WINDOW_S seconds."""
        window = float(settings.slack_rate_window_s)
        return cls(asks_per_user=(settings.slack_asks_per_user, window),
                   probes_per_user=(settings.slack_probes_per_user, window),
                   probes_per_node=(settings.slack_probes_per_node, window))

    def probe(self, user: str, node: str) -> str | None:
        """Check both probe limits; None when allowed, else the refusal reason."""
        wait = self.probes_per_user.hit(f"user:{user}")
        if wait:
            return f"you have run too many diagnostics; try again in {wait:.0f} s"
        wait = self.probes_per_node.hit(f"node:{node}")
        if wait:
            return f"{node} has had too many diagnostics; try again in {wait:.0f} s"
        return None

    def hang(self, user: str, nodes: list[str]) -> str | None:
        """`/nccl hang` on several nodes counts once for the person and once per node."""
        wait = self.probes_per_user.hit(f"user:{user}")
        if wait:
            return f"you have run too many diagnostics; try again in {wait:.0f} s"
        for node in nodes:
            if wait := self.probes_per_node.hit(f"node:{node}"):
                return f"{node} has had too many diagnostics; try again in {wait:.0f} s"
        return None

    def claim_node(self, node: str) -> bool:
        """One diagnostic per node at a time; False when one is already running."""
        with self._lock:
            if node in self._busy:
                return False
            self._busy.add(node)
            return True

    def release_node(self, node: str) -> None:
        with self._lock:
            self._busy.discard(node)

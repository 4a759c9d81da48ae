"""One probe at a time per node: a non-blocking lock that remembers who holds it and how
far its probe has got."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timezone

from tools.params import ProbeProgress


@dataclass(frozen=True)
class Holder:
    user: str
    since: str
    what: str


class NodeBusyError(Exception):
    def __init__(self, holder: Holder) -> None:
        super().__init__(f"node busy: {holder.what} by {holder.user} since {holder.since}")
        self.holder = holder


class ProbeLock:
    """`with lock.hold(user, what):` runs the block or raises NodeBusyError naming the holder."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.holder: Holder | None = None
        self.progress: ProbeProgress | None = None

    def report(self, progress: ProbeProgress) -> None:
        """The running probe's latest position (`tools.probe.launch.sweep_position`)."""
        self.progress = progress

    def acquire(self, user: str, what: str = "probe") -> Holder:
        if not self._lock.acquire(blocking=False):
            holder = self.holder
            raise NodeBusyError(holder or Holder("unknown", "unknown", what))
        self.holder = Holder(user, datetime.now(timezone.utc).isoformat(timespec="seconds"), what)
        self.progress = None
        return self.holder

    def release(self) -> None:
        self.holder, self.progress = None, None
        self._lock.release()

    def hold(self, user: str, what: str = "probe") -> _Held:
        return _Held(self, user, what)


class _Held:
    def __init__(self, lock: ProbeLock, user: str, what: str) -> None:
        self.lock, self.user, self.what = lock, user, what

    def __enter__(self) -> Holder:
        return self.lock.acquire(self.user, self.what)

    def __exit__(self, *exc: object) -> None:
        self.lock.release()

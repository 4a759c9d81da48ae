"""One hang sample per node at a time: a second identical request (a client's retry, or a
colleague asking the same) joins the running sample and gets its result; a different one is
told who is sampling since when."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Generic, TypeVar

T = TypeVar("T")


class SampleRunningError(Exception):
    """Another hang sample (with other parameters) runs here, or too many wait for one."""

    def __init__(self, user: str, since: str, why: str) -> None:
        super().__init__(why)
        self.user, self.since, self.why = user, since, why


@dataclass
class _Run(Generic[T]):
    key: str
    user: str
    since: str
    done: threading.Event = field(default_factory=threading.Event)
    result: T | None = None
    error: BaseException | None = None
    waiters: int = 0


def request_key(params: Mapping[str, object]) -> str:
    """Requests with the same parameters are the same sample."""
    return json.dumps(params, sort_keys=True, default=str)


class SingleFlight(Generic[T]):
    """Runs one call at a time; callers with the same key while it runs share its result."""

    def __init__(self, max_waiters: int = 8) -> None:
        self.max_waiters = max_waiters
        self._lock = threading.Lock()
        self._run: _Run[T] | None = None

    def run(self, key: str, user: str, fn: Callable[[], T], wait_s: float) -> tuple[T, bool]:
        """(the result, whether it was joined rather than run here); SampleRunningError when
        a different call runs, too many wait, or the running one outlasts `wait_s`."""
        with self._lock:
            run = self._run
            if run is None:
                run = self._run = _Run(key, user, datetime.now(timezone.utc).isoformat(
                    timespec="seconds"))
                mine = True
            elif run.key != key:
                raise SampleRunningError(run.user, run.since, "another hang sample runs here")
            elif run.waiters >= self.max_waiters:
                raise SampleRunningError(run.user, run.since, "too many wait for the running "
                                         "hang sample")
            else:
                run.waiters += 1
                mine = False
        if not mine:
            if not run.done.wait(wait_s):
                raise SampleRunningError(run.user, run.since, "the running hang sample did "
                                         "not finish in time")
            if run.error is not None:
                raise run.error
            assert run.result is not None
            return run.result, True
        try:
            run.result = fn()
            return run.result, False
        except BaseException as exc:
            run.error = exc
            raise
        finally:
            with self._lock:
                self._run = None
            run.done.set()

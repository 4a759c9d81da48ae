"""Fair scheduling of the Slack work: one user's huge uploads never hold everyone else up.

`FairScheduler` runs jobs on a bounded pool of workers. Each user has at most `per_user`
jobs running and `queue_per_user` waiting; a free worker takes the next waiting job of the
next user in turn (round-robin over the users with work waiting), so a user with ten
queued zip bombs gets one worker while everyone else's questions go by. What is over a
user's queue is refused at once (the caller tells the person), never silently dropped.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum

log = logging.getLogger(__name__)

Job = Callable[[], None]


class Admission(Enum):
    """What `FairScheduler.submit` did with a job."""

    STARTED = "started"
    QUEUED = "queued"
    REFUSED = "refused"


@dataclass(frozen=True)
class Task:
    """A started job: calling it runs the job, then frees its worker for the next one."""

    user: str
    job: Job
    scheduler: FairScheduler

    def __call__(self) -> None:
        try:
            self.job()
        except Exception:  # a job's failure is its own; the worker goes on
            log.exception("a scheduled job for %s failed", self.user)
        finally:
            self.scheduler._done(self.user)


#: Starts a task on some thread (by default the scheduler's own pool); tests pass their own.
Runner = Callable[[Task], None]


class FairScheduler:
    """At most `workers` jobs at a time, `per_user` of them per user, `queue_per_user`
    more waiting per user, served round-robin across users. Thread-safe."""

    def __init__(self, workers: int = 8, per_user: int = 1, queue_per_user: int = 4,
                 name: str = "ncclbot-work", runner: Runner | None = None) -> None:
        if workers < 1 or per_user < 1 or queue_per_user < 0:
            raise ValueError("workers and per_user must be >= 1, queue_per_user >= 0")
        self.workers, self.per_user, self.queue_per_user = workers, per_user, queue_per_user
        self._pool = None if runner else ThreadPoolExecutor(workers, thread_name_prefix=name)
        self._runner: Runner = runner or self._submit_to_pool
        self._running: dict[str, int] = {}
        self._waiting: dict[str, deque[Job]] = {}
        self._turns: deque[str] = deque()  # users with jobs waiting, next in turn first
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, user: str, job: Job) -> Admission:
        """Run `job` for `user` now, later (in turn), or not at all (the user's queue is
        full, or the scheduler is shut down)."""
        with self._lock:
            if self._closed:
                return Admission.REFUSED
            if self._can_start(user) and not self._waiting.get(user):
                self._running[user] = self._running.get(user, 0) + 1
                start, admitted = [job], Admission.STARTED
            else:
                queue = self._waiting.setdefault(user, deque())
                if len(queue) >= self.queue_per_user:
                    if not queue:
                        del self._waiting[user]
                    return Admission.REFUSED
                queue.append(job)
                if user not in self._turns:
                    self._turns.append(user)
                start, admitted = [], Admission.QUEUED
        for j in start:
            self._runner(Task(user, j, self))
        return admitted

    def running(self, user: str) -> int:
        with self._lock:
            return self._running.get(user, 0)

    def waiting(self, user: str) -> int:
        with self._lock:
            return len(self._waiting.get(user, ()))

    def shutdown(self, wait: bool = True) -> None:
        """Drop the waiting jobs and refuse new ones; running jobs finish (`wait`: first)."""
        with self._lock:
            self._closed = True
            self._waiting.clear()
            self._turns.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=True)

    # -- inside ------------------------------------------------------------------------------
    def _busy(self) -> int:
        return sum(self._running.values())

    def _can_start(self, user: str) -> bool:
        return self._busy() < self.workers and self._running.get(user, 0) < self.per_user

    def _next(self) -> tuple[str, Job] | None:
        """The next job to start, round-robin over users with work waiting (lock held)."""
        if self._busy() >= self.workers:
            return None
        for _ in range(len(self._turns)):
            user = self._turns.popleft()
            queue = self._waiting[user]
            if self._running.get(user, 0) >= self.per_user:
                self._turns.append(user)  # keeps its place behind the others
                continue
            job = queue.popleft()
            if queue:
                self._turns.append(user)
            else:
                del self._waiting[user]
            self._running[user] = self._running.get(user, 0) + 1
            return user, job
        return None

    def _done(self, user: str) -> None:
        with self._lock:
            left = self._running.get(user, 0) - 1
            if left > 0:
                self._running[user] = left
            else:
                self._running.pop(user, None)
            ready = []
            while not self._closed and (nxt := self._next()) is not None:
                ready.append(nxt)
        for u, j in ready:
            self._runner(Task(u, j, self))

    def _submit_to_pool(self, task: Task) -> None:
        assert self._pool is not None
        try:
            self._pool.submit(task)
        except RuntimeError:  # shut down meanwhile: the job is dropped like the waiting ones
            log.info("scheduler shut down; a job was dropped")

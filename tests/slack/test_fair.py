"""The fair scheduler's rule, with a runner the test drives: which job starts when, never
how long anything takes."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from bot.slack.fair import Admission, FairScheduler, Task


@dataclass
class Named:
    """A job known by its name (raises when `fail`)."""

    name: str
    fail: bool = False

    def __call__(self) -> None:
        if self.fail:
            raise RuntimeError("bad log")


def scheduler(workers: int, per_user: int, queue: int
              ) -> tuple[FairScheduler, list[str], dict[str, Task]]:
    """A scheduler whose started jobs are held by name (`running`) until the test runs
    one, which finishes it and frees its worker; `started`: names in the order started."""
    started: list[str] = []
    running: dict[str, Task] = {}

    def runner(task: Task) -> None:
        assert isinstance(task.job, Named)
        started.append(task.job.name)
        running[task.job.name] = task

    return FairScheduler(workers, per_user, queue, runner=runner), started, running


def named(name: str) -> Named:
    return Named(name)


def test_one_users_backlog_does_not_hold_up_others() -> None:
    fair, started, running = scheduler(workers=2, per_user=1, queue=3)
    assert fair.submit("bomber", named("b1")) is Admission.STARTED
    for n in ("b2", "b3", "b4"):
        assert fair.submit("bomber", named(n)) is Admission.QUEUED
    assert fair.submit("alice", named("a1")) is Admission.STARTED  # the second worker
    assert fair.submit("bob", named("o1")) is Admission.QUEUED  # both workers busy
    assert fair.submit("carol", named("c1")) is Admission.QUEUED
    assert started == ["b1", "a1"]
    # a worker frees: the next user in turn who is under the limit, not the bomber again
    running.pop("a1")()
    assert started[-1] == "o1"
    running.pop("b1")()  # the bomber's worker: carol had waited longer than the bomber
    assert started[-1] == "c1"
    running.pop("o1")()
    assert started[-1] == "b2"  # only now the bomber's second
    assert (fair.running("bomber"), fair.waiting("bomber")) == (1, 2)


def test_round_robin_between_users_with_queues() -> None:
    fair, started, running = scheduler(workers=1, per_user=1, queue=5)
    fair.submit("x", named("x1"))
    for n in ("x2", "x3"):
        fair.submit("x", named(n))
    for n in ("y1", "y2"):
        fair.submit("y", named(n))
    fair.submit("z", named("z1"))
    while running:
        running.pop(started[-1])()
    assert started == ["x1", "x2", "y1", "z1", "x3", "y2"]


def test_per_user_limit_and_full_queue_is_refused() -> None:
    fair, started, running = scheduler(workers=4, per_user=2, queue=1)
    assert [fair.submit("u", named(n)) for n in ("u1", "u2", "u3", "u4")] == [
        Admission.STARTED, Admission.STARTED, Admission.QUEUED, Admission.REFUSED]
    assert started == ["u1", "u2"]  # two workers stay free for others
    assert fair.submit("v", named("v1")) is Admission.STARTED
    running.pop("u1")()
    assert started[-1] == "u3"
    assert fair.submit("u", named("u5")) is Admission.QUEUED  # room in the queue again


def test_a_failing_job_frees_its_worker() -> None:
    fair, started, running = scheduler(workers=1, per_user=1, queue=1)

    fair.submit("u", Named("boom", fail=True))
    fair.submit("u", named("next"))
    running.pop("boom")()  # logged, not raised
    assert started == ["boom", "next"]


def test_shutdown_drops_waiting_and_refuses_new() -> None:
    fair, started, _ = scheduler(workers=1, per_user=1, queue=2)
    fair.submit("u", named("u1"))
    fair.submit("u", named("u2"))
    fair.shutdown()
    assert fair.waiting("u") == 0
    assert fair.submit("w", named("w1")) is Admission.REFUSED
    assert started == ["u1"]


def test_sizes_must_be_positive() -> None:
    with pytest.raises(ValueError):
        FairScheduler(workers=0)

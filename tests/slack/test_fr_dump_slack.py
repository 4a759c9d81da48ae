"""Crafted Flight Recorder dumps through the Slack app over real HTTP (issue 31): the bot
stays small and answering (/livez), the dumps become notes, and the thread still works."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.slack.serve import Health, http_server
from tests.logs.crafted_dumps import crafted
from tests.slack.conftest import ONCALL, Poster, block_text, crash_log
from tests.slack.fake_slack import FakeSlack


def _crafted(kind: str) -> tuple[str, bytes]:
    return next((n, d) for n, d, _ in crafted()
                if n.split("_", 1)[1].rsplit("_fr_trace_", 1)[0] == kind)


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


class Watch:
    """Polls the bot's /livez and its RSS (this process: the app runs in it) meanwhile."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.start_kib = _rss_kib()
        self.peak_kib = self.start_kib
        self.polls = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_kib = max(self.peak_kib, _rss_kib())
            try:
                with urllib.request.urlopen(f"{self.base}/livez", timeout=10) as r:
                    if r.status != 200:
                        self.failures.append(f"HTTP {r.status}")
            except OSError as exc:
                self.failures.append(repr(exc))
            self.polls += 1
            self._stop.wait(0.05)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)


@contextmanager
def served(make_app: Any, tweak: Any = None) -> Iterator[tuple[Poster, str, Any]]:
    app, deps = make_app(http=True, tweak=tweak)
    server = http_server(app, "127.0.0.1", 0, health=Health(store_ping=deps.store.ping,
                                                             ready=True))
    base = f"http://127.0.0.1:{server.port}"
    try:
        yield Poster(f"{base}/slack/events", app, deps.settings, deps), base, deps
    finally:
        server.stop()


def _thread_text(slack: FakeSlack, ts: str) -> str:
    return " ".join(block_text(m.get("blocks")) + str(m.get("text", ""))
                    for m in slack.thread("C1", ts))


def _answered(slack: FakeSlack, ts: str, word: str) -> bool:
    return any(word in block_text(m.get("blocks")) and "ncclbot_feedback_up" in block_text(
        m.get("blocks")) for m in slack.thread("C1", ts))


def test_the_memo_and_laughs_dumps_leave_the_bot_up_and_the_thread_usable(
        slack: FakeSlack, make_app: Any) -> None:
    memo_name, memo = _crafted("memo_8_bytes")
    laughs_name, laughs = _crafted("laughs_11x10")
    with served(make_app) as (poster, base, deps), Watch(base) as watch:
        files = [slack.add_file(memo_name, memo), slack.add_file(laughs_name, laughs)]
        status, _ = poster.event({"type": "app_mention", "user": "UALICE", "channel": "C1",
                                  "ts": "31.1", "text": "<@UBOT> why is it stuck?",
                                  "files": files})
        assert status == 200
        # no usable input: the answer says why, file by file
        slack.wait_for(lambda: "could not analyze" in _thread_text(slack, "31.1"), timeout=120)
        said = _thread_text(slack, "31.1")
        assert f"{memo_name}: refused: memo index" in said and laughs_name in said, said
        # a good log posted later in the same thread is answered
        good = slack.add_file("train.log", crash_log())
        poster.event({"type": "app_mention", "user": "UALICE", "channel": "C1", "ts": "31.2",
                      "thread_ts": "31.1", "text": "<@UBOT> and this one?", "files": [good]})
        slack.wait_for(lambda: _answered(slack, "31.1", "rank_crashed"), timeout=120)
        # the thread's answer over all its logs: the good log's diagnosis, the dumps as notes
        notes = _notes(deps, "31.1")
        assert any(memo_name in n and "memo index" in n for n in notes), notes
        assert any(laughs_name in n and "billion laughs" in n for n in notes), notes
    assert watch.polls > 0 and watch.failures == []
    assert watch.peak_kib - watch.start_kib < 100 * 1024, (watch.start_kib, watch.peak_kib)
    assert "Something went wrong" not in _thread_text(slack, "31.1")


def _notes(deps: Any, thread_ts: str | None = None) -> list[str]:
    """The notes of the answers stored in channel C1 (in one thread)."""
    with deps.store.db.tx() as db:
        rows = db.execute("SELECT id, thread_ts FROM answers WHERE channel=?", ("C1",)
                          ).fetchall()
    answers = [deps.store.answer(r[0]) for r in rows if thread_ts in (None, r[1])]
    return [n for a in answers if a is not None for n in a.notes]


def test_a_log_whose_answer_failed_leaves_the_thread(slack: FakeSlack, make_app: Any
                                                    ) -> None:
    """Every message of a thread reads all of the thread's logs again: one whose analysis
    fails (here a fault put into the real analyzer for one file name) is set aside, so the
    thread's later messages are still answered."""

    def tweak(deps: Any) -> None:
        real = deps.troubleshooter.analyses.analyze

        def analyze(paths: Any) -> Any:
            if any(str(p).endswith("boom.log") for p in paths):
                raise RuntimeError("a fault in the analysis")
            return real(paths)

        deps.troubleshooter.analyses.analyze = analyze

    with served(make_app, tweak) as (poster, _, _):
        boom = slack.add_file("boom.log", b"nothing to see\n")
        poster.event({"type": "app_mention", "user": "UALICE", "channel": "C1", "ts": "32.1",
                      "text": "<@UBOT> why?", "files": [boom]})
        slack.wait_for(lambda: "set aside" in _thread_text(slack, "32.1"), timeout=120)
        assert "boom.log" in _thread_text(slack, "32.1")
        good = slack.add_file("train.log", crash_log())
        poster.event({"type": "app_mention", "user": "UALICE", "channel": "C1", "ts": "32.2",
                      "thread_ts": "32.1", "text": "<@UBOT> and now?", "files": [good]})
        slack.wait_for(lambda: _answered(slack, "32.1", "rank_crashed"), timeout=120)


def _hang_sample(dump: bytes) -> dict[str, Any]:
    """What a node's agent answers for `hang`: four ranks, rank 1 in its own code and the
    others in all_reduce, each with the given Flight Recorder dump."""
    import base64

    from tools.hang.model import Frame, HangSample, RankSample, ThreadStack

    def rank(r: int) -> RankSample:
        top = (Frame(function="load_shard", file="/job/train.py", line=40) if r == 1 else
               Frame(function="all_reduce",
                     file="/usr/lib/python3/torch/distributed/distributed_c10d.py", line=2501))
        return RankSample(pid=1000 + r, rank=r, local_rank=r, world_size=4, job="j1",
                          threads=[ThreadStack(name="MainThread", frames=[
                              top, Frame(function="step", file="/job/train.py", line=88)])],
                          fr_dump_b64=base64.b64encode(dump).decode())

    sample = HangSample(host="gpu-node07", ranks=[rank(r) for r in range(4)])
    from tools.result import ToolResult

    return ToolResult(tool="hang", status="success", data=sample.model_dump(mode="json"),
                      invocation="hang").model_dump(mode="json")


@pytest.mark.parametrize("kind", ["laughs_11x10", "memo_8_bytes", "build_on_dict"])
def test_a_crafted_dump_under_nccl_hang_ends_with_a_note(slack: FakeSlack, make_app: Any,
                                                         kind: str) -> None:
    _, dump = _crafted(kind)

    def tweak(deps: Any) -> None:  # the agent's answer, as it comes over HTTP
        deps.run_node = lambda node, tool, params, who: _hang_sample(dump)

    with served(make_app, tweak) as (poster, base, deps), Watch(base) as watch:
        status, _ = poster.command("hang gpu-node07", user=ONCALL)
        assert status == 200
        verdict = slack.wait_for(lambda: next(
            (m for m in slack.messages.values() if "load_shard" in block_text(m.get("blocks"))),
            None), timeout=120)
        notes = _notes(deps)
    assert "Sampling" not in block_text(verdict["blocks"])
    assert "rank 1" in block_text(verdict["blocks"])  # the stacks still give the verdict
    assert sum("Flight Recorder dump not used" in n for n in notes) == 4, notes
    assert watch.failures == [] and watch.peak_kib - watch.start_kib < 100 * 1024


def test_nccl_hang_ends_with_a_note_when_the_answer_fails(
        slack: FakeSlack, make_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever fails after the samples came back, the status message is replaced (by the
    Troubleshooter's failure answer, which names the error)."""
    _, dump = _crafted("laughs_11x10")

    def broken(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("a fault in the triangulation")

    monkeypatch.setattr("bot.diagnosis.hang.triangulate", broken)

    def tweak(deps: Any) -> None:
        deps.run_node = lambda node, tool, params, who: _hang_sample(dump)

    with served(make_app, tweak) as (poster, _, _):
        poster.command("hang gpu-node07", user=ONCALL)
        slack.wait_for(lambda: any("a fault in the triangulation" in block_text(m.get("blocks"))
                                   for m in slack.messages.values()), timeout=120)
    assert not any("Sampling" in block_text(m.get("blocks")) + str(m.get("text"))
                   for m in slack.messages.values())

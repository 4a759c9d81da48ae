"""A Chinese hang answer has no English prose in the node's own notes (issue 25, one
language): the node writes English (its wire format) and the bot translates each message at
render time (`bot.diagnosis.hang_zh`). Every note-writing string of tools/hang has a pattern
(read from the source with ast, so a new note without Chinese fails here); the real collector,
run on fake ranks here, gives notes of each family that the answer shows in Chinese."""

from __future__ import annotations

import io
import os
import socket
import time
from concurrent.futures import Future
from pathlib import Path

import pytest
from rich.console import Console

from bot.answering.analysis import answer_hang
from bot.answering.contract import Answer
from bot.diagnosis.hang import note_in
from bot.diagnosis.hang_zh import node_note_zh
from bot.render.lang import latin_prose
from bot.render.terminal import render_answer
from bot.slack.message import details_message, first_message, message_text
from scripts.zh_leaks import node_messages
from tests.conftest import ROOT
from tests.hang.jobs import fake_ranks, need_py_spy, rank_env
from tools.hang.model import HangSample, RankSample
from tools.hang.stacks import parse_dump_json


def test_every_note_the_node_writes_has_chinese() -> None:
    """Each note string of tools/hang (scripts/zh_leaks.node_messages reads them with ast)
    has a pattern, and its Chinese has no English prose."""
    messages, missing = node_messages(), []
    for where, line, text in messages:
        zh = node_note_zh(text, fallback=False)
        if zh is None or latin_prose(zh):
            missing.append(f"{where}:{line}: {text!r} -> {zh!r}")
    assert len(messages) >= 60, messages  # the scan finds the notes (not an empty pass)
    assert not missing, "notes without a Chinese pattern:\n" + "\n".join(missing)


def test_every_node_message_in_a_chinese_hang_answer_on_every_surface() -> None:
    """zh_leaks --hang: each message as a node's note, answered in Chinese, on the CLI's
    details text and Slack's first and Details messages: no English prose anywhere."""
    from scripts.zh_leaks import measure_hang

    tally = measure_hang()
    assert sum(tally.texts.values()) == 3 * len(node_messages())
    assert not tally.common, tally.where


def test_a_note_no_pattern_knows_is_kept_in_backticks() -> None:
    assert node_note_zh("a brand new note") == "`a brand new note`"
    assert node_note_zh("n1: a brand `new` note") == "`n1: a brand 'new' note`"
    assert note_in("a brand new note", "en") == "a brand new note"
    # numbers, paths and hosts are kept; the node's prefix `host: ` is the bot's
    assert node_note_zh("gpu-node07: only the main thread of each rank is sent, to keep the "
                        "reply under 48 MiB") == ("gpu-node07：为使回复小于 48 MiB，每个 rank 只发送"
                                                  "主线程的调用栈")
    assert "/tmp/fr/pipe_3.pipe 已满" in str(node_note_zh(
        "/tmp/fr/pipe_3.pipe is full (the rank does not read its debug pipe); no dump asked"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _texts(answer: Answer) -> dict[str, str]:
    buf = io.StringIO()
    render_answer(answer, Console(file=buf, width=200, highlight=False, soft_wrap=True,
                                  color_system=None), details=True)
    return {"cli": buf.getvalue(),
            "slack first": message_text(first_message(answer, "zh").blocks),
            "slack details": message_text(details_message(answer, "zh").blocks)}


def _no_english(answer: Answer, sample: HangSample) -> None:
    """The node's notes are in the Chinese answer, in Chinese, on every surface."""
    zh_notes = [n for n in answer.notes if n]
    assert zh_notes
    for n in zh_notes:
        assert not latin_prose(n), n
    for surface, text in _texts(answer).items():
        leaks = latin_prose(text, [r.cmdline for r in sample.ranks])
        assert not leaks, (surface, leaks)


def test_the_real_collector_s_notes_in_a_chinese_answer(tmp_path: Path) -> None:
    """Fake ranks (real processes) that never dump, fill their pipe or have none, one that
    claims a rank beyond its job's size, a pid that is no rank; no RAS listening; this
    machine's GPU sample (NVML is absent here)."""
    need_py_spy()
    from tools.hang.collect import HangParams, collect_hang

    modes = ["mute", "full", "sleep", "mute"]
    envs = [{**rank_env(tmp_path, r, 4), "FAKE_MODE": m} for r, m in enumerate(modes)]
    envs.append({**rank_env(tmp_path, 7, 4), "FAKE_MODE": "sleep"})  # RANK 7 of 4
    with fake_ranks(envs, uid=None) as procs:
        result = collect_hang(HangParams(
            pids=[p.pid for p in procs] + [1], ras_port=_free_port(), nccl_version="2.27.5",
            timeout_s=3.0, deadline_s=20.0))
    sample = HangSample.model_validate(result.data)
    # each family: the procs notes, RAS, GPU and the ranks' Flight Recorder notes
    assert any("not a rank of a distributed job" in n for n in sample.notes), sample.notes
    assert any("not below the WORLD_SIZE" in n for n in sample.notes), sample.notes
    assert sample.ras_note and "NCCL RAS" in sample.ras_note
    fr = [r.fr_note for r in sample.ranks if r.fr_note]
    assert len(fr) == 4, fr
    for note in [*fr, *(r.stack_error for r in sample.ranks if r.stack_error)]:
        zh = node_note_zh(note, fallback=False)
        assert zh is not None and not latin_prose(zh), (note, zh)
    answer = answer_hang([sample], lang="zh")
    assert any(n.startswith(f"{sample.host}：NCCL RAS：") for n in answer.notes), answer.notes
    _no_english(answer, sample)


RECORDED = ROOT / "tests" / "fixtures" / "hang"


def test_the_collector_s_own_limits_in_a_chinese_answer() -> None:
    """What the collector says when the deadline comes first, a part fails, the reply is
    capped, or py-spy cannot read a rank (run for real: a pid that has gone)."""
    from tools.hang.collect import (
        ByteBudget,
        HangParams,
        _flight_recorder,
        _outcome,
        _stacks,
        cap_reply,
    )
    from tools.hang.procs import TrainingProcess
    from tools.hang.stacks import dump_stacks

    tp = TrainingProcess(os.getpid(), {"RANK": "3", "LOCAL_RANK": "3", "WORLD_SIZE": "4"})
    p = HangParams()
    late_stack = _stacks(tp, p, time.monotonic())[1]
    late_fr = _flight_recorder(tp, p, time.monotonic(), ByteBudget(1))[1]
    failed: Future[tuple[list[int], str | None]] = Future()
    failed.set_exception(OSError("no route"))
    part = _outcome(failed, ([], "late"))[1]
    gone = dump_stacks(2**22 + 1, timeout_s=5.0)[1]  # above any pid this kernel gives out
    assert late_stack and late_fr and part and gone
    threads = parse_dump_json((RECORDED / "py-spy-rank-in-all_reduce.json").read_text())
    ranks = [RankSample(pid=100 + r, rank=r, world_size=4, fr_dump_b64="A" * 400_000,
                        threads=threads * 3) for r in range(3)]
    ranks.append(RankSample(pid=103, rank=3, world_size=4, stack_error=gone))
    sample = HangSample(host="gpu-node07", ranks=ranks, ras_note=part, gpu_note=late_stack)
    cap_reply(sample, limit=2_000)  # every dump dropped, then the side threads
    assert sample.notes and all(r.fr_note for r in sample.ranks[:3])
    sample.notes.append(late_fr or "")
    answer = answer_hang([sample], lang="zh")
    assert any("没有调用栈" in n for n in answer.notes), answer.notes
    _no_english(answer, sample)
    assert not latin_prose(str(node_note_zh(sample.ranks[0].fr_note or "")))


@pytest.mark.parametrize("lang", ["en", "both"])
def test_english_answers_keep_the_node_s_words(lang: str) -> None:
    note = "pid 1: not a rank of a distributed job (no RANK and LOCAL_RANK in its " \
           "environment), or gone; skipped"
    threads = parse_dump_json((RECORDED / "py-spy-rank-in-all_reduce.json").read_text())
    sample = HangSample(host="n1", notes=[note], ranks=[
        RankSample(pid=r, rank=r, world_size=2, threads=threads) for r in range(2)])
    assert note in answer_hang([sample], lang=lang).notes


def test_a_dump_the_bot_cannot_use_and_a_node_without_ranks_in_chinese() -> None:
    """The bot's own reader (its sandbox) refuses a rank's dump that is not one; a second
    node found no rank (its agent's reason comes as the answer's input note). Notes of the
    input that are not the node's (why no LLM answered) stay as they are."""
    import base64

    threads = parse_dump_json((RECORDED / "py-spy-rank-in-all_reduce.json").read_text())
    ranks = [RankSample(pid=r, rank=r, world_size=2, threads=threads) for r in range(2)]
    ranks[1].fr_dump_b64 = base64.b64encode(b"not a pickle at all").decode()
    none_here = ("gpu-node08: no rank of a distributed job found on this node (looked for "
                 "processes with RANK and LOCAL_RANK in their environment, matching 'train.py')")
    answer = answer_hang([HangSample(host="gpu-node07", ranks=ranks)], lang="zh",
                         notes=[none_here, "the LLM is off"])
    dump = next(n for n in answer.notes if "Flight Recorder dump" in n)
    assert dump.startswith("gpu-node07 rank 1：没有使用它的 Flight Recorder dump（"), dump
    assert not latin_prose(dump) and "请重新复制该 rank 的 dump" in dump, dump
    assert ("gpu-node08：这个节点上没有找到分布式作业的 rank（查找的是环境变量中有 RANK 和 "
            "LOCAL_RANK 的进程，命令行包含 `'train.py'`）") in answer.notes, answer.notes
    assert answer.notes[-1] == "the LLM is off"

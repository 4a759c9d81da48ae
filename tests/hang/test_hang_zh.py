"""A Chinese hang answer has no English prose in the node's own notes (issue 25, one
language): the node writes English (its wire format) and the bot translates each message at
render time (`bot.diagnosis.hang_zh`). Every note-writing string of tools/hang has a pattern
(read from the source with ast, so a new note without Chinese fails here); the real collector,
run on fake ranks here, gives notes of each family that the answer shows in Chinese."""

from __future__ import annotations

import ast
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
from tests.conftest import ROOT
from tests.hang.jobs import fake_ranks, need_py_spy, rank_env
from tools.hang.model import HangSample, RankSample
from tools.hang.stacks import parse_dump_json

#: where the node's notes are written (tools/runner.py: why py-spy did not run; tools/nvml.py:
#: why there is no GPU sample)
SOURCES = [*(ROOT / "tools" / "hang").glob("*.py"), ROOT / "tools" / "runner.py",
           ROOT / "tools" / "nvml.py"]
NOTE_FIELDS = {"fr_note", "ras_note", "gpu_note", "stack_error"}
#: exceptions whose message becomes a note (`NCCL RAS: {exc}`, `{exc} (no GPU sample)`, ...)
NOTE_ERRORS = {"RefusedError", "RasUnavailableError", "RasRefusedError", "NvmlUnavailableError"}
#: functions whose plain `return "..."` is a note (pipe_paths: why a rank has no pipe,
#: reader._why: why a file is not opened, ras.refusal: why RAS is not asked)
NOTE_RETURNS = {"pipe_paths", "_why", "refusal"}


def _text(node: ast.expr) -> str | None:
    """A string expression with each interpolated value as `7`; None when not a string."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "7"
                       for v in node.values)
    if isinstance(node, ast.IfExp):  # `(", matching ..." if p.pattern else "")`: the text
        return _text(node.body)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        if left is None and right is None:
            return None
        return (left or "7") + (right or "7")
    return None


def _notes_in(tree: ast.AST) -> list[tuple[int, str]]:
    """Every note-writing string of one module: appended to `notes`, set as a rank's or the
    node's note field, the note of a `(value, note)` return or of `_outcome`'s late pair, a
    note-carrying exception's message, a command's `error=`, a no-rank reason."""
    found: list[tuple[int, str]] = []

    def add(expr: ast.expr | None) -> None:
        if expr is not None and (t := _text(expr)) is not None and any(c.isalpha() for c in t):
            found.append((expr.lineno, t))

    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        for node in ast.walk(fn):
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
                add(node.value.elts[-1])
            elif (isinstance(node, ast.Return) and fn.name in NOTE_RETURNS
                  and node.value is not None):
                add(node.value)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) \
                else ""
            owner = f.value if isinstance(f, ast.Attribute) else None
            to_notes = name == "append" and (
                (isinstance(owner, ast.Name) and owner.id == "notes")
                or (isinstance(owner, ast.Attribute) and owner.attr == "notes"))
            if to_notes or (name in NOTE_ERRORS and node.args):
                add(node.args[0])
            elif name == "_outcome" and isinstance(late := node.args[1], ast.Tuple):
                add(late.elts[-1])
            elif name == "unavailable" and len(node.args) > 2:
                add(node.args[2])
            for kw in node.keywords:
                if kw.arg == "error":
                    add(kw.value)
        elif isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                elts = t.elts if isinstance(t, ast.Tuple) else [t]
                vals = (node.value.elts if isinstance(node.value, ast.Tuple) and
                        isinstance(t, ast.Tuple) else [node.value] * len(elts))
                for e, v in zip(elts, vals, strict=False):
                    if ((isinstance(e, ast.Attribute) and e.attr in NOTE_FIELDS)
                            or (isinstance(node, ast.AugAssign) and isinstance(e, ast.Name)
                                and e.id == "why")):
                        add(v)
    return found


def test_every_note_the_node_writes_has_chinese() -> None:
    seen, missing = 0, []
    for path in SOURCES:
        for line, text in _notes_in(ast.parse(path.read_text(encoding="utf-8"))):
            seen += 1
            zh = node_note_zh(text, fallback=False)
            if zh is None or latin_prose(zh):
                missing.append(f"{path.relative_to(ROOT)}:{line}: {text!r} -> {zh!r}")
    assert seen >= 60, seen  # the scan finds the notes (not an empty pass)
    assert not missing, "notes without a Chinese pattern:\n" + "\n".join(missing)


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

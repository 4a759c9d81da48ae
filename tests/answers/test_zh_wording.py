"""One language (issue 25): every reason the diagnosis writes has its Chinese
(`bot.diagnosis.wording`), a Chinese answer holds no English prose outside code and log
quotes, and a past incident is named in Chinese (or, without `title_zh`, by its thread and
its cause). The answers are built and rendered as `analyze --lang zh` and Slack do."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from rich.console import Console

from bot.answering.analysis import analyze_sources, answer_from_analysis
from bot.answering.contract import Answer, SimilarIncident
from bot.answering.knowledge import bundled_cards
from bot.diagnosis.wording import REASONS, reason_zh
from bot.knowledge.check import untitled_zh
from bot.knowledge.incidents import load_incidents, parse_incident
from bot.logs.sources import expand_inputs
from bot.render.lang import latin_prose
from bot.render.seen import seen_title
from bot.render.terminal import render_answer
from bot.slack.blocks import render_other_causes
from bot.slack.message import details_message, first_message, message_text
from scripts.zh_leaks import knowledge_zh
from tests.conftest import ROOT

CJK = re.compile(r"[\u4e00-\u9fff]")
SAMPLE = ROOT / "examples" / "sample-8rank-oom.log"
#: the modules that write reasons (`Signal(category, strength, reason, ...)`)
REASON_SOURCES = ("bot/diagnosis/rules.py", "bot/diagnosis/hang.py", "bot/answering/ask.py")
#: real logs of the corpus whose answers give many rules' reasons (6 to 11 each on
#: 2026-11-29): timeouts read across ranks, a rank busy alone, a crash among timeouts
MANY_RULES = ("llava-ddp-one-rank-index-assert-others-timeout",
              "colbert-index-kmeans-rank0-exceeds-10min",
              "megatron-1050-fused-kernel-compile-rank0-barrier",
              "verl-1420-sglang-build-rollout-mesh-tp-watchdog",
              "torchtune-gemma-rank0-save-keyerror-allgather-timeout",
              "determined-8915-two-gpus-hang-together-p2p-shm-disable",
              "h100-ib-error4-vendor81-acs-breaks-gdr",
              "hpc-node-uncorrectable-ecc-pytorch")
#: what stands for a value in a reason read from the source (a number reads like most values)
VALUE = "7"


def _text_of(node: ast.expr, assigned: list[tuple[int, str, ast.expr]]) -> str | None:
    """A reason expression as the text it makes, each value as `VALUE` (None: not a text)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out = ""
        for v in node.values:
            # a value right after a word is an optional suffix (`cause{where}`): often empty
            out += (_text_of(v, assigned) or "") if isinstance(v, ast.Constant) else \
                ("" if out[-1:].isalpha() else VALUE)
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text_of(node.left, assigned), _text_of(node.right, assigned)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.Name):  # the nearest assignment before it
        before = [v for line, name, v in assigned if name == node.id and line < node.lineno]
        return _text_of(before[-1], assigned) if before else None
    return None


def written_reasons(path: Path) -> list[tuple[int, str]]:
    """Every reason a module passes to `Signal(...)`, with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        assigned = [(a.lineno, a.targets[0].id, a.value) for a in ast.walk(fn)
                    if isinstance(a, ast.Assign) and len(a.targets) == 1
                    and isinstance(a.targets[0], ast.Name)]
        for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
            if not (isinstance(call.func, ast.Name) and call.func.id == "Signal"):
                continue
            arg = call.args[2] if len(call.args) > 2 else next(
                (k.value for k in call.keywords if k.arg == "reason"), None)
            text = _text_of(arg, assigned) if arg is not None else None
            assert text is not None, f"{path.name}:{call.lineno}: a reason this test cannot read"
            out.append((call.lineno, text))
    return out


def test_every_reason_the_rules_write_has_its_chinese() -> None:
    """A reason added to a rule without its Chinese in `bot/diagnosis/wording.py` fails here."""
    seen = 0
    for rel in REASON_SOURCES:
        for line, en in written_reasons(ROOT / rel):
            seen += 1
            zh = reason_zh(en)
            if en == "ncclInternalError":  # NCCL's name for the error, said as it is
                continue
            if en == f"rank {VALUE} {VALUE}":  # quotes a cross-rank reason (test_chinese.py)
                assert zh == en
                continue
            assert zh != en and CJK.search(zh), f"{rel}:{line}: no Chinese for {en!r}"
            assert not latin_prose(zh, [VALUE]), f"{rel}:{line}: {zh!r}"
    assert seen >= 90  # the rules' reasons were all read (104 on 2026-11-29)


def test_each_wording_keeps_its_values_and_says_the_rest_in_chinese() -> None:
    for w in REASONS:
        if w.en == "rank {rank} {why}":  # quotes a cross-rank reason: test_chinese.py
            continue
        names = re.findall(r"\{(\w+)\}", w.en)
        values = {n: f"v{i}x" for i, n in enumerate(names)}
        en = w.en.format(**values)
        zh = reason_zh(en)
        for n, v in values.items():
            if n not in ("question", "answer", "why", "xid", "channels", "outside"):  # translated
                assert v in zh, (w.en, n, zh)
        assert CJK.search(zh), w.en
        assert not latin_prose(zh, list(values.values())), (w.en, zh)


def test_two_reasons_joined_are_each_said_and_kept_apart() -> None:
    joined = ("resembles 2 past incident(s), closest https://github.com/o/r/issues/1 "
              "(similarity 0.38); reads like card some-card (similarity 0.37)")
    zh = reason_zh(joined)
    assert zh == ("与 2 个过去的事件相似，最接近的是 https://github.com/o/r/issues/1（相似度 "
                  "0.38）；读起来像卡片 some-card（相似度 0.37）")
    assert reason_zh("a reason from elsewhere") == "a reason from elsewhere"
    assert reason_zh("Xid 79 (GPU has fallen off the bus): a GPU/NVLink hardware fault") == \
        "Xid 79（ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS）：GPU/NVLink 硬件故障"


@cache
def _answer(name: str) -> tuple[Answer, str]:
    """The Chinese answer for the sample or an incident's log, and the log."""
    if name == "sample":
        log = SAMPLE.read_text(encoding="utf-8")
        inputs = expand_inputs([str(SAMPLE)])
    else:
        from bot.logs.sources import text_source

        log = next(i for i in load_incidents() if i.id == name).log
        inputs = [text_source(f"{name}.log", log)]
    cards = list(bundled_cards())
    report, diagnosis = analyze_sources(inputs, None, cards)
    return answer_from_analysis(report, diagnosis, cards, "zh"), log


def _texts(answer: Answer) -> dict[str, str]:
    out = {}
    for details in (False, True):
        buf = io.StringIO()
        render_answer(answer, Console(file=buf, width=200, color_system=None, soft_wrap=True),
                      details=details)
        out["details" if details else "analyze"] = buf.getvalue()
    out["slack first"] = message_text(first_message(answer, "zh").blocks)
    out["slack details"] = message_text(details_message(answer, "zh").blocks)
    out["slack other causes"] = message_text(render_other_causes(answer, "zh").blocks)
    return out


@pytest.mark.parametrize("name", ["sample", *MANY_RULES])
def test_a_chinese_answer_has_no_english_prose(name: str) -> None:
    """Outside code, log quotes and the cards' own Chinese (their authors' words, counted by
    `scripts/zh_leaks.py`): the reasons, headings, suspects, ranks, "seen before"."""
    answer, log = _answer(name)
    assert answer.diagnosis.root_causes
    assert any(CJK.search(w) for rc in answer.diagnosis.root_causes for w in rc.why)
    for surface, text in _texts(answer).items():
        leaks = latin_prose(text, [log, *knowledge_zh()])
        assert not leaks, (name, surface, [(x.text, x.line) for x in leaks[:5]])


def test_the_sample_answer_in_english_keeps_its_english() -> None:
    cards = list(bundled_cards())
    report, diagnosis = analyze_sources(expand_inputs([str(SAMPLE)]), None, cards)
    en = answer_from_analysis(report, diagnosis, cards, "en")
    whys = [w for rc in en.diagnosis.root_causes for w in rc.why]
    assert "CUDA out of memory on a rank" in whys
    assert not any(CJK.search(w) for w in whys)


def test_an_answer_kept_in_both_languages_shows_its_ranks_and_suspects_in_chinese() -> None:
    """Slack keeps a thread's answer in both languages and shows it in the thread's: each
    per-rank line and suspect reason read in Chinese as `describe` and `reason_in` write it."""
    from bot.logs.analyze import analyzer_for
    from bot.logs.crossrank import analyze_ranks, describe, rank_line_in, reason_in
    from bot.logs.sources import text_source

    analyzer = analyzer_for(list(bundled_cards()))
    lines = 0
    for inc in load_incidents():
        report = analyzer.analyze([text_source(f"{inc.id}.log", inc.log)])
        cr = analyze_ranks(report)
        en, zh = describe(cr, report.world_size, "en"), describe(cr, report.world_size, "zh")
        assert [rank_line_in(x, "zh") for x in en] == zh, inc.id
        assert [rank_line_in(x, "en") for x in en] == en
        lines += len(en)
        for s in cr.suspects:
            assert not latin_prose(reason_in(s.reason, "zh"), [inc.log]), (inc.id, s.reason)
    assert lines >= 10  # the corpus exercises them


def _incident(title_zh: str | None) -> SimilarIncident:
    return SimilarIncident(source="https://github.com/org/repo/issues/42", title="Parallel "
                           "training hangs", title_zh=title_zh, category="p2p_pcie_topology",
                           resolution="Disabled IOMMU.", score=0.5)


def test_seen_before_is_named_in_chinese_and_falls_back_without_title_zh() -> None:
    from bot.knowledge.taxonomy import category

    assert seen_title(_incident("并行训练卡住"), "zh") == "并行训练卡住"
    assert seen_title(_incident("并行训练卡住"), "en") == "Parallel training hangs"
    fallback = seen_title(_incident(None), "zh")
    assert fallback == f"org/repo#42（{category('p2p_pcie_topology').short('zh')}）"
    assert not latin_prose(fallback)


def test_every_incident_has_a_chinese_title() -> None:
    incidents = load_incidents()
    assert all(i.title_zh and CJK.search(i.title_zh) for i in incidents)
    assert [i.id for i in incidents if latin_prose(i.title_zh or "")] == []
    assert untitled_zh(incidents) == []


def test_an_incident_without_title_zh_loads_and_is_a_warning_not_a_defect(
        tmp_path: Path) -> None:
    """`knowledge check` over a corpus where one incident has no `title_zh`: exit 0, one
    warning naming it; its answers name the thread and the cause instead."""
    src = ROOT / "knowledge" / "incidents" / "hpc-node-uncorrectable-ecc-pytorch.yaml"
    text = "".join(line for line in src.read_text(encoding="utf-8").splitlines(keepends=True)
                   if not line.startswith("title_zh:"))
    assert parse_incident(text).title_zh is None
    folder = tmp_path / "incidents"
    folder.mkdir()
    (folder / src.name).write_text(text, encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "bot.cli.main", "knowledge", "check",
                          "--incidents", str(folder)], capture_output=True, text=True,
                         timeout=600, cwd=ROOT)
    out = " ".join((run.stdout + run.stderr).split())
    assert "1 incident(s) without title_zh" in out and "hpc-node-uncorrectable-ecc-pytorch" in out
    assert run.returncode == 0, out
    assert "warning" in out and "1 incident(s) OK" in out

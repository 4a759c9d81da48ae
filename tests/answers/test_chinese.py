"""A Chinese answer is Chinese (issue 25): the suspects' reasons, the per-rank facts and the
reasons behind each cause, on the bundled sample and on real incidents of the corpus."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from bot.answering.analysis import analyze_sources, answer_from_analysis
from bot.answering.answer import why_in
from bot.answering.contract import Answer
from bot.answering.knowledge import bundled_cards
from bot.knowledge.incidents import load_incidents
from bot.logs.analyze import analyzer_for
from bot.logs.crossrank import analyze_ranks, describe, reason_in
from bot.logs.sources import expand_inputs, text_source
from tests.conftest import ROOT

SAMPLE = ROOT / "examples" / "sample-8rank-oom.log"
CJK = re.compile(r"[\u4e00-\u9fff]")
#: English words of the sentences `analyze_ranks`, `describe` and the engine write
ENGLISH = re.compile(r"\b(?:reported|timed out|did not|failed first|first observed|lags|"
                     r"lost|while|others|matched|resembles|reads like|silent|may have|"
                     r"behind|waiting|could not|rank\(s\))\b")


def english(text: str) -> bool:
    """Whether `text` has an English sentence in it (identifiers such as card ids, URLs and
    log excerpts in quotes aside)."""
    return bool(ENGLISH.search(re.sub(r"“[^”]*”|\S*[-_/]\S*", "", text)))


@cache
def _sample(lang: str) -> Answer:
    cards = list(bundled_cards())
    report, diagnosis = analyze_sources(expand_inputs([str(SAMPLE)]), None, cards)
    return answer_from_analysis(report, diagnosis, cards, lang)


def test_the_sample_in_chinese_has_no_english_sentences() -> None:
    zh = _sample("zh")
    d = zh.diagnosis
    assert d.suspects and d.ranks and d.root_causes[0].why
    texts = [*(s.reason for s in d.suspects), *d.ranks, *d.root_causes[0].why]
    for text in texts:
        assert CJK.search(text), text
        assert not english(text), text
    dumped = zh.model_dump_json()
    assert "(zh)" not in dumped and "（zh）" not in dumped


def test_english_and_both_keep_the_english_reasons() -> None:
    for lang in ("en", "both"):
        d = _sample(lang).diagnosis
        assert any("torchrun's first observed failure" in s.reason for s in d.suspects)
        assert any("watchdog timeout" in r for r in d.ranks)
        assert not any(CJK.search(t) for t in (*d.ranks, *(s.reason for s in d.suspects)))


def test_every_suspect_reason_of_the_corpus_reads_in_chinese() -> None:
    """Each reason part `analyze_ranks` gives on the corpus's real logs has its Chinese; the
    Flight Recorder's own text (from a dump) is the one part allowed to stay as it is."""
    cards = list(bundled_cards())
    analyzer = analyzer_for(cards)
    parts = 0
    for inc in load_incidents():
        report = analyzer.analyze([text_source(f"{inc.id}.log", inc.log)])
        cr = analyze_ranks(report)
        for s in cr.suspects:
            for en, zh in zip(s.reason.split("; "), reason_in(s.reason, "zh").split("; "),
                              strict=True):
                parts += 1
                assert CJK.search(zh), (inc.id, en)
        for line in describe(cr, report.world_size, "zh"):
            assert CJK.search(line) and not english(line), (inc.id, line)
    assert parts >= 10  # the corpus exercises them (12 parts on 2026-11-29)


#: every reason `analyze_ranks` writes, as it writes them (crossrank.py)
REASONS = (
    "torchrun's first observed failure (exitcode 1)",
    "torchrun's first observed failure (failed), but its own error is a timeout or a lost "
    "peer: it was waiting for another rank",
    "failed first: oom (OutOfMemoryError)",
    "exited with code -9 without reporting a watchdog timeout",
    "could not connect to the store at 10.0.0.1:29500 while the other ranks did",
    "could not connect to the store while the other ranks did",
    "its ranks could not connect to the store at master:29500 while the other nodes did",
    "every other rank gave up on it at the monitored barrier: rank 0 came late",
    "rank 0 reports that it never reached the monitored barrier (1800000 ms)",
    "ran ALLREDUCE where 7 ranks ran BROADCAST",
    "gloo found no address for interface 'eth9' here (GLOO_SOCKET_IFNAME)",
    "did not report a watchdog timeout while 7 of 8 ranks did (stuck elsewhere or dead)",
    "was in barrier() when it gave up, while 6 rank(s) were in all_reduce(): another code path",
    "busy with 'saving checkpoint' while 7 rank(s) timed out waiting",
    "its timed-out collective SeqNum=41 lags the others (SeqNum=42)",
    "last enqueued NCCL work 41 lags the others (42)",
    "ran a different collective at SeqNum=42 than the others (ALLGATHER, ALLREDUCE)",
    "reported no error while 7 rank(s) lost or waited for a peer: it left the job or was busy "
    "elsewhere",
)


def test_each_cross_rank_reason_has_its_chinese() -> None:
    for en in REASONS:
        zh = reason_in(en, "zh")
        assert CJK.search(zh) and not english(zh), (en, zh)
    # the parts of a reason stay apart (readers split on "; ")
    assert reason_in("; ".join(REASONS[:3]), "zh").count("; ") == 2


def test_a_reason_from_elsewhere_stays_as_it_is() -> None:
    assert reason_in("rank 3 wrote no dump", "zh") == "rank 3 wrote no dump"
    assert why_in("something a new rule says", "zh") == "something a new rule says"
    assert why_in("matched signature 'torch-cuda-oom' of card c1", "en") == \
        "matched signature 'torch-cuda-oom' of card c1"
    assert why_in("matched signature 'torch-cuda-oom' of card c1", "zh") == \
        "匹配了卡片 c1 的特征“torch-cuda-oom”"
    # a rule that quotes a cross-rank reason: both halves in Chinese
    assert why_in("rank 5 failed first: oom (OutOfMemoryError)", "zh") == \
        "rank 5 最先出错：oom（OutOfMemoryError）"


def test_the_cli_answer_in_chinese_names_causes_in_chinese(tmp_path: Path) -> None:
    """`ncclbot analyze --lang zh` (a real process) on the bundled sample: the suspect's
    reason and the other candidates are Chinese (no category ids)."""
    from tests.answers.test_answers import cli

    out = cli("analyze", "--lang", "zh", str(SAMPLE), data=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    others = next(x for x in lines if x.startswith("其他候选"))
    assert not re.search(r"\b[a-z]+_[a-z_]+\b", others), others
    suspect = next(x for x in lines if x.startswith("可疑："))
    assert CJK.search(suspect.split("—", 1)[1]) and not english(suspect), suspect

"""One language (issue 25): a live hang's answer (`ncclbot node hang`, `/v1/hang`, the Slack
"Why is it stuck?" button) and the fixed words a Chinese Slack thread gets (the suggested
diagnostics, their buttons, the thread's notes) are in the reader's language.

The hang answers come from recorded py-spy stacks (tests/fixtures/hang) triangulated and
answered as the node command does; the Slack texts from the real renderers."""

from __future__ import annotations

import io
import re

from rich.console import Console

from bot.answering.analysis import analyze_sources, answer_from_analysis, answer_hang
from bot.answering.contract import Answer, ProbeSuggestion, SimilarIncident
from bot.answering.knowledge import bundled_cards
from bot.knowledge.incidents import load_incidents
from bot.logs.sources import text_source
from bot.render.lang import latin_prose
from bot.render.terminal import render_answer
from bot.slack.conversation import earlier_notes
from bot.slack.message import details_message, first_message, message_text
from bot.slack.resolve import resolved_message, seen_line
from bot.state.threads import Candidate, ThreadState
from tests.conftest import ROOT
from tools.hang.model import HangSample, RankSample
from tools.hang.stacks import parse_dump_json

CJK = re.compile(r"[\u4e00-\u9fff]")
RECORDED = ROOT / "tests" / "fixtures" / "hang"


def _rank(rank: int, recorded: str, world_size: int = 4) -> RankSample:
    threads = parse_dump_json((RECORDED / recorded).read_text())
    return RankSample(pid=1000 + rank, rank=rank, world_size=world_size, threads=threads)


def _stuck_in_load_shard() -> list[HangSample]:
    """Rank 2 reads its shard while ranks 0, 1 and 3 wait for it in all_reduce."""
    return [HangSample(host="gpu-node07", ranks=[
        _rank(r, "py-spy-rank-in-load_shard.json" if r == 2 else "py-spy-rank-in-all_reduce.json")
        for r in range(4)])]


def _texts(answer: Answer) -> dict[str, str]:
    buf = io.StringIO()
    render_answer(answer, Console(file=buf, width=200, color_system=None, soft_wrap=True),
                  details=True)
    return {"terminal": buf.getvalue(),
            "slack first": message_text(first_message(answer, "zh").blocks),
            "slack details": message_text(details_message(answer, "zh").blocks)}


def test_a_chinese_hang_answer_is_chinese() -> None:
    answer = answer_hang(_stuck_in_load_shard(), lang="zh")
    head = answer.headline["zh"]
    assert head.startswith("有 rank 卡在自己的代码中：rank 2（gpu-node07）停在 load_shard")
    assert "4 个 rank 中有 3 个在 all_reduce 中等待" in head
    assert answer.diagnosis.suspects[0].rank == 2
    for surface, text in _texts(answer).items():
        assert "rank 2（gpu-node07）" in text, surface
        leaks = latin_prose(text)
        assert not leaks, (surface, [(x.text, x.line) for x in leaks[:5]])


def test_a_hang_answer_in_both_languages_keeps_its_english_headline() -> None:
    answer = answer_hang(_stuck_in_load_shard(), lang="both")
    assert answer.headline["en"].startswith(
        "host stuck: rank 2 on gpu-node07 is in load_shard (job.py:6) while 3 of 4 ranks wait "
        "in all_reduce")
    assert CJK.search(answer.headline["zh"])
    assert answer.summary == answer.headline["en"]


def test_a_chinese_hang_answer_says_its_notes_in_chinese() -> None:
    """Half of an 8-rank job sampled, all waiting in all_reduce: nobody is blamed, and the
    note that asks for the other nodes reads in Chinese (in English for an English answer)."""
    half = [HangSample(host="n1", ranks=[_rank(r, "py-spy-rank-in-all_reduce.json", 8)
                                         for r in range(4)])]
    zh, en = answer_hang(half, lang="zh"), answer_hang(half, lang="en")
    assert zh.headline["zh"] == "尚无定论：采样到的调用栈中没有哪个 rank 与众不同"
    assert "rank 4, 5, 6, 7 没有被采样" in " ".join(zh.notes)
    assert not latin_prose(" ".join(zh.notes))
    assert any("ranks 4, 5, 6, 7 were not sampled" in n for n in en.notes)
    for surface, text in _texts(zh).items():
        assert not latin_prose(text), (surface, [x.text for x in latin_prose(text)])


def _corpus_answer(name: str, lang: str) -> Answer:
    log = next(i for i in load_incidents() if i.id == name).log
    cards = list(bundled_cards())
    report, diagnosis = analyze_sources([text_source(f"{name}.log", log)], None, cards)
    return answer_from_analysis(report, diagnosis, cards, lang)


def test_a_chinese_threads_suggested_diagnostics_and_their_buttons_are_chinese() -> None:
    """The diagnostics an LLM agent proposes (Slack keeps them as proposed until on-call runs
    one): the block's heading, each line and the buttons in the thread's language."""
    probe = ProbeSuggestion(node="gpu-node07", preset="full", reason="检查该节点的 IB 链路")
    base = _corpus_answer("nccl-tests-roce-error12-default-gid-index", "both")
    answer = base.model_copy(update={"suggested_probes": [probe]})
    zh = message_text(details_message(answer, "zh").blocks)
    assert "*建议运行的诊断*（值班人员可用下面的按钮运行）\n• `probe full` 节点 `gpu-node07`：" \
           "检查该节点的 IB 链路" in zh
    head, *rest = zh[zh.index("*建议运行的诊断*"):].splitlines()
    block = "\n".join([head, *rest[:next(i for i, x in enumerate(rest) if x.startswith("*"))]])
    assert not latin_prose(block), [x.text for x in latin_prose(block)]
    assert "*Suggested diagnostics* (on-call can run them below)" in message_text(
        details_message(answer, "en").blocks)

    def labels(lg: str) -> list[str]:
        actions = next(b for b in first_message(answer, lg, "A1").blocks
                       if b["type"] == "actions")
        return [e["text"]["text"] for e in actions["elements"]
                if e["action_id"].startswith("ncclbot_probe")]

    assert labels("zh")[0] == "在 gpu-node07 上运行 probe full"
    assert labels("en")[0] == "Run probe full on gpu-node07"
    assert not any(latin_prose(x) for x in labels("zh"))


def test_a_chinese_threads_note_on_an_earlier_candidate_is_chinese() -> None:
    answer = _corpus_answer("nccl-tests-roce-error12-default-gid-index", "zh")
    ctx = ThreadState(last_answer_id="x", candidates=[Candidate(
        category="firewall_ports", card="some-card", confidence=0.5)])
    (note,) = earlier_notes(ctx, answer, "zh")
    assert note == "本线程之前排在首位的候选是 firewall_ports（50%，卡片 some-card）；见“其他可能原因”。"
    assert earlier_notes(ctx, answer)[0].startswith("Earlier in this thread the leading")


def test_a_teams_own_resolution_is_told_in_the_threads_language() -> None:
    """The team's resolved incident in a Chinese answer's "seen before", and the note a
    Chinese thread gets when someone resolves it (its buttons included)."""
    fix = "把 NCCL_IB_GID_INDEX 设为 3。"
    inc = SimilarIncident(source="https://example.slack.com/archives/C1/p1", title="t",
                          category="infiniband_roce", resolution=fix, score=0.9, local=True,
                          seen_in="C1", date="2026-11-12", resolved_by="UALICE")
    zh = seen_line(inc, 600, "zh")
    assert zh == ("2026-11-12 在 <#C1> 见过——修复方法：把 NCCL_IB_GID_INDEX 设为 3。（由 "
                  "<@UALICE> 解决） · <https://example.slack.com/archives/C1/p1|线程>")
    assert seen_line(inc).startswith("Seen in <#C1> on 2026-11-12 — fixed by ")
    shown, text = resolved_message("inc-1", "UALICE", "infiniband_roce", fix, False, "", "zh")
    said = shown[0]["text"]["text"]
    assert said.endswith("修复方法：把 NCCL_IB_GID_INDEX 设为 3。以后同样的故障会首先给出这个原因。")
    assert [e["text"]["text"] for e in shown[-1]["elements"]] == ["更正", "忘掉"]
    assert text == "已解决: infiniband_roce"
    assert not latin_prose(said + zh)
    english, _ = resolved_message("inc-1", "UALICE", "infiniband_roce", "Set the GID.", True)
    assert [e["text"]["text"] for e in english[-1]["elements"]] == ["Correct", "Forget"]

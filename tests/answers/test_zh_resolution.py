"""One language (issue 25): what fixed a past incident is said in Chinese to a Chinese reader.

Every shipped incident carries `resolution_zh` (Chinese, the English's numbers kept, no English
prose outside backticks); `knowledge check` warns, never fails, for one without it; and the
"seen before" of a Chinese answer (terminal and Slack) shows it where an English answer shows
the resolution. The answers are built from real corpus logs as `analyze --lang zh` builds them.
"""

from __future__ import annotations

import io
import re
from functools import cache

from rich.console import Console

from bot.answering.analysis import analyze_sources, answer_from_analysis
from bot.answering.contract import Answer, SimilarIncident
from bot.answering.knowledge import bundled_cards
from bot.knowledge.check import unresolved_zh
from bot.knowledge.incidents import load_incidents, parse_incident
from bot.logs.sources import text_source
from bot.render.lang import latin_prose
from bot.render.seen import resolution_in
from bot.render.terminal import render_answer
from bot.slack.message import details_message, first_message, message_text
from tests.conftest import ROOT

CJK = re.compile(r"[\u4e00-\u9fff]")
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
#: a real log whose nearest past incident is itself (a RoCE GID-index timeout)
CASE = "nccl-tests-roce-error12-default-gid-index"


def test_every_incident_has_a_faithful_looking_chinese_resolution() -> None:
    """Chinese, no English prose outside code spans, balanced backticks, and every number of
    the English resolution (versions, sizes, ports, PR numbers) kept as written."""
    incidents = load_incidents()
    assert len(incidents) >= 100
    for inc in incidents:
        zh = inc.resolution_zh or ""
        assert CJK.search(zh), inc.id
        assert not latin_prose(zh), (inc.id, [x.text for x in latin_prose(zh)])
        assert zh.count("`") % 2 == 0, inc.id
        missing = [n for n in NUMBER.findall(inc.resolution) if n not in zh]
        assert not missing, (inc.id, missing)
    assert unresolved_zh(incidents) == []


def test_an_incident_without_resolution_zh_loads_and_is_named_in_a_warning() -> None:
    src = ROOT / "knowledge" / "incidents" / f"{CASE}.yaml"
    text = "".join(line for line in src.read_text(encoding="utf-8").splitlines(keepends=True)
                   if not line.startswith("resolution_zh:"))
    inc = parse_incident(text)
    assert inc.resolution_zh is None and inc.resolution
    (warning,) = unresolved_zh([inc])
    assert warning.startswith("1 incident(s) without resolution_zh") and CASE in warning


def _similar(resolution_zh: str | None) -> SimilarIncident:
    return SimilarIncident(source="https://github.com/org/repo/issues/42", title="Hang",
                           category="p2p_pcie_topology", resolution="Disabled the IOMMU.",
                           resolution_zh=resolution_zh, score=0.5)


def test_the_resolution_is_picked_in_the_readers_language() -> None:
    assert resolution_in(_similar("关闭 IOMMU 后解决。"), "zh") == "关闭 IOMMU 后解决。"
    assert resolution_in(_similar("关闭 IOMMU 后解决。"), "en") == "Disabled the IOMMU."
    assert resolution_in(_similar(None), "zh") == ""  # without it: the link has the fix


@cache
def _answer(lang: str) -> Answer:
    log = next(i for i in load_incidents() if i.id == CASE).log
    cards = list(bundled_cards())
    report, diagnosis = analyze_sources([text_source(f"{CASE}.log", log)], None, cards)
    return answer_from_analysis(report, diagnosis, cards, lang)


def _terminal(answer: Answer, details: bool) -> str:
    buf = io.StringIO()
    render_answer(answer, Console(file=buf, width=200, color_system=None, soft_wrap=True),
                  details=details)
    return buf.getvalue()


def test_a_chinese_seen_before_shows_the_chinese_resolution() -> None:
    answer = _answer("zh")
    first = answer.similar_incidents[0]
    assert first.resolution_zh and CJK.search(first.resolution_zh)
    opening = first.resolution_zh[:30]
    for surface, text in (("analyze --details", _terminal(answer, details=True)),
                          ("slack details", message_text(details_message(answer, "zh").blocks)),
                          ("slack first", message_text(first_message(answer, "zh").blocks))):
        assert opening in text, (surface, text[-800:])
        assert first.resolution[:30] not in text, surface
    english = _answer("en")
    assert english.similar_incidents[0].resolution[:30] in _terminal(english, details=True)

"""Signatures measured on real logs: the gate CI applies, and how it counts."""

from __future__ import annotations

import datetime as dt

import yaml

from bot.knowledge.cards import card_files, healthy_logs, parse_card
from bot.knowledge.incidents import Confirmation, Incident
from bot.knowledge.signatures import measure
from bot.service import bundled_cards, bundled_incidents


def test_every_decisive_signature_passes_the_bar_on_the_corpus() -> None:
    stats = measure(bundled_cards(), bundled_incidents(), healthy_logs())
    failing = {f"{s.card}/{s.name}": s.problems() for s in stats if s.problems()}
    assert failing == {}
    assert healthy_logs(), "no healthy logs to measure against"


def _incident(iid: str, category: str, log: str) -> Incident:
    return Incident(id=iid, source=f"https://github.com/o/r/issues/{iid}", repo="o/r", title=iid,
                    date=dt.date(2024, 1, 1), category=category, log=log, resolution="fixed",
                    confirmed_by=Confirmation(who="reporter", quote="that fixed it for me"))


def test_measure_counts_true_and_false_positives_and_healthy_hits() -> None:
    data = yaml.safe_load(card_files()[0].read_text(encoding="utf-8"))
    data["signatures"] = [{"name": "boom", "pattern": "BOOM happened", "weight": 0.8}]
    data["examples"] = ["BOOM happened on rank 3"]
    card = parse_card(yaml.safe_dump(data, allow_unicode=True))
    other = "rendezvous_failure" if card.category != "rendezvous_failure" else "rank_crashed"
    incidents = [_incident("tp-case", card.category, "x\nBOOM happened here\n"),
                 _incident("fp-case", other, "BOOM happened too\n"),
                 _incident("quiet-case", other, "nothing\n")]
    (st,) = measure([card], incidents, [("ok.log", "all fine\nBOOM happened in a test\n")])
    assert st.true_pos == ["tp-case"] and st.false_pos == ["fp-case", "healthy:ok.log"]
    assert st.precision is not None and abs(st.precision - 1 / 3) < 1e-9
    problems = " ".join(st.problems())
    assert "healthy log ok.log" in problems and "precision 0.33" in problems
    (alone,) = measure([card], incidents[2:], [])
    assert alone.problems() == ["no real positive in the incident corpus"]

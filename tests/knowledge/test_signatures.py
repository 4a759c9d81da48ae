"""Signatures measured on real logs: the gate CI applies, and how it counts."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml

from bot.answering.knowledge import bundled_cards, bundled_incidents
from bot.knowledge.cards import Card, card_files, healthy_logs, parse_card
from bot.knowledge.incidents import Confirmation, Incident
from bot.knowledge.signatures import measure, summarize


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
    assert alone.problems() == ["no real positive (no incident of its card's category, no proof)"]


def _card_with(signatures: list[dict[str, object]], examples: list[str]) -> Card:
    data = yaml.safe_load(card_files()[0].read_text(encoding="utf-8"))
    data["signatures"], data["examples"] = signatures, examples
    return parse_card(yaml.safe_dump(data, allow_unicode=True))


def test_a_proof_is_a_real_positive_and_a_format_string_may_stand_for_an_example() -> None:
    proof = [{"source": "https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/bootstrap.cc#L126",
              "quote": 'WARN("Bootstrap : no socket interface found");'}]
    card = _card_with([{"name": "no-iface", "pattern": "Bootstrap : no socket interface found",
                        "weight": 0.8, "proof": proof}], [])
    (st,) = measure([card], [], [])
    assert st.proofs == 1 and st.has_positive and st.problems() == []
    assert summarize([st]).proven_by_source == 1
    # without the proof the signature matches nothing real: the card is rejected
    with pytest.raises(ValueError, match="none of its proofs"):
        _card_with([{"name": "no-iface", "pattern": "Bootstrap : no socket interface found",
                     "weight": 0.8}], [])


def test_a_light_signature_on_a_healthy_log_fails_and_the_summary_counts_it() -> None:
    card = _card_with([{"name": "socket", "pattern": "NCCL INFO Using network Socket",
                        "weight": 0.15}], ["x:1:1 [0] NCCL INFO Using network Socket"])
    other = "rendezvous_failure" if card.category != "rendezvous_failure" else "rank_crashed"
    incidents = [_incident("other-cause", other, "h:2:2 [0] NCCL INFO Using network Socket\n")]
    healthy = [("sockets.log", "h:1:1 [0] NCCL INFO Using network Socket\n")]
    (st,) = measure([card], incidents, healthy)
    assert not st.decisive and st.healthy_hits == ["sockets.log"]
    assert st.problems() == ["fires on healthy log sockets.log"]
    summary = summarize([st])
    assert (summary.only_other_causes, summary.healthy_false_positives, summary.imprecise,
            summary.failing, summary.without_positive) == (1, 1, 1, 1, 1)
    assert "1 fire on a healthy log" in summary.line()


def test_every_healthy_log_has_a_source_and_no_signature_fires_on_one() -> None:
    from bot.knowledge.check import check_healthy

    assert check_healthy() == []
    assert len(healthy_logs()) >= 25
    stats = measure(bundled_cards(), bundled_incidents(), healthy_logs())
    assert [f"{s.card}/{s.name}" for s in stats if s.healthy_hits] == []


def test_a_healthy_log_without_an_index_entry_is_a_defect(tmp_path: Path) -> None:
    from bot.knowledge.cards import knowledge_dir
    from bot.knowledge.check import check_healthy

    index = (knowledge_dir() / "healthy" / "index.yaml").read_text(encoding="utf-8")
    (tmp_path / "index.yaml").write_text(index, encoding="utf-8")
    data = yaml.safe_load(index)
    for entry in data["logs"][1:]:
        (tmp_path / entry["file"]).write_text("ok\n", encoding="utf-8")
    (tmp_path / "stray.log").write_text("ok\n", encoding="utf-8")
    problems = check_healthy(tmp_path)
    assert any(p.startswith("healthy/stray.log: no entry") for p in problems)
    assert any(data["logs"][0]["file"] in p and "no such log" in p for p in problems)

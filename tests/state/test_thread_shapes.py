"""Thread state is typed (candidates, analyses, probe proposals) and still loads the rows
earlier versions wrote as plain dicts.

`tests/fixtures/threads/state_before_typed.json` is a row written by the code before this
change (main at 73971be): `analyze_log` over the bundled sample, the Slack conversation's
`merge_candidates` over the deterministic answer, one confirmed probe proposal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.agent.models import CauseFound, LogAnalysis, ProbeProposal
from bot.answering.contract import EvidenceLine, InputSummary, SuspectOut
from bot.state.threads import Candidate, SqliteThreadStore, ThreadState

OLD_ROW = Path(__file__).resolve().parents[1] / "fixtures" / "threads" / "state_before_typed.json"
SAMPLE = "sample-8rank-oom.log"


def test_an_old_shape_row_loads_into_the_typed_state(tmp_path: Path) -> None:
    raw = OLD_ROW.read_text()
    store = SqliteThreadStore(tmp_path / "threads.sqlite3")
    with store.db.tx() as tx:  # the row exactly as the old code stored it
        tx.execute("INSERT INTO thread_state VALUES (?,?,?)",
                   ("C1:1700000000.000100", raw, 1.0e12))
    state = store.get("C1:1700000000.000100")
    assert state is not None

    top = state.candidates[0]
    assert isinstance(top, Candidate)
    assert (top.category, top.card) == ("rank_crashed", "cuda-oom-on-one-rank-others-timeout")
    assert top.confidence == 0.72 and top.title["en"].startswith("CUDA out of memory")

    analysis = state.analyses[SAMPLE]
    assert isinstance(analysis, LogAnalysis)
    assert analysis.files == [SAMPLE] and analysis.input.files == []  # old rows had none
    assert analysis.hosts == ["gpu-node-16", "gpu-node-17"]
    assert analysis.input.counts["oom"] == 1
    cause = analysis.root_causes[0]
    assert isinstance(cause, CauseFound) and cause.card == "cuda-oom-on-one-rank-others-timeout"
    assert cause.evidence[0] == EvidenceLine(file=SAMPLE, line=75, rank=5,
                                             text=cause.evidence[0].text)
    assert "OutOfMemoryError" in cause.evidence[0].text
    assert analysis.suspects[0] == SuspectOut(rank=5, host="gpu-node-17",
                                              reason=analysis.suspects[0].reason)

    (proposal,) = state.proposals
    assert isinstance(proposal, ProbeProposal)
    assert (proposal.node, proposal.preset, proposal.status) == ("gpu-node-16", "quick",
                                                                  "confirmed")
    assert proposal.params["collectives"] == ["all_reduce"]

    # what the model is shown of the analysis is what the old dict showed, less the nulls
    old = json.loads(raw)["analyses"][SAMPLE]
    shown = analysis.for_model()
    assert shown["root_causes"] == old["root_causes"]
    assert shown["input"] == old["input"]
    assert set(shown) == set(old)

    # and it round-trips through the store in the new shape
    store.put(state)
    again = store.get(state.thread_id or "")
    assert again == state
    store.close()


def test_a_candidate_without_a_confidence_reads_as_zero() -> None:
    state = ThreadState.model_validate(
        {"candidates": [{"category": "network_config", "card": None, "confidence": None,
                         "title": {"en": "x"}, "written_by": "an older version"}]})
    assert state.candidates == [Candidate(category="network_config", confidence=0.0,
                                          title={"en": "x"})]


def test_a_proposal_is_frozen_and_its_status_one_of_three() -> None:
    p = ProbeProposal(node="gpu-node-7", preset="quick", params={"iters": 10})
    assert p.status == "proposed" and p.key == ("gpu-node-7", "quick")
    confirmed = p.model_copy(update={"status": "confirmed"})
    assert confirmed.status == "confirmed" and p.status == "proposed"
    with pytest.raises(ValidationError, match=r"proposals\.0\.status"):
        ThreadState.model_validate({"proposals": [{"node": "n", "preset": "quick",
                                                   "status": "maybe"}]})


def test_the_input_summary_drops_its_file_list_only_for_the_model() -> None:
    analysis = LogAnalysis(attachment="a.log", files=["a.log"], verdict="diagnosed",
                           input=InputSummary.model_validate(
                               {"files": [{"name": "a.log", "lines": 3}], "lines": 3,
                                "hosts": ["h1"]}))
    shown = analysis.for_model()
    assert isinstance(shown["input"], dict) and "files" not in shown["input"]
    assert shown["input"]["hosts"] == ["h1"] and shown["files"] == ["a.log"]
    assert analysis.model_dump()["input"]["files"][0]["name"] == "a.log"

"""The pure grounding checks."""

from __future__ import annotations

from bot.agent.answer_model import AgentAnswer, AnswerParseError, parse_answer
from bot.agent.validate import validate_answer
from bot.answering.contract import Dropped
from bot.answering.knowledge import bundled_cards
from bot.knowledge.taxonomy import category_ids
from tests.agent_llm.conftest import OOM_CARD

LONG = ("[rank2]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 336.00 MiB. "
        "GPU  has a total capacity of 79.15 GiB of which 141.25 MiB is free. Process 2109115 "
        "has 78.99 GiB memory in use. Of the allocated memory 77.21 GiB is allocated by "
        "PyTorch, and 283.51 MiB is reserved by PyTorch but unallocated. If reserved but "
        "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:"
        "True to avoid fragmentation.")
LINES = {("train.log", 7): "[rank2]: torch.cuda.OutOfMemoryError: CUDA out of memory.",
         ("train.log", 9): LONG}


ALL_IDS = [c.id for c in bundled_cards()]


def _check(raw: dict, seen=(OOM_CARD,), known=None, files=None, nodes=None, node_names=None):
    cards = {c.id: c for c in bundled_cards() if c.id in seen}
    return validate_answer(AgentAnswer.model_validate(raw), cards=cards,
                           categories=category_ids(),
                           line_at=lambda f, n: LINES.get((f, n)),
                           known_evidence=known or {}, presets={"quick"},
                           analyzed_files=files, known_nodes=nodes, all_card_ids=ALL_IDS,
                           node_names=node_names)


def _claim(*evidence: dict) -> dict:
    return {"explanation": "x", "root_causes": [{
        "category": "rank_crashed", "card": OOM_CARD, "confidence": 0.9,
        "evidence": list(evidence)}]}


def test_valid_claim_kept_and_evidence_text_taken_from_the_log():
    out = _check(_claim({"file": "train.log", "line": 7, "text": LINES[("train.log", 7)]}))
    assert out.notes == [] and out.grounded
    assert out.answer.citations == [OOM_CARD]
    assert len(out.answer.remediation) >= 3  # the card's steps when the model gave none
    # A part of the line is completed from the log, and the user is told.
    out = _check(_claim({"file": "train.log", "line": 7, "text": "OutOfMemoryError"}))
    assert out.answer.root_causes[0].evidence[0].text == LINES[("train.log", 7)]
    assert out.notes == ["evidence train.log:7: the quoted text was replaced by the log line"]


def test_a_quote_must_really_match_its_line():
    for lax in ("E", "memory", "CUDA", "rank2]"):  # substrings, but far from the line
        out = _check(_claim({"file": "train.log", "line": 7, "text": lax}))
        assert out.answer.root_causes[0].evidence == [], lax
        assert out.notes == ["dropped evidence train.log:7: the quoted text does not match "
                             "that line"]
        assert out.dropped == [Dropped(kind="evidence", file="train.log", line=7)]
    # Most of the line's words, in another order or spacing, still match.
    out = _check(_claim({"file": "train.log", "line": 7,
                         "text": "rank2 torch.cuda OutOfMemoryError - CUDA out of memory"}))
    assert out.answer.root_causes[0].evidence[0].line == 7
    # A long line shortened with "..." matches, its pieces in order.
    short = "torch.cuda.OutOfMemoryError: CUDA out of memory ... to avoid fragmentation."
    out = _check(_claim({"file": "train.log", "line": 9, "text": short}))
    assert out.answer.root_causes[0].evidence[0].text == LONG
    backwards = "to avoid fragmentation ... torch.cuda.OutOfMemoryError: CUDA out of memory"
    assert _check(_claim({"file": "train.log", "line": 9, "text": backwards})
                  ).answer.root_causes[0].evidence == []
    # But not a long text that merely contains the line's words among many others.
    padded = "CUDA out of memory " + " ".join(f"word{i}" for i in range(30))
    out = _check(_claim({"file": "train.log", "line": 7, "text": padded}))
    assert out.answer.root_causes[0].evidence == []


def test_evidence_only_from_logs_analyze_log_returned():
    out = _check(_claim({"file": "train.log", "line": 7, "text": LINES[("train.log", 7)]}),
                 files={"other.log"})
    assert out.answer.root_causes[0].evidence == []
    assert out.notes == ["dropped evidence train.log:7: train.log is not a log analyze_log "
                         "returned in this conversation"]


def test_explanation_card_ids_no_tool_returned_are_removed():
    other = "nccl-socket-ifname-matches-no-interface"
    out = _check({"explanation": f"Not {other}; it is {OOM_CARD} (see made-up-card).",
                  "root_causes": [{"category": "rank_crashed", "card": OOM_CARD,
                                   "confidence": 0.9},
                                  {"category": "rank_crashed", "card": "made-up-card",
                                   "confidence": 0.5}]})
    assert out.answer.explanation == (f"Not [unverified card]; it is {OOM_CARD} "
                                      "(see [unverified card]).")
    assert sum("from the explanation" in n for n in out.notes) == 2


def test_probe_suggestions_need_an_inventory_node():
    raw = {"explanation": "", "citations": [OOM_CARD],
           "probes": [{"node": "HOST_1", "preset": "quick"}, {"node": "HOST_9", "preset": "quick"},
                      {"node": "HOST_1", "preset": "quick"}]}
    out = _check(raw, nodes={"HOST_1"})
    assert [(p.node, p.preset) for p in out.answer.probes] == [("HOST_1", "quick")]
    assert out.notes == ["dropped probe suggestion 'quick' on HOST_9: not a node of the "
                         "inventory (NCCLBOT_NODES_FILE)"]
    assert _check(raw, nodes=set()).answer.probes == []


def test_wrong_line_number_repaired_from_known_evidence():
    known = {"train.log": {"7": LINES[("train.log", 7)]}}
    out = _check({"explanation": "", "root_causes": [{
        "category": "rank_crashed", "card": OOM_CARD, "confidence": 0.5,
        "evidence": [{"file": "train.log", "line": 3, "text": "CUDA out of memory"}]}]},
        known=known)
    assert out.answer.root_causes[0].evidence[0].line == 7
    assert out.notes == ["repaired evidence train.log:3 to train.log:7"]


def test_unseen_card_unknown_probe_and_bad_step_dropped():
    out = _check({"explanation": "", "root_causes": [
        {"category": "rank_crashed", "card": "nccl-socket-ifname-matches-no-interface",
         "confidence": 0.9}],
        "remediation": [{"card": OOM_CARD, "step": 0}],
        "probes": [{"node": "n1", "preset": "burn-it-down"}, {"node": "n1", "preset": "quick"}]})
    assert not out.grounded
    assert [p.preset for p in out.answer.probes] == ["quick"]
    assert len(out.notes) == 3, out.notes


def test_parse_answer_tolerates_fences_but_not_garbage():
    fenced = 'Here:\n```json\n{"explanation": "ok", "citations": ["a"]}\n```'
    assert parse_answer(fenced).citations == ["a"]
    for bad in ("", "no json here", '{"root_causes": 5}', "[1, 2]"):
        try:
            parse_answer(bad)
        except AnswerParseError:
            continue
        raise AssertionError(f"accepted {bad!r}")


def test_explanation_node_names_the_model_was_never_shown_are_removed():
    from bot.agent.validate import NodeNames

    nodes = NodeNames(known={"HOST_1", "HOST_2"}, naming=["gpu-node07", "gpu-node08.cluster"],
                      seen="analyze_log: rank 2 on HOST_1; peer gpu-node11 unreachable")
    raw = {"explanation": "Rank 2 on HOST_1 ran out of memory; gpu-node11 lost its peer, and "
                          "gpu-node42 and HOST_7 timed out. Probe GPU-NODE99.cluster next, "
                          "then gpu-node42 again; node-a and rank7 are not node names here.",
           "citations": [OOM_CARD]}
    out = _check(raw, node_names=nodes)
    assert out.answer.explanation == (
        "Rank 2 on HOST_1 ran out of memory; gpu-node11 lost its peer, and [unverified node] "
        "and [unverified node] timed out. Probe [unverified node] next, then [unverified node] "
        "again; node-a and rank7 are not node names here.")
    assert [d.node for d in out.dropped] == ["gpu-node42", "HOST_7", "GPU-NODE99.cluster"]
    assert out.notes[0] == ("removed node name 'gpu-node42' from the explanation: not a node "
                            "of the inventory, nor named in the question, the logs or a "
                            "tool's output")
    assert _check(raw).answer.explanation == raw["explanation"]  # not checked without names

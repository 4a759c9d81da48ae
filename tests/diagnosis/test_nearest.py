"""The nearest-incident channel: normalisation, salient lines, the index and the vote."""

from __future__ import annotations

import datetime as dt

from bot.diagnosis.nearest import (
    IncidentIndex,
    Neighbour,
    VoteParams,
    category_votes,
    incident_doc,
    terms,
)
from bot.knowledge.incidents import Confirmation, Incident
from bot.logs.salient import HEAD_LINES, TAIL_LINES, SalientLines, normalise, salient_key

# Lines as NCCL and PyTorch print them (the IB line is built from the format string in
# NCCL's src/transport/net_ib/p2p.cc, ncclIbLogCompletionWithError).
WATCHDOG = ("[rank5]:[E ProcessGroupNCCL.cpp:563] [Rank 5] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=15734, OpType=ALLREDUCE, NumelIn=220084533, "
            "NumelOut=220084533, Timeout(ms)=600000) ran for 600037 milliseconds before timing out.")
IB = ("node-1:12345:12400 [3] NCCL WARN NET/IB: Got completion from peer 10.1.1.2<49152> with "
      "status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129  localGid "
      "::ffff:10.1.1.1 remoteGids::ffff:10.1.1.2 hca mlx5_0")
SHM = "Error while creating shared memory segment /dev/shm/nccl-1YsMbG (size 7340384)"


def test_normalise_drops_what_varies_between_jobs() -> None:
    nccl = ("[rank5]: RuntimeError: [Rank 5] NCCL error in: /opt/pytorch/torch/csrc/distributed/"
            "c10d/ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.14.3")
    a = salient_key(nccl)
    b = salient_key(nccl.replace("rank5", "rank12").replace("Rank 5", "Rank 12")
                    .replace(":1269", ":1300").replace("2.14.3", "2.18.1"))
    assert a is not None and a == b
    assert "[rank]" in a and "processgroupnccl.cpp" in a and "1269" not in a
    ib = salient_key(IB)
    assert ib is not None
    assert "node-1" not in ib and "10.1.1.2" not in ib and "ipaddr" in ib
    assert "net/ib" in ib and "ibv_wc_retry_exc_err(12)" in ib
    assert normalise("File /opt/conda/lib/python3.10/site-packages/torch/x.py:12") == "file x.py"


def test_lines_every_timeout_prints_are_not_compared() -> None:
    """The watchdog's report is structured evidence for the rules; it says nothing about the
    cause, so it is not a salient line."""
    assert salient_key(WATCHDOG) is None
    assert salient_key("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:") is None


def test_only_salient_lines_are_kept() -> None:
    assert salient_key("step 100 loss 2.31 lr 3e-4") is None
    assert salient_key("") is None
    assert salient_key(SHM) == "error while creating shared memory segment nccl-1ysmbg (size )"


def test_salient_lines_are_bounded_head_and_tail() -> None:
    acc: SalientLines[int] = SalientLines()
    for i in range(HEAD_LINES + TAIL_LINES + 500):
        acc.add(f"error number {'x' * (i % 7)} {i:05d}", i)
        acc.add(f"error number {'x' * (i % 7)} {i:05d}", -1)  # duplicates are ignored
    lines = acc.lines()
    assert len(lines) == HEAD_LINES + TAIL_LINES
    assert lines[0].endswith("00000") and lines[-1].endswith(f"{HEAD_LINES + TAIL_LINES + 499:05d}")
    assert all(where is not None and where >= 0 for _, where in acc.items())


def _incident(iid: str, category: str, log: str, secondary: list[str] | None = None) -> Incident:
    return Incident(id=iid, source=f"https://github.com/o/r/issues/{len(iid)}{iid[-1]}",
                    repo="o/r", title=iid, date=dt.date(2024, 1, 1), category=category,
                    secondary=secondary or [], log=log, resolution="fixed",
                    confirmed_by=Confirmation(who="maintainer", quote="this was the cause"))


def test_index_finds_the_incident_with_the_same_failure() -> None:
    corpus = [
        _incident("ib-case", "infiniband_roce", IB),
        _incident("shm-case", "shm_ipc_container", SHM + "\nNCCL WARN unhandled system error"),
        _incident("timeout-case", "timeout_too_short", WATCHDOG),
    ]
    index = IncidentIndex(corpus)
    query = [k for k in (salient_key(IB.replace("mlx5_0", "mlx5_3").replace("10.1.1.2", "10.9.9.9")),)
             if k]
    best = index.nearest(query, k=3)
    assert best[0].doc.id == "incident:ib-case" and best[0].score > 0.8
    assert all(n.doc.id != "incident:ib-case" for n in
               index.nearest(query, k=3, exclude=lambda i: i.id == "ib-case"))
    assert index.overlap(query[0], index.docs[0]) > index.overlap(query[0], index.docs[1])
    assert index.similarities(["nothing in common"]) == [0.0, 0.0, 0.0]


def test_votes_share_by_similarity_and_scale_with_closeness() -> None:
    a = _incident("a-case", "infiniband_roce", IB)
    b = _incident("b-case", "network_interface", IB, secondary=["infiniband_roce"])
    da, db = incident_doc(a), incident_doc(b)
    votes = category_votes([Neighbour(da, 0.6), Neighbour(db, 0.3)], VoteParams(k=2, power=1))
    assert max(votes, key=lambda c: votes[c]) == "infiniband_roce"
    assert abs(sum(votes.values()) - 1.0) < 1e-9  # the best neighbour is close: full weight
    far = category_votes([Neighbour(da, 0.1)], VoteParams(k=2, floor=0.05, full_at=0.5))
    assert abs(far["infiniband_roce"] - 0.2) < 1e-9
    assert category_votes([Neighbour(da, 0.01)], VoteParams(floor=0.05)) == {}


def test_terms_have_bigrams() -> None:
    t = terms(["unhandled system error"])
    assert t["unhandled system"] == 1 and t["error"] == 1
    assert "system error" not in terms(["unhandled system error"], bigrams=False)


def test_cards_are_documents_too_and_never_excluded() -> None:
    from bot.answering.knowledge import bundled_cards

    cards = [c for c in bundled_cards() if c.id == "dev-shm-too-small-in-container"]
    index = IncidentIndex([_incident("ib-case", "infiniband_roce", IB)], cards)
    query = [k for k in (salient_key(SHM),) if k]
    best = index.nearest(query, k=2, exclude=lambda i: True)
    assert [n.doc.card for n in best] == ["dev-shm-too-small-in-container"]
    assert best[0].incident is None and best[0].doc.category == "shm_ipc_container"


def test_knowledge_is_kept_on_disk_and_rebuilt_when_damaged(tmp_path, monkeypatch) -> None:
    import bot.answering.knowledge as service

    service.knowledge_for.cache_clear()
    cards, index = service.knowledge_for(tmp_path)
    (kept,) = tmp_path.glob("knowledge-*.pickle")
    service.knowledge_for.cache_clear()
    built = []
    monkeypatch.setattr(service, "IncidentIndex", lambda *a: built.append(a) or index)
    again_cards, again = service.knowledge_for(tmp_path)  # from disk: nothing built
    assert not built and len(again.docs) == len(index.docs) and len(again_cards) == len(cards)
    service.knowledge_for.cache_clear()
    kept.write_bytes(b"not a pickle")  # a damaged cache is rebuilt, not an error
    service.knowledge_for(tmp_path)
    assert len(built) == 1
    service.knowledge_for.cache_clear()


def test_with_evidence_at_least_three_candidates_the_filled_ones_weak() -> None:
    """A log whose evidence names one cause still lists three candidates: the others are
    weak, below the real one, and say which past incident they come from."""
    from bot.answering.knowledge import bundled_cards, bundled_index
    from bot.diagnosis.engine import MIN_CANDIDATES, diagnose
    from bot.logs.analyze import analyzer_for
    from bot.logs.sources import text_source

    cards = list(bundled_cards())
    report = analyzer_for(cards).analyze([text_source("ib.log", IB + "\n")])
    d = diagnose(report, cards, incidents=bundled_index())
    categories = list(dict.fromkeys(rc.category for rc in d.root_causes))
    assert categories[0] == "infiniband_roce"
    assert len(categories) >= MIN_CANDIDATES
    first = d.root_causes[0]
    for rc in d.root_causes[1:]:
        assert rc.score < first.score
    assert all(rc.certainty == "weak" for rc in d.root_causes if rc.category != "infiniband_roce")

"""NCCL RAS: parsing real report layouts, the client protocol over a socket, the version gate
and the two-poll verdict. Fixtures: tests/fixtures/ras (see its README for provenance)."""

from __future__ import annotations

import socket

import pytest
from conftest import FIXTURES
from ras_server import RasReplayServer

from tools.hang.ras import (
    RasCommunicator,
    RasCountGroup,
    RasRank,
    RasRefusedError,
    RasStatus,
    RasUnavailableError,
    compare,
    known_issues,
    parse_json,
    parse_status,
    parse_text,
    poll,
    refusal,
)

RAS = FIXTURES / "ras"
HASH = "7f3e2a9c41b05d18"


def report(name: str) -> str:
    return (RAS / name).read_text()


def status(name: str) -> RasStatus:
    return parse_status(report(name))


# --- parsing ------------------------------------------------------------------------------


def test_parse_json_counts_and_ranks() -> None:
    st = status("json_2.29.2_desync.json")
    assert (st.fmt, st.nccl_version, st.complete, st.timeouts) == ("json", "2.29.2", True, 0)
    (comm,) = st.communicators
    assert comm.comm_hash == HASH and comm.nranks == 4 and comm.counts_complete
    r3 = next(r for r in comm.ranks if r.rank == 3)
    assert (r3.host, r3.pid, r3.gpu, r3.status) == ("10.0.0.2", 4204, "1", "RUNNING")
    assert r3.counts == {"Broadcast": 1, "Reduce": 0, "AllGather": 0, "ReduceScatter": 0,
                         "AllReduce": 1199}
    allreduce = [(g.count, g.ranks) for g in comm.count_groups if g.op == "AllReduce"]
    assert allreduce == [(1200, [0, 1, 2]), (1199, [3])]


def test_parse_json_missing_and_dead_ranks() -> None:
    (comm,) = status("json_2.29.2_missing_rank.json").communicators
    (m,) = comm.missing_ranks
    assert (m.rank, m.host, m.pid, m.unresponsive, m.dead) == (3, "10.0.0.2", 4204, True, False)
    dead = status("json_2.29.2_dead_rank.json")
    assert [(p.host, p.pid) for p in dead.dead_processes] == [("10.0.0.2", 4204)]


def test_parse_json_repairs_the_2_28_missing_comma() -> None:
    raw = report("json_2.28.9_missing_rank.json")
    assert '"nvml_dev": 1\n' in raw  # the layout NCCL 2.28.7-2.29.1 write
    st = parse_json(raw)
    assert st.nccl_version == "2.28.9" and st.communicators[0].missing_ranks[0].rank == 3
    assert any("comma" in w for w in st.warnings)


def test_parse_text_header_table_and_mismatch() -> None:
    st = status("text_2.27.5_desync.txt")
    assert (st.fmt, st.nccl_version, st.collection_time_s, st.complete) == (
        "text", "2.27.5", 0.01, True)
    (row,) = st.groups
    assert (row.comms, row.ranks_per_comm, row.status, row.errors) == (1, 8, "RUNNING",
                                                                       "MISMATCH")
    (comm,) = st.communicators
    assert (comm.comm_hash, comm.label, comm.nranks, comm.problems) == (HASH, "#0-0", 8,
                                                                        ["MISMATCH"])
    groups = [(g.op, g.count, g.nranks, g.ranks) for g in comm.count_groups]
    assert groups == [("AllReduce", 1200, 7, []), ("AllReduce", 1199, 1, [5])]
    r5 = comm.ranks[0]
    assert (r5.rank, r5.host, r5.pid, r5.gpu, r5.counts) == (5, "10.0.0.2", 4106, "1",
                                                             {"AllReduce": 1199})


def test_parse_text_dead_process_and_missing_rank() -> None:
    st = status("text_2.27.5_dead.txt")
    assert [(p.pid, p.host, p.gpus) for p in st.dead_processes] == [(4106, "10.0.0.2", "1")]
    assert st.timeouts == 2 and st.collection_time_s == 2.05
    (m,) = st.communicators[0].missing_ranks
    assert (m.rank, m.host, m.pid, m.unresponsive, m.dead) == (5, "10.0.0.2", 4106, True, True)


def test_parse_text_before_2_26() -> None:
    inc = status("text_2.24.3_incomplete.txt")
    assert inc.nccl_version == "2.24.3"
    assert [(p.pid, p.host) for p in inc.missing_processes] == [(4106, "10.0.0.2")]
    assert [r.rank for r in inc.communicators[0].missing_ranks] == [5]
    mm = status("text_2.24.3_mismatch.txt").communicators[0]
    assert [(g.op, g.count, g.nranks, g.ranks) for g in mm.count_groups] == [
        ("all", 5000, 6, []), ("all", 4999, 2, [2, 6])]


def test_parse_truncated_and_garbage() -> None:
    full = report("text_2.27.5_desync.txt")
    cut = parse_text(full[: full.index("Warnings")])
    assert not cut.complete and cut.groups and any("cut short" in w for w in cut.warnings)
    with pytest.raises(RasUnavailableError, match="not complete JSON"):
        parse_json(report("json_2.29.2_desync.json")[:700])
    with pytest.raises(RasUnavailableError, match="not a RAS report"):
        parse_status("HTTP/1.1 400 Bad Request\r\n\r\n<html></html>")
    with pytest.raises(RasUnavailableError, match="not a RAS report"):
        parse_status('{"hello": "world"}')


# --- the two-poll verdict ------------------------------------------------------------------


def test_desync_names_the_lowest_ranks() -> None:
    for name, rank, host in (("json_2.29.2_desync.json", 3, "10.0.0.2"),
                             ("text_2.27.5_desync.txt", 5, "10.0.0.2")):
        v = compare(status(name), status(name))
        assert (v.kind, v.culprit_ranks, v.culprit_hosts) == ("desync", [rank], [host]), name
        assert v.culprits[0].pid is not None
        assert any("at 1199 in both polls" in e and "1200" in e for e in v.evidence)
    old = compare(status("text_2.24.3_mismatch.txt"), status("text_2.24.3_mismatch.txt"))
    assert (old.kind, old.culprit_ranks) == ("desync", [2, 6])


def test_equal_frozen_counts_are_a_stall_not_health() -> None:
    v = compare(status("json_2.29.2_equal_1200.json"), status("json_2.29.2_equal_1200.json"))
    assert v.kind == "stalled_equal" and not v.culprits
    assert any("AllReduce 1200" in e and "nccl#1730" in e for e in v.evidence)


def test_progressing() -> None:
    v = compare(status("json_2.29.2_equal_1200.json"), status("json_2.29.2_equal_1260.json"))
    assert v.kind == "progressing" and any("1200 -> 1260" in e for e in v.evidence)
    # a spread that clears (or appears) between text polls means counts moved
    assert compare(status("text_2.27.5_desync.txt"), status("text_2.27.5_ok.txt")).kind \
        == "progressing"
    assert compare(status("text_2.27.5_ok.txt"), status("text_2.27.5_desync.txt")).kind \
        == "progressing"


def test_text_without_spread_cannot_tell_a_stall() -> None:
    v = compare(status("text_2.27.5_ok.txt"), status("text_2.27.5_ok.txt"))
    assert v.kind == "unknown" and any("hides their counts" in e for e in v.evidence)


def test_dead_and_missing_peers() -> None:
    cases = [("json_2.29.2_equal_1200.json", "json_2.29.2_missing_rank.json", 3),
             ("json_2.29.2_missing_rank.json", "json_2.29.2_dead_rank.json", 3),
             ("text_2.27.5_desync.txt", "text_2.27.5_dead.txt", 5)]
    for a, b, rank in cases:
        v = compare(status(a), status(b))
        assert (v.kind, v.culprit_ranks, v.culprit_hosts) == ("dead_peer", [rank],
                                                              ["10.0.0.2"]), b
    dead = compare(status("json_2.29.2_missing_rank.json"), status("json_2.29.2_dead_rank.json"))
    assert any("considered dead" in e for e in dead.evidence)
    old = compare(status("text_2.24.3_incomplete.txt"), status("text_2.24.3_incomplete.txt"))
    assert old.kind == "dead_peer" and 5 in old.culprit_ranks
    assert ("10.0.0.2", 4106) in {(c.host, c.pid) for c in old.culprits}


def _comm(h: str, counts: dict[int, int], nranks: int = 4) -> RasCommunicator:
    ranks = [RasRank(rank=r, host=f"n{r}", counts={"AllReduce": c}) for r, c in counts.items()]
    by: dict[int, list[int]] = {}
    for r, c in counts.items():
        by.setdefault(c, []).append(r)
    return RasCommunicator(comm_hash=h, nranks=nranks, ranks=ranks, counts_complete=True,
                           count_groups=[RasCountGroup(op="AllReduce", count=c, nranks=len(rs),
                                                       ranks=rs) for c, rs in by.items()])


def test_overall_verdict_over_several_communicators() -> None:
    def st(*comms: RasCommunicator) -> RasStatus:
        return RasStatus(fmt="json", communicators=list(comms))

    idle = _comm("00000000000000aa", {0: 0, 1: 0, 2: 0, 3: 0})
    world1 = _comm("00000000000000bb", {0: 50, 1: 50, 2: 50, 3: 50})
    world2 = _comm("00000000000000bb", {0: 51, 1: 51, 2: 51, 3: 51})
    # one communicator progressing, an idle one frozen: progressing, not a stall
    v = compare(st(idle, world1), st(idle, world2))
    assert v.kind == "progressing"
    assert {c.comm_hash: c.kind for c in v.communicators} == {"00000000000000aa": "unknown",
                                                               "00000000000000bb": "progressing"}
    # lowest rank frozen while the others keep launching: desync, culprit the frozen rank
    lag1 = _comm("00000000000000cc", {0: 10, 1: 10, 2: 10, 3: 9})
    lag2 = _comm("00000000000000cc", {0: 12, 1: 12, 2: 12, 3: 9})
    v = compare(st(world1, lag1), st(world2, lag2))
    assert (v.kind, v.culprit_ranks, v.culprit_hosts) == ("desync", [3], ["n3"])
    # one rank ahead of three frozen ones: the three are named, the one ahead is mentioned
    ahead = _comm("00000000000000dd", {0: 7, 1: 7, 2: 8, 3: 7})
    v = compare(st(ahead), st(ahead))
    assert v.kind == "desync" and v.culprit_ranks == [0, 1, 3]
    assert any("ahead may instead" in e for e in v.evidence)


# --- versions ------------------------------------------------------------------------------


def test_version_gate() -> None:
    assert refusal("2.26.2") and "issues/1669" in (refusal("2.26.2") or "")
    assert "issues/1996" in (refusal("2.27.7+cuda12.4") or "")
    assert refusal("2.27.3") is None and refusal("2.29.2") is None and refusal(None) is None
    assert [k.issue.rsplit("/", 1)[1] for k in known_issues("2.28.9")] == ["1762", "2346"]
    assert known_issues("2.24.3") == [] and known_issues("garbage") == []


# --- the protocol over a real socket -------------------------------------------------------


def test_poll_json_handshake_and_two_polls() -> None:
    reports = [report("json_2.29.2_desync.json"), report("json_2.29.2_desync.json")]
    with RasReplayServer(reports) as srv:
        first = poll("127.0.0.1", srv.port, timeout_s=3)
        second = poll("127.0.0.1", srv.port, timeout_s=3)
    assert srv.commands[0] == ["CLIENT PROTOCOL 2", "TIMEOUT 3", "SET FORMAT json", "STATUS"]
    assert first.fmt == "json" and first.source == f"127.0.0.1:{srv.port}"
    assert any("issues/2346" in w for w in first.warnings)
    v = compare(first, second)
    assert (v.kind, v.culprit_ranks) == ("desync", [3])


def test_poll_json_answers_differ_between_polls() -> None:
    reports = [report("json_2.29.2_equal_1200.json"), report("json_2.29.2_equal_1260.json")]
    with RasReplayServer(reports) as srv:
        v = compare(poll("127.0.0.1", srv.port, timeout_s=2),
                    poll("127.0.0.1", srv.port, timeout_s=2))
    assert v.kind == "progressing"


def test_poll_text_server_before_2_28_7() -> None:
    with RasReplayServer([report("text_2.27.5_desync.txt")], json=False) as srv:
        with pytest.raises(RasRefusedError, match=r"predates NCCL 2\.28\.7"):
            poll("127.0.0.1", srv.port, timeout_s=2)
        assert "STATUS" not in srv.commands[0]
        assert srv.commands[0][-1] == "SET FORMAT json"
        st = poll("127.0.0.1", srv.port, timeout_s=2, nccl_version="2.27.5", verbose=True)
        with pytest.raises(RasUnavailableError, match="no JSON output"):
            poll("127.0.0.1", srv.port, timeout_s=2, fmt="json", nccl_version="2.27.5")
    assert srv.commands[1][-1] == "VERBOSE STATUS"
    assert st.fmt == "text" and st.nccl_version == "2.27.5"
    assert st.communicators[0].count_groups[-1].ranks == [5]
    assert any("issues/1762" in w for w in st.warnings)


def test_poll_text_format_on_a_json_server() -> None:
    with RasReplayServer([report("text_2.27.5_ok.txt")]) as srv:
        st = poll("127.0.0.1", srv.port, timeout_s=2, fmt="text")
    assert srv.commands[0][2] == "SET FORMAT text" and st.fmt == "text"


def test_poll_refuses_known_crashing_versions_before_connecting() -> None:
    with RasReplayServer([report("text_2.27.5_ok.txt")], json=False) as srv:
        for version in ("2.26.2", "2.27.7"):
            with pytest.raises(RasRefusedError, match="force=True"):
                poll("127.0.0.1", srv.port, timeout_s=2, nccl_version=version)
        assert srv.commands == []
        st = poll("127.0.0.1", srv.port, timeout_s=2, nccl_version="2.27.7", force=True)
    # the report's own version line wins over the caller's claim
    assert any("said NCCL 2.27.7; RAS reports 2.27.5" in w for w in st.warnings)
    assert not any("known crash" in w for w in st.warnings)


def test_poll_connection_refused() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(RasUnavailableError) as e:
        poll("127.0.0.1", port, timeout_s=2)
    msg = str(e.value)
    assert f"NCCL RAS not listening on 127.0.0.1:{port}" in msg
    assert "NCCL >= 2.24" in msg and "NCCL_RAS_ENABLE" in msg


@pytest.mark.parametrize(("mode", "match"), [("http", "does not speak the NCCL RAS protocol"),
                                             ("close", "closed the connection"),
                                             ("silent", "did not answer in time")])
def test_poll_broken_servers(mode: str, match: str) -> None:
    with RasReplayServer([report("text_2.27.5_ok.txt")], mode=mode) as srv, \
            pytest.raises(RasUnavailableError, match=match):
        poll("127.0.0.1", srv.port, timeout_s=0.5)


def test_poll_truncated_and_garbage_reports() -> None:
    json_cut = report("json_2.29.2_desync.json")[:900]
    text_cut = report("text_2.27.5_desync.txt")[:400]
    with RasReplayServer([json_cut, text_cut, "", "SEGV\n"]) as srv:
        with pytest.raises(RasUnavailableError, match="not complete JSON"):
            poll("127.0.0.1", srv.port, timeout_s=2)
        st = poll("127.0.0.1", srv.port, timeout_s=2, fmt="text")
        assert not st.complete and st.nccl_version == "2.27.5"
        with pytest.raises(RasUnavailableError, match="closed without a report"):
            poll("127.0.0.1", srv.port, timeout_s=2, fmt="text")
        with pytest.raises(RasUnavailableError, match="not a RAS report"):
            poll("127.0.0.1", srv.port, timeout_s=2, fmt="text")

"""Flight Recorder dumps: real ones from a gloo job, crafted ones, broken ones."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from bot.logs.flight_recorder import DumpError, analyze_dumps, looks_like_dump, parse_dump
from tests.answer_json import analyze_paths


@pytest.fixture(scope="module")
def job(fr_job_dir: Path) -> Path:
    """The real 4-rank gloo job's output (`fr_job_dir` in tests/conftest.py: run once per
    session, shared with tests/mcp/test_flight_recorder.py)."""
    return fr_job_dir


def test_dumps_alone_name_the_rank_and_the_collective_it_never_entered(job: Path) -> None:
    answer = analyze_paths([str(job / "dumps")])
    suspect = answer["diagnosis"]["suspects"][0]
    assert suspect["rank"] == 2
    assert "never entered collective #4 (gloo:all_reduce [[8]])" in suspect["reason"]
    assert "fr_job.py:" in suspect["reason"]  # where the others called it
    assert answer["diagnosis"]["root_causes"][0]["category"] == "collective_mismatch"
    assert answer["verdict"] != "no_evidence"


def test_dumps_with_the_jobs_text_logs_are_joined(job: Path) -> None:
    answer = analyze_paths([str(job / "dumps"), str(job / "logs"), str(job / "torchrun.log")])
    assert answer["diagnosis"]["suspects"][0]["rank"] == 2
    texts = [e["text"] for rc in answer["diagnosis"]["root_causes"] for e in rc["evidence"]]
    assert any("never entered collective" in t for t in texts)  # from the dumps
    assert any("Timed out waiting" in t or "Connection closed" in t for t in texts)  # logs


def test_torchs_json_dumps_alone_name_the_rank(job: Path) -> None:
    """`_dump_fr_trace_json` output, read the same way; its head alone says it is a dump
    (torch sorts the keys: a big dump's version and pg_config come after every entry)."""
    first = (job / "json" / "fr_trace_0.json").read_bytes()
    assert looks_like_dump(first[:300], "fr_trace_0.json")
    answer = analyze_paths([str(job / "json")])
    assert answer["diagnosis"]["suspects"][0]["rank"] == 2
    assert "never entered collective #4 (gloo:all_reduce [[8]])" in (
        answer["diagnosis"]["suspects"][0]["reason"])


def test_json_dumps_and_a_mismatch(job: Path) -> None:
    raw = pickle.loads((job / "dumps" / "fr_trace_0").read_bytes())  # our own dump: trusted
    for e in raw["entries"]:
        if e["collective_seq_id"] == 2:
            e["profiling_name"] = "gloo:broadcast"
    other = parse_dump(json.dumps(raw).encode(), "fr_trace_0.json")
    mine = parse_dump((job / "dumps" / "fr_trace_1").read_bytes(), "fr_trace_1")
    findings = analyze_dumps([other, mine])
    mismatch = next(f for f in findings if f.kind == "mismatch")
    assert "collective #2" in mismatch.text and "gloo:broadcast" in mismatch.text


class _Evil:
    def __reduce__(self) -> tuple[object, tuple[str, ...]]:
        return (os.system, (f"touch {MARKER}",))


MARKER = Path("/tmp/ncclbot-fr-pwned")


def test_a_crafted_pickle_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    MARKER.unlink(missing_ok=True)
    evil = pickle.dumps({"version": "2.10", "entries": [], "x": _Evil()})
    with pytest.raises(DumpError, match="refused"):
        parse_dump(evil, "fr_trace_0")
    (tmp_path / "fr_trace_0").write_bytes(evil)
    (tmp_path / "rank0.log").write_text("[rank0]: RuntimeError: NCCL error: unhandled system "
                                        "error\n")
    answer = analyze_paths([str(tmp_path)])  # the rest is still analysed
    assert any("refused" in n for n in answer["notes"])
    assert answer["diagnosis"]["root_causes"]
    assert not MARKER.exists()


def test_a_truncated_dump_is_a_note_not_a_crash(job: Path, tmp_path: Path) -> None:
    data = (job / "dumps" / "fr_trace_0").read_bytes()
    (tmp_path / "fr_trace_0").write_bytes(data[: len(data) // 2])
    with pytest.raises(DumpError, match="truncated"):
        parse_dump(data[: len(data) // 2], "fr_trace_0")
    for r in (1, 2, 3):
        (tmp_path / f"fr_trace_{r}").write_bytes((job / "dumps" / f"fr_trace_{r}").read_bytes())
    answer = analyze_paths([str(tmp_path)])
    assert any("fr_trace_0" in n and "truncated" in n for n in answer["notes"])
    assert answer["diagnosis"]["suspects"][0]["rank"] == 2


def test_a_group_member_without_a_dump_is_the_suspect(job: Path) -> None:
    dumps = [parse_dump((job / "dumps" / f"fr_trace_{r}").read_bytes(), f"fr_trace_{r}")
             for r in (0, 1, 3)]  # rank 2's dump is lost; the others all reached #4
    assert dumps[0].groups and 2 in next(iter(dumps[0].groups.values()))  # from pg_config
    findings = analyze_dumps(dumps)
    assert [(f.kind, f.ranks) for f in findings] == [("no_dump", [2])]
    assert "reached collective #4 (gloo:all_reduce [[8]])" in findings[0].text
    assert analyze_dumps(dumps[:1]) == []  # one dump alone says nothing about the others

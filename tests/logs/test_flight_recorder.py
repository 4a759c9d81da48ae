"""Flight Recorder dumps: real ones from a gloo job, crafted ones, broken ones."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from bot.logs.flight_recorder import DumpError, analyze_dumps, looks_like_dump, parse_dump
from tests.answer_json import analyze_paths

JOB = Path(__file__).with_name("fr_job.py")


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run the job for real: 4 gloo ranks under torchrun, rank 2 skips one all_reduce."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("fr")
    (out / "dumps").mkdir()
    (out / "json").mkdir()
    env = {**os.environ, "DUMP_DIR": str(out / "dumps"), "SKIP_RANK": "2",
           "JSON_DIR": str(out / "json"),
           "TORCH_FR_BUFFER_SIZE": "2000", "GLOO_SOCKET_IFNAME": "lo"}
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc-per-node", "4", "--redirects", "3", "--log-dir", str(out / "logs"),
                str(JOB)]
    proc = subprocess.run(torchrun, env=env, capture_output=True, text=True, timeout=300)
    (out / "torchrun.log").write_text(proc.stdout + proc.stderr)
    assert sorted(p.name for p in (out / "dumps").iterdir()) == [
        f"fr_trace_{r}" for r in range(4)], proc.stderr[-2000:]
    return out


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

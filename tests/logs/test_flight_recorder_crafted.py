"""Crafted Flight Recorder dumps (tests/logs/crafted_dumps.py): each is a note, read in a
bounded child process, and the rest of the input is still analysed (issue 31)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bot.logs.flight_recorder import DumpError, FrDump, parse_dump
from bot.logs.fr_sandbox import DumpInput, SandboxLimits, read_dumps
from tests.logs.crafted_dumps import crafted, write

ROOT = Path(__file__).resolve().parents[2]
#: the `ncclbot` command as installed (its console script), run as a process of its own
_SCRIPT = Path(sys.executable).with_name("ncclbot")
NCCLBOT = [str(_SCRIPT)] if _SCRIPT.exists() else [
    sys.executable, "-c", "import sys; from bot.cli.main import main; sys.exit(main())"]
CASE = ROOT / "tests" / "fixtures" / "logs" / "oom-one-rank.yaml"
#: crafted files whose data is usable as it is (a dump with 100,000 sizes: shown shortened;
#: a lone surrogate in a name: replaced)
USABLE = {"sizes_long", "lone_surrogates"}


def _kind(name: str) -> str:
    return name.split("_", 1)[1].rsplit("_fr_trace_", 1)[0]


def _good_log(folder: Path) -> Path:
    """A real case's log (a rank OOMs, the others time out) beside the crafted dumps."""
    path = folder / "rank2.log"
    path.write_text(yaml.safe_load(CASE.read_text())["log"])
    return path


def test_every_crafted_dump_is_a_note_from_one_child() -> None:
    corpus = crafted()
    assert len(corpus) >= 53
    got = read_dumps([DumpInput(name, lambda d=data: d) for name, data, _ in corpus])
    assert len(got) == len(corpus)
    for (name, _, what), result in zip(corpus, got, strict=True):
        if isinstance(result, DumpError):
            text = str(result)
            assert text.startswith(name) and "\n" not in text and len(text) < 700, what
        else:
            assert isinstance(result, FrDump)
            assert result.notes or _kind(name) in USABLE, (name, what)
            # what is kept is bounded text and small ints, printable at once
            for e in result.entries:
                assert 0 <= e.seq < 2**63 and len(e.op) <= 300 and len(e.sizes) <= 130
                assert len(f"{e}") < 2000
    by_kind = {_kind(name): str(r) for (name, _, _), r in zip(corpus, got, strict=True)}
    assert "memo index 134217728" in by_kind["memo_8_bytes"]
    assert "billion laughs" in by_kind["laughs_11x10"]
    assert "billion laughs" in by_kind["laughs_filled_late"]
    assert "BUILD" in by_kind["build_on_dict"]
    assert "nested more than" in by_kind["deep_lists"]
    assert "nested more than" in by_kind["json_deep"]
    assert "integer of 16610 bits" in by_kind["int_5000_digits_seq"]
    assert "a number of 5000 digits" in by_kind["json_int_5000_digits"]
    assert "expected 4294967295 bytes" in by_kind["binunicode_4gb"]
    assert "os.system" in by_kind["global_os_system"]
    assert "holds itself" in by_kind["self_reference"]


def test_a_child_that_dies_costs_its_dump_only() -> None:
    """Limits small enough that a big (valid) dump kills its child: that dump is a note,
    the dumps before and after it are read by a fresh child."""
    import pickle

    good = pickle.dumps({"version": "2.10", "entries": [
        {"collective_seq_id": 1, "profiling_name": "nccl:all_reduce", "state": "scheduled",
         "input_sizes": [[8]], "frames": []}]}, protocol=2)
    big = pickle.dumps({"version": "2.10", "entries": [
        {"collective_seq_id": i, "profiling_name": f"nccl:all_reduce {i}"}
        for i in range(200_000)]}, protocol=2)
    got = read_dumps([DumpInput("fr_trace_0", lambda: good), DumpInput("fr_trace_1", lambda: big),
                      DumpInput("fr_trace_2", lambda: good)],
                     SandboxLimits(memory_bytes=48 * 2**20))
    assert isinstance(got[0], FrDump) and isinstance(got[2], FrDump)
    assert isinstance(got[1], DumpError) and "fr_trace_1" in str(got[1])
    assert "memory" in str(got[1]) or "stopped" in str(got[1]) or "killed" in str(got[1])


def test_a_slow_dump_is_stopped_by_the_wall_timeout() -> None:
    """The child is killed when a dump takes longer than its wall time (here: 0 s plus a
    small rate, for a dump big enough to need more); the next dump is still read."""
    import pickle

    big = pickle.dumps({"version": "2.10", "entries": [
        {"collective_seq_id": i, "frames": [{"filename": f"f{i}.py", "line": i}]}
        for i in range(20_000)]}, protocol=2)
    small = pickle.dumps({"version": "2.10", "entries": []}, protocol=2)
    got = read_dumps([DumpInput("fr_trace_0", lambda: big), DumpInput("fr_trace_1", lambda: small)],
                     SandboxLimits(wall_s=0.0, wall_s_per_mib=0.001))
    assert isinstance(got[0], DumpError) and "took longer than" in str(got[0])
    assert isinstance(got[1], DumpError | FrDump)  # no exception


def test_parse_dump_answers_in_the_bots_terms() -> None:
    with pytest.raises(DumpError, match="refused: memo index"):
        parse_dump(dict((n.split("_", 1)[1].rsplit("_fr", 1)[0], d) for n, d, _ in crafted())
                   ["memo_8_bytes"], "fr_trace_0")


def _analyze(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([*NCCLBOT, "analyze", "--json", *args],
                          capture_output=True, text=True, timeout=600, env=env, cwd=cwd)


def test_analyze_over_the_whole_crafted_folder_keeps_the_good_logs_diagnosis(
        tmp_path: Path) -> None:
    files = write(tmp_path / "dumps")
    _good_log(tmp_path)
    proc = _analyze([str(tmp_path)], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    answer = json.loads(proc.stdout)
    assert answer["diagnosis"]["root_causes"][0]["category"] == "rank_crashed"
    assert answer["diagnosis"]["suspects"][0]["rank"] == 2
    notes = answer["notes"]
    # each file named in a note, or counted in one note shared by many ("N inputs (a … b)")
    named = {f.name for f in files if any(f.name in n for n in notes)}
    shared = sum(int(n.split(" inputs (", 1)[0]) for n in notes if " inputs (" in n)
    unnamed = [f.name for f in files if f.name not in named and _kind(f.name) not in USABLE]
    assert len(unnamed) <= shared, unnamed
    assert all("\n" not in n for n in notes)


_PEAK = """
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _peak_kib(args: list[str], cwd: Path) -> int:
    """The peak RSS of `ncclbot analyze ARGS` and everything it started (its sandbox child),
    measured by a fresh process whose only children they are."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _PEAK, *NCCLBOT, "analyze", *args],
                         capture_output=True, text=True, timeout=600,
                         env=env, cwd=cwd, check=True)
    return int(out.stdout.strip())


@pytest.mark.parametrize("kind", ["memo_8_bytes", "laughs_11x10"])
def test_the_memo_and_laughs_files_cost_analyze_under_100_mb(tmp_path: Path, kind: str
                                                             ) -> None:
    name, data = next((n, d) for n, d, _ in crafted() if _kind(n) == kind)
    (tmp_path / name).write_bytes(data)
    good = _good_log(tmp_path)
    base = _peak_kib([str(good)], tmp_path)
    peak = _peak_kib([str(tmp_path / name), str(good)], tmp_path)
    assert peak - base < 100 * 1024, (kind, base, peak)
    proc = _analyze([str(tmp_path / name), str(good)], tmp_path)
    answer = json.loads(proc.stdout)
    assert any(name in n and "refused" in n for n in answer["notes"])
    assert answer["diagnosis"]["suspects"][0]["rank"] == 2


def test_the_reader_child_is_limited_and_has_none_of_the_bots_secrets(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import pickle

    from bot.logs.fr_sandbox import _Child

    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-not-for-the-child")
    child = _Child(SandboxLimits())
    try:  # once it answered a dump, it has set its limits
        got = child.parse("fr_trace_0", pickle.dumps({"version": "2.10", "entries": []}, 2))
        assert isinstance(got, FrDump)
        pid = child.proc.pid
        assert b"xoxb-not-for-the-child" not in Path(f"/proc/{pid}/environ").read_bytes()
        limits = {line[:26].strip(): line[26:].split()[:2]
                  for line in Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]}
        assert limits["Max address space"][0] != "unlimited"
        assert int(limits["Max address space"][0]) < 2 * 2**30
        assert limits["Max cpu time"][0] != "unlimited"
        assert limits["Max file size"] == ["0", "0"]
    finally:
        child.close()

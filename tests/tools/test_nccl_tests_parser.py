"""parse_nccl_tests on real nccl-tests output, and running binaries through the runner."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import FIXTURES

from tools.probe.nccl_tests import parse_nccl_tests, parse_nccl_tests_json, run_nccl_tests
from tools.probe.params import ProbeParams
from tools.runner import CommandOutput, RecordedRunner, SubprocessRunner

NT = FIXTURES / "nccl_tests"


def test_newer_format_with_root_and_wrong_columns() -> None:
    out = parse_nccl_tests((NT / "h100_pcie_all_reduce_2gpu_excerpt.txt").read_text(),
                           "all_reduce")
    assert len(out["rows"]) == 2
    row = out["rows"][0]
    assert row == {
        "collective": "all_reduce", "bytes": 1073741824, "count": 268435456, "type": "float",
        "redop": "sum", "root": -1, "time_us": 9306.7, "algbw_gbps": 115.37,
        "busbw_gbps": 115.37, "correct": True,
        "in_place": {"time_us": 9291.5, "algbw_gbps": 115.56, "busbw_gbps": 115.56,
                     "correct": True}}
    assert out["rows"][1]["time_us"] == 18535.0


def test_older_format_with_error_column() -> None:
    out = parse_nccl_tests((NT / "h20_all_reduce_2node_excerpt.txt").read_text())
    assert [r["bytes"] for r in out["rows"]] == [4, 8, 16, 32, 64, 128, 256, 512]
    assert out["rows"][0]["root"] is None and out["rows"][0]["correct"] is True
    assert out["rows"][-1]["busbw_gbps"] == 0.02


def test_header_devices_and_version() -> None:
    out = parse_nccl_tests((NT / "h200_all_reduce_8gpu_header.txt").read_text())
    assert out["nccl_version"] == "2.20.3+cuda12.3"
    assert out["params"]["minBytes"] == "65536" and out["params"]["iters"] == "20"
    assert len(out["devices"]) == 8 and out["devices"][7]["name"] == "NVIDIA H200"
    assert out["devices"][2] == {"rank": 2, "pid": 65236, "host": "gpu49", "device": 2,
                                 "bus": "0x3b", "name": "NVIDIA H200"}
    assert out["rows"] == []


def test_wrong_results_avg_and_mpi_prefix() -> None:
    text = ("[0]      4194304       1048576     float     sum      -1[0]    622.6    6.74   "
            "12.91      3[0]    625.8    6.70   12.85      0\n"
            "# Avg bus bandwidth    : 12.8800 \n")
    out = parse_nccl_tests(text, "all_reduce")
    assert out["rows"][0]["correct"] is False and out["rows"][0]["in_place"]["correct"] is True
    assert out["avg_busbw_gbps"] == 12.88


def _argv(base: Path, json_dir: Path | None = None) -> tuple[str, ...]:
    argv = (str(base / "all_reduce_perf"), "-b", "1024", "-e", "2147483648", "-f", "2",
            "-g", "2", "-w", "5", "-n", "20")
    return (*argv, "-J", str(json_dir / "all_reduce.json")) if json_dir else argv


def test_run_binaries_through_runner(tmp_path: Path) -> None:
    (tmp_path / "all_reduce_perf").write_text("")
    argv = _argv(tmp_path, tmp_path)
    text = (NT / "h100_pcie_all_reduce_2gpu_excerpt.txt").read_text()
    runner = RecordedRunner({argv: text})
    p = ProbeParams(max_bytes=2**31, nccl_tests=str(tmp_path),
                    collectives=["all_reduce", "all_gather"])
    result = run_nccl_tests(p, runner, ngpus=2, json_dir=tmp_path)
    assert result.status == "success" and len(result.data["results"]) == 2
    assert result.data["runs"][0]["source"] == "stdout"  # no JSON report was written
    assert result.data["runs"][1]["skipped"].endswith("all_gather_perf not found")
    runner = RecordedRunner({argv: CommandOutput(argv, 124, error="timed out after 5 s")})
    failed = run_nccl_tests(p, runner, ngpus=2, json_dir=tmp_path)
    assert failed.status == "error" and "timed out" in failed.error


def test_json_report_matches_the_text_table_and_drops_the_environment() -> None:
    raw = (NT / "h100_pcie_all_reduce_2gpu.json").read_text()
    out = parse_nccl_tests_json(raw, "all_reduce")
    text = parse_nccl_tests((NT / "h100_pcie_all_reduce_2gpu_excerpt.txt").read_text(),
                            "all_reduce")
    assert out is not None and out["rows"] == text["rows"]
    assert out["json_version"] == 2 and out["nccl_version"] == "2.20.5"
    assert out["avg_busbw_gbps"] == 115.68 and out["errors"] == []
    assert out["params"]["step_factor"] == 2 and "devices" not in out["params"]
    assert [d["bus"] for d in out["devices"]] == ["0000:01:00", "0000:02:00"]
    assert "hf_" not in json.dumps(out) and "env" not in out


def test_json_report_truncated_nan_and_failures() -> None:
    raw = (NT / "h100_pcie_all_reduce_2gpu.json").read_text()
    assert parse_nccl_tests_json(raw[: len(raw) // 2]) is None  # binary died mid-write
    assert parse_nccl_tests_json("[1, 2]") is None
    doc = json.loads(raw)
    doc["results"][0]["out_of_place"].update(bus_bw="nan", nwrong=3.0)
    doc["results"][1]["out_of_place"] = None  # in-place only rows (trace replay)
    doc["out_of_bounds"] = {"count": 3, "okay": "false"}
    doc["errors"] = ["unhandled cuda error"]
    out = parse_nccl_tests_json(json.dumps(doc), "all_reduce")
    assert out is not None
    first, second = out["rows"]
    assert first["busbw_gbps"] is None and first["correct"] is False
    assert second["time_us"] == 18524.0 and second["in_place"]["busbw_gbps"] == 115.93
    assert out["errors"] == ["Out of bounds values : 3 FAILED", "unhandled cuda error"]


_FAKE_PERF = """#!{python}
import shutil, sys
args = sys.argv[1:]
if "-J" in args:
    shutil.copy({report!r}, args[args.index("-J") + 1])
print(open({text!r}).read(), end="")
"""


def test_a_real_binary_writes_its_json_report(tmp_path: Path) -> None:
    """A stand-in `all_reduce_perf` process that behaves as nccl-tests >= 2.14 does."""
    perf = tmp_path / "all_reduce_perf"
    perf.write_text(_FAKE_PERF.format(python=sys.executable,
                                      report=str(NT / "h100_pcie_all_reduce_2gpu.json"),
                                      text=str(NT / "h100_pcie_all_reduce_2gpu_excerpt.txt")))
    perf.chmod(0o755)
    p = ProbeParams(max_bytes=2**31, nccl_tests=str(tmp_path), collectives=["all_reduce"])
    result = run_nccl_tests(p, SubprocessRunner(), ngpus=2)
    assert result.status == "success", result.error
    run = result.data["runs"][0]
    assert run["source"] == "json" and " -J " in run["invocation"]
    assert run["nccl_version"] == "2.20.5" and len(run["devices"]) == 2
    assert [r["busbw_gbps"] for r in result.data["results"]] == [115.37, 115.86]
    assert not Path(run["invocation"].split(" -J ")[1]).parent.exists()  # temp dir removed


def test_binaries_without_json_output_are_run_again_without_it(tmp_path: Path) -> None:
    (tmp_path / "all_reduce_perf").write_text("")
    usage = "invalid option 'J'\nUSAGE: all_reduce_perf \n\t[-t,--nthreads <num threads>]\n"
    text = (NT / "h100_pcie_all_reduce_2gpu_excerpt.txt").read_text()
    runner = RecordedRunner({_argv(tmp_path, tmp_path): usage, _argv(tmp_path): text})
    p = ProbeParams(max_bytes=2**31, nccl_tests=str(tmp_path), collectives=["all_reduce"])
    result = run_nccl_tests(p, runner, ngpus=2, json_dir=tmp_path)
    assert result.status == "success" and len(result.data["results"]) == 2
    assert runner.calls == [_argv(tmp_path, tmp_path), _argv(tmp_path)]
    assert "-J" not in result.data["runs"][0]["invocation"]


def test_no_binaries_is_unavailable(tmp_path: Path) -> None:
    result = run_nccl_tests(ProbeParams(nccl_tests=str(tmp_path)), RecordedRunner({}), ngpus=8)
    assert result.status == "unavailable"

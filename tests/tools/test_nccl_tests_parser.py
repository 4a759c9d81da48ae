"""parse_nccl_tests on real nccl-tests output, and running binaries through the runner."""

from __future__ import annotations

from pathlib import Path

from conftest import FIXTURES

from tools.nccl_tests import parse_nccl_tests, run_nccl_tests
from tools.registry import ProbeParams
from tools.runner import CommandOutput, RecordedRunner

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


def test_run_binaries_through_runner(tmp_path: Path) -> None:
    (tmp_path / "all_reduce_perf").write_text("")
    argv = (str(tmp_path / "all_reduce_perf"), "-b", "1024", "-e", "2147483648", "-f", "2",
            "-g", "2", "-w", "5", "-n", "20")
    text = (NT / "h100_pcie_all_reduce_2gpu_excerpt.txt").read_text()
    runner = RecordedRunner({argv: text})
    p = ProbeParams(max_bytes=2**31, nccl_tests=str(tmp_path),
                    collectives=["all_reduce", "all_gather"])
    result = run_nccl_tests(p, runner, ngpus=2)
    assert result.status == "success" and len(result.data["results"]) == 2
    assert result.data["runs"][1]["skipped"].endswith("all_gather_perf not found")
    runner = RecordedRunner({argv: CommandOutput(argv, 124, error="timed out after 5 s")})
    failed = run_nccl_tests(p, runner, ngpus=2)
    assert failed.status == "error" and "timed out" in failed.error


def test_no_binaries_is_unavailable(tmp_path: Path) -> None:
    result = run_nccl_tests(ProbeParams(nccl_tests=str(tmp_path)), RecordedRunner({}), ngpus=8)
    assert result.status == "unavailable"

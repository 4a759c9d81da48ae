"""The probe for real: gloo workers on 127.0.0.1, a forced hang, formulas, baselines."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.params import ProbeProgress
from tools.probe.baselines import baseline_findings, hardware_key
from tools.probe.busbw import bandwidths, bus_factor, sweep_sizes
from tools.probe.launch import sweep_position
from tools.probe.model import ProbeData
from tools.probe.params import ProbeParams
from tools.probe.run import run_probe
from tools.probe.worker import parse_fault
from tools.registry import read_data

pytest.importorskip("torch")

SMALL = {"backend": "gloo", "min_bytes": 1024, "max_bytes": 65536, "factor": 8.0,
         "warmup": 1, "iters": 3, "collective_timeout": 20, "timeout": 60}


def test_gloo_two_ranks_every_collective(tmp_path: Path) -> None:
    plot = tmp_path / "busbw.png"
    result = run_probe(ProbeParams(**SMALL, nproc=2, plot=str(plot)))
    assert result.status == "success", result.error
    rows = result.data["results"]
    assert {r["collective"] for r in rows} == {"all_reduce", "all_gather", "reduce_scatter",
                                               "broadcast", "alltoall", "sendrecv"}
    assert all(r["correct"] for r in rows)
    assert all(r["busbw_gbps"] > 0 and r["algbw_gbps"] > 0 and r["time_us"] > 0 for r in rows)
    assert set(rows[0]) == {"collective", "bytes", "time_us", "algbw_gbps", "busbw_gbps",
                            "correct"}
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [f.rule for f in result.findings] == ["probe_no_baseline"]


def test_gloo_four_ranks(tmp_path: Path) -> None:
    params = ProbeParams(**{**SMALL, "max_bytes": 8192}, nproc=4,
                         collectives=["all_reduce", "all_gather", "sendrecv"])
    seen: list[ProbeProgress] = []
    result = run_probe(params, on_progress=seen.append)
    assert result.status == "success", result.error
    rows = result.data["results"]
    assert result.data["nproc"] == 4 and all(r["correct"] for r in rows)
    assert seen and all(s.steps == 6 and s.ranks <= 4 for s in seen)  # 3 colls x 2 sizes
    assert [s.step for s in seen] == sorted(s.step for s in seen)
    ar = [r for r in rows if r["collective"] == "all_reduce"][-1]
    assert ar["busbw_gbps"] == pytest.approx(ar["algbw_gbps"] * 1.5, rel=1e-3)
    # read back through the result model its ToolSpec declares
    data = read_data("probe", result)
    assert isinstance(data, ProbeData) and data.nproc == 4
    assert data.largest_busbw() == pytest.approx(ar["busbw_gbps"])


def test_forced_hang_is_bounded_and_reported() -> None:
    params = ProbeParams(**{**SMALL, "collective_timeout": 3, "timeout": 40}, nproc=2,
                         collectives=["all_reduce"])
    seen: list[ProbeProgress] = []
    result = run_probe(params, fault="hang:rank=1:collective=all_reduce:bytes=8192",
                       on_progress=seen.append)
    # while it hangs, progress shows where: the second of three sizes
    assert seen[-1] == ProbeProgress(step=2, steps=3, collective="all_reduce", bytes=8192,
                                     ranks=2)
    assert result.status == "error"
    hang = result.data["hang"]
    assert hang["collective"] == "all_reduce" and hang["bytes"] == 8192
    assert hang["ranks_not_finished"] == [1]
    assert list(hang["ranks_failed"]) == [0]
    assert "all_reduce at 8192 bytes" in result.error and "[1]" in result.error
    assert [f.rule for f in result.findings] == ["probe_hang"]


def test_slow_rank_delay_slows_the_timed_collective() -> None:
    params = ProbeParams(**{**SMALL, "max_bytes": 1024}, nproc=2, collectives=["broadcast"])
    result = run_probe(params, fault="delay:rank=1:seconds=0.2:collective=broadcast")
    assert result.status == "success", result.error
    (row,) = result.data["results"]
    # rank 1 stalls 0.2 s before each timed broadcast; rank 0 waits for it inside the op
    assert row["time_us"] >= 0.9 * 0.2e6
    assert row["busbw_gbps"] < 1024 / 0.18 / 1e9


def test_corrupted_buffer_fails_the_correctness_check() -> None:
    params = ProbeParams(**{**SMALL, "max_bytes": 8192}, nproc=2,
                         collectives=["all_reduce", "all_gather"])
    result = run_probe(params, fault="corrupt:rank=0:collective=all_reduce")
    assert result.status == "success", result.error
    rows = result.data["results"]
    assert [r["correct"] for r in rows if r["collective"] == "all_reduce"] == [False, False]
    assert all(r["correct"] for r in rows if r["collective"] == "all_gather")
    bad = [f for f in result.findings if f.rule == "probe_incorrect_result"]
    assert len(bad) == 1 and bad[0].severity == "error"
    assert "all_reduce@1024" in bad[0].message and "all_gather" not in bad[0].message


def test_overall_timeout_stops_a_slow_probe() -> None:
    # 20 s: two ranks import torch and reach the collective even on a busy machine; the
    # delayed rank would take 600 s, so only the overall timeout can end the run
    params = ProbeParams(**{**SMALL, "max_bytes": 1024, "collective_timeout": 900,
                            "timeout": 20}, nproc=2, collectives=["all_reduce"])
    result = run_probe(params, fault="delay:rank=1:seconds=600")
    assert result.status == "error"
    hang = result.data["hang"]
    assert hang["reason"] == "overall timeout of 20 s reached"  # not the rank's delay
    assert hang["ranks_not_finished"] == [0, 1]
    # where the ranks were when it stopped: in the collective, or (very busy) still starting
    assert hang["collective"] in ("all_reduce", "init")
    assert [f.rule for f in result.findings] == ["probe_hang"]


def test_sweep_position_is_the_slowest_rank() -> None:
    colls, sizes = ["all_reduce", "broadcast"], [1024, 4096]
    assert sweep_position({}, colls, sizes) is None
    assert sweep_position({0: {"collective": "broadcast", "bytes": 1024},
                           1: {"collective": "all_reduce", "bytes": 4096}}, colls, sizes) == \
        ProbeProgress(step=2, steps=4, collective="all_reduce", bytes=4096, ranks=2)
    start = sweep_position({0: {"collective": "init", "bytes": 0}, 1: None}, colls, sizes)
    assert start is not None and start.step == 0
    done = sweep_position({0: None, 1: {"collective": "finish", "bytes": 0}}, colls, sizes)
    assert done is not None and done.step == done.steps == 4


def test_fault_spec() -> None:
    assert parse_fault("hang:rank=1:collective=all_reduce:bytes=1024") == {
        "kind": "hang", "rank": "1", "collective": "all_reduce", "bytes": "1024"}
    assert parse_fault("corrupt:rank=0") == {"kind": "corrupt", "rank": "0"}
    assert parse_fault(None) is None and parse_fault("") is None


def test_nccl_backend_without_gpu_is_unavailable() -> None:
    result = run_probe(ProbeParams(backend="nccl"))
    assert result.status == "unavailable"
    assert "needs GPUs" in result.error and "NVML" in result.error


def test_bus_factors_match_nccl_tests() -> None:
    assert bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert bus_factor("all_gather", 8) == pytest.approx(0.875)
    assert bus_factor("reduce_scatter", 4) == pytest.approx(0.75)
    assert bus_factor("alltoall", 2) == pytest.approx(0.5)
    assert bus_factor("broadcast", 8) == bus_factor("sendrecv", 8) == 1.0
    # 1 GiB all_reduce in 9306.7 us on 2 GPUs: nccl-tests printed 115.37/115.37
    algbw, busbw = bandwidths("all_reduce", 1073741824, 9306.7, 2)
    assert round(algbw, 2) == 115.37 and round(busbw, 2) == 115.37
    with pytest.raises(ValueError):
        bus_factor("gather", 2)


def test_sweep_sizes() -> None:
    assert sweep_sizes(1024, 65536, 8) == [1024, 8192, 65536]
    assert sweep_sizes(1000, 5000, 2) == [1000, 2000, 4000, 5000]
    with pytest.raises(ValueError):
        sweep_sizes(10, 5, 2)


def test_baselines() -> None:
    assert hardware_key("nccl", "NVIDIA H100 80GB HBM3", 8) == "h100_sxm_8"
    assert hardware_key("nccl", "NVIDIA A100-SXM4-80GB", 8) == "a100_sxm_8"
    assert hardware_key("gloo", None, 2) is None
    rows = [{"collective": "all_reduce", "bytes": 2**30, "busbw_gbps": 297.6}]
    (f,) = baseline_findings(rows, "nccl", "NVIDIA H100 80GB HBM3", 8)
    assert f.rule == "probe_busbw_vs_baseline" and f.severity == "warn"
    assert "62% of the expected ~480 GB/s" in f.message and "github.com" in f.message
    rows = [{"collective": "all_reduce", "bytes": 2**30, "busbw_gbps": 470.0}]
    assert baseline_findings(rows, "nccl", "NVIDIA H100 80GB HBM3", 8)[0].severity == "info"


@pytest.mark.gpu
def test_nccl_probe_on_local_gpus() -> None:
    result = run_probe(ProbeParams(backend="nccl", max_bytes=2**26, iters=5, warmup=2,
                                   collective_timeout=60, timeout=300))
    assert result.status == "success", result.error
    assert all(r["correct"] and r["busbw_gbps"] > 0 for r in result.data["results"])


@pytest.mark.gpu
def test_topology_on_a_gpu_node() -> None:
    from tools.topo.collect import collect_topology

    result = collect_topology()
    assert result.status == "success", result.error
    assert result.data["gpus"] and result.data["gpus"][0]["uuid"].startswith("GPU-")

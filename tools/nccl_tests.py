"""NVIDIA nccl-tests: a pure parser of their text output, and running the binaries.

Rows carry the out-of-place numbers in the probe's row shape (collective, bytes,
time_us, algbw_gbps, busbw_gbps, correct) plus the in-place ones.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from tools.busbw import COLLECTIVES
from tools.registry import ProbeParams
from tools.result import ToolResult
from tools.runner import CommandRunner, SubprocessRunner, render_argv

BINARIES = {c: f"{c}_perf" for c in COLLECTIVES}
_MPI_TAG = re.compile(r"\[\d+\]")
_PARAM = re.compile(r"([A-Za-z][A-Za-z ]*?)\s*:?\s+(-?\d+(?:\.\d+)?)")
_DEVICE = re.compile(r"#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+"
                     r"(\d+)\s+\[([^\]]+)\]\s+(.*)$")


def _num(tok: str) -> float | None:
    try:
        return float(tok)
    except ValueError:
        return None


def _parse_row(tokens: list[str], collective: str) -> dict[str, Any] | None:
    if len(tokens) < 12 or not tokens[0].isdigit() or not tokens[1].isdigit():
        return None
    has_root = len(tokens) >= 13 and re.fullmatch(r"-?\d+", tokens[4]) is not None
    vals = tokens[5:13] if has_root else tokens[4:12]
    nums = [_num(v) for v in vals]
    if nums[0] is None:
        return None
    is_count = "." not in vals[3] and "e" not in vals[3].lower()

    def ok(v: float | None) -> bool | None:
        if v is None:
            return None
        return v == 0 if is_count else v < 1e-3

    return {
        "collective": collective, "bytes": int(tokens[0]), "count": int(tokens[1]),
        "type": tokens[2], "redop": tokens[3], "root": int(tokens[4]) if has_root else None,
        "time_us": nums[0], "algbw_gbps": nums[1], "busbw_gbps": nums[2],
        "correct": ok(nums[3]),
        "in_place": {"time_us": nums[4], "algbw_gbps": nums[5], "busbw_gbps": nums[6],
                     "correct": ok(nums[7])},
    }


def parse_nccl_tests(text: str, collective: str = "unknown") -> dict[str, Any]:
    """Parse one nccl-tests run's stdout: header, devices, rows, average busbw, errors."""
    out: dict[str, Any] = {"collective": collective, "params": {}, "devices": [], "rows": [],
                           "nccl_version": None, "avg_busbw_gbps": None, "errors": []}
    for raw in text.splitlines():
        line = _MPI_TAG.sub(" ", raw).strip()
        if line.startswith("# nThread"):
            out["params"] = {k.strip().replace(" ", "_"): v
                             for k, v in _PARAM.findall(line.lstrip("# "))}
        elif m := _DEVICE.match(line):
            out["devices"].append({"rank": int(m.group(1)), "pid": int(m.group(2)),
                                   "host": m.group(3), "device": int(m.group(4)),
                                   "bus": m.group(5), "name": m.group(6).strip()})
        elif line.startswith("NCCL version"):
            out["nccl_version"] = line.split()[2]
        elif line.startswith("# Avg bus bandwidth"):
            out["avg_busbw_gbps"] = _num(line.split(":")[-1].strip())
        elif "NCCL failure" in line or "Test failure" in line or "NCCL WARN" in line:
            out["errors"].append(line)
        elif line and not line.startswith("#") and (row := _parse_row(line.split(), collective)):
            out["rows"].append(row)
    return out


def run_nccl_tests(p: ProbeParams, runner: CommandRunner | None = None,
                   ngpus: int | None = None) -> ToolResult:
    """Run the selected `*_perf` binaries from `p.nccl_tests` on this node's GPUs."""
    runner = runner or SubprocessRunner()
    base = Path(p.nccl_tests or ".")
    ngpus = ngpus or p.nproc
    if ngpus is None:
        from tools.probe import gpu_info

        ngpus, _, reason = gpu_info("nccl")
        if not ngpus:
            return ToolResult.unavailable("probe", f"nccl-tests in {base}",
                                          f"nccl-tests need GPUs: {reason or 'no GPU found'}")
    runs, rows, deadline = [], [], time.monotonic() + p.timeout
    for coll in p.collectives:
        binary = base / BINARIES[coll]
        if not binary.is_file():
            runs.append({"collective": coll, "skipped": f"{binary} not found"})
            continue
        argv = [str(binary), "-b", str(p.min_bytes), "-e", str(p.max_bytes),
                "-f", str(max(2, round(p.factor))), "-g", str(ngpus),
                "-w", str(p.warmup), "-n", str(p.iters)]
        left = deadline - time.monotonic()
        res = runner(argv, timeout=max(1.0, left))
        parsed = parse_nccl_tests(res.stdout, coll)
        runs.append({"collective": coll, "invocation": render_argv(argv),
                     "returncode": res.returncode, "error": res.error,
                     **{k: parsed[k] for k in ("params", "devices", "nccl_version",
                                               "avg_busbw_gbps", "errors")}})
        rows += parsed["rows"]
        if not res.ok:
            return ToolResult.failed("probe", render_argv(argv),
                                     f"{binary.name} failed: {res.error or res.stderr[-500:]}",
                                     runs=runs, results=rows)
    if not rows:
        return ToolResult.unavailable("probe", f"nccl-tests in {base}",
                                      f"no nccl-tests binaries found in {base}", runs=runs)
    return ToolResult(tool="probe", status="success", invocation=f"nccl-tests in {base}",
                      data={"backend": "nccl-tests", "nproc": ngpus, "results": rows,
                            "runs": runs})

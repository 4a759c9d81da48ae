"""NVIDIA nccl-tests: pure parsers of their text and `-J` JSON output, and running the binaries.

Rows carry the out-of-place numbers in the probe's row shape (collective, bytes,
time_us, algbw_gbps, busbw_gbps, correct) plus the in-place ones. Newer nccl-tests
write a JSON report with `-J FILE.json` (`src/util.cu`, JSON_FILE_VERSION 2); its
numbers are unrounded, so they are preferred to the text table when present.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from pathlib import Path

from typing_extensions import NotRequired, TypedDict

from tools.probe.busbw import COLLECTIVES
from tools.probe.params import ProbeParams
from tools.result import ToolResult
from tools.runner import CommandRunner, SubprocessRunner, render_argv

BINARIES = {c: f"{c}_perf" for c in COLLECTIVES}
_MPI_TAG = re.compile(r"\[\d+\]")
_PARAM = re.compile(r"([A-Za-z][A-Za-z ]*?)\s*:?\s+(-?\d+(?:\.\d+)?)")
_DEVICE = re.compile(r"#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+"
                     r"(\d+)\s+\[([^\]]+)\]\s+(.*)$")


class Side(TypedDict):
    """One placement's numbers (out-of-place or in-place) of a row."""

    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    correct: bool | None


class Row(Side):
    """One message size: the out-of-place numbers in the probe's row shape, and in-place."""

    collective: str
    bytes: int
    count: int | None
    type: str | None
    redop: str | None
    root: int | None
    in_place: Side | None


class Device(TypedDict):
    rank: int | None
    pid: int | None
    host: str | None
    device: int | None
    bus: str | None
    name: str | None


class Report(TypedDict):
    """One binary's run: its header parameters, devices, rows, average busbw, errors."""

    collective: str
    params: dict[str, object]
    devices: list[Device]
    rows: list[Row]
    nccl_version: str | None
    avg_busbw_gbps: float | None
    errors: list[str]
    json_version: NotRequired[object]


class Run(TypedDict, total=False):
    """What `run_nccl_tests` says about each binary it ran (or skipped)."""

    collective: str
    skipped: str
    invocation: str
    returncode: int | None
    error: str | None
    source: str
    params: dict[str, object]
    devices: list[Device]
    nccl_version: str | None
    avg_busbw_gbps: float | None
    errors: list[str]


def _num(tok: str) -> float | None:
    try:
        return float(tok)
    except ValueError:
        return None


def _parse_row(tokens: list[str], collective: str) -> Row | None:
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

    return Row(
        collective=collective, bytes=int(tokens[0]), count=int(tokens[1]),
        type=tokens[2], redop=tokens[3], root=int(tokens[4]) if has_root else None,
        time_us=nums[0], algbw_gbps=nums[1], busbw_gbps=nums[2], correct=ok(nums[3]),
        in_place=Side(time_us=nums[4], algbw_gbps=nums[5], busbw_gbps=nums[6],
                      correct=ok(nums[7])))


def parse_nccl_tests(text: str, collective: str = "unknown") -> Report:
    """Parse one nccl-tests run's stdout: header, devices, rows, average busbw, errors."""
    out = Report(collective=collective, params={}, devices=[], rows=[], nccl_version=None,
                 avg_busbw_gbps=None, errors=[])
    for raw in text.splitlines():
        line = _MPI_TAG.sub(" ", raw).strip()
        if line.startswith("# nThread"):
            out["params"] = {k.strip().replace(" ", "_"): v
                             for k, v in _PARAM.findall(line.lstrip("# "))}
        elif m := _DEVICE.match(line):
            out["devices"].append(Device(rank=int(m.group(1)), pid=int(m.group(2)),
                                         host=m.group(3), device=int(m.group(4)),
                                         bus=m.group(5), name=m.group(6).strip()))
        elif line.startswith("NCCL version"):
            out["nccl_version"] = line.split()[2]
        elif line.startswith("# Avg bus bandwidth"):
            out["avg_busbw_gbps"] = _num(line.split(":")[-1].strip())
        elif "NCCL failure" in line or "Test failure" in line or "NCCL WARN" in line:
            out["errors"].append(line)
        elif line and not line.startswith("#") and (row := _parse_row(line.split(), collective)):
            out["rows"].append(row)
    return out


def _json_side(side: object) -> Side | None:
    if not isinstance(side, dict):
        return None
    wrong = side.get("nwrong")
    time_us = side.get("time", side.get("cpu_time"))
    return Side(time_us=_json_num(time_us), algbw_gbps=_json_num(side.get("alg_bw")),
                busbw_gbps=_json_num(side.get("bus_bw")),
                correct=None if wrong is None else _json_num(wrong) == 0)


def _json_num(v: object) -> float | None:
    """nccl-tests writes NaN as the string "nan"; anything not a number becomes None."""
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def parse_nccl_tests_json(text: str, collective: str = "unknown") -> Report | None:
    """Parse an nccl-tests `-J` JSON report into `parse_nccl_tests`' shape.

    None when the text is not a complete JSON object (e.g. the binary died while
    writing it); the caller then keeps the numbers from stdout. The `env` list the
    report carries is dropped: it is the whole process environment, secrets included.
    """
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict):
        return None
    raw_config = doc.get("config")
    config: dict[str, object] = raw_config if isinstance(raw_config, dict) else {}
    out = Report(collective=collective, json_version=doc.get("version"),
                 params={k: v for k, v in config.items() if k != "devices"}, devices=[],
                 rows=[], nccl_version=_nccl_version(doc.get("nccl_version")),
                 avg_busbw_gbps=None, errors=[])
    devices = config.get("devices")
    for d in devices if isinstance(devices, list) else []:
        if isinstance(d, dict):
            out["devices"].append(Device(rank=d.get("rank"), pid=d.get("pid"),
                                         host=d.get("hostname"), device=d.get("device"),
                                         bus=d.get("device_hex"), name=d.get("device_info")))
    for r in doc.get("results") or []:
        if not isinstance(r, dict) or not isinstance(r.get("size"), int):
            continue
        oop, inp = _json_side(r.get("out_of_place")), _json_side(r.get("in_place"))
        main = oop or inp or Side(time_us=None, algbw_gbps=None, busbw_gbps=None,
                                  correct=None)
        root = str(r.get("root", "")).strip()
        out["rows"].append(Row(
            collective=collective, bytes=r["size"], count=r.get("count"),
            type=r.get("type"), redop=r.get("redop"),
            root=int(root) if re.fullmatch(r"-?\d+", root) else None,
            time_us=main["time_us"], algbw_gbps=main["algbw_gbps"],
            busbw_gbps=main["busbw_gbps"], correct=main["correct"], in_place=inp))
    avg = doc.get("average_bus_bandwidth")
    if isinstance(avg, dict):
        out["avg_busbw_gbps"] = _json_num(avg.get("bandwidth"))
    oob = doc.get("out_of_bounds")
    if isinstance(oob, dict) and oob.get("count"):
        out["errors"].append(f"Out of bounds values : {oob['count']} FAILED")
    out["errors"] += [str(e) for e in doc.get("errors") or [] if e]
    return out


def _nccl_version(code: object) -> str | None:
    """NCCL_VERSION_CODE (e.g. 22703) as "2.27.3"; older two-digit codes (2708) too."""
    if not isinstance(code, int) or code <= 0:
        return None
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


# Older binaries print "invalid option 'J'" (and getopt "invalid option -- 'J'") then usage.
_NO_JSON_FLAG = re.compile(r"(?:invalid|unrecognized) option[ -]*'?-?J\b")


def run_nccl_tests(p: ProbeParams, runner: CommandRunner | None = None,
                   ngpus: int | None = None, json_dir: str | Path | None = None) -> ToolResult:
    """Run the selected `*_perf` binaries from `p.nccl_tests` on this node's GPUs.

    Each binary is asked for a `-J` JSON report in `json_dir` (a temporary
    directory by default); binaries too old to know `-J` are run again without it.
    """
    if json_dir is None:
        with tempfile.TemporaryDirectory(prefix="ncclbot-nccl-tests-") as tmp:
            return run_nccl_tests(p, runner, ngpus, tmp)
    runner = runner or SubprocessRunner()
    base = Path(p.nccl_tests or ".")
    ngpus = ngpus or p.nproc
    if ngpus is None:
        from tools.probe.run import gpu_info

        ngpus, _, reason = gpu_info("nccl")
        if not ngpus:
            return ToolResult.unavailable("probe", f"nccl-tests in {base}",
                                          f"nccl-tests need GPUs: {reason or 'no GPU found'}")
    runs: list[Run] = []
    rows: list[Row] = []
    deadline = time.monotonic() + p.timeout
    for coll in p.collectives:
        binary = base / BINARIES[coll]
        if not binary.is_file():
            runs.append(Run(collective=coll, skipped=f"{binary} not found"))
            continue
        argv = [str(binary), "-b", str(p.min_bytes), "-e", str(p.max_bytes),
                "-f", str(max(2, round(p.factor))), "-g", str(ngpus),
                "-w", str(p.warmup), "-n", str(p.iters)]
        report = Path(json_dir) / f"{coll}.json"
        res = runner([*argv, "-J", str(report)], timeout=max(1.0, deadline - time.monotonic()))
        if _NO_JSON_FLAG.search(res.stdout + res.stderr):
            res = runner(argv, timeout=max(1.0, deadline - time.monotonic()))
        else:
            argv += ["-J", str(report)]
        parsed, source = parse_nccl_tests(res.stdout, coll), "stdout"
        if report.is_file() and (doc := parse_nccl_tests_json(
                report.read_text(errors="replace"), coll)) and doc["rows"]:
            doc["errors"] = list(dict.fromkeys(doc["errors"] + parsed["errors"]))
            parsed, source = doc, "json"
        runs.append(Run(collective=coll, invocation=render_argv(argv),
                        returncode=res.returncode, error=res.error, source=source,
                        params=parsed["params"], devices=parsed["devices"],
                        nccl_version=parsed["nccl_version"],
                        avg_busbw_gbps=parsed["avg_busbw_gbps"], errors=parsed["errors"]))
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

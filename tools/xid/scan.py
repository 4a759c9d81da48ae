"""Scan kernel logs (dmesg, journal, kern.log) for `NVRM: Xid` lines and explain them."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from typing_extensions import NotRequired, TypedDict

from tools.cards import card_for
from tools.files import open_regular
from tools.result import Finding, Severity, ToolResult
from tools.runner import CommandRunner, SubprocessRunner, render_argv
from tools.xid.catalog import XID_CATALOG_URL, XID_LINE, explain

TOOL = "xid"
_XID = re.compile(r"^(.*?)" + XID_LINE)
_PID = re.compile(r"^pid=(?P<pid>'?<?[\w]+>?'?),\s*(?:name=(?P<name>[^,]*),\s*)?(?P<msg>.*)$")
_SEVERITY_ORDER: dict[Severity, int] = {"info": 0, "warn": 1, "error": 2}
MAX_FILE_BYTES = 512 * 2**20


class XidEvent(TypedDict):
    """One `NVRM: Xid` line; `name` and `severity` from the catalogue once explained."""

    pci: str
    code: int
    pid: int | None
    process: str | None
    message: str
    timestamp: str | None
    line: str
    name: NotRequired[str]
    severity: NotRequired[Severity]


def parse_xid_line(line: str) -> XidEvent | None:
    """One `NVRM: Xid` line -> {pci, code, pid, process, message, timestamp}; else None."""
    m = _XID.match(line.rstrip())
    if not m:
        return None
    prefix, pci, code, rest = m.groups()
    pid, name = None, None
    if pm := _PID.match(rest):
        raw_pid = pm.group("pid").strip("'")
        pid = int(raw_pid) if raw_pid.isdigit() else None
        name = (pm.group("name") or "").strip() or None
        name = None if name in ("<unknown>", "'<unknown>'") else name
        rest = pm.group("msg")
    prefix = prefix.strip()
    ts = re.search(r"\[\s*(\d+\.\d+)\]", prefix)
    return XidEvent(pci=pci, code=int(code), pid=pid, process=name, message=rest.strip(),
                    timestamp=ts.group(1) if ts else prefix or None, line=line.rstrip()[:500])


def parse_xid_lines(lines: Iterable[str]) -> list[XidEvent]:
    return [x for line in lines if "Xid" in line and (x := parse_xid_line(line))]


def xid_findings(events: Sequence[XidEvent]) -> list[Finding]:
    """One finding per (code, GPU), worst first, explaining the code."""
    groups = Counter((e["code"], e["pci"]) for e in events)
    out = []
    for (code, pci), n in groups.items():
        info = explain(code)
        sample = next(e for e in events if e["code"] == code and e["pci"] == pci)
        severity = info.severity
        if "Nonfatal" in sample["message"] and severity == "error":
            severity = "warn"
        out.append(Finding(
            severity=severity, rule=info.rule, card=card_for(info.rule),
            message=f"Xid {code} ({info.name}) on GPU {pci}, {n}x: {info.action}. "
                    f"First: {sample['message'][:160]}"))
    return sorted(out, key=lambda f: -_SEVERITY_ORDER[f.severity])


def _result(events: list[XidEvent], invocation: str, source: str) -> ToolResult:
    for e in events:
        info = explain(e["code"])
        e["name"], e["severity"] = info.name, info.severity
    codes = Counter(e["code"] for e in events)
    return ToolResult(tool=TOOL, status="success", invocation=invocation,
                      data={"source": source, "count": len(events), "codes": dict(codes),
                            "events": events[-500:], "catalog": XID_CATALOG_URL},
                      findings=xid_findings(events))


def scan_xid(*, file: str | None = None, text: str | None = None,
             runner: CommandRunner | None = None) -> ToolResult:
    """Scan `text`, a log `file`, or (default) `dmesg`, falling back to `journalctl -k`."""
    if text is not None:
        return _result(parse_xid_lines(text.splitlines()), "xid (text)", "text")
    if file is not None:
        try:
            with open_regular(file, MAX_FILE_BYTES) as fh:
                events = parse_xid_lines(fh)
        except OSError as exc:
            return ToolResult.failed(TOOL, f"xid --file {file}",
                                     f"cannot read {file}: {exc.strerror or exc}")
        return _result(events, f"xid --file {file}", str(Path(file)))
    runner = runner or SubprocessRunner()
    reasons = []
    for argv in (["dmesg"], ["journalctl", "-k", "--no-pager", "-q", "-b"]):
        out = runner(argv, timeout=30)
        if out.ok:
            return _result(parse_xid_lines(out.stdout.splitlines()), render_argv(argv), argv[0])
        reasons.append(f"{render_argv(argv)}: {out.error or out.stderr.strip()[:200]}")
    return ToolResult.unavailable(TOOL, "dmesg", "cannot read kernel logs ("
                                  + "; ".join(reasons) + "); pass --file with a saved log")

"""Xid scan on real dmesg/journal excerpts."""

from __future__ import annotations

from pathlib import Path

from conftest import FIXTURES

from tools.runner import CommandOutput, RecordedRunner
from tools.xid.catalog import XID_CATALOG_URL, XIDS, explain, xid_cause
from tools.xid.scan import parse_xid_line, scan_xid

DMESG = FIXTURES / "dmesg"


def test_parse_line_variants() -> None:
    x = parse_xid_line("[74889.644138] NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the "
                       "bus.")
    assert x is not None
    assert (x["pci"], x["code"], x["pid"], x["process"]) == ("0000:02:00", 79, None, None)
    assert x["timestamp"] == "74889.644138" and x["message"] == "GPU has fallen off the bus."
    y = parse_xid_line("kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, "
                       "Ch 00000001 caused by previous Xid 149")
    assert y is not None and (y["pid"], y["process"]) == (1818990, "python3")
    assert y["message"] == "Ch 00000001 caused by previous Xid 149"
    z = parse_xid_line("NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, "
                       "Graphics SM Warp Exception")
    assert z is not None and z["pid"] is None and z["process"] is None
    assert parse_xid_line("NVRM: GPU at PCI:0000:02:00: GPU-660d") is None


def test_fallen_off_bus_file() -> None:
    result = scan_xid(file=str(DMESG / "xid79-fallen-off-bus-aer.log"))
    assert result.status == "success" and result.data["codes"] == {79: 1}
    (f,) = result.findings
    assert f.rule == "xid_gpu_fell_off_bus" and f.severity == "error"
    assert "0000:02:00" in f.message


def test_every_fixture_parses() -> None:
    files = sorted(DMESG.glob("*.log"))
    assert files, "dmesg fixtures missing"
    for path in files:
        result = scan_xid(file=str(path))
        assert result.status == "success" and result.data["count"] >= 1, path.name
        assert result.data["catalog"] == XID_CATALOG_URL


def test_app_faults_and_nvlink_followups() -> None:
    text = (DMESG / "xid13-xid109-sm-exception.log").read_text()
    result = scan_xid(text=text)
    assert result.data["codes"] == {13: 3, 109: 1}
    assert {f.rule for f in result.findings} == {"xid_app_fault"}
    text = (DMESG / "xid45-after-nvlink-xid145-149.log").read_text()
    events = scan_xid(text=text).data["events"]
    assert {e["code"] for e in events} == {45} and events[0]["severity"] == "info"


def test_catalog() -> None:
    assert explain(48).rule == "xid_ecc" and explain(74).rule == "xid_nvlink"
    assert explain(99999).rule == "xid_other" and XID_CATALOG_URL in explain(99999).action
    nonfatal = scan_xid(text="NVRM: Xid (PCI:0000:01:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0")
    assert nonfatal.findings[0].severity == "warn"


def test_dmesg_not_permitted_falls_back_then_unavailable() -> None:
    denied = CommandOutput(("dmesg",), 1, stderr="dmesg: read kernel buffer failed: "
                           "Operation not permitted")
    runner = RecordedRunner({("dmesg",): denied})
    result = scan_xid(runner=runner)
    assert result.status == "unavailable" and "Operation not permitted" in result.error
    journal = ("journalctl", "-k", "--no-pager", "-q", "-b")
    runner = RecordedRunner({("dmesg",): denied, journal: "kernel: NVRM: Xid (PCI:0000:3b:00): "
                             "48, pid=77, name=python, DBE (double bit error) ..."})
    ok = scan_xid(runner=runner)
    assert ok.status == "success" and ok.findings[0].rule == "xid_ecc"


def test_missing_file(tmp_path: Path) -> None:
    result = scan_xid(file=str(tmp_path / "nope.log"))
    assert result.status == "error" and "cannot read" in result.error


def _log_rule_signals(text: str) -> list[tuple[str, float]]:
    """The log analyzer's facts for `text`, through the log rules' Xid rule."""
    from bot.answering.analysis import analyze_sources
    from bot.diagnosis.rules import hardware_rule
    from bot.logs.crossrank import analyze_ranks
    from bot.logs.sources import text_source

    report, _ = analyze_sources([text_source("dmesg.log", text)])
    return [(s.category, s.strength) for s in hardware_rule(report, analyze_ranks(report))]


def test_node_tool_and_log_rules_share_the_catalogue() -> None:
    """Every catalogued code reads the same through the node tool and the log rules: the
    rule's class is the catalogue's `cause`; an uncatalogued code is neither."""
    codes = [*sorted(XIDS), 999]
    lines = [f"[ 12.5] NVRM: Xid (PCI:0000:3b:00): {code}, pid=77, name=python3, test"
             for code in codes]
    signals = _log_rule_signals("\n".join(lines) + "\n")
    assert len(signals) == len(codes)
    expected = {"hardware": ("gpu_hardware_fault", 0.85), "application": ("rank_crashed", 0.4),
                None: ("gpu_hardware_fault", 0.5)}
    for code, signal in zip(codes, signals, strict=True):
        assert signal == expected[xid_cause(code)], code
    findings = scan_xid(text="\n".join(lines)).findings
    assert {f.rule for f in findings} == {explain(c).rule for c in codes}
    for code in XIDS:
        info = explain(code)
        assert info.cause in ("hardware", "application") and info.mnemonic and info.nvidia_action
        assert info.rule != "xid_app_fault" or info.cause == "application", code


def test_old_driver_format_reaches_both() -> None:
    """NVIDIA's Xid document's example line (no `PCI:`) is read by both readers."""
    line = "NVRM: Xid (0000:03:00): 48, Channel 00000001"
    assert scan_xid(text=line).data["codes"] == {48: 1}
    assert _log_rule_signals(line + "\n") == [("gpu_hardware_fault", 0.85)]

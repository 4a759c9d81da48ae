"""Readable (non --json) output of `ncclbot node ...` never treats tool text as rich
markup: errors, findings, variable values and log lines with `[...]` print as written."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from tools.cli import node_app, render
from tools.result import Finding, ToolResult

runner = CliRunner(env={"COLUMNS": "250"})
HOSTILE = "[/x] [bold]not bold[/bold] [link=file:///etc]y[/link] \\"


def test_render_escapes_every_text_field() -> None:
    result = ToolResult(
        tool="probe", status="error", invocation=f"probe {HOSTILE}", error=f"hung: {HOSTILE}",
        findings=[Finding(severity="error", rule="probe_hang", message=HOSTILE, card="[/c]")],
        data={"backend": "[/b]", "nproc": 2, "results": [
            {"collective": "[/coll]", "bytes": 8, "time_us": 1.0, "algbw_gbps": 1.0,
             "busbw_gbps": 1.0, "correct": False}]})
    con = Console(record=True, width=300)
    render(result, con)
    text = con.export_text()
    assert text.count("[/x] [bold]not bold[/bold]") == 3  # invocation, error, finding
    assert "[/c]" in text and "[/coll]" in text and "[/b] x2" in text and "NO" in text


def test_env_with_bracketed_value_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "[/x]")
    res = runner.invoke(node_app, ["env"])
    assert res.exception is None, res.output
    assert "NCCL_SOCKET_IFNAME=[/x]" in res.output
    assert "nccl_socket_ifname_missing" in res.output  # the lint finding names it too


def test_xid_line_with_markup_prints(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text("[ 12.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=[/evil], "
                   "GPU has fallen off the bus [/evil] [red]x[/red].\n")
    res = runner.invoke(node_app, ["xid", "--file", str(log)])
    assert res.exit_code == 0 and res.exception is None, res.output
    assert "[/evil]" in res.output and "Xid 79" in res.output


def test_xid_refuses_devices_and_fifos(tmp_path: Path) -> None:
    res = runner.invoke(node_app, ["xid", "--file", "/dev/zero"])
    assert res.exit_code == 1 and "not a regular file (a character device)" in res.output
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done = threading.Event()

    def scan() -> None:
        out["res"] = runner.invoke(node_app, ["xid", "--json", "--file", str(fifo)])
        done.set()

    out: dict = {}
    threading.Thread(target=scan, daemon=True).start()
    assert done.wait(120), "xid --file FIFO blocked"
    assert out["res"].exit_code == 1 and "a FIFO" in out["res"].output
    res = runner.invoke(node_app, ["topo", "--topo-file", str(fifo)])
    assert res.exit_code == 1 and "not a regular file" in res.output


def test_hung_probe_prints_readably() -> None:
    pytest.importorskip("torch")
    res = CliRunner(env={"COLUMNS": "250", "NCCLBOT_PROBE_FAULT": "hang:rank=1:collective=all_reduce",
                         "GLOO_SOCKET_IFNAME": "lo"}).invoke(node_app, [
        "probe", "--backend", "gloo", "--nproc", "2", "--min-bytes", "1K", "--max-bytes",
        "1024", "--iters", "1", "--warmup", "0", "--collectives", "all_reduce",
        "--collective-timeout", "2", "--timeout", "40"])
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.output
    assert "probe_hang" in res.output and "ranks not finished: [1]" in res.output
    assert "all_reduce at 1024 bytes" in res.output  # "1K" was read as 1024 bytes


def test_sizes_take_nccl_tests_suffixes() -> None:
    import typer

    from tools.cli import parse_size

    assert [parse_size(t) for t in ("1024", "64K", "16M", "1G", "1.5M", "16MiB", "2gb")] == [
        1024, 65536, 16 << 20, 1 << 30, 3 << 19, 16 << 20, 2 << 30]
    with pytest.raises(typer.BadParameter, match="not a size"):
        parse_size("sixteen")
    res = CliRunner().invoke(node_app, ["probe", "--backend", "gloo", "--max-bytes", "16Q"])
    assert res.exit_code == 2 and "not a size" in res.output


def test_probe_progress_line_and_stderr_status() -> None:
    from tools.cli import progress_line, progress_on_stderr
    from tools.params import ProbeProgress

    assert progress_line(ProbeProgress(step=3, steps=8, collective="all_reduce",
                                       bytes=4 << 20, ranks=2)) == (
        "probe step 3/8: all_reduce, 4 MiB (2 ranks)")
    assert progress_line(ProbeProgress(step=0, steps=8, collective="init", bytes=0,
                                       ranks=4)) == "probe starting 4 rank(s)…"
    with progress_on_stderr(enabled=False) as cb:
        assert cb is None  # not a terminal: nothing is drawn, the probe gets no listener
    import io

    from rich.console import Console

    con = Console(file=io.StringIO(), force_terminal=True, width=80)
    with progress_on_stderr(enabled=True, console=con) as cb:
        assert cb is not None
        cb(ProbeProgress(step=2, steps=3, collective="broadcast", bytes=1024, ranks=2))
    assert "probe" in con.file.getvalue()

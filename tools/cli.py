"""`ncclbot node ...`: run a node diagnostic here and print it.

Exit codes: 0 success, 1 error (the tool ran and failed, or bad input),
2 unavailable (a prerequisite is missing: no GPU/NVML, no torch, no dmesg access).
`--json` prints the ToolResult as JSON; otherwise a readable summary, in which
every text a tool produced (errors, findings, variable values, file lines) is
escaped: it is data, never rich markup.
Every command dispatches through `tools.registry.run_local`, which the node
agent also calls, so a later `--node NAME` only swaps the executor.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer

from tools.registry import run_local
from tools.result import ToolResult
from tools.units import format_size

node_app = typer.Typer(help="Node diagnostics: topology, environment, probe, Xid.",
                       no_args_is_help=True)
EXIT_CODES = {"success": 0, "error": 1, "unavailable": 2}
_SEVERITY_STYLE = {"error": "bold red", "warn": "yellow", "info": "cyan"}


def _emit(result: ToolResult, as_json: bool) -> None:
    if as_json:
        typer.echo(result.to_json())
    else:
        render(result)
    raise typer.Exit(EXIT_CODES[result.status])


def _e(value: Any) -> str:
    """`value` as literal text for rich (escaped markup)."""
    from rich.markup import escape

    return escape(str(value))


def render(result: ToolResult, con: Any = None) -> None:
    """A rich summary: status, key facts, findings. Tool output is escaped, never markup."""
    from rich.console import Console
    from rich.table import Table

    con = con or Console()
    style = {"success": "green", "error": "red", "unavailable": "yellow"}[result.status]
    con.print(f"[bold]{_e(result.tool)}[/bold]: [{style}]{result.status}[/{style}]  "
              f"[dim]{_e(result.invocation)}[/dim]")
    if result.error:
        con.print(f"[{style}]{_e(result.error)}[/{style}]")
    _render_data(con, result)
    if result.findings:
        table = Table("severity", "rule", "message", "card", title="Findings")
        for f in result.findings:
            table.add_row(f"[{_SEVERITY_STYLE[f.severity]}]{f.severity}[/]", _e(f.rule),
                          _e(f.message), _e(f.card or "-"))
        con.print(table)
    elif result.status == "success":
        con.print("[green]no findings[/green]")


def _render_data(con: Any, result: ToolResult) -> None:
    from rich.table import Table

    d = result.data
    if result.tool == "probe" and d.get("results"):
        t = Table("collective", "bytes", "time (us)", "algbw GB/s", "busbw GB/s", "correct",
                  title=_e(f"{d.get('backend')} x{d.get('nproc')}"))
        for r in d["results"]:
            correct = {True: "yes", False: "[bold red]NO[/]"}.get(r["correct"], "?")
            t.add_row(_e(r["collective"]), f"{r['bytes']:,}", f"{r['time_us']:.1f}",
                      f"{r['algbw_gbps']:.3f}", f"{r['busbw_gbps']:.3f}", correct)
        con.print(t)
    elif result.tool == "topo" and d.get("topology"):
        topo = d["topology"]
        gpus = topo["gpus"]
        t = Table("", *map(_e, gpus), "CPU affinity", "NUMA",
                  title=_e(f"topology ({d.get('source')})"))
        for a in gpus:
            t.add_row(_e(a), *[_e("X" if a == b else topo["links"].get(a, {}).get(b, ""))
                               for b in gpus], _e(topo["cpu_affinity"].get(a, "")),
                      _e(topo["numa_affinity"].get(a, "")))
        con.print(t)
        for nic in topo["nics"]:
            near = [g for g in gpus if topo["links"].get(g, {}).get(nic) in ("PIX", "PXB")]
            con.print(_e(f"  {topo['nic_names'].get(nic, nic)}: shares a PCIe switch with "
                         f"{', '.join(near) or 'no GPU'}"))
    elif result.tool == "env":
        for k, v in d.get("variables", {}).items():
            con.print(_e(f"  {k}={v}"))
        pk = d.get("versions", {}).get("packages", {})
        con.print(_e("  versions: " + ", ".join(f"{k} {v}" for k, v in pk.items() if v)))
    elif result.tool == "xid":
        con.print(_e(f"  {d.get('count', 0)} Xid events; codes {d.get('codes', {})}"))
    if d.get("interfaces") and result.tool != "env":
        con.print(_e("  NICs: " + ", ".join(f"{i['name']}({i['state']}, mtu {i['mtu']})"
                                            for i in d["interfaces"] if not i.get("virtual"))))


@node_app.command()
def topo(
    json_out: bool = typer.Option(False, "--json", help="print the result as JSON"),
    topo_file: str = typer.Option(None, "--topo-file",
                                  help="analyse a saved `nvidia-smi topo -m` output instead"),
) -> None:
    """GPU/NIC topology, NVLink, P2P, ACS, IOMMU and GPU health."""
    _emit(run_local("topo", {"topo_file": topo_file}), json_out)


@node_app.command()
def env(json_out: bool = typer.Option(False, "--json", help="print the result as JSON")) -> None:
    """Environment variables (redacted), versions, limits, network, with lint findings."""
    _emit(run_local("env", {}), json_out)


@node_app.command()
def probe(
    backend: str = typer.Option("nccl", help="nccl (GPUs) or gloo (CPU)"),
    nproc: int = typer.Option(None, help="ranks (default: GPUs for nccl, 2 for gloo)"),
    min_bytes: str = typer.Option("1K", "--min-bytes",
                                  help="smallest message: bytes, or with K/M/G (x1024) as "
                                  "nccl-tests' -b"),
    max_bytes: str = typer.Option("64M", "--max-bytes", help="largest message, e.g. 16M, 1G"),
    factor: float = typer.Option(2.0),
    iters: int = typer.Option(20),
    warmup: int = typer.Option(5),
    timeout: float = typer.Option(600.0, help="overall seconds"),
    collective_timeout: float = typer.Option(60.0, "--collective-timeout",
                                             help="seconds per collective step"),
    collectives: str = typer.Option(None, help="comma list, e.g. all_reduce,all_gather"),
    plot: str = typer.Option(None, help="write a busbw PNG to this file"),
    nccl_tests: str = typer.Option(None, "--nccl-tests", help="run nccl-tests from this dir"),
    nnodes: int = typer.Option(1, "--nnodes", help="nodes in a torchrun c10d rendezvous; run "
                               "this same command on each (needs --rdzv-endpoint)"),
    node_rank: int = typer.Option(None, "--node-rank",
                                  help="this node's rank; node 0 hosts the c10d store"),
    rdzv_endpoint: str = typer.Option(None, "--rdzv-endpoint",
                                      help="HOST:PORT of the c10d rendezvous (node 0's address)"),
    rdzv_id: str = typer.Option("ncclbot-probe", "--rdzv-id",
                                help="rendezvous id, the same on every node"),
    json_out: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Bounded collective bandwidth sweep (nccl-tests style busbw).

    With --nnodes/--rdzv-endpoint it runs under torchrun's c10d rendezvous (start it on
    every node); each node prints the rows its own ranks measured.
    """
    from tools.probe.worker import FAULT_ENV

    params: dict[str, Any] = {
        "backend": backend, "nproc": nproc, "min_bytes": parse_size(min_bytes, "--min-bytes"),
        "max_bytes": parse_size(max_bytes, "--max-bytes"),
        "factor": factor, "iters": iters, "warmup": warmup, "timeout": timeout,
        "collective_timeout": collective_timeout, "plot": plot, "nccl_tests": nccl_tests,
        "nnodes": nnodes, "node_rank": node_rank, "rdzv_endpoint": rdzv_endpoint,
        "rdzv_id": rdzv_id}
    if collectives:
        params["collectives"] = [c.strip() for c in collectives.split(",") if c.strip()]
    # Test-only fault injection: honoured here (the caller's own environment), never by
    # the agent unless NCCLBOT_AGENT_ALLOW_FAULTS=1.
    with progress_on_stderr(enabled=sys.stderr.isatty()) as on_progress:
        result = run_local("probe", params, fault=os.environ.get(FAULT_ENV) or None,
                           on_progress=on_progress)
    _emit(result, json_out)


_SIZE_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def parse_size(text: str, option: str = "size") -> int:
    """"16M" -> 16777216 (K/M/G are powers of 1024, as in nccl-tests' -b/-e); plain bytes too."""
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGB]?)(?:i?B)?\s*", text or "", re.IGNORECASE)
    if not m:
        raise typer.BadParameter(f"{text!r} is not a size; use bytes or a number with K, M "
                                 "or G, e.g. 1024, 64K, 16M, 1G", param_hint=option)
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).upper()])


def progress_line(where: dict[str, Any]) -> str:
    """"step 3/8: all_reduce, 4 MiB (2 ranks)" for a probe's position."""
    if where.get("step", 0) <= 0:
        return f"probe starting {where.get('ranks', 0)} rank(s)…"
    if where.get("collective") == "finish":
        return f"probe finishing, {where.get('steps')} steps done…"
    return (f"probe step {where['step']}/{where.get('steps')}: {where.get('collective')}, "
            f"{format_size(int(where.get('bytes') or 0))} ({where.get('ranks')} ranks)")


@contextmanager
def progress_on_stderr(enabled: bool, console: Any = None
                       ) -> Iterator[Callable[[dict[str, Any]], None] | None]:
    """A live "probe step k/N" line on stderr while the probe runs (terminals only)."""
    if not enabled:
        yield None
        return
    from rich.console import Console

    con = console or Console(stderr=True)
    with con.status("probe starting…") as status:
        yield lambda where: status.update(_e(progress_line(where)))


@node_app.command()
def xid(
    file: str = typer.Option(None, "--file", help="a saved dmesg/journal/kern.log"),
    json_out: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """NVIDIA Xid errors in kernel logs, explained."""
    _emit(run_local("xid", {"file": file}), json_out)

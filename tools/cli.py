"""`ncclbot node ...`: run a node diagnostic here and print it.

Exit codes: 0 success, 1 error (the tool ran and failed, or bad input),
2 unavailable (a prerequisite is missing: no GPU/NVML, no torch, no dmesg access).
`--json` prints the ToolResult as JSON; otherwise a readable summary.
Every command dispatches through `tools.registry.run_local`, which the node
agent also calls, so a later `--node NAME` only swaps the executor.
"""

from __future__ import annotations

from typing import Any

import typer

from tools.registry import run_local
from tools.result import ToolResult

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


def render(result: ToolResult) -> None:
    """A rich summary: status, key facts, findings."""
    from rich.console import Console
    from rich.table import Table

    con = Console()
    style = {"success": "green", "error": "red", "unavailable": "yellow"}[result.status]
    con.print(f"[bold]{result.tool}[/bold]: [{style}]{result.status}[/{style}]  "
              f"[dim]{result.invocation}[/dim]")
    if result.error:
        con.print(f"[{style}]{result.error}[/{style}]")
    _render_data(con, result)
    if result.findings:
        table = Table("severity", "rule", "message", "card", title="Findings")
        for f in result.findings:
            table.add_row(f"[{_SEVERITY_STYLE[f.severity]}]{f.severity}[/]", f.rule,
                          f.message, f.card or "-")
        con.print(table)
    elif result.status == "success":
        con.print("[green]no findings[/green]")


def _render_data(con: Any, result: ToolResult) -> None:
    from rich.table import Table

    d = result.data
    if result.tool == "probe" and d.get("results"):
        t = Table("collective", "bytes", "time (us)", "algbw GB/s", "busbw GB/s", "correct",
                  title=f"{d.get('backend')} x{d.get('nproc')}")
        for r in d["results"]:
            t.add_row(r["collective"], f"{r['bytes']:,}", f"{r['time_us']:.1f}",
                      f"{r['algbw_gbps']:.3f}", f"{r['busbw_gbps']:.3f}", str(r["correct"]))
        con.print(t)
    elif result.tool == "topo" and d.get("topology"):
        topo = d["topology"]
        gpus = topo["gpus"]
        t = Table("", *gpus, "CPU affinity", "NUMA", title=f"topology ({d.get('source')})")
        for a in gpus:
            t.add_row(a, *[("X" if a == b else topo["links"].get(a, {}).get(b, "")) for b in
                           gpus], topo["cpu_affinity"].get(a, ""),
                      topo["numa_affinity"].get(a, ""))
        con.print(t)
        for nic in topo["nics"]:
            near = [g for g in gpus if topo["links"].get(g, {}).get(nic) in ("PIX", "PXB")]
            con.print(f"  {topo['nic_names'].get(nic, nic)}: shares a PCIe switch with "
                      f"{', '.join(near) or 'no GPU'}")
    elif result.tool == "env":
        for k, v in d.get("variables", {}).items():
            con.print(f"  {k}={v}")
        pk = d.get("versions", {}).get("packages", {})
        con.print("  versions: " + ", ".join(f"{k} {v}" for k, v in pk.items() if v))
    elif result.tool == "xid":
        con.print(f"  {d.get('count', 0)} Xid events; codes {d.get('codes', {})}")
    if d.get("interfaces") and result.tool != "env":
        con.print("  NICs: " + ", ".join(f"{i['name']}({i['state']}, mtu {i['mtu']})"
                                         for i in d["interfaces"] if not i.get("virtual")))


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
    min_bytes: int = typer.Option(1024, "--min-bytes"),
    max_bytes: int = typer.Option(64 * 2**20, "--max-bytes"),
    factor: float = typer.Option(2.0),
    iters: int = typer.Option(20),
    warmup: int = typer.Option(5),
    timeout: float = typer.Option(600.0, help="overall seconds"),
    collective_timeout: float = typer.Option(60.0, "--collective-timeout",
                                             help="seconds per collective step"),
    collectives: str = typer.Option(None, help="comma list, e.g. all_reduce,all_gather"),
    plot: str = typer.Option(None, help="write a busbw PNG to this file"),
    nccl_tests: str = typer.Option(None, "--nccl-tests", help="run nccl-tests from this dir"),
    json_out: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Bounded collective bandwidth sweep (nccl-tests style busbw)."""
    params: dict[str, Any] = {
        "backend": backend, "nproc": nproc, "min_bytes": min_bytes, "max_bytes": max_bytes,
        "factor": factor, "iters": iters, "warmup": warmup, "timeout": timeout,
        "collective_timeout": collective_timeout, "plot": plot, "nccl_tests": nccl_tests}
    if collectives:
        params["collectives"] = [c.strip() for c in collectives.split(",") if c.strip()]
    _emit(run_local("probe", params), json_out)


@node_app.command()
def xid(
    file: str = typer.Option(None, "--file", help="a saved dmesg/journal/kern.log"),
    json_out: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """NVIDIA Xid errors in kernel logs, explained."""
    _emit(run_local("xid", {"file": file}), json_out)

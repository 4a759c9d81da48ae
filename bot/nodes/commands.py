"""The remote half of `ncclbot node ...`: call agents, render results and localization."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from bot.errors import NodeError


def _settings(config: Path | None) -> Any:
    from bot.config import load_settings

    return load_settings(config)


def run_remote(config: Path | None, name: str, tool: str, params: dict[str, Any],
               as_json: bool) -> None:
    from bot.nodes.client import client_for
    from bot.nodes.inventory import load_inventory
    from tools.cli import EXIT_CODES, render

    settings = _settings(config)
    node = load_inventory(settings.nodes_file).get(name)
    timeout = float(params.get("timeout", 600.0)) + 30.0 if tool == "probe" else 60.0
    with client_for(settings, node, timeout=timeout) as client:
        result = client.run(tool, params)
    result.data.setdefault("node", name)
    if as_json:
        typer.echo(result.to_json())
    else:
        render(result)
    raise typer.Exit(EXIT_CODES[result.status])


def run_multi(config: Path | None, names: str, params: dict[str, Any], as_json: bool,
              mode: str, expected: float | None) -> None:
    from bot.nodes.client import client_for
    from bot.nodes.inventory import load_inventory
    from bot.nodes.multiprobe import localize, run_group

    if mode not in ("auto", "always", "never"):
        raise typer.BadParameter("--localize must be auto, always or never")
    settings = _settings(config)
    nodes = load_inventory(settings.nodes_file).expand(
        [n.strip() for n in names.split(",") if n.strip()])
    if len(nodes) < 2:
        raise NodeError("--nodes needs at least two nodes", hint="Use --node for one node.")
    if params.get("nproc") is None:
        if params.get("backend", "nccl") == "nccl":
            raise NodeError("--nproc (GPUs per node) is required for a multi-node nccl probe")
        params["nproc"] = 1
    timeout = float(params.get("timeout", 600.0)) + 30.0
    clients = {n.name: client_for(settings, n, timeout=timeout) for n in nodes}
    try:
        def run(group: tuple[str, ...]) -> Any:
            return run_group(clients, group, params)

        if mode == "never":
            from bot.nodes.multiprobe import Localization

            full = run(tuple(clients))
            loc = Localization("healthy" if full.ok else "inconclusive", [],
                               full.error or "all ranks finished", full)
        else:
            loc = localize(run, list(clients), expected_busbw=expected, always=mode == "always")
    finally:
        for c in clients.values():
            c.close()
    if as_json:
        typer.echo(json.dumps(loc.as_dict(), indent=2, default=str))
    else:
        render_localization(loc)
    raise typer.Exit(0 if loc.verdict == "healthy" else 1)


def _bar(value: float | None, top: float, width: int = 30) -> str:
    if value is None or top <= 0:
        return "-"
    return "█" * max(1, round(width * value / top)) + f" {value:.3f}"


def render_localization(loc: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console(highlight=False)
    style = {"healthy": "green", "node": "red", "link": "red"}.get(loc.verdict, "yellow")
    con.print(f"[bold]multi-node probe[/]: [{style}]{loc.verdict}[/] - {loc.summary}")
    full = loc.full
    con.print(f"full group {', '.join(full.nodes)}: "
              + ("ok" if full.ok else f"[red]failed[/] {full.error}")
              + (f", busbw {full.busbw_gbps:.3f} GB/s" if full.busbw_gbps else ""))
    if loc.pairs:
        top = max((p.busbw_gbps or 0.0) for p in loc.pairs)
        t = Table("pair", "status", "duration s", "busbw GB/s (largest size)", title="pairs")
        for p in loc.pairs:
            status = "[red]bad[/]" if p.bad else "[green]ok[/]"
            t.add_row(" <-> ".join(p.nodes), status, f"{p.duration_s:.1f}",
                      _bar(p.busbw_gbps, top) if p.ok else (p.error or "failed")[:80])
        con.print(t)
    if loc.nodes:
        t = Table("node", "pairs", "bad pairs", "median busbw", "hung here", "verdict",
                  title="nodes")
        for n, s in loc.nodes.items():
            bw = s["median_busbw_gbps"]
            t.add_row(n, str(s["pairs"]), str(s["bad_pairs"]),
                      f"{bw:.3f}" if bw is not None else "-", "yes" if s["hung_here"] else "",
                      s.get("verdict", ""))
        con.print(t)


def list_nodes(config: Path | None, as_json: bool) -> None:
    from bot.nodes.inventory import load_inventory

    inv = load_inventory(_settings(config).nodes_file)
    if as_json:
        typer.echo(inv.model_dump_json(indent=2))
        return
    for name, node in inv.nodes.items():
        typer.echo(f"{name}\t{node.url}\t{','.join(node.labels)}")
    for group, members in inv.groups.items():
        typer.echo(f"group {group}: {', '.join(members)}")

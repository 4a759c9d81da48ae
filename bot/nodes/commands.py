"""The remote half of `ncclbot node ...`: call agents, render results and localization.

Everything an agent or a node sends back is data, never markup: it is escaped before
rich prints it (an error text like `[/x]` would otherwise crash the renderer).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

import typer

from bot.errors import NodeError

if TYPE_CHECKING:
    from rich.console import Console

    from bot.config import Settings
    from bot.nodes.localize import Localization, Mode
    from tools.hang.model import HangSample


def _settings(config: Path | None) -> Settings:
    from bot.config import load_settings

    return load_settings(config)


def run_remote(config: Path | None, name: str, tool: str, params: Mapping[str, object],
               as_json: bool) -> None:
    """`ncclbot node TOOL --node NAME`: through the NodeRunner, printed as here."""
    from bot.nodes.client import cli_user
    from bot.nodes.runner import NodeRunner
    from tools.cli import EXIT_CODES, progress_on_stderr, render
    from tools.registry import TOOLS

    runner = NodeRunner(_settings(config), cli_user())
    with progress_on_stderr(enabled=TOOLS[tool].progress and sys.stderr.isatty()) as progress:
        result = runner.run(name, tool, params, on_progress=progress)
    result.data.setdefault("node", name)
    if as_json:
        typer.echo(result.to_json())
    else:
        render(result)
    raise typer.Exit(EXIT_CODES[result.status])


def hang_samples(config: Path | None, node: str | None, nodes: str | None,
                 params: Mapping[str, object]) -> tuple[list[HangSample], list[str]]:
    """The `hang` diagnostic here (no node named) or on each named node's agent, in
    parallel; the samples, and what failed where."""
    from bot.nodes.hang import gather, read_sample
    from bot.nodes.runner import NodeRunner

    if node is None and nodes is None:
        got = read_sample(NodeRunner().run(None, "hang", params), "this machine")
        return ([got], []) if not isinstance(got, str) else ([], [got])
    from bot.nodes.client import cli_user
    from bot.nodes.inventory import load_inventory

    settings = _settings(config)
    names = [n.strip() for n in f"{node or ''},{nodes or ''}".split(",") if n.strip()]
    targets = [t.name for t in load_inventory(settings.nodes_file).expand(names)]
    runner = NodeRunner(settings, cli_user())  # waits the sample's deadline and the way back
    return gather(targets, lambda name: runner.run(name, "hang", params))


def run_multi(config: Path | None, names: str, params: Mapping[str, object], as_json: bool,
              mode: str, expected: float | None) -> None:
    from bot.nodes.client import client_for
    from bot.nodes.inventory import load_inventory
    from bot.nodes.localize import localize
    from bot.nodes.multiprobe import baseline_for, preflight, run_group

    if mode not in ("auto", "always", "never"):
        raise typer.BadParameter("--localize must be auto, always or never")
    settings = _settings(config)
    nodes = load_inventory(settings.nodes_file).expand(
        [n.strip() for n in names.split(",") if n.strip()])
    if len(nodes) < 2:
        raise NodeError("--nodes needs at least two nodes", hint="Use --node for one node.")
    from bot.nodes.runner import NodeRunner
    from tools.probe.remote import group_request

    try:
        request = group_request(params)
    except ValueError as exc:
        raise NodeError(str(exc)) from None
    # the probe's own limit, and the way back
    timeout = NodeRunner().timeout("probe", request.body())
    clients = {n.name: client_for(settings, n, timeout=timeout) for n in nodes}
    try:
        preflight(clients, request.force)
        loc = localize(lambda group: run_group(clients, group, request), list(clients),
                       expected_busbw=expected, mode=cast("Mode", mode),
                       baseline=baseline_for(request))
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


def render_localization(loc: Localization, con: Console | None = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    con = con or Console(highlight=False)
    style = {"healthy": "green", "node": "red", "link": "red"}.get(loc.verdict, "yellow")
    con.print(f"[bold]multi-node probe[/]: [{style}]{escape(loc.verdict)}[/] - "
              f"{escape(loc.summary)}")
    full = loc.full
    con.print(f"full group {escape(', '.join(full.nodes))}: "
              + ("ok" if full.ok else f"[red]failed[/] {escape(full.error or '')}")
              + (f", busbw {full.busbw_gbps:.3f} GB/s" if full.busbw_gbps else ""))
    if loc.expected_busbw:
        con.print(f"expected busbw {loc.expected_busbw:.1f} GB/s "
                  f"({escape(loc.expected_source or '')})")
    if loc.pairs:
        top = max((p.busbw_gbps or 0.0) for p in loc.pairs)
        t = Table("pair", "status", "duration s", "busbw GB/s (largest size)", title="pairs")
        for p in loc.pairs:
            status = "[yellow]busy[/]" if p.busy else "[red]bad[/]" if p.bad else "[green]ok[/]"
            t.add_row(escape(" <-> ".join(p.nodes)), status, f"{p.duration_s:.1f}",
                      _bar(p.busbw_gbps, top) if p.ok else escape((p.error or "failed")[:80]))
        con.print(t)
    if loc.nodes:
        t = Table("node", "pairs", "bad pairs", "median busbw", "peers' median", "hung here",
                  "verdict", title="nodes")
        for n, s in loc.nodes.items():
            bw, peers = s.median_busbw_gbps, s.peers_median_busbw_gbps
            t.add_row(escape(n), str(s.pairs), str(s.bad_pairs),
                      f"{bw:.3f}" if bw is not None else "-",
                      f"{peers:.3f}" if peers is not None else "-",
                      "yes" if s.hung_here else "", escape(s.verdict))
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

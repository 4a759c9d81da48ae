"""`ncclbot serve mcp`: the MCP server for coding agents and HolmesGPT (imports `mcp` only
when run; without the `mcp` extra it says, in one line, what to install)."""

from __future__ import annotations

import getpass
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="TOML settings file (or NCCLBOT_CONFIG).")
]
DEFAULT_PORT = 8471


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def serve_mcp(
    http: Annotated[bool, typer.Option("--http", help="Streamable HTTP at "
                                       "http://HOST:PORT/mcp instead of stdio.")] = False,
    host: Annotated[str, typer.Option(help="HTTP bind address (with --http). Anything but "
                                      "loopback needs NCCLBOT_MCP_TOKEN.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port (with --http).")] = DEFAULT_PORT,
    allow_probes: Annotated[bool, typer.Option(
        "--allow-probes", help="Offer node_probe (NCCL bandwidth probes on nodes' GPUs) for "
        "the on-call user named by --user.")] = False,
    user: Annotated[str | None, typer.Option(
        "--user", help="Who the server acts for on node agents (signed requests, audit). "
        "With --allow-probes it must be in NCCLBOT_ONCALL_USERS. Default: your login.")] = None,
    log_root: Annotated[list[Path] | None, typer.Option(
        "--log-root", help="A folder whose files the tools may read by path; repeatable. "
        "Default: any file with stdio, none with --http (logs then come as text).")] = None,
    config: ConfigOpt = None,
) -> None:
    """Run an MCP server (stdio by default; --http for streamable HTTP): analyze_logs, ask,
    search_knowledge, get_card, similar_incidents and node diagnostics as tools, the cards
    and incidents as resources. See docs/mcp.md."""
    try:
        import mcp  # noqa: F401 - the extra's check, before anything starts
    except ModuleNotFoundError:
        sys.stderr.write("error: `ncclbot serve mcp` needs the optional package 'mcp': pip "
                         "install 'ncclbot[mcp]' (add 'ncclbot[retrieval]' for ask and "
                         "search_knowledge)\n")
        raise typer.Exit(3) from None
    from bot.cli.main import settings_from
    from bot.mcp.auth import TOKEN_ENV, check_http_token
    from bot.mcp.backend import Backend, Policy, check_probe_identity
    from bot.mcp.server import serve

    settings = settings_from(config)
    token = check_http_token(host, os.environ.get(TOKEN_ENV)) if http else None
    if allow_probes:
        user = check_probe_identity(settings, user)
    roots = tuple(p.expanduser().resolve() for p in log_root or ())
    for root in roots:
        if not root.is_dir():
            raise typer.BadParameter(f"--log-root {root} is not a folder")
    policy = Policy(user=f"mcp:{user or _login()}", allow_probes=allow_probes,
                    log_roots=roots if roots or http else None)
    serve(Backend(settings, policy), http=http, host=host, port=port, token=token)


def register(app: typer.Typer, serve_app: typer.Typer) -> None:
    serve_app.command("mcp")(serve_mcp)

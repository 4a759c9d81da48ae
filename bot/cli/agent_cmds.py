"""`ncclbot serve agent`: run the node agent (imports FastAPI/uvicorn only when run)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.errors import ConfigError

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="TOML settings file (or NCCLBOT_CONFIG).")
]

DEFAULT_PORT = 8470


def serve_agent(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = DEFAULT_PORT,
    audit_log: Annotated[Path | None, typer.Option(
        "--audit-log", help="JSON-lines audit log (or NCCLBOT_AGENT_AUDIT_LOG).")] = None,
    allow_root: Annotated[bool, typer.Option(
        "--allow-root", help="Start even as root (not recommended).")] = False,
    force_user: Annotated[list[str] | None, typer.Option(
        "--force-user", help="May force a probe over busy GPUs (default: "
        "NCCLBOT_ONCALL_USERS). Repeatable.")] = None,
    name: Annotated[list[str] | None, typer.Option(
        "--name", help="Another host name (or host:port) the bot may address this agent by, "
        "as in its NCCLBOT_NODES_FILE url, e.g. behind a proxy or DNS alias. Requests are "
        "signed for the address the bot used; this machine's own addresses and host name are "
        "always accepted. Repeatable.")] = None,
    config: ConfigOpt = None,
) -> None:
    """Run the node agent: signed HTTP API for topo, env, probe and xid on this node."""
    from bot.config import load_settings
    from tools.agent.server import StartError, serve

    settings = load_settings(config)
    try:
        serve(settings, host, port, audit_log=audit_log, allow_root=allow_root,
              force_users=force_user, names=name)
    except StartError as exc:
        raise ConfigError(str(exc), hint="See docs/agent.md for running the agent.") from exc


def register(app: typer.Typer, serve_app: typer.Typer) -> None:
    serve_app.command("agent")(serve_agent)

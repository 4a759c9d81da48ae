"""`ncclbot serve slack` and `ncclbot feedback report` (slack imports stay inside)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer, serve_app: typer.Typer) -> None:
    feedback_app = typer.Typer(help="What people said about the answers.", no_args_is_help=True)
    app.add_typer(feedback_app, name="feedback")

    @serve_app.command("slack")
    def serve_slack(
        http: Annotated[bool, typer.Option("--http", help="Events API over HTTP instead of "
                                           "Socket Mode.")] = False,
        port: Annotated[int, typer.Option(help="HTTP port (with --http).")] = 3000,
        host: Annotated[str, typer.Option(help="HTTP bind address (with --http).")] = "0.0.0.0",
        health_port: Annotated[int, typer.Option(
            help="Socket Mode: port of the local health check (GET 127.0.0.1:PORT/healthz); "
            "0 turns it off.")] = 3000,
        config: Annotated[Path | None, typer.Option("--config", help="TOML settings file.")]
        = None,
    ) -> None:
        """Run the Slack app (Socket Mode by default; --http for /slack/events).

        The retrieval index is opened (built on the first start) before events are taken.
        """
        import logging

        from bot.cli.main import settings_from
        from bot.slack.app import build_deps, create_app, web_client
        from bot.slack.serve import Health, serve_http, serve_socket

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: "
                            "%(message)s")
        settings = settings_from(config)
        client = web_client(settings)
        deps = build_deps(settings, client)
        slack_app = create_app(settings, client, http=http, deps=deps)
        health = Health(store_ping=deps.store.ping)

        def warm_up() -> None:
            logging.getLogger("ncclbot.serve").info(
                "retrieval index and log scanner ready (%.1f s)", deps.troubleshooter.warm())
            deps.authz.group_members()  # the on-call group, so slash commands answer at once

        if http:
            serve_http(slack_app, host, port, health, warm_up)
        else:
            token = settings.slack_app_token
            serve_socket(slack_app, token.get_secret_value() if token else None, health,
                         warm_up, health_port=health_port)

    @feedback_app.command("report")
    def feedback_report(
        config: Annotated[Path | None, typer.Option("--config", help="TOML settings file.")]
        = None,
        reasons: Annotated[bool, typer.Option(help="Also list the reasons people gave.")] = False,
    ) -> None:
        """Helpful / not helpful per root-cause category and card."""
        from rich.table import Table

        from bot.cli.main import console, settings_from
        from bot.slack.store import Store

        settings = settings_from(config)
        out = console()
        if settings.database_url is None and not settings.state_db.exists():
            out.print(f"No feedback yet ({settings.state_db} does not exist).")
            return
        store = Store.open(settings)
        rows = store.feedback_report()
        if not rows:
            out.print("No feedback yet.")
            return
        table = Table("category", "card", "helpful", "not helpful", "helpful %")
        for cat, card, up, down in rows:
            table.add_row(cat, card, str(up), str(down), f"{up / max(1, up + down):.0%}")
        out.print(table)
        if reasons:
            for cat, card, reason in store.feedback_reasons():
                out.print(f"[bold]{cat}[/] {card}: {reason}")

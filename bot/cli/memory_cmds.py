"""`ncclbot incidents add|list|show|forget|export|import`: the team's own resolved incidents."""

from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bot.errors import InputError

if TYPE_CHECKING:
    from bot.config import Settings
    from bot.memory.model import LocalIncident
    from bot.memory.store import MemoryStore

ConfigOpt = Annotated[Path | None, typer.Option("--config", help="TOML settings file.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
def check_link(url: str | None, what: str) -> str | None:
    """An http(s) link, or an InputError in one line."""
    if not url:
        return None
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or any(c in url for c in "<>| "):
        raise InputError(f"{what} must be an http(s) link, not {url[:80]!r}")
    return url.strip()


def check_cause(category: str, card: str | None) -> None:
    """A known category, and a card of it (one line naming what is wrong otherwise)."""
    from bot.answering.knowledge import bundled_cards
    from bot.knowledge.taxonomy import category_ids

    if category not in category_ids():
        raise InputError(f"unknown category {category!r}; one of: "
                         + ", ".join(sorted(category_ids())))
    if card is not None:
        found = next((c for c in bundled_cards() if c.id == card), None)
        if found is None:
            raise InputError(f"unknown card {card!r} (`ncclbot knowledge list` lists them)")
        if category != found.category and category not in found.also:
            raise InputError(f"card {card} is about {found.category}, not {category}")


def _memory(settings: Settings, create: bool) -> MemoryStore | None:
    from bot.memory.runtime import memory

    return memory(settings, create=create)


def corpus_yaml(data: dict[str, Any]) -> str:
    """YAML in the corpus's style (multi-line text as blocks)."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return yaml.dump(data, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=100)


def incident_row(inc: LocalIncident) -> dict[str, Any]:
    return {"id": inc.id, "date": inc.date.isoformat(), "category": inc.category,
            "card": inc.card, "title": inc.title, "resolution": inc.resolution,
            "source": inc.url or None, "channel": inc.channel_name or inc.channel,
            "resolved_by": inc.confirmed_by.who, "origin": inc.origin}


def register(app: typer.Typer, serve_app: typer.Typer) -> None:
    inc_app = typer.Typer(help="The team's own resolved incidents: the next answers use them.",
                          no_args_is_help=True)
    app.add_typer(inc_app, name="incidents")

    @inc_app.command("add")
    def add(
        log: Annotated[str, typer.Option("--log", help="The failing job's log (.log .gz .zip).")],
        category: Annotated[str, typer.Option("--category", help="The cause's category id.")],
        fix: Annotated[str, typer.Option("--fix", help="What fixed it, in a line or two.")],
        card: Annotated[str | None, typer.Option("--card", help="The card that names the "
                                                 "cause, if one does.")] = None,
        source: Annotated[str | None, typer.Option("--source", help="A link: postmortem, "
                                                   "ticket, thread.")] = None,
        title: Annotated[str | None, typer.Option("--title", help="A short name for it.")]
        = None,
        question: Annotated[str | None, typer.Option("--question", help="What was asked.")]
        = None,
        as_json: JsonOpt = False,
        config: ConfigOpt = None,
    ) -> None:
        """Record a resolved incident of this team (redacted and bounded)."""
        from bot.cli.main import settings_from
        from bot.memory.capture import read_lines, versions_of
        from bot.memory.model import capture

        settings = settings_from(config)
        check_cause(category, card)
        url = check_link(source, "--source")
        if not Path(log).exists():
            raise InputError(f"--log {log}: no such file")
        lines = read_lines([log])
        versions = versions_of(lines)
        try:
            inc = capture(log_lines=lines, category=category, card=card, resolution=fix,
                          who=getpass.getuser(), role="cli",
                          keep_hosts=settings.memory_keep_hosts, title=title, source=url,
                          question=question, versions=versions, origin="cli")
        except ValueError as exc:
            raise InputError(str(exc).splitlines()[0]) from None
        store = _memory(settings, create=True)
        assert store is not None
        store.add(inc, f"cli:{getpass.getuser()}")
        if as_json:
            sys.stdout.write(json.dumps(incident_row(inc), ensure_ascii=False) + "\n")
        else:
            typer.echo(f"stored {inc.id}: {inc.category} - {inc.title} "
                       f"({len(inc.log.splitlines())} log lines kept)")

    @inc_app.command("list")
    def list_(as_json: JsonOpt = False, config: ConfigOpt = None) -> None:
        """Every local incident, oldest first."""
        from bot.cli.main import console, settings_from

        store = _memory(settings_from(config), create=False)
        rows = [incident_row(i) for i in (store.all() if store else [])]
        if as_json:
            sys.stdout.write(json.dumps(rows, ensure_ascii=False, indent=1) + "\n")
            return
        if not rows:
            typer.echo("No local incidents yet (`ncclbot incidents add`, or Resolved in Slack).")
            return
        from rich.markup import escape
        from rich.table import Table

        table = Table("id", "date", "category", "card", "title", "resolved by")
        for r in rows:
            table.add_row(r["id"], r["date"], r["category"], r["card"] or "-",
                          escape(r["title"][:60]), escape(str(r["resolved_by"])))
        console().print(table)

    @inc_app.command("show")
    def show(incident_id: str, as_json: JsonOpt = False, config: ConfigOpt = None) -> None:
        """One local incident, whole."""
        from bot.cli.main import settings_from

        store = _memory(settings_from(config), create=False)
        inc = store.get(incident_id) if store else None
        if inc is None:
            raise InputError(f"no local incident {incident_id!r} (`ncclbot incidents list`)")
        data = inc.model_dump(mode="json", exclude_none=True)
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=1) + "\n" if as_json
                         else corpus_yaml(data))

    @inc_app.command("forget")
    def forget(incident_id: str, config: ConfigOpt = None) -> None:
        """Delete one: it no longer counts in any answer, from the next one on."""
        from bot.cli.main import settings_from

        store = _memory(settings_from(config), create=False)
        if store is None or not store.forget(incident_id, f"cli:{getpass.getuser()}"):
            raise InputError(f"no local incident {incident_id!r} (`ncclbot incidents list`)")
        typer.echo(f"forgot {incident_id}")

    @inc_app.command("labels")
    def labels(as_json: JsonOpt = False, config: ConfigOpt = None) -> None:
        """Answers found not helpful (👎) whose thread was then resolved: what the answer led
        with and the cause recorded instead (labels for the cards' review)."""
        from bot.cli.main import settings_from

        store = _memory(settings_from(config), create=False)
        rows = [{"answer": a, "answered": was, "category": cat, "card": card}
                for a, was, cat, card in (store.corrections() if store else [])]
        if as_json:
            sys.stdout.write(json.dumps(rows, ensure_ascii=False, indent=1) + "\n")
            return
        for r in rows:
            typer.echo(f"{r['answer']}: answered {r['answered']}, was {r['category']} "
                       f"({r['card'] or 'no card'})")
        typer.echo(f"{len(rows)} wrong answer(s) labelled by a resolution")

    @inc_app.command("export")
    def export(directory: Path, config: ConfigOpt = None) -> None:
        """Write every local incident as a corpus file (`ncclbot knowledge check
        --incidents DIR` validates them) for review and an upstream pull request."""
        from bot.cli.main import settings_from
        from bot.memory.model import to_corpus

        store = _memory(settings_from(config), create=False)
        directory.mkdir(parents=True, exist_ok=True)
        written = 0
        for inc in store.all() if store else []:
            try:
                corpus = to_corpus(inc)
            except ValueError as exc:
                typer.echo(f"skipped: {str(exc).splitlines()[0]}", err=True)
                continue
            data = corpus.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
            data = {"id": corpus.id, **data}
            (directory / f"{corpus.id}.yaml").write_text(corpus_yaml(data), encoding="utf-8")
            written += 1
        typer.echo(f"wrote {written} incident(s) to {directory}")

    @inc_app.command("import")
    def import_(directory: Path, config: ConfigOpt = None) -> None:
        """Load another team's export (corpus-format YAML files); a defective or known file
        is skipped with a line saying why."""
        from bot.cli.main import settings_from
        from bot.knowledge.incidents import SEALED_FILE, incident_files, parse_incident
        from bot.memory.model import from_corpus
        from bot.memory.store import MemoryChangeError

        if not directory.is_dir():
            raise InputError(f"{directory}: not a folder of incident YAML files")
        settings = settings_from(config)
        store = _memory(settings, create=True)
        assert store is not None
        loaded = 0
        for path in incident_files(directory):
            if path.name == SEALED_FILE:
                continue
            try:
                inc = from_corpus(parse_incident(path.read_text(encoding="utf-8")),
                                  settings.memory_keep_hosts)
                store.add(inc, f"cli:{getpass.getuser()}", action="import")
            except (ValueError, OSError, MemoryChangeError) as exc:
                typer.echo(f"skipped {path.name}: {one_line(exc)}", err=True)
                continue
            loaded += 1
        typer.echo(f"imported {loaded} incident(s) from {directory}")


def one_line(exc: Exception) -> str:
    """An error in one line (a validation error: each field and what is wrong with it)."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'file'}: {e['msg']}"
                         for e in exc.errors())[:300]
    first = str(exc).strip().splitlines()
    return first[0] if first else type(exc).__name__

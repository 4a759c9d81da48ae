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

import inspect
import os
import sys
import typing
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer
from pydantic.fields import FieldInfo

from tools.params import ProbeProgress, Progress, ToolSpec, findings_summary
from tools.registry import TOOLS, run_local
from tools.result import ToolResult
from tools.units import format_size

if TYPE_CHECKING:
    from rich.console import Console

node_app = typer.Typer(help="Node diagnostics: " + ", ".join(TOOLS) + ".",
                       no_args_is_help=True)
EXIT_CODES = {"success": 0, "error": 1, "unavailable": 2}
_SEVERITY_STYLE = {"error": "bold red", "warn": "yellow", "info": "cyan"}


def _emit(result: ToolResult, as_json: bool) -> None:
    if as_json:
        typer.echo(result.to_json())
    else:
        render(result)
    raise typer.Exit(EXIT_CODES[result.status])


def _e(value: object) -> str:
    """`value` as literal text for rich (escaped markup)."""
    from rich.markup import escape

    return escape(str(value))


def render(result: ToolResult, con: Console | None = None) -> None:
    """A rich summary: status, key facts, findings. Tool output is escaped, never markup."""
    from rich.console import Console
    from rich.table import Table

    con = con or Console()
    style = {"success": "green", "error": "red", "unavailable": "yellow"}[result.status]
    con.print(f"[bold]{_e(result.tool)}[/bold]: [{style}]{result.status}[/{style}]  "
              f"[dim]{_e(result.invocation)}[/dim]")
    if result.error:
        con.print(f"[{style}]{_e(result.error)}[/{style}]")
    spec = TOOLS.get(result.tool)
    if spec is not None and not result.error and spec.summary is not findings_summary:
        con.print(_e(spec.summary(result)))  # the tool's own one-line summary
    _render_data(con, result)
    if result.findings:
        table = Table("severity", "rule", "message", "card", title="Findings")
        for f in result.findings:
            table.add_row(f"[{_SEVERITY_STYLE[f.severity]}]{f.severity}[/]", _e(f.rule),
                          _e(f.message), _e(f.card or "-"))
        con.print(table)
    elif result.status == "success":
        con.print("[green]no findings[/green]")


def _render_data(con: Console, result: ToolResult) -> None:
    spec = TOOLS.get(result.tool)
    if spec is not None:
        spec.render(result, con)  # the tool's own table (its ToolSpec)
    d = result.data
    if d.get("interfaces") and result.tool != "env":
        con.print(_e("  NICs: " + ", ".join(f"{i['name']}({i['state']}, mtu {i['mtu']})"
                                            for i in d["interfaces"] if not i.get("virtual"))))

_SIZE_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def parse_size(text: str, option: str = "size") -> int:
    """"16M" -> 16777216 (K/M/G are powers of 1024, as in nccl-tests' -b/-e); plain bytes too."""
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGB]?)(?:i?B)?\s*", text or "", re.IGNORECASE)
    if not m:
        raise typer.BadParameter(f"{text!r} is not a size; use bytes or a number with K, M "
                                 "or G, e.g. 1024, 64K, 16M, 1G", param_hint=option)
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).upper()])


def progress_line(where: ProbeProgress) -> str:
    """"step 3/8: all_reduce, 4 MiB (2 ranks)" for a probe's position."""
    if where.step <= 0:
        return f"probe starting {where.ranks} rank(s)…"
    if where.collective == "finish":
        return f"probe finishing, {where.steps} steps done…"
    return (f"probe step {where.step}/{where.steps}: {where.collective}, "
            f"{format_size(where.bytes)} ({where.ranks} ranks)")


@contextmanager
def progress_on_stderr(enabled: bool, console: Console | None = None
                       ) -> Iterator[Progress | None]:
    """A live "probe step k/N" line on stderr while the probe runs (terminals only)."""
    if not enabled:
        yield None
        return
    from rich.console import Console

    con = console or Console(stderr=True)
    with con.status("probe starting…") as status:
        yield lambda where: status.update(_e(progress_line(where)))

# -- the commands, generated from each tool's ToolSpec ------------------------------------

_KW = inspect.Parameter.KEYWORD_ONLY


def _base(annotation: object) -> tuple[object, bool]:
    """(the type inside Optional, whether it is a list)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (list, tuple):
        return (args[0] if args else str), True
    if args and origin is not typing.Literal:  # X | None
        return _base(args[0])
    return annotation, False


def flag(name: str, field: FieldInfo) -> str:
    """A field's CLI flag: `--min-bytes`, or the one its model names (`cli` in its extra)."""
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    return str(extra.get("cli") or "--" + name.replace("_", "-"))


def _is_size(field: FieldInfo) -> bool:
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    return bool(extra.get("size"))


def options(spec: ToolSpec) -> list[inspect.Parameter]:
    """One typer option per field of the tool's parameter model: the flag from its name, the
    help from its description and default; booleans are --x/--no-x switches, lists comma
    lists, sizes take K/M/G. Every value is checked by the model itself."""
    out = []
    for name, field in spec.params.model_fields.items():
        base, is_list = _base(field.annotation)
        default = field.get_default(call_default_factory=True)
        shown = ",".join(map(str, default)) if isinstance(default, list) else default
        if _is_size(field) and isinstance(default, int):
            shown = format_size(default)
        choices = typing.get_args(base) if typing.get_origin(base) is typing.Literal else ()
        help_text = (field.description or name) + (f" ({'|'.join(choices)})" if choices
                                                   else "")
        if base is bool and not is_list:
            opt = f"{flag(name, field)}/--no-{flag(name, field)[2:]}"
            out.append(inspect.Parameter(name, _KW, annotation=bool, default=typer.Option(
                bool(default), opt, help=help_text)))
            continue
        if shown not in (None, "", []):
            help_text += f" (default: {shown})"
        typ: Any = (base if base in (int, float) and not is_list and not _is_size(field)
                    else str)
        out.append(inspect.Parameter(name, _KW, annotation=typ | None, default=typer.Option(
            None, flag(name, field), help=help_text, show_default=False)))
    return out


def to_params(spec: ToolSpec, kwargs: Mapping[str, object]) -> dict[str, object]:
    """The options given (None: not given, the model's default applies) as the tool's
    parameters: comma lists split, sizes parsed."""
    params: dict[str, object] = {}
    for name, field in spec.params.model_fields.items():
        value: object = kwargs.get(name)
        if value is None:
            continue
        base, is_list = _base(field.annotation)
        if is_list and isinstance(value, str):
            words = [v.strip() for v in value.split(",") if v.strip()]
            value = words
            if base is int:
                if not all(v.isdigit() for v in words):
                    raise typer.BadParameter(f"takes whole numbers: {flag(name, field)} "
                                             "123,124", param_hint=flag(name, field))
                value = [int(v) for v in words]
        elif _is_size(field) and isinstance(value, str):
            value = parse_size(value, flag(name, field))
        params[name] = value
    return params


def help_text(spec: ToolSpec) -> str:
    """The command's help: the tool's description and what it needs."""
    need = spec.prerequisite_text()
    return spec.description + (f"\n\nIt {need}." if need else "")


def command(spec: ToolSpec) -> Callable[..., None]:
    """`ncclbot node NAME`: the tool's options, --json; runs it here."""

    def run(**kwargs: Any) -> None:
        from tools.probe.worker import FAULT_ENV

        as_json = bool(kwargs.pop("json_out"))
        params = to_params(spec, kwargs)
        # Test-only fault injection: honoured here (the caller's own environment), never by
        # the agent unless NCCLBOT_AGENT_ALLOW_FAULTS=1.
        with progress_on_stderr(enabled=spec.progress and sys.stderr.isatty()) as progress:
            result = run_local(spec.name, params, fault=os.environ.get(FAULT_ENV) or None,
                               on_progress=progress)
        _emit(result, as_json)

    params = [*options(spec), inspect.Parameter("json_out", _KW, annotation=bool,
                                                default=typer.Option(
                                                    False, "--json",
                                                    help="print the result as JSON"))]
    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params}
    run.__doc__ = help_text(spec)
    run.__name__ = spec.name
    return run


for _spec in TOOLS.values():
    if _spec.cli:
        node_app.command(_spec.name, help=help_text(_spec))(command(_spec))

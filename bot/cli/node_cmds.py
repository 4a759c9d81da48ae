"""`ncclbot node NAME [--node NODE | --nodes A,B,..]` for every node tool, and `ncclbot nodes`.

The commands are the tools' own (`tools.cli.node_app`, generated from each `ToolSpec`),
wrapped with `--node`: without it they run here; with it the same parameters go, signed, to
that node's agent through `bot.nodes.runner.NodeRunner`. `probe --nodes` runs one sweep
across several agents and localizes a slow or broken node/link; `hang` samples a running
job's ranks (here, or on agents) and compares them.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="TOML settings file (or NCCLBOT_CONFIG).")
]
_KW = inspect.Parameter.KEYWORD_ONLY


def _extra_params(tool: str) -> list[inspect.Parameter]:
    from tools.registry import TOOLS

    extra = [
        inspect.Parameter("node", _KW, annotation=str | None, default=typer.Option(
            None, "--node", help="Run on this node's agent (a name in NCCLBOT_NODES_FILE).")),
        inspect.Parameter("config", _KW, annotation=Path | None, default=typer.Option(
            None, "--config", help="TOML settings file (or NCCLBOT_CONFIG).")),
    ]
    if TOOLS[tool].exclusive:  # the GPU-exclusive tool (probe): multi-node and force
        extra += [
            inspect.Parameter("nodes", _KW, annotation=str | None, default=typer.Option(
                None, "--nodes", help="Comma list of nodes/groups: one multi-node sweep, then "
                "pairwise rounds naming the slow or broken node or link.")),
            inspect.Parameter("localize", _KW, annotation=str, default=typer.Option(
                "auto", "--localize", help="auto (when slow/failed), always or never.")),
            inspect.Parameter("expected_busbw", _KW, annotation=float | None, default=typer.Option(
                None, "--expected-busbw", help="GB/s the full group should reach (default: "
                "the baseline for the nodes' hardware, when known).")),
            inspect.Parameter("force", _KW, annotation=bool, default=typer.Option(
                False, "--force", help="With --node/--nodes: probe even while processes hold "
                "the GPUs (the agent allows it only for users in its force allow list).")),
        ]
    return extra


def remote_body(tool: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The command's options as the agent's request body, checked against the agent's
    request model first: an option the agent refuses (a file to write, a local torchrun) is
    a usage error naming the flags, before anything is sent."""
    from pydantic import ValidationError

    from tools.cli import flag, to_params
    from tools.registry import TOOLS

    spec = TOOLS[tool]
    body = to_params(spec, kwargs)
    try:
        spec.request_model().model_validate(body, strict=False)
    except ValidationError as exc:
        fields = spec.params.model_fields
        by_msg: dict[str, list[str]] = {}
        for e in exc.errors():
            name = str(e["loc"][0]) if e.get("loc") else ""
            shown = flag(name, fields[name]) if name in fields else name or "body"
            by_msg.setdefault(str(e["msg"]).removeprefix("Value error, "), []).append(shown)
        raise typer.BadParameter("; ".join(f"{', '.join(flags)}: {msg}"
                                           for msg, flags in by_msg.items())) from None
    return body


def wrap(tool: str, callback: Callable[..., Any]) -> Callable[..., Any]:
    """`callback` with --node (and --nodes for probe) added; remote when a node is named."""
    sig = inspect.signature(callback)
    hints = typing.get_type_hints(callback)
    params = [p.replace(annotation=hints.get(p.name, p.annotation))
              for p in sig.parameters.values()]
    extra = _extra_params(tool)

    def command(**kwargs: Any) -> None:
        node, config = kwargs.pop("node"), kwargs.pop("config")
        nodes = kwargs.pop("nodes", None)
        localize_mode = kwargs.pop("localize", "auto")
        expected = kwargs.pop("expected_busbw", None)
        force = kwargs.pop("force", False)
        if node is None and nodes is None:
            if force:
                raise typer.BadParameter("--force only applies with --node or --nodes (a "
                                         "local probe does not check the GPUs' processes)")
            callback(**kwargs)
            return
        as_json = bool(kwargs.get("json_out"))
        body = remote_body(tool, kwargs)
        if force:
            body["force"] = True
        if nodes is not None:
            from bot.nodes.commands import run_multi

            run_multi(config, nodes, body, as_json, localize_mode, expected)
        else:
            from bot.nodes.commands import run_remote

            run_remote(config, node, tool, body, as_json)

    command.__signature__ = sig.replace(parameters=[*params, *extra])  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in [*params, *extra]}
    command.__doc__ = callback.__doc__
    command.__name__ = tool
    return command


def hang_command() -> Callable[..., None]:
    """`ncclbot node hang`: the hang tool's options (from its ToolSpec) plus where to sample
    and how to answer."""
    from tools.cli import help_text, options, to_params
    from tools.registry import TOOLS

    spec = TOOLS["hang"]

    def hang(**kwargs: Any) -> None:
        from bot.answering.troubleshooter import Question, Troubleshooter
        from bot.cli.main import _check_lang, emit, settings_from
        from bot.nodes.commands import hang_samples

        node, nodes, as_json = kwargs.pop("node"), kwargs.pop("nodes"), kwargs.pop("as_json")
        lang, config = _check_lang(kwargs.pop("lang")), kwargs.pop("config")
        body = to_params(spec, kwargs)
        try:
            spec.params.model_validate(body)
        except ValueError as exc:
            raise typer.BadParameter(str(exc).splitlines()[-1] if str(exc) else "bad option"
                                     ) from None
        settings = settings_from(config)
        samples, errors = hang_samples(config, node, nodes, body)
        if not samples:
            from bot.errors import NodeError

            raise NodeError("no sample of the job's ranks: " + "; ".join(errors),
                            hint="Run it where the job's ranks are (as root, or with "
                            "CAP_SYS_PTRACE), or name them with --pids.")
        question = Question("", lang=lang, samples=tuple(samples), notes=tuple(errors))
        emit(Troubleshooter(settings).answer(question, strict=True), as_json)

    params = [*options(spec),
              inspect.Parameter("node", _KW, annotation=str | None, default=typer.Option(
                  None, "--node", help="Sample this node through its agent (a name in "
                  "NCCLBOT_NODES_FILE).")),
              inspect.Parameter("nodes", _KW, annotation=str | None, default=typer.Option(
                  None, "--nodes", help="Comma list of nodes or groups: sample them all and "
                  "compare.")),
              inspect.Parameter("as_json", _KW, annotation=bool, default=typer.Option(
                  False, "--json", help="Print the answer as JSON.")),
              inspect.Parameter("lang", _KW, annotation=str, default=typer.Option(
                  "both", "--lang", help="en, zh or both.")),
              inspect.Parameter("config", _KW, annotation=Path | None, default=typer.Option(
                  None, "--config", help="TOML settings file (or NCCLBOT_CONFIG)."))]
    hang.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    hang.__annotations__ = {p.name: p.annotation for p in params}
    hang.__doc__ = ("Why is a running job stuck? Every rank's Python stack (py-spy), Flight "
                    "Recorder through the ranks' debug pipes, NCCL RAS and a GPU sample, here "
                    "or on agents, compared: the odd rank out, where it is, and what kind of "
                    "hang it is.\n\n" + help_text(spec))
    return hang


def nodes_list(config: ConfigOpt = None, as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List the nodes and groups in the inventory (NCCLBOT_NODES_FILE)."""
    from bot.nodes.commands import list_nodes

    list_nodes(config, as_json)


def register(app: typer.Typer, serve_app: typer.Typer) -> None:
    from tools.cli import node_app

    wrapped = typer.Typer(help=node_app.info.help, no_args_is_help=True)
    for info in node_app.registered_commands:
        if info.callback is None:
            continue
        name = info.name or info.callback.__name__
        wrapped.command(name, help=info.help)(wrap(name, info.callback))
    wrapped.command("hang")(hang_command())
    app.add_typer(wrapped, name="node")
    app.command("nodes")(nodes_list)

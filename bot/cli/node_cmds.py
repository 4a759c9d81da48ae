"""`ncclbot node topo|env|probe|xid|hang [--node NAME | --nodes A,B,..]` and `ncclbot nodes`.

The commands are the tools' own (`tools.cli.node_app`), wrapped with `--node`: without it
they run here; with it the same parameters go, signed, to that node's agent. `probe
--nodes` runs one sweep across several agents and localizes a slow or broken node/link;
`hang` samples a running job's ranks (here, or on agents) and compares them.
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
_LOCAL_ONLY = ("json_out",)


def _extra_params(tool: str) -> list[inspect.Parameter]:
    extra = [
        inspect.Parameter("node", _KW, annotation=str | None, default=typer.Option(
            None, "--node", help="Run on this node's agent (a name in NCCLBOT_NODES_FILE).")),
        inspect.Parameter("config", _KW, annotation=Path | None, default=typer.Option(
            None, "--config", help="TOML settings file (or NCCLBOT_CONFIG).")),
    ]
    if tool == "probe":
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


#: Probe options that run torchrun here; an agent takes `--nodes` instead.
_TORCHRUN_ONLY = {"nnodes": 1, "node_rank": None, "rdzv_endpoint": None,
                  "rdzv_id": "ncclbot-probe"}


def to_params(tool: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The tool command's options as the agent's request body."""
    from tools.registry import TOOLS

    fields = TOOLS[tool].params.model_fields
    params = {k: v for k, v in kwargs.items() if k in fields and v is not None}
    if isinstance(params.get("collectives"), str):
        params["collectives"] = [c.strip() for c in params["collectives"].split(",") if c.strip()]
    for key in ("min_bytes", "max_bytes"):
        if isinstance(params.get(key), str):
            from tools.cli import parse_size

            params[key] = parse_size(params[key], f"--{key.replace('_', '-')}")
    return params


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
        torchrun = [k for k, default in _TORCHRUN_ONLY.items()
                    if k in kwargs and kwargs.pop(k) != default]
        if torchrun:
            raise typer.BadParameter(
                f"--{', --'.join(k.replace('_', '-') for k in torchrun)} run torchrun on this "
                "machine; with agents use --nodes A,B,.. (the bot sets up the rendezvous)")
        as_json = bool(kwargs.get("json_out"))
        body = to_params(tool, kwargs)
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


def hang(
    pids: Annotated[str | None, typer.Option(
        "--pids", help="Comma list of the ranks' process ids here (default: every process "
        "with RANK and LOCAL_RANK in its environment).")] = None,
    pattern: Annotated[str | None, typer.Option(
        "--pattern", help="Only processes whose command line contains this text.")] = None,
    job: Annotated[str | None, typer.Option(
        "--job", help="Only this job (TORCHELASTIC_RUN_ID or SLURM_JOB_ID).")] = None,
    native: Annotated[bool, typer.Option("--native", help="Include C/C++ frames.")] = False,
    ras_port: Annotated[int, typer.Option(
        "--ras-port", help="NCCL RAS port (0: do not ask RAS).")] = 28028,
    deadline: Annotated[float, typer.Option(
        "--deadline", min=5.0, max=120.0, help="Seconds the whole sample may take on a node; "
        "ranks not sampled by then are listed with a note.")] = 45.0,
    node: Annotated[str | None, typer.Option(
        "--node", help="Sample this node through its agent (a name in NCCLBOT_NODES_FILE).")
    ] = None,
    nodes: Annotated[str | None, typer.Option(
        "--nodes", help="Comma list of nodes or groups: sample them all and compare.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")] = False,
    lang: Annotated[str, typer.Option("--lang", help="en, zh or both.")] = "both",
    config: ConfigOpt = None,
) -> None:
    """Why is a running job stuck? Every rank's Python stack (py-spy), Flight Recorder
    through the ranks' debug pipes, NCCL RAS and a GPU sample, here or on agents, compared:
    the odd rank out, where it is, and what kind of hang it is."""
    from bot.cli.main import _check_lang, emit, settings_from
    from bot.nodes.commands import hang_samples
    from bot.service import answer_hang

    try:
        pid_list = [int(p) for p in (pids or "").split(",") if p.strip()]
    except ValueError:
        raise typer.BadParameter("--pids takes process ids: --pids 123,124") from None
    body: dict[str, Any] = {"pids": pid_list, "pattern": pattern, "job": job, "native": native,
                            "ras_port": ras_port or None, "deadline_s": deadline}
    lang = _check_lang(lang)
    settings = settings_from(config)
    samples, errors = hang_samples(config, node, nodes, body)
    if not samples:
        from bot.errors import NodeError

        raise NodeError("no sample of the job's ranks: " + "; ".join(errors),
                        hint="Run it where the job's ranks are (as root, or with "
                        "CAP_SYS_PTRACE), or name them with --pids.")
    emit(answer_hang(samples, settings, lang).with_notes(*errors), as_json)


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
    wrapped.command("hang")(hang)
    app.add_typer(wrapped, name="node")
    app.command("nodes")(nodes_list)

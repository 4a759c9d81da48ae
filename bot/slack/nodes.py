"""Running node diagnostics through the node client, on behalf of a Slack user."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bot.config import Settings
from bot.errors import NodeError
from tools.registry import TOOLS, preset_params

if TYPE_CHECKING:
    from tools.agent.models import StatusReply

NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")

#: run(node, tool, params, user) -> ToolResult as a dict; raises NodeError (a
#: `bot.nodes.runner.NodeRunner` underneath, see `make_runner`).
NodeRunner = Callable[[str, str, dict[str, Any], str], dict[str, Any]]
#: status(node, user) -> the agent's /v1/probe/status reply; raises NodeError (and
#: pydantic's ValidationError for a reply that is not one).
ProbeStatus = Callable[[str, str], "StatusReply"]


def params_for(tool: str, preset: str | None) -> dict[str, Any]:
    """The parameters of `tool`'s preset (its spec's presets; the first when None)."""
    try:
        return preset_params(tool, preset)
    except ValueError as exc:
        raise NodeError(str(exc).split(";")[0], hint="Use one of: "
                        f"{', '.join(TOOLS[tool].presets)}.") from exc


def check_target(node: str, tool: str) -> None:
    if tool not in TOOLS:
        raise NodeError(f"unknown diagnostic {tool!r}", hint=f"Use one of: {', '.join(TOOLS)}.")
    if not NODE_NAME.match(node):
        raise NodeError(f"{node!r} is not a node name", hint="Use a name from the node inventory.")


def expand_nodes(settings: Settings, words: list[str]) -> list[str]:
    """`/nccl hang` targets: node names, group names or labels of the inventory (comma or
    space separated) as node names; the words themselves when there is no inventory."""
    names = [n for w in words for n in w.split(",") if n]
    try:
        from bot.nodes.inventory import load_inventory

        return [n.name for n in load_inventory(settings.nodes_file).expand(names)]
    except (NodeError, ModuleNotFoundError):
        return names


def make_runner(settings: Settings) -> NodeRunner:
    """The real runner: `bot.nodes.runner.NodeRunner` (the inventory, a signed call to the
    node's agent as `user`, waiting as long as the tool's spec says)."""
    from bot.nodes.runner import NodeRunner as Runner

    runner = Runner(settings)

    def run(node: str, tool: str, params: dict[str, Any], user: str) -> dict[str, Any]:
        return runner.run(node, tool, params, user=user).model_dump()

    return run


def make_status_reader(settings: Settings) -> ProbeStatus:
    """Asks a node's agent how far its running probe has got (for the status message)."""
    from bot.nodes.runner import NodeRunner as Runner
    from tools.agent.models import StatusReply

    runner = Runner(settings)

    def status(node: str, user: str) -> StatusReply:
        return StatusReply.model_validate(runner.status(node, user))

    return status


def progress_text(status: StatusReply | None, user: str) -> str | None:
    """"step 3/8: all_reduce, 4.2 MB" for `user`'s running probe; None when not known."""
    prog = status.progress if status else None
    if not status or not status.running or status.holder != user or prog is None:
        return None
    from bot.slack.files import human

    if prog.step <= 0:
        return f"starting {prog.ranks} rank(s), step 0/{prog.steps}"
    if prog.collective == "finish":
        return f"all {prog.steps} steps done, collecting results"
    return f"step {prog.step}/{prog.steps}: {prog.collective}, {human(prog.bytes)}"

"""Running node diagnostics through the node client, on behalf of a Slack user."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from bot.config import Settings
from bot.errors import NodeError
from tools.probe.presets import PROBE_PRESETS
from tools.registry import TOOLS

NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
PRESETS = PROBE_PRESETS  # one table for the agent, the buttons and /nccl probe

#: run(node, tool, params, user) -> ToolResult as a dict; raises NodeError.
NodeRunner = Callable[[str, str, dict[str, Any], str], dict[str, Any]]
#: status(node, user) -> the agent's /v1/probe/status reply; raises NodeError.
ProbeStatus = Callable[[str, str], dict[str, Any]]


def sizes_in(params: dict[str, Any]) -> int:
    """How many message sizes a probe sweeps (for progress messages)."""
    lo, hi, f = params.get("min_bytes", 1024), params.get("max_bytes", 64 << 20), params.get(
        "factor", 2.0)
    n, s = 0, float(lo)
    while s <= hi and n < 64:
        n, s = n + 1, s * f
    return n


def params_for(tool: str, preset: str | None) -> dict[str, Any]:
    if tool != "probe":
        return {}
    if (preset or "quick") not in PRESETS:
        raise NodeError(f"unknown probe preset {preset!r}",
                        hint=f"Use one of: {', '.join(PRESETS)}.")
    return dict(PRESETS[preset or "quick"])


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


def _agent_client(settings: Settings, node: str, user: str, timeout: float) -> Any:
    """A signed client for `node`'s agent acting for `user` (a context manager)."""
    try:
        from bot.nodes.client import client_for
        from bot.nodes.inventory import load_inventory
    except ModuleNotFoundError as exc:
        raise NodeError(f"node diagnostics are not installed here ({exc.name})",
                        hint="Install ncclbot[client] on the bot.") from exc
    target = load_inventory(settings.nodes_file).get(node)
    return client_for(settings, target, user=user, timeout=timeout)


def make_runner(settings: Settings, timeout: float = 660.0) -> NodeRunner:
    """The real runner: inventory lookup, signed call to the node agent as `user`."""

    def run(node: str, tool: str, params: dict[str, Any], user: str) -> dict[str, Any]:
        with _agent_client(settings, node, user, timeout) as client:
            result: dict[str, Any] = client.run(tool, params, timeout=timeout).model_dump()
            return result

    return run


def make_status_reader(settings: Settings, timeout: float = 5.0) -> ProbeStatus:
    """Asks a node's agent how far its running probe has got (for the status message)."""

    def status(node: str, user: str) -> dict[str, Any]:
        with _agent_client(settings, node, user, timeout) as client:
            reply: dict[str, Any] = client.probe_status()
            return reply

    return status


def progress_text(status: dict[str, Any] | None, user: str) -> str | None:
    """"step 3/8: all_reduce, 4.2 MB" for `user`'s running probe; None when not known."""
    prog = (status or {}).get("progress")
    if not status or not status.get("running") or status.get("holder") != user or not prog:
        return None
    from bot.slack.files import human

    if prog.get("step", 0) <= 0:
        return f"starting {prog.get('ranks', 0)} rank(s), step 0/{prog.get('steps')}"
    if prog.get("collective") == "finish":
        return f"all {prog.get('steps')} steps done, collecting results"
    return (f"step {prog['step']}/{prog.get('steps')}: {prog.get('collective')}, "
            f"{human(prog.get('bytes') or 0)}")

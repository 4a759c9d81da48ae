"""`NodeRunner`: the one way the bot runs a node tool, here or on a node's agent.

The CLI (`ncclbot node NAME [--node N]`), Slack's buttons and `/nccl`, and the LLM agent's
node tools and confirmed probes all call `NodeRunner.run`. It waits as long as the tool's
`ToolSpec` says the tool may run (a probe's own `timeout`, a hang sample's deadline) plus
the way back, reports progress while a tool that has some runs (a probe's sweep step), and
stops waiting when asked to (`cancel`). The result is the tool's `ToolResult`; failing to
reach or use the node raises `NodeError` (an `AgentError` saying which kind).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING

from bot.errors import NodeError
from tools.agent.models import StatusReply
from tools.params import Progress
from tools.registry import TOOLS, run_local, tool_timeout
from tools.result import ToolResult

if TYPE_CHECKING:
    import httpx

    from bot.config import Settings
    from bot.nodes.client import Json, NodeClient

#: what a caller waits beyond the tool's own limit: connecting, the reply, a busy node
MARGIN_S = 30.0


class NodeRunner:
    """Runs node tools for one settings object (the inventory, secret and TLS of agents).

    `user` is who the agent is told asks (its audit log, on-call and force rules); a call
    may name another. `transport` is the test seam of the HTTP client."""

    def __init__(self, settings: Settings | None = None, user: str | None = None, *,
                 margin_s: float = MARGIN_S, progress_every_s: float = 2.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.settings, self.user = settings, user
        self.margin_s, self.progress_every_s = margin_s, progress_every_s
        self.transport = transport

    def timeout(self, tool: str, params: Mapping[str, object] | None) -> float:
        """Seconds to wait for `tool` on a node: its spec's limit plus the margin."""
        return tool_timeout(tool, params) + self.margin_s

    def run(self, node: str | None, tool: str, params: Mapping[str, object] | None = None, *,
            user: str | None = None, on_progress: Progress | None = None,
            cancel: threading.Event | None = None, fault: str | None = None) -> ToolResult:
        """Run `tool` here (`node` None) or on `node`'s agent and return its result.

        `on_progress` hears where a tool that reports progress is (locally from the tool,
        remotely from the agent's status every `progress_every_s`). `cancel`: set it to stop
        waiting for a remote tool (NodeError "cancelled"; the node finishes what it started).
        `fault`: the test-only probe fault spec, for a local run only."""
        if tool not in TOOLS:
            raise NodeError(f"unknown diagnostic {tool!r}", hint=f"Use one of: "
                            f"{', '.join(TOOLS)}.")
        if node is None:
            return run_local(tool, params, fault=fault, on_progress=on_progress)
        return self._remote(node, tool, dict(params or {}), user or self.user, on_progress,
                            cancel)

    def status(self, node: str, user: str | None = None) -> Json:
        """The agent's `/v1/probe/status`: is a probe running, whose, which step."""
        with self._client(node, user or self.user, 5.0) as client:
            return client.probe_status()

    # -- plumbing -----------------------------------------------------------------------
    def _client(self, node: str, user: str | None, timeout: float) -> NodeClient:
        try:
            from bot.nodes.client import client_for
            from bot.nodes.inventory import load_inventory
        except ModuleNotFoundError as exc:
            raise NodeError(f"node diagnostics are not installed here ({exc.name})",
                            hint="Install ncclbot[client] on the bot.") from exc
        if self.settings is None:
            raise NodeError(f"no settings to reach node {node!r}",
                            hint="Name nodes in NCCLBOT_NODES_FILE.")
        target = load_inventory(self.settings.nodes_file).get(node)
        return client_for(self.settings, target, user, transport=self.transport,
                          timeout=timeout)

    def _remote(self, node: str, tool: str, params: Mapping[str, object], user: str | None,
                on_progress: Progress | None, cancel: threading.Event | None) -> ToolResult:
        wait = self.timeout(tool, params)
        client = self._client(node, user, wait)
        watch = on_progress is not None and TOOLS[tool].progress
        if not watch and cancel is None:
            with client:
                result = client.run(tool, params, timeout=wait)
        else:
            pool = ThreadPoolExecutor(1, thread_name_prefix="ncclbot-node")
            call: Future[ToolResult] = pool.submit(client.run, tool, params, timeout=wait)
            # the client closes when the call ends, even after the caller stopped waiting
            call.add_done_callback(lambda _: client.close())
            try:
                result = self._wait(call, node, user, on_progress if watch else None, cancel)
            finally:
                pool.shutdown(wait=False)
        return result

    def _wait(self, call: Future[ToolResult], node: str, user: str | None,
              on_progress: Progress | None, cancel: threading.Event | None) -> ToolResult:
        while True:
            try:
                return call.result(timeout=self.progress_every_s)
            except FutureTimeout:
                pass
            if cancel is not None and cancel.is_set():
                raise NodeError(f"cancelled while waiting for node {node}",
                                hint="The node finishes what it started; its agent's "
                                "audit log has the outcome.")
            if on_progress is not None:
                try:
                    reply = self.status(node, user)
                except NodeError:
                    continue  # progress is best effort
                try:
                    st = StatusReply.model_validate(reply)
                except ValueError:
                    continue  # an agent of another version: no progress, still the result
                if st.running and st.holder == user and st.progress is not None:
                    on_progress(st.progress)

"""Node diagnostics from Slack (button or /nccl): authorise, rate-limit, audit, run, render."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from slack_bolt import Respond
from slack_sdk import WebClient

from bot.errors import NcclbotError
from bot.nodes.hang import gather
from bot.slack import blocks, message
from bot.slack.deps import Deps, ephemeral
from bot.slack.lang import choose
from bot.slack.nodes import (
    NODE_NAME,
    check_target,
    params_for,
    progress_text,
)
from bot.slack.progress import StatusMessage, Ticker
from tools.registry import TOOLS, default_preset
from tools.result import ToolResult

log = logging.getLogger(__name__)
#: `/nccl hang` samples at most this many nodes at once
MAX_HANG_NODES = 64


class Diagnostics:
    """Runs one node tool for one Slack user; every attempt lands in the audit trail."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    def refusal(self, node: str, tool: str) -> str:
        """What a person who may not run diagnostics is told."""
        return (f":no_entry: Only {self.deps.authz.who()} may run diagnostics on nodes. Ask one "
                f"of them, or attach the output of `ncclbot node {tool}` run on `{node}`.")

    def _gate(self, user: str, channel: str, node: str, tool: str) -> tuple[str, str] | None:
        """(outcome, what the person is told) when diagnostics may not run in this channel or
        for this person; None when they may."""
        allowed = self.deps.settings.probe_channels
        if allowed and channel not in allowed:
            where = ", ".join(f"<#{c}>" for c in allowed)
            return "channel", f":no_entry: Diagnostics run only in {where}; ask there."
        if not self.deps.authz.allowed(user):
            return "refused", self.refusal(node, tool)
        return None

    def run(self, client: WebClient, user: str, channel: str, thread_ts: str | None, node: str,
            tool: str, preset: str | None = None, respond: Respond | None = None,
            told_refused: bool = False) -> str:
        """Returns the outcome written to the audit trail. `told_refused`: the person was
        already refused (in the slash command's acknowledgement); audit it, say nothing."""
        d = self.deps
        preset = (preset or default_preset(tool)) if default_preset(tool) else None

        def refuse(outcome: str, text: str) -> str:
            d.store.audit(user, channel, node, tool, preset, outcome, text)
            if not (told_refused and outcome == "refused"):
                ephemeral(client, channel, user, text, respond, thread_ts)
            return outcome

        try:
            check_target(node, tool)
            params = params_for(tool, preset)
        except NcclbotError as exc:
            return refuse("invalid", f":x: {exc.message} {exc.hint or ''}".strip())
        if (shut := self._gate(user, channel, node, tool)) is not None:
            return refuse(*shut)
        if reason := d.limits.probe(user, node):
            return refuse("rate_limited", f":hourglass: Not now: {reason}.")
        if not d.limits.claim_node(node):
            return refuse("busy", f":hourglass: A diagnostic is already running on `{node}`; "
                          "wait for its result.")
        released = False

        def release() -> None:  # once: a second release could free someone else's claim
            nonlocal released
            if not released:
                released = True
                d.limits.release_node(node)

        try:
            d.store.audit(user, channel, node, tool, preset, "started")
            outcome, where, files = self._run(client, user, channel, thread_ts, node, tool,
                                              preset, params, release)
        finally:
            release()
        for f in files:  # the chart and the raw result, in the thread beside the verdict
            try:
                client.files_upload_v2(channel=where[0], thread_ts=where[1], content=f.content,
                                       filename=f.filename, title=f.title)
            except Exception as exc:  # noqa: BLE001 - the verdict is already posted
                log.warning("could not attach %s: %s", f.filename, exc)
        return outcome

    def _run(self, client: WebClient, user: str, channel: str, thread_ts: str | None,
             node: str, tool: str, preset: str | None, params: dict[str, Any],
             release: Callable[[], None]
             ) -> tuple[str, tuple[str, str], list[message.Attachment]]:
        """Run and post the verdict; returns the outcome, where it was posted (channel,
        thread) and the files to attach there. `release` frees the node as soon as the tool
        has returned, before the verdict is posted: whoever acts on the verdict (a button
        under it) finds the node free."""
        d = self.deps
        what = f"{tool} {preset}" if preset else tool
        status = StatusMessage(client, channel, thread_ts,
                               f"{what} on {node} for <@{user}>: starting…")

        def tick(elapsed: float) -> None:
            where = self._where(node, tool, user)
            status.update(f"{what} on {node}: {where or 'running'}, {elapsed:.0f} s…")

        try:
            with Ticker(tick, every_s=d.progress_every_s):
                result = ToolResult.model_validate(d.run_node(node, tool, params,
                                                              f"slack:{user}"))
        except NcclbotError as exc:
            result = ToolResult.failed(tool, "", exc.message + (f" {exc.hint}" if exc.hint
                                                                 else ""))
        except Exception as exc:
            log.exception("node diagnostic failed")
            result = ToolResult.failed(tool, "", f"unexpected failure: {exc}")
        release()
        outcome = result.status
        d.store.audit(user, channel, node, tool, preset, outcome, result.error or "")
        rendered, files = message.diagnostic_message(node, tool, result)
        status.finish(rendered)
        return outcome, (status.channel, thread_ts or status.ts), files

    def hang(self, client: WebClient, user: str, channel: str, thread_ts: str | None,
             nodes: list[str], respond: Respond | None = None, told_refused: bool = False,
             lang: str | None = None) -> str:
        """`/nccl hang NODES` and the "Why is it stuck?" button: the `hang` diagnostic on every
        node at once, triangulated into one answer posted in the thread. On-call only, each
        node audited; returns the outcome."""
        d = self.deps
        what = ",".join(nodes)[:200] or "?"

        def refuse(outcome: str, text: str) -> str:
            d.store.audit(user, channel, what, "hang", None, outcome, text)
            if not (told_refused and outcome == "refused"):
                ephemeral(client, channel, user, text, respond, thread_ts)
            return outcome

        if not nodes or len(nodes) > MAX_HANG_NODES or not all(NODE_NAME.match(n)
                                                                for n in nodes):
            return refuse("invalid", f":x: Name 1 to {MAX_HANG_NODES} nodes from the "
                          "inventory: `/nccl hang node-1,node-2`.")
        if (shut := self._gate(user, channel, nodes[0], "hang")) is not None:
            return refuse(*shut)
        if reason := d.limits.hang(user, nodes):
            return refuse("rate_limited", f":hourglass: Not now: {reason}.")
        claimed = [n for n in nodes if d.limits.claim_node(n)]
        try:
            if len(claimed) < len(nodes):
                busy = ", ".join(f"`{n}`" for n in nodes if n not in claimed)
                return refuse("busy", f":hourglass: A diagnostic is already running on {busy}; "
                              "wait for its result.")
            d.store.audit(user, channel, what, "hang", None, "started")
            zh = (lang or choose(*d.lang_prefs(user, channel), "")) == "zh"
            status = StatusMessage(client, channel, thread_ts, (
                f"为什么卡住？正在为 <@{user}> 采样 {len(nodes)} 个节点上的 rank…" if zh else
                f"Why is it stuck? Sampling the ranks on {len(nodes)} node(s) for <@{user}>…"))
            try:
                return self._hang(status, user, channel, thread_ts, nodes, what, lang)
            except Exception as exc:  # the status message must not say "Sampling…" forever
                log.exception("/nccl hang %s failed", what)
                d.store.audit(user, channel, what, "hang", None, "error",
                              f"unexpected failure: {type(exc).__name__}")
                status.finish(blocks.message(
                    ":warning: The hang samples could not be put together "
                    f"({type(exc).__name__}; the error is in the bot's log). Run "
                    f"`ncclbot node hang --node {nodes[0]}` on a login node for the raw "
                    "sample, or try again."))
                return "error"
        finally:
            for n in claimed:
                d.limits.release_node(n)

    def _hang(self, status: StatusMessage, user: str, channel: str, thread_ts: str | None,
              nodes: list[str], what: str, lang: str | None) -> str:
        """Sample the nodes, triangulate, post the answer in place of the status."""
        d = self.deps
        samples, errors = gather(nodes, lambda node: d.run_node(node, "hang", {},
                                                                 f"slack:{user}"))
        if not samples:
            d.store.audit(user, channel, what, "hang", None, "error", "; ".join(errors)[:300])
            status.finish(blocks.message(":warning: No node sent a sample: "
                                         + "; ".join(errors)[:1500]))
            return "error"
        from bot.answering.troubleshooter import Question

        lg = lang or choose(*d.lang_prefs(user, channel), "")
        answer = d.troubleshooter.answer(Question("", lang=lg, samples=tuple(samples),
                                                  notes=tuple(errors)))
        where = thread_ts or status.ts
        answer_id = d.store.save_answer(channel, where, answer, f"hang:{what}")
        # the real outcome: samples that could not be answered (the Troubleshooter's failure
        # answer, verdict "error") are an error, audited with what the answer says
        failed = answer.verdict == "error"
        outcome = "error" if failed else "success"
        detail = "; ".join([*([f"{answer.summary} {answer.text}"] if failed else []), *errors])
        d.store.audit(user, channel, what, "hang", None, outcome, detail[:300])
        status.finish(message.first_message(answer, lg, answer_id, []))
        return outcome

    def _where(self, node: str, tool: str, user: str) -> str | None:
        """"step 3/8: all_reduce, 4.2 MB" from the node's agent; None if it cannot say."""
        if not TOOLS[tool].progress or self.deps.probe_status is None:
            return None
        try:
            return progress_text(self.deps.probe_status(node, f"slack:{user}"), f"slack:{user}")
        except Exception as exc:  # noqa: BLE001 - progress is best effort
            log.debug("probe status of %s unavailable: %s", node, exc)
            return None

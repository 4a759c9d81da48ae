"""`/nccl help | ask QUESTION | probe NODE [preset] | topo|env|xid NODE | hang NODES |
lang en|zh|both`."""

from __future__ import annotations

from slack_bolt import Ack, App, Respond
from slack_sdk import WebClient

from bot.slack import blocks
from bot.slack.conversation import Conversation
from bot.slack.deps import Deps
from bot.slack.diagnostics import Diagnostics
from bot.slack.lang import LANGS
from bot.slack.nodes import expand_nodes
from bot.slack.payloads import MessageEvent, Payload, SlashCommand, on_command
from tools.registry import TOOLS as NODE_TOOLS


def parse(text: str) -> tuple[str, list[str], str]:
    """(subcommand, words, rest of the text)."""
    text = (text or "").strip()
    head, _, rest = text.partition(" ")
    return head.lower() or "help", rest.split(), rest.strip()


def register(app: App, deps: Deps, conv: Conversation, diag: Diagnostics) -> None:
    def ack_command(ack: Ack, command: Payload) -> None:
        cmd = SlashCommand.read(command, "slash command")
        if cmd is None:
            ack(text="That command is malformed; try `/nccl help`.", response_type="ephemeral")
            return
        sub, words, rest = parse(cmd.text)
        if sub == "ask" and rest:
            ack()
        elif sub == "hang" and words:
            ack(text=node_ack(deps, diag, cmd.user_id, sub, " ".join(words)),
                response_type="ephemeral")
        elif sub in NODE_TOOLS and words:
            ack(text=node_ack(deps, diag, cmd.user_id, sub, words[0]),
                response_type="ephemeral")
        elif sub == "lang":
            ack(text=set_lang(deps, cmd, words), response_type="ephemeral")
        else:
            ack(blocks=blocks.wire(blocks.help_message().blocks), text=blocks.HELP,
                response_type="ephemeral")

    def work(cmd: SlashCommand, client: WebClient, respond: Respond | None) -> None:
        sub, words, rest = parse(cmd.text)
        user, channel = cmd.user_id, cmd.channel_id
        if sub == "ask" and rest:
            posted = client.chat_postMessage(channel=channel, text=f"<@{user}> asked: {rest}")
            conv.handle(MessageEvent(channel=posted.get("channel") or channel, user=user,
                                     ts=posted["ts"], text=rest), client)
        elif sub == "hang" and words:
            diag.hang(client, user, channel, None, expand_nodes(deps.settings, words), respond,
                      told_refused=deps.authz.allowed_now(user) is False)
        elif sub in NODE_TOOLS and words:
            preset = words[1] if sub == "probe" and len(words) > 1 else None
            diag.run(client, user, channel, None, words[0], sub, preset, respond,
                     told_refused=deps.authz.allowed_now(user) is False)

    app.command("/nccl")(ack=ack_command, lazy=[on_command(work)])


def node_ack(deps: Deps, diag: Diagnostics, user: str, tool: str, node: str) -> str:
    """The slash command's immediate reply: a refusal for people who may not run
    diagnostics (known without calling Slack: the group's members are cached), else a
    neutral note (rate limits and a busy node are checked when it starts)."""
    allowed = deps.authz.allowed_now(user)
    if allowed is False:
        return diag.refusal(node, tool)
    if allowed is None:
        return f"Checking that you may run `{tool}` on `{node}`…"
    return f"Starting `{tool}` on `{node}`; the result comes in this channel."


def set_lang(deps: Deps, command: SlashCommand, words: list[str]) -> str:
    if not words or words[0] not in (*LANGS, "auto"):
        return "Usage: `/nccl lang en|zh|both|auto [channel]`"
    lang = None if words[0] == "auto" else words[0]
    if len(words) > 1 and words[1] == "channel":
        deps.store.set_lang(f"channel:{command.channel_id}", lang)
        return f"Answers in this channel: {words[0]}."
    deps.store.set_lang(f"user:{command.user_id}", lang)
    return f"Answers for you: {words[0]}."

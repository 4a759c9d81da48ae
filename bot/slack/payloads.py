"""Slack's payloads, parsed once where bolt hands them over, and the values ncclbot puts in
its own buttons and forms (one encode, one decode each).

bolt gives a listener the request as parsed JSON (`Payload`); the adapters here
(`on_action`, `on_event`, `on_command`, `on_view`) turn it into the typed models below
before any of ncclbot's code sees it, so listeners take `BlockAction`, `MessageEvent`,
`SlashCommand` or `ViewSubmission`. Fields Slack adds that ncclbot does not read are
ignored; a payload missing what ncclbot needs (a user, a channel) is logged in one line
and dropped. Button values are JSON written by ncclbot (`ButtonValue.encode`) and read
back with `decode`, which answers None for a value no answer of ours could have made.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from slack_bolt import Ack, BoltContext, Respond
from slack_sdk import WebClient

from bot.answering.contract import Lang
from bot.slack.blocks import Block

log = logging.getLogger(__name__)

#: A request body as bolt hands it to a listener: JSON as parsed, nothing checked yet.
Payload = dict[str, Any]
M = TypeVar("M", bound="SlackModel")
B = TypeVar("B", bound="ButtonValue")


class SlackModel(BaseModel):
    """A Slack payload: unknown fields ignored, ids that arrive as numbers read as text."""

    model_config = ConfigDict(extra="ignore", frozen=True, coerce_numbers_to_str=True)

    @classmethod
    def read(cls: type[M], payload: Mapping[str, object] | None, what: str) -> M | None:
        """The payload as this model; None (and one line in the log) when it is not one."""
        try:
            return cls.model_validate(payload or {})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "body"
            log.warning("ignored a malformed Slack %s: %s at %s (%d problem(s))", what,
                        first["msg"], where, exc.error_count())
            return None


class Ref(SlackModel):
    """`{"id": ...}`: a user, channel or team."""

    id: str = ""


class SlackFile(SlackModel):
    """A file shared in a message (the fields `files.precheck` and the download read)."""

    id: str = ""
    name: str | None = None
    title: str | None = None
    size: int | None = None
    mode: str | None = None
    is_external: bool = False
    filetype: str | None = None
    mimetype: str | None = None
    url_private: str | None = None
    url_private_download: str | None = None

    @property
    def url(self) -> str:
        return self.url_private_download or self.url_private or ""

    @property
    def label(self) -> str:
        """The name to show for it."""
        return self.name or self.title or self.id or "file"


class MessageEvent(SlackModel):
    """An `app_mention` or `message` event (also what `/nccl ask` posts on a person's
    behalf)."""

    channel: str
    ts: str
    user: str | None = None
    text: str = ""
    thread_ts: str | None = None
    files: list[SlackFile] = Field(default_factory=list)
    subtype: str | None = None
    bot_id: str | None = None
    channel_type: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_nulls(cls, data: object) -> object:
        """Slack sends `"text": null` on some file shares; read it as no text."""
        if isinstance(data, dict):
            return {**data, "text": data.get("text") or "", "files": data.get("files") or []}
        return data


class SlashCommand(SlackModel):
    """`/nccl ...` (the form Slack posts)."""

    user_id: str
    channel_id: str
    text: str = ""


class Action(SlackModel):
    """One element's action in a `block_actions` payload."""

    action_id: str = ""
    block_id: str = ""
    value: str | None = None
    action_ts: str = ""


class Container(SlackModel):
    channel_id: str = ""


class PostedMessage(SlackModel):
    """The message a clicked button sits on, as Slack sends it back (its blocks keep any
    key, to be posted back changed only where ncclbot changes them)."""

    ts: str | None = None
    thread_ts: str | None = None
    text: str | None = None
    blocks: list[Block] = Field(default_factory=list)


class BlockAction(SlackModel):
    """A button click (`block_actions`): who, where, on which message, which button."""

    user: Ref
    channel: Ref | None = None
    container: Container = Field(default_factory=Container)
    message: PostedMessage | None = None
    trigger_id: str = ""
    actions: list[Action] = Field(default_factory=list)

    @property
    def user_id(self) -> str:
        return self.user.id

    @property
    def channel_id(self) -> str:
        return (self.channel.id if self.channel else "") or self.container.channel_id

    @property
    def thread_ts(self) -> str | None:
        """The thread the message is in (the message itself when it starts one)."""
        msg = self.message
        return (msg.thread_ts or msg.ts) if msg else None

    @property
    def action(self) -> Action:
        return self.actions[0] if self.actions else Action()

    @property
    def value(self) -> str:
        return self.action.value or ""


class SelectedOption(SlackModel):
    value: str | None = None


class InputValue(SlackModel):
    """One input's state in a submitted view (text, URL or select)."""

    value: str | None = None
    selected_option: SelectedOption | None = None

    @property
    def selected(self) -> str | None:
        return self.selected_option.value if self.selected_option else None


class ViewState(SlackModel):
    values: dict[str, dict[str, InputValue]] = Field(default_factory=dict)


class SubmittedView(SlackModel):
    callback_id: str = ""
    private_metadata: str = ""
    state: ViewState = Field(default_factory=ViewState)

    def input(self, block: str, action_id: str = "value") -> InputValue:
        """What was entered in the input `block` (empty when it was left out)."""
        return self.state.values.get(block, {}).get(action_id) or InputValue()


class ViewSubmission(SlackModel):
    """A submitted modal (`view_submission`)."""

    user: Ref
    view: SubmittedView = Field(default_factory=SubmittedView)


class Envelope(SlackModel):
    """What tells one request from another (for skipping repeats), of any kind."""

    type: str | None = None
    event_id: str | None = None
    trigger_id: str | None = None
    retry_attempt: int | None = None
    actions: list[Action] = Field(default_factory=list)


# -- ncclbot's own values --------------------------------------------------------------------

class ButtonValue(SlackModel):
    """A value ncclbot writes into a button or form and reads back when it is used."""

    def encode(self) -> str:
        return json.dumps(self.model_dump(exclude_none=True))

    @classmethod
    def decode(cls: type[B], raw: str | None) -> B | None:
        """The value, or None when it is not one ncclbot made (not JSON, fields missing)."""
        try:
            return cls.model_validate_json(raw or "{}")
        except ValidationError:
            return None


class RunButton(ButtonValue):
    """"Run probe on gpu-node07" and "Why is it stuck?" (`tool` hang, on `nodes`)."""

    node: str | None = None
    nodes: list[str] | None = None
    tool: str = "probe"
    preset: str | None = None
    #: the answer the button is on
    a: str | None = None

    @model_validator(mode="after")
    def _has_target(self) -> RunButton:
        if not (self.node or (self.tool == "hang" and self.nodes)):
            raise ValueError("no node")
        return self

    def targets(self, limit: int = 64) -> list[str]:
        """The nodes a hang button samples."""
        return (self.nodes or [self.node or ""])[:limit]


class LangButton(ButtonValue):
    """The answer in the other language."""

    a: str
    lang: str = "en"

    @property
    def language(self) -> Lang:
        return "zh" if self.lang == "zh" else "en"


class DecideButton(ButtonValue):
    """One answer to the deciding question: the answer id, the question id, the answer."""

    a: str
    q: str
    v: str


class FormMeta(ButtonValue):
    """A modal's `private_metadata`: the answer and the thread it belongs to, and the
    thread's language when it is Chinese (`l`: "zh"; the form's errors follow it)."""

    a: str = ""
    c: str = ""
    t: str = ""
    l: str = ""  # noqa: E741 - one letter like the others: private_metadata is small


# -- adapters: bolt's keyword arguments in, typed models out ------------------------------

ActionHandler = Callable[[BlockAction, WebClient, Respond | None], None]


def on_action(handler: ActionHandler, ack_first: bool = False) -> Callable[..., None]:
    """A bolt listener (lazy, or acknowledging first) running `handler` on the parsed click."""
    if ack_first:
        def acked(ack: Ack, body: Payload, client: WebClient,
                  respond: Respond | None = None) -> None:
            ack()
            if (parsed := BlockAction.read(body, "button click")) is not None:
                handler(parsed, client, respond)

        return acked

    def lazy(body: Payload, client: WebClient, respond: Respond | None = None) -> None:
        if (parsed := BlockAction.read(body, "button click")) is not None:
            handler(parsed, client, respond)

    return lazy


def on_event(handler: Callable[[MessageEvent, WebClient, BoltContext], None]
             ) -> Callable[..., None]:
    """A lazy bolt listener running `handler` on the parsed message event."""
    def lazy(event: Payload, client: WebClient, context: BoltContext) -> None:
        if (parsed := MessageEvent.read(event, "message event")) is not None:
            handler(parsed, client, context)

    return lazy


def on_command(handler: Callable[[SlashCommand, WebClient, Respond | None], None]
               ) -> Callable[..., None]:
    """A lazy bolt listener running `handler` on the parsed slash command."""
    def lazy(command: Payload, client: WebClient, respond: Respond | None = None) -> None:
        if (parsed := SlashCommand.read(command, "slash command")) is not None:
            handler(parsed, client, respond)

    return lazy


def on_view(handler: Callable[[ViewSubmission, WebClient], None]) -> Callable[..., None]:
    """A lazy bolt listener running `handler` on the parsed view submission."""
    def lazy(body: Payload, client: WebClient) -> None:
        if (parsed := ViewSubmission.read(body, "form submission")) is not None:
            handler(parsed, client)

    return lazy

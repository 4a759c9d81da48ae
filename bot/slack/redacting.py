"""The one door to Slack: every text the bot posts has its secrets stripped first.

Answers quote log lines, tool results hold environment dumps, reports are attached as
files: any of them can carry a token or a password. `RedactingWebClient` is the app's
WebClient; every Web API call that posts or updates something (messages, ephemeral
messages, views, file uploads and their comments) goes through `strip_secrets` on the way
out, whichever code built it; so do bolt's `respond` (`RedactingRespond`, posting to a
command's or button's response_url) and `ack` (`RedactingAck`, the body of the HTTP
response to Slack, which a slash command shows). Host names stay (the people in the
channel run those nodes); only the model sees placeholders for them.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from slack_bolt import BoltResponse
from slack_bolt.context.ack import Ack
from slack_bolt.context.respond import Respond
from slack_sdk import WebClient
from slack_sdk.web import SlackResponse
from slack_sdk.webhook import WebhookResponse

from bot.agent.redact_rules import strip_secrets

#: Web API methods whose arguments are posted for people to read.
POSTING = ("chat.", "views.", "files.")
T = TypeVar("T")


def scrub(obj: T) -> T:
    """`obj` (a string, or JSON's nested dicts and lists) with every string in it stripped
    of secrets; the same shape and type."""
    return cast(T, _scrub(obj))


def _scrub(obj: object) -> object:
    if isinstance(obj, str):
        return strip_secrets(obj)
    if isinstance(obj, dict):
        return {k: _scrub(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(_scrub(v) for v in obj)
    return obj


def scrub_bytes(content: bytes) -> bytes:
    """A file's content without secrets when it is text (images and other binaries pass)."""
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return content
    return strip_secrets(text).encode("utf-8")


def redacting_copy(client: WebClient) -> RedactingWebClient:
    """A RedactingWebClient with the same token, endpoint and settings as `client`."""
    return RedactingWebClient(
        token=client.token, base_url=client.base_url, timeout=client.timeout, ssl=client.ssl,
        proxy=client.proxy, headers=client.headers, team_id=getattr(client, "team_id", None),
        logger=client.logger,
        retry_handlers=client.retry_handlers.copy() if client.retry_handlers else None)


class RedactingWebClient(WebClient):
    """A WebClient that strips secrets from everything it posts."""

    def api_call(self, api_method: str, *, http_verb: str = "POST",
                 files: dict[str, object] | None = None, data: dict[str, object] | None = None,
                 params: dict[str, object] | None = None, json: dict[str, object] | None = None,
                 headers: dict[str, str] | None = None, auth: dict[str, str] | None = None
                 ) -> SlackResponse:
        if api_method.startswith(POSTING):
            data, params, json = scrub(data), scrub(params), scrub(json)
        return super().api_call(api_method, http_verb=http_verb, files=files, data=data,
                                params=params, json=json, headers=headers, auth=auth)

    def files_upload_v2(self, **kwargs: Any) -> SlackResponse:
        content = kwargs.get("content")
        if isinstance(content, str):
            kwargs["content"] = strip_secrets(content)
        elif isinstance(content, bytes):
            kwargs["content"] = scrub_bytes(content)
        for key in ("initial_comment", "title"):
            if isinstance(kwargs.get(key), str):
                kwargs[key] = strip_secrets(kwargs[key])
        return super().files_upload_v2(**kwargs)


class RedactingRespond(Respond):
    """bolt's `respond()` (a POST to the request's response_url), secrets stripped."""

    def __call__(self, text: str | dict[str, Any] = "", blocks: Any = None,
                 attachments: Any = None, *args: Any, **kwargs: Any) -> WebhookResponse:
        return super().__call__(scrub(text), scrub(blocks), scrub(attachments), *args,
                                **scrub(kwargs))


class RedactingAck(Ack):
    """bolt's `ack()`, whose text, blocks and view Slack shows: secrets stripped."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]

    def __call__(self, text: str | dict[str, Any] = "", blocks: Any = None,
                 attachments: Any = None, *args: Any, **kwargs: Any) -> BoltResponse:
        return super().__call__(scrub(text), scrub(blocks), scrub(attachments), *args,
                                **scrub(kwargs))

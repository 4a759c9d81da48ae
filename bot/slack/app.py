"""`create_app(settings, client=None)`: the bolt App wired to the troubleshooting service;
`shutdown(app)` stops its listener threads (queued work is dropped, running work finishes)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from pydantic import SecretStr
from slack_bolt import App, BoltRequest
from slack_sdk import WebClient

from bot.answering.troubleshooter import Troubleshooter
from bot.config import Settings
from bot.errors import ConfigError
from bot.slack.authz import OncallAuthz
from bot.slack.deps import Deps
from bot.slack.listeners import register
from bot.slack.nodes import make_runner, make_status_reader
from bot.slack.ratelimit import Limits
from bot.slack.redacting import (
    RedactingAck,
    RedactingRespond,
    RedactingWebClient,
    redacting_copy,
)
from bot.slack.store import Store


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def web_client(settings: Settings) -> WebClient:
    token = _secret(settings.slack_bot_token)
    if not token:
        raise ConfigError("SLACK_BOT_TOKEN is not set",
                          hint="Install the app to your workspace and export its xoxb- token; "
                          "see docs/slack.md.")
    if settings.slack_api_url:
        return RedactingWebClient(token=token, timeout=60,
                                  base_url=settings.slack_api_url.rstrip("/") + "/")
    return RedactingWebClient(token=token, timeout=60)


class RedactingApp(App):
    """The bolt App, whose per-request clients (the `client` every listener gets) are
    `RedactingWebClient`s too: nothing reaches Slack without its secrets stripped."""

    #: what the listeners were given (its schedulers stop with the app)
    deps: Deps | None = None

    def _init_context(self, req: BoltRequest) -> None:
        super()._init_context(req)
        client = req.context.get("client")
        if isinstance(client, WebClient) and not isinstance(client, RedactingWebClient):
            req.context["client"] = redacting_copy(client)
            client = req.context["client"]
        req.context["ack"] = RedactingAck()  # the HTTP response Slack shows
        if req.context.response_url and isinstance(client, WebClient):
            req.context["respond"] = RedactingRespond(  # response_url: the other way out
                response_url=req.context.response_url, proxy=client.proxy, ssl=client.ssl)


def create_app(settings: Settings, client: WebClient | None = None, *, http: bool = False,
               deps: Deps | None = None, workers: int = 16) -> App:
    """The app; `http=True` requires the signing secret (Events API over HTTP)."""
    client = client or web_client(settings)
    secret = _secret(settings.slack_signing_secret) or ""
    if http and not secret:
        raise ConfigError("SLACK_SIGNING_SECRET is not set",
                          hint="HTTP mode verifies every request; copy the Signing Secret from "
                          "the app's Basic Information page.")
    app = RedactingApp(client=client, signing_secret=secret,
                       request_verification_enabled=bool(secret),
                       listener_executor=ThreadPoolExecutor(max_workers=workers,
                                                            thread_name_prefix="ncclbot-slack"))
    app.deps = deps or build_deps(settings, client)
    register(app, app.deps)
    return app


def shutdown(app: App, wait: bool = True) -> None:
    """Stop the listener pool and the work schedulers: queued work is dropped, running work
    finishes first (`wait`), so nothing keeps working after the app is gone."""
    app.listener_runner.listener_executor.shutdown(wait=wait, cancel_futures=True)
    deps = getattr(app, "deps", None)
    if isinstance(deps, Deps):
        deps.shutdown(wait)


def build_deps(settings: Settings, client: WebClient) -> Deps:
    from bot.memory.runtime import attach

    store = Store.open(settings)
    work, llm_work = Deps.schedulers(settings)
    return Deps(
        settings=settings,
        store=store,
        authz=OncallAuthz(client, settings.oncall_usergroup, settings.oncall_users),
        limits=Limits.from_settings(settings),
        troubleshooter=Troubleshooter(settings, agent_store=store.threads),
        run_node=make_runner(settings),
        probe_status=make_status_reader(settings),
        files_dir=settings.data_dir / "slack-files",
        bot_token=client.token or "",
        work=work,
        llm_work=llm_work,
        memory=attach(settings, store.db),
    )

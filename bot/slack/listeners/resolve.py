"""Resolved, Correct and Forget: a thread's cause becomes one of the team's local incidents.

Only the asker and on-call people may resolve, correct or forget (`may_resolve`); every
change and every refusal is audited in the memory's audit table. A thread is resolved
once; Resolved (or Correct) again opens the same form filled in, to correct it.
"""

from __future__ import annotations

import logging

from slack_bolt import Ack, App, Respond
from slack_sdk import WebClient

from bot.memory.model import LocalIncident, Role, capture
from bot.memory.store import MemoryChangeError
from bot.slack import blocks, resolve
from bot.slack.authz import may_resolve
from bot.slack.deps import Deps, ephemeral
from bot.slack.lang import choose
from bot.slack.payloads import BlockAction, Payload, ViewSubmission, on_action, on_view

log = logging.getLogger(__name__)


def _cards(lang: str = "en") -> list[tuple[str, str, str]]:
    from bot.answering.knowledge import bundled_cards

    return [(c.id, c.category, c.title.zh if lang == "zh" else c.title.en)
            for c in bundled_cards()]


def _categories(lang: str = "en") -> list[tuple[str, str]]:
    from bot.knowledge.taxonomy import load_taxonomy

    return [(c.id, c.zh if lang == "zh" else c.en) for c in load_taxonomy()]


def _current(inc: LocalIncident) -> resolve.FormFill:
    """The form's fields as a stored incident fills them (to correct it)."""
    value = f"card:{inc.card}" if inc.card else f"cat:{inc.category}"
    return resolve.FormFill(value=value, title=inc.title, category=inc.category,
                            fix=inc.resolution, link=inc.link or "")


def register(app: App, deps: Deps) -> None:
    def refuse(client: WebClient, user: str, channel: str, thread_ts: str, action: str,
               asker: str | None) -> None:
        assert deps.memory is not None
        deps.memory.audit(user, f"{action}-refused", "-", f"{channel}:{thread_ts}")
        who = f"<@{asker}> (who asked)" if asker else "the person who asked"
        ephemeral(client, channel, user, f"Only {who} or on-call people ({deps.authz.who()}) "
                  f"may {action} this thread.", thread_ts=thread_ts or None)

    def open_form(client: WebClient, click: BlockAction, user: str, channel: str,
                  thread_ts: str, answer_id: str, existing: LocalIncident | None) -> None:
        memory = deps.memory
        assert memory is not None
        asker = memory.asker(channel, thread_ts)
        if not may_resolve(deps.authz, user, asker,
                           existing.confirmed_by.who if existing else None):
            refuse(client, user, channel, thread_ts, "resolve", asker)
            return
        answer = deps.store.answer(answer_id) if answer_id else None
        thread = deps.store.context(channel, thread_ts)
        # the form in the thread's language (a "both" thread gets the English form)
        lang = choose(*deps.lang_prefs(user, channel), " ".join(thread.questions[:1]))
        categories = _categories(lang)
        groups = resolve.cause_choices(answer, _cards(lang), categories, thread.candidates,
                                       lang)
        view = resolve.resolve_modal(answer_id, channel, thread_ts, groups, categories,
                                     _current(existing) if existing else None, lang)
        client.views_open(trigger_id=click.trigger_id, view=blocks.wire_view(view))

    def on_resolve(click: BlockAction, client: WebClient, respond: Respond | None) -> None:
        user, channel, thread_ts = click.user_id, click.channel_id, click.thread_ts or ""
        if deps.memory is None or not thread_ts:
            ephemeral(client, channel, user, "Resolving is not available here.")
            return
        existing = deps.memory.for_thread(channel, thread_ts)
        open_form(client, click, user, channel, thread_ts, click.value, existing)

    def on_correct(click: BlockAction, client: WebClient, respond: Respond | None) -> None:
        user, channel = click.user_id, click.channel_id
        existing = deps.memory.get(click.value) if deps.memory else None
        if existing is None or not existing.channel or not existing.thread_ts:
            ephemeral(client, channel, user, "That resolution is gone (forgotten).")
            return
        open_form(client, click, user, existing.channel, existing.thread_ts,
                  existing.answer_id or "", existing)

    def on_forget(click: BlockAction, client: WebClient, respond: Respond | None) -> None:
        user, channel, thread_ts = click.user_id, click.channel_id, click.thread_ts or ""
        memory = deps.memory
        incident_id = click.value
        existing = memory.get(incident_id) if memory else None
        if memory is None or existing is None:
            ephemeral(client, channel, user, "That resolution is gone already.")
            return
        where_c, where_t = existing.channel or channel, existing.thread_ts or thread_ts
        asker = memory.asker(where_c, where_t)
        if not may_resolve(deps.authz, user, asker, existing.confirmed_by.who):
            refuse(client, user, where_c, where_t, "forget", asker)
            return
        memory.forget(incident_id, user)
        msg = click.message
        if msg is not None and msg.ts:
            try:
                client.chat_update(channel=channel, ts=msg.ts, text="Resolution forgotten",
                                   blocks=blocks.wire([blocks.context(
                                       f":wastebasket: <@{user}> forgot this resolution "
                                       f"(`{incident_id}`); it no longer counts in answers.")]))
            except Exception:  # noqa: BLE001 - cosmetic: it is forgotten
                pass

    def ack_form(ack: Ack, body: Payload) -> None:
        form = ViewSubmission.read(body, "resolve form")
        _, errors = resolve.read_submission(form.view if form else None)
        if errors:
            ack(response_action="errors", errors=errors)
        else:
            ack()

    def save(form: ViewSubmission, client: WebClient) -> None:
        sub, _ = resolve.read_submission(form.view)
        memory = deps.memory
        if sub is None or memory is None:
            return
        user = form.user.id
        existing = memory.for_thread(sub.channel, sub.thread_ts)
        asker = memory.asker(sub.channel, sub.thread_ts)
        if not may_resolve(deps.authz, user, asker,
                           existing.confirmed_by.who if existing else None):
            refuse(client, user, sub.channel, sub.thread_ts, "resolve", asker)
            return
        category, card, title = _cause(sub)
        answer = deps.store.answer(sub.answer_id)
        top = answer.root_causes[0] if answer and answer.root_causes else None
        paths = [r.path for r in deps.store.logs(sub.channel, sub.thread_ts)]
        from bot.memory.capture import read_lines, versions_of

        lines = read_lines(paths) if paths else []
        questions = deps.store.context(sub.channel, sub.thread_ts).questions
        role: Role = "asker" if user == asker else "oncall"
        try:
            inc = capture(log_lines=lines, category=category, card=card, resolution=sub.fix,
                          who=user, role=role, keep_hosts=deps.settings.memory_keep_hosts,
                          title=title, source=_permalink(client, sub.channel, sub.thread_ts),
                          link=sub.link, question=questions[0] if questions else None,
                          versions=versions_of(lines) if lines else {}, origin="slack",
                          channel=sub.channel, thread_ts=sub.thread_ts,
                          answered=top.category if top else None, answer_id=sub.answer_id,
                          incident_id=existing.id if existing else None)
            if existing is not None:
                memory.replace(inc, user)
            else:
                memory.add(inc, user)
        except (ValueError, MemoryChangeError) as exc:
            ephemeral(client, sub.channel, user, f"Not saved: {str(exc).splitlines()[0]}",
                      thread_ts=sub.thread_ts)
            return
        # the thread's language: the person's or channel's choice, else its first question's
        lang = choose(*deps.lang_prefs(user, sub.channel), " ".join(questions[:1]))
        note = ""
        if top is not None and top.category != category and memory.downvoted(sub.answer_id):
            note = (f"回答首先给出的是 `{top.category}`；已记录 `{category}` 为正确原因。"
                    if lang == "zh" else f"The answer led with `{top.category}`; `{category}` "
                    "is recorded as the right cause.")
        shown, text = resolve.resolved_message(inc.id, user, card or category, inc.resolution,
                                               existing is not None, note, lang)
        client.chat_postMessage(channel=sub.channel, thread_ts=sub.thread_ts, text=text,
                                blocks=blocks.wire(shown))

    app.action(resolve.ACTION_RESOLVE)(on_action(on_resolve, ack_first=True))
    app.action(resolve.ACTION_CORRECT)(on_action(on_correct, ack_first=True))
    app.action(resolve.ACTION_FORGET)(on_action(on_forget, ack_first=True))
    app.view(resolve.VIEW_RESOLVE)(ack=ack_form, lazy=[on_view(save)])


def _cause(sub: resolve.Submission) -> tuple[str, str | None, str | None]:
    """(category, card, title) of the chosen cause; an unknown card or category raises
    ValueError through `capture`."""
    if sub.value.startswith("card:"):
        from bot.answering.knowledge import bundled_cards

        cid = sub.value.removeprefix("card:")
        card = next((c for c in bundled_cards() if c.id == cid), None)
        if card is None:
            return "?", None, None
        return card.category, card.id, sub.title or card.title.en
    if sub.value.startswith("cat:"):
        return sub.value.removeprefix("cat:"), None, sub.title or None
    return sub.category or "other", None, sub.title


def _permalink(client: WebClient, channel: str, thread_ts: str) -> str | None:
    """The thread's permalink (None when Slack does not give one)."""
    try:
        link = client.chat_getPermalink(channel=channel, message_ts=thread_ts).get("permalink")
    except Exception as exc:  # noqa: BLE001 - the incident is kept without its link
        log.warning("chat.getPermalink failed for %s:%s: %s", channel, thread_ts, exc)
        return None
    return resolve.safe_url(str(link)) if link else None

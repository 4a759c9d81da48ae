"""The deciding question's buttons: a click is evidence. The thread's logs and question are
answered again with that answer as a fact (the same ranking, one more signal), and the
updated answer is posted in the thread; the buttons on the old answer give way to a line
saying who answered what."""

from __future__ import annotations

import logging
import re

from slack_bolt import Ack, App, Respond
from slack_sdk import WebClient

from bot.answering.troubleshooter import Question
from bot.knowledge.taxonomy import question as deciding_question
from bot.slack import blocks, message
from bot.slack.conversation import Conversation, logs_key, merge_candidates
from bot.slack.deps import Deps, ephemeral
from bot.slack.lang import choose
from bot.slack.payloads import BlockAction, DecideButton, on_action
from bot.slack.store import thread_id
from tools.redact import redact_text

log = logging.getLogger(__name__)
ANSWER_ID = re.compile(r"[0-9a-f]{16}")
ANSWERED = {"en": "<@{user}> answered “{q}”: *{a}*. The answer below takes it into account.",
            "zh": "<@{user}> 回答了“{q}”：*{a}*。下面的答案已据此更新。"}


def parse_value(value: str) -> tuple[str, str, str] | None:
    """(answer id, question id, answer) from a button's value; None when it is not one of
    ours (an unknown question or answer, a malformed id)."""
    v = DecideButton.decode(value)
    if v is None:
        return None
    q = deciding_question(v.q)
    if not ANSWER_ID.fullmatch(v.a) or q is None or v.v not in q.answers:
        return None
    return v.a, v.q, v.v


def register(app: App, deps: Deps, conv: Conversation) -> None:
    def ack_only(ack: Ack) -> None:
        ack()

    def decide(click: BlockAction, client: WebClient, respond: Respond | None) -> None:
        user, channel, thread_ts = click.user_id, click.channel_id, click.thread_ts
        parsed = parse_value(click.value)
        if parsed is None or not thread_ts:
            deps.store.audit(user, channel, "?", "decide", None, "invalid",
                             f"malformed button: {redact_text(str(click.action.value)[:200])}")
            ephemeral(client, channel, user, "That button is malformed; ask again.")
            return
        answer_id, qid, said = parsed
        previous = deps.store.answer(answer_id)
        if previous is None:
            ephemeral(client, channel, user, "I no longer have that answer; ask again.")
            return
        facts = {**previous.facts, qid: said}
        ctx = deps.store.context(channel, thread_ts)
        asked = previous.question or ""
        lang = choose(*deps.lang_prefs(user, channel), asked or " ".join(ctx.questions[-1:]))
        lg = message.primary(lang)
        with conv._lock(channel, thread_ts):
            refs = deps.store.logs(channel, thread_ts)
            key = logs_key(refs)
            q = Question(asked, tuple(r.path for r in refs), thread_id(channel, thread_ts),
                         logs_key=key if refs else None, facts=tuple(sorted(facts.items())))
            answer = deps.troubleshooter.answer(q, llm=False)
            new_id = deps.store.save_answer(channel, thread_ts, answer, key)
            dq = deciding_question(qid)
            words = message.ANSWER_WORDS[lg]
            note = ANSWERED[lg].format(user=user, q=dq.text(lg) if dq else qid,
                                       a=words.get(said, said))
            rendered = message.first_message(answer, lang, new_id, [])
            client.chat_postMessage(channel=channel, thread_ts=thread_ts,
                                    text=rendered.text,
                                    blocks=blocks.wire([blocks.context(note),
                                                        *rendered.blocks]))
            ctx = deps.store.context(channel, thread_ts)
            ctx.last_answer_id = new_id
            ctx.candidates = merge_candidates(ctx.candidates, answer)
            deps.store.save_context(channel, thread_ts, ctx)
        answered(click, client, note)

    def answered(click: BlockAction, client: WebClient, note: str) -> None:
        """The old answer's question buttons give way to who answered what (cosmetic)."""
        msg = click.message
        if msg is None or not msg.ts:
            return
        kept = [b if not b.get("block_id", "").startswith("ncclbot_decide:")
                else blocks.context(note) for b in msg.blocks]
        try:
            client.chat_update(channel=click.channel_id, ts=msg.ts, blocks=blocks.wire(kept),
                               text=msg.text or "ncclbot answer")
        except Exception:
            log.debug("could not mark the deciding question answered", exc_info=True)

    app.action(re.compile(f"^{message.ACTION_DECIDE}"))(ack=ack_only, lazy=[on_action(decide)])

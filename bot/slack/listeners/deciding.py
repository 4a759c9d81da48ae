"""The deciding question's buttons: a click is evidence. The thread's logs and question are
answered again with that answer as a fact (the same ranking, one more signal), and the
updated answer is posted in the thread; the buttons on the old answer give way to a line
saying who answered what."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from bot.answering.troubleshooter import Question
from bot.knowledge.taxonomy import question as deciding_question
from bot.slack import blocks, message
from bot.slack.conversation import Conversation, logs_key, merge_candidates
from bot.slack.deps import Deps, ephemeral
from bot.slack.lang import choose
from bot.slack.store import thread_id
from tools.redact import redact_text

log = logging.getLogger(__name__)
ANSWER_ID = re.compile(r"[0-9a-f]{16}")
ANSWERED = {"en": "<@{user}> answered “{q}”: *{a}*. The answer below takes it into account.",
            "zh": "<@{user}> 回答了“{q}”：*{a}*。下面的答案已据此更新。"}


def _where(body: dict[str, Any]) -> tuple[str, str, str | None]:
    msg = body.get("message") or {}
    channel = (body.get("channel") or {}).get("id") or body.get("container", {}).get(
        "channel_id", "")
    return body["user"]["id"], channel, msg.get("thread_ts") or msg.get("ts")


def parse_value(value: str) -> tuple[str, str, str] | None:
    """(answer id, question id, answer) from a button's value; None when it is not one of
    ours (an unknown question or answer, a malformed id)."""
    try:
        v = json.loads(value or "{}")
        answer_id, qid, said = str(v["a"]), str(v["q"]), str(v["v"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    q = deciding_question(qid)
    if not ANSWER_ID.fullmatch(answer_id) or q is None or said not in q.answers:
        return None
    return answer_id, qid, said


def register(app: Any, deps: Deps, conv: Conversation) -> None:
    def ack_only(ack: Any) -> None:
        ack()

    def decide(body: dict[str, Any], action: dict[str, Any], client: Any) -> None:
        user, channel, thread_ts = _where(body)
        parsed = parse_value(str(action.get("value") or ""))
        if parsed is None or not thread_ts:
            deps.store.audit(user, channel, "?", "decide", None, "invalid",
                             f"malformed button: {redact_text(str(action.get('value'))[:200])}")
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
                                    blocks=[blocks.context(note), *rendered.blocks])
            ctx = deps.store.context(channel, thread_ts)
            ctx.last_answer_id = new_id
            ctx.candidates = merge_candidates(ctx.candidates, answer)
            deps.store.save_context(channel, thread_ts, ctx)
        answered(body, client, note)

    def answered(body: dict[str, Any], client: Any, note: str) -> None:
        """The old answer's question buttons give way to who answered what (cosmetic)."""
        msg = body.get("message") or {}
        if not msg.get("ts"):
            return
        kept = [b if not str(b.get("block_id", "")).startswith("ncclbot_decide:")
                else blocks.context(note) for b in msg.get("blocks") or []]
        try:
            client.chat_update(channel=_where(body)[1], ts=msg["ts"], blocks=kept,
                               text=msg.get("text") or "ncclbot answer")
        except Exception:
            log.debug("could not mark the deciding question answered", exc_info=True)

    app.action(re.compile(f"^{message.ACTION_DECIDE}"))(ack=ack_only, lazy=[decide])

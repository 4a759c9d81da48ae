"""A message to the bot (mention, DM, thread follow-up): fetch logs, dedup, answer, render."""

from __future__ import annotations

import hashlib
import logging
import re
import threading

from slack_sdk import WebClient

from bot.answering.contract import Answer
from bot.answering.troubleshooter import Question
from bot.slack import blocks, message
from bot.slack.deps import Deps, ephemeral
from bot.slack.fair import Admission
from bot.slack.files import Download, Rejected, download, file_url_refused, human, precheck
from bot.slack.lang import choose
from bot.slack.payloads import MessageEvent, SlackFile
from bot.slack.progress import StatusMessage
from bot.slack.store import LogRef, thread_id
from bot.state.threads import Candidate, ThreadState

log = logging.getLogger(__name__)
MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")
#: the summary of an answer whose backend failed unexpectedly (`Answer.failure`)
FAILED = Answer.failure(RuntimeError()).summary


def clean_text(text: str) -> str:
    return MENTION.sub("", text or "").strip()


def logs_key(refs: list[LogRef]) -> str:
    return hashlib.sha256(",".join(sorted(r.sha256 for r in refs)).encode()).hexdigest()[:32]


class Conversation:
    """Handles one incoming message end to end; safe to call from many threads."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self._thread_locks: dict[tuple[str, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, channel: str, thread_ts: str) -> threading.Lock:
        with self._guard:
            return self._thread_locks.setdefault((channel, thread_ts), threading.Lock())

    def handle(self, event: MessageEvent, client: WebClient) -> None:
        channel, user = event.channel, event.user or "unknown"
        thread_ts = event.thread_ts or event.ts
        if wait := self.deps.limits.asks_per_user.hit(f"user:{user}"):
            ephemeral(client, channel, user, f"You are asking faster than I can answer; "
                      f"try again in {wait:.0f} s.", thread_ts=thread_ts)
            return
        try:
            client.reactions_add(channel=channel, timestamp=event.ts, name="eyes")
        except Exception:  # noqa: BLE001 - cosmetic
            pass

        def work() -> None:
            with self._lock(channel, thread_ts):
                self._handle(event, client, channel, user, thread_ts)

        admitted = self.deps.work.submit(user, work)
        if admitted is not Admission.STARTED:
            self._tell(client, channel, user, thread_ts, admitted)

    def _tell(self, client: WebClient, channel: str, user: str, thread_ts: str,
              admitted: Admission) -> None:
        """Say why a message waits (queued behind the person's earlier ones) or was not
        taken (too many of theirs already waiting)."""
        work = self.deps.work
        if admitted is Admission.QUEUED:
            text = ("I am still working on your earlier request; this one is queued and "
                    "answered in turn." if work.running(user) else
                    "I am busy with other people's requests; yours is queued and answered "
                    "in turn.")
        else:
            text = (f"I am still working on your earlier uploads ({work.running(user)} "
                    f"running, {work.waiting(user)} waiting), so I did not take this one. "
                    "Send it again once they are answered.")
        try:
            ephemeral(client, channel, user, text, thread_ts=thread_ts)
        except Exception as exc:  # noqa: BLE001 - the note is best effort
            log.warning("could not tell %s that the request was %s: %s", user,
                        admitted.value, exc)

    def _handle(self, event: MessageEvent, client: WebClient, channel: str, user: str,
                thread_ts: str) -> None:
        d = self.deps
        question = clean_text(event.text)
        files = event.files
        ctx = d.store.context(channel, thread_ts)
        if d.memory is not None:  # the first to ask may resolve the thread
            d.memory.note_asker(channel, thread_ts, user)
        lang = choose(*d.lang_prefs(user, channel), question or " ".join(ctx.questions[-1:]))
        status = StatusMessage(client, channel, thread_ts,
                               f"reading {len(files)} log(s)…" if files else "thinking…")
        new: list[Download] = []
        try:
            new, dups, rejected = self.fetch(files, client, channel, thread_ts, status)
            notes = [f"{r.name} {r.reason}" for r in rejected]
            if files and not new:
                self._nothing_new(status, dups, rejected, notes)
                return
            refs = d.store.logs(channel, thread_ts)
            key = logs_key(refs)
            previous = (d.store.answer(ctx.last_answer_id)
                        if ctx.last_answer_id and question and not new else None)
            if previous is not None and previous.root_causes:
                self._follow_up(question, previous, refs, key, status, channel, thread_ts,
                                ctx.last_answer_id or "", lang)
                return
            # a mention without a word and without new logs shows the thread's answer again
            old_id = None if (new or question) else d.store.answer_for_logs(
                channel, thread_ts, key)
            stored = d.store.answer(old_id) if old_id else None
            if old_id is None or stored is None:
                # New logs without a word: they answer the thread's last question.
                asked = question or (ctx.questions[-1] if new and ctx.questions else "")
                # with an LLM, the deterministic answer is posted first and the LLM's
                # account follows in the thread when (if) it comes
                answer = self._answer(asked, refs, key, status, thread_id(channel, thread_ts),
                                      llm=False)
                # Every message of a thread reads all of the thread's logs again: new logs
                # whose answer failed would fail each later message too.
                failed = new and answer.verdict == "error" and answer.summary == FAILED
                if failed and (dropped := self._forget(channel, thread_ts, new)):
                    notes.insert(0, set_aside(dropped))
                    new = [x for x in new if x not in dropped]
                    refs = d.store.logs(channel, thread_ts)
                    key = logs_key(refs)
                answer_id = d.store.save_answer(channel, thread_ts, answer, key)
            else:
                answer, answer_id = stored, old_id
                notes.append("本线程中的日志与之前相同；再次显示之前的回答。" if lang == "zh" else
                             "Same logs as before in this thread; showing the answer again.")
            if new:
                notes.append(("已接收：" if lang == "zh" else "Accepted: ")
                             + ", ".join(f"{x.name} ({human(x.size)})" for x in new))
            notes += earlier_notes(ctx, answer, lang)
            more = bool(blocks.others(ctx.candidates, answer))
            rendered = message.first_message(answer, lang, answer_id, notes, more_causes=more)
            status.finish(rendered)
            self._remember(channel, thread_ts, question, answer_id, answer, key if refs else None)
            t = d.troubleshooter
            if stored is None and t.llm_available():
                # on its own workers: the person's next message need not wait for the LLM
                follow = d.llm_work.submit(user, lambda: self._llm_follows(
                    client, channel, thread_ts, asked, refs, key, lang))
                if follow is Admission.REFUSED:
                    log.info("LLM follow-up of %s:%s not queued (%s has too many waiting)",
                             channel, thread_ts, user)
        except Exception:
            log.exception("answering failed")
            # Every message of a thread reads all of the thread's logs again: a log whose
            # answer failed would fail each later message too, so it leaves the thread.
            dropped = self._forget(channel, thread_ts, new)
            status.finish(blocks.message(
                ":warning: Something went wrong while answering; the error is in the bot's log. "
                + (set_aside(dropped) + " " if dropped else "")
                + "Try again, or run `ncclbot analyze` on the log."))

    def _forget(self, channel: str, thread_ts: str, logs: list[Download]) -> list[Download]:
        """Take the logs out of the thread; those it could take out."""
        out = []
        for x in logs:
            try:
                self.deps.store.forget_log(channel, thread_ts, x.fingerprint or x.sha256)
                out.append(x)
            except Exception as exc:  # noqa: BLE001 - the answer already failed; say so
                log.warning("could not take %s out of %s:%s: %s", x.name, channel, thread_ts,
                            exc)
        return out

    def _answer(self, question: str, refs: list[LogRef], key: str, status: StatusMessage,
                tid: str, llm: bool | None = None) -> Answer:
        """The answer to `question` over the thread's logs, analyzed once per set of logs."""
        d = self.deps
        q = Question(question, tuple(r.path for r in refs), tid,
                     logs_key=key if refs else None)
        if not d.troubleshooter.has_analysis(q):
            status.update(f"analyzing {len(refs)} log(s), {human(sum(r.size for r in refs))}…",
                          force=True)
        else:
            status.update("looking for an answer…", force=True)
        return d.troubleshooter.answer(q, llm=llm)

    def _llm_follows(self, client: WebClient, channel: str, thread_ts: str, question: str,
                     refs: list[LogRef], key: str, lang: str) -> None:
        """The LLM agent's account of the same logs and question, as a thread reply (nothing
        when the LLM was unavailable: the deterministic answer already stands)."""
        d = self.deps
        q = Question(question, tuple(r.path for r in refs), thread_id(channel, thread_ts),
                     logs_key=key if refs else None)
        answer = d.troubleshooter.answer(q)
        if answer.llm is None or not answer.llm.used:
            return
        with self._lock(channel, thread_ts):  # the thread's state, as a message's work
            self._post_llm(client, channel, thread_ts, answer, key, lang)

    def _post_llm(self, client: WebClient, channel: str, thread_ts: str, answer: Answer, key: str,
                  lang: str) -> None:
        d = self.deps
        answer_id = d.store.save_answer(channel, thread_ts, answer, key)
        reply = message.follow_up_message(answer.explanation or answer.summary, lang, "",
                                          [c.card for c in answer.citations][:3])
        # the agent's proposals become buttons here, with details and feedback
        actions = message.first_buttons(answer, answer_id, message.primary(lang), False)
        client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=reply.text,
                                blocks=blocks.wire([*reply.blocks, actions]))
        ctx = d.store.context(channel, thread_ts)
        ctx.last_answer_id = answer_id
        ctx.candidates = merge_candidates(ctx.candidates, answer)
        d.store.save_context(channel, thread_ts, ctx)

    def _follow_up(self, question: str, previous: Answer, refs: list[LogRef], key: str,
                   status: StatusMessage, channel: str, thread_ts: str, answer_id: str,
                   lang: str) -> None:
        """A question in a thread that already has an answer: a short reply to it."""
        d = self.deps
        status.update("looking for an answer…", force=True)
        q = Question(question, tuple(r.path for r in refs), thread_id(channel, thread_ts),
                     logs_key=key if refs else None)
        reply = d.troubleshooter.follow_up(q, previous)
        status.finish(message.follow_up_message(reply.text, reply.lang, answer_id,
                                                reply.cards))
        ctx = d.store.context(channel, thread_ts)
        ctx.questions = [*ctx.questions, question][-10:]
        d.store.save_context(channel, thread_ts, ctx)

    def _nothing_new(self, status: StatusMessage, dups: list[LogRef],
                     rejected: list[Rejected], notes: list[str]) -> None:
        lines = []
        if dups:
            lines.append("Already analyzed in this thread (same content), not analyzing again: "
                         + ", ".join(f"`{x.name}`" for x in dups) + ". See the answer above.")
        if rejected:
            lines.append("No log accepted. Attach text logs (.log .txt) or .gz/.zip archives "
                         f"up to {human(self.deps.settings.slack_max_file_bytes)}.")
            lines += [f"• `{r.name}` {r.reason}" for r in rejected]
        status.finish(blocks.message("\n".join(lines)))

    def fetch(self, files: list[SlackFile], client: WebClient, channel: str, thread_ts: str,
              status: StatusMessage) -> tuple[list[Download], list[LogRef], list[Rejected]]:
        """Download the attached logs; split them into new, duplicate and rejected."""
        d = self.deps
        cap = d.settings.slack_max_file_bytes
        new: list[Download] = []
        dups: list[LogRef] = []
        rejected: list[Rejected] = []
        todo: list[SlackFile] = []
        for f in files:
            if not f.url and f.id:
                try:
                    f = SlackFile.model_validate(client.files_info(file=f.id)["file"])
                except Exception as exc:  # noqa: BLE001
                    rejected.append(Rejected(f.name or f.id, f"is not readable ({exc})"))
                    continue
            name = f.name or f.id or "file"
            if why := precheck(f, cap):
                rejected.append(Rejected(name, why))
            else:
                todo.append(f)
        total = sum(f.size or 0 for f in todo)
        done = [0]

        def progress(n: int) -> None:
            done[0] += n
            status.update(f"reading {len(todo)} log(s), {human(done[0])} of {human(total)}…")

        if todo:
            status.update(f"reading {len(todo)} log(s), {human(total)}…", force=True)
        for f in todo:
            url = f.url
            if why := file_url_refused(url, d.settings.slack_api_url):
                rejected.append(Rejected(f.name or f.id, why))
                continue
            got = download(url, d.bot_token, f.name or f.id, d.files_dir, cap, progress)
            if isinstance(got, Rejected):
                rejected.append(got)
                continue
            ref = LogRef(got.fingerprint or got.sha256, got.name, str(got.path), got.size)
            if d.store.add_log(channel, thread_ts, ref):
                new.append(got)
            else:
                dups.append(d.store.seen_log(channel, thread_ts, ref.sha256) or ref)
        return new, dups, rejected

    def _remember(self, channel: str, thread_ts: str, question: str, answer_id: str,
                  answer: Answer, analysis_key: str | None) -> None:
        ctx: ThreadState = self.deps.store.context(channel, thread_ts)
        ctx.last_answer_id = answer_id
        ctx.candidates = merge_candidates(ctx.candidates, answer)
        ctx.analysis_key = analysis_key
        if question:
            ctx.questions = [*ctx.questions, question][-10:]
        self.deps.store.save_context(channel, thread_ts, ctx)


def set_aside(logs: list[Download]) -> str:
    return (f"I set aside {', '.join(f'`{x.name}`' for x in logs)}: answering with "
            f"{'it' if len(logs) == 1 else 'them'} failed, and the rest of this thread still "
            "works without. Run `ncclbot analyze` on the file for the error.")


def merge_candidates(old: list[Candidate], answer: Answer, keep: int = 10
                     ) -> list[Candidate]:
    """Every root cause proposed in the thread so far, best confidence each, best first."""
    best = {c.key: c for c in old}
    for rc in answer.root_causes:
        c = Candidate(category=rc.category, card=rc.card, confidence=rc.confidence,
                      title=dict(rc.title))
        if c.key not in best or c.confidence > best[c.key].confidence:
            best[c.key] = c
    return sorted(best.values(), key=lambda c: -c.confidence)[:keep]


def earlier_notes(ctx: ThreadState, answer: Answer, lang: str = "en") -> list[str]:
    """A follow-up whose leading cause differs from the thread's best so far says so (in
    Chinese for a Chinese thread)."""
    if not ctx.candidates or not ctx.last_answer_id:
        return []
    top, causes = ctx.candidates[0], answer.root_causes
    if causes and (causes[0].category, causes[0].card) == top.key:
        return []
    if lang == "zh":
        return [f"本线程之前排在首位的候选是 {top.category}（{top.confidence:.0%}，卡片 "
                f"{top.card}）；见“其他可能原因”。"]
    return [f"Earlier in this thread the leading candidate was {top.category} "
            f"({top.confidence:.0%}, card {top.card}); "
            "see Other possible causes."]

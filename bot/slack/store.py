"""Slack's own state, in the state database (a SQLite file, or PostgreSQL shared by
replicas): the ids of the events already received (so Slack's retries are not answered
twice, by any replica), each thread's log files (dedup fingerprints), stored answers,
feedback, audit and language preferences. A thread's memory itself is the one
`bot.state.threads.ThreadState`, in the same database (`Store.threads`)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from bot.answering.contract import Answer
from bot.state.db import Database, SqliteDatabase, open_database
from bot.state.threads import SqlThreadStore, ThreadState

if TYPE_CHECKING:
    from bot.config import Settings


class AuditRow(TypedDict):
    """One line of the audit trail: who asked for what on which node, and how it ended."""

    ts: float
    user: str
    channel: str | None
    node: str
    tool: str
    preset: str | None
    outcome: str
    detail: str

SCHEMA = """
CREATE TABLE IF NOT EXISTS fingerprints (
    channel TEXT, thread_ts TEXT, sha256 TEXT, name TEXT, path TEXT, size INTEGER, added REAL,
    PRIMARY KEY (channel, thread_ts, sha256));
CREATE TABLE IF NOT EXISTS answers (
    id TEXT PRIMARY KEY, channel TEXT, thread_ts TEXT, logs_key TEXT, answer TEXT, created REAL);
CREATE INDEX IF NOT EXISTS answers_logs ON answers (channel, thread_ts, logs_key);
CREATE TABLE IF NOT EXISTS feedback (
    answer_id TEXT, "user" TEXT, helpful INTEGER, reason TEXT, category TEXT, card TEXT,
    created REAL, PRIMARY KEY (answer_id, "user"));
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL, "user" TEXT, channel TEXT, node TEXT,
    tool TEXT, preset TEXT, outcome TEXT, detail TEXT);
CREATE TABLE IF NOT EXISTS prefs (scope TEXT PRIMARY KEY, lang TEXT);
CREATE TABLE IF NOT EXISTS events (event_id TEXT PRIMARY KEY, received REAL);
CREATE INDEX IF NOT EXISTS events_received ON events (received);
"""


def thread_id(channel: str, thread_ts: str) -> str:
    """A Slack thread's id in the thread store (and for the Troubleshooter)."""
    return f"{channel}:{thread_ts}"


#: How long a received event id is remembered (Slack retries within minutes).
EVENT_TTL_S = 24 * 3600.0


@dataclass
class LogRef:
    """One log kept for a thread (content-addressed on disk)."""

    sha256: str
    name: str
    path: str
    size: int


class Store:
    """Slack's state over one `Database` (a SQLite file when given a path); thread-safe,
    and safe for several processes or replicas sharing the database."""

    def __init__(self, db: Database | str | Path) -> None:
        self.db = db if isinstance(db, Database) else SqliteDatabase(db)
        self.path = self.db.path
        self._pruned = float("-inf")
        self.db.create(SCHEMA)
        self.threads = SqlThreadStore(self.db)

    @classmethod
    def open(cls, settings: Settings) -> Store:
        """The store in the database the settings name (PostgreSQL or the SQLite file)."""
        return cls(open_database(settings))

    def close(self) -> None:
        self.db.close()

    def ping(self) -> bool:
        """Whether the database answers (for the health check)."""
        return self.db.ping()

    # Slack events already received: retries (X-Slack-Retry-Num) carry the same event_id.
    def claim_event(self, event_id: str, now: float | None = None) -> bool:
        """Record an event id; False when it was already received (a retry or a replay),
        by this process or any other on the same database: the insert is atomic."""
        now = time.time() if now is None else now
        with self.db.tx() as db:
            new = db.execute("INSERT INTO events VALUES (?,?) ON CONFLICT DO NOTHING",
                             (event_id, now)).rowcount == 1
            if new and now - self._pruned > 3600:  # forget old ids now and then
                self._pruned = now
                db.execute("DELETE FROM events WHERE received < ?", (now - EVENT_TTL_S,))
        return new

    # Thread memory (the one ThreadState, keyed "channel:thread_ts" as the Troubleshooter's).
    def context(self, channel: str, thread_ts: str) -> ThreadState:
        tid = thread_id(channel, thread_ts)
        return self.threads.get(tid) or ThreadState(thread_id=tid)

    def has_thread(self, channel: str, thread_ts: str) -> bool:
        return self.threads.get(thread_id(channel, thread_ts)) is not None

    def save_context(self, channel: str, thread_ts: str, state: ThreadState) -> None:
        self.threads.put(state.model_copy(update={"thread_id": thread_id(channel, thread_ts)}))

    # Dedup fingerprints (content hash of each downloaded log).
    def add_log(self, channel: str, thread_ts: str, ref: LogRef) -> bool:
        """Remember a log for the thread; False when the same content was already there."""
        with self.db.tx() as db:
            cur = db.execute(
                "INSERT INTO fingerprints VALUES (?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                (channel, thread_ts, ref.sha256, ref.name, ref.path, ref.size, time.time()))
            return cur.rowcount == 1

    def forget_log(self, channel: str, thread_ts: str, sha256: str) -> None:
        """Take a log out of the thread (its answer failed): later messages do not read it."""
        with self.db.tx() as db:
            db.execute("DELETE FROM fingerprints WHERE channel=? AND thread_ts=? AND sha256=?",
                       (channel, thread_ts, sha256))

    def seen_log(self, channel: str, thread_ts: str, sha256: str) -> LogRef | None:
        with self.db.tx() as db:
            row = db.execute("SELECT sha256,name,path,size FROM fingerprints WHERE channel=? AND "
                             "thread_ts=? AND sha256=?", (channel, thread_ts, sha256)).fetchone()
        return LogRef(*row) if row else None

    def logs(self, channel: str, thread_ts: str) -> list[LogRef]:
        with self.db.tx() as db:
            rows = db.execute("SELECT sha256,name,path,size FROM fingerprints WHERE channel=? AND "
                              "thread_ts=? ORDER BY added", (channel, thread_ts)).fetchall()
        return [LogRef(*r) for r in rows]

    # Answers.
    def save_answer(self, channel: str, thread_ts: str, answer: Answer,
                    logs_key: str = "") -> str:
        answer_id = uuid.uuid4().hex[:16]
        with self.db.tx() as db:
            db.execute("INSERT INTO answers VALUES (?,?,?,?,?,?)",
                       (answer_id, channel, thread_ts, logs_key,
                        answer.model_dump_json(), time.time()))
        return answer_id

    def answer(self, answer_id: str) -> Answer | None:
        """A stored answer; None when there is none, or it was stored in an older shape."""
        with self.db.tx() as db:
            row = db.execute("SELECT answer FROM answers WHERE id=?", (answer_id,)).fetchone()
        if not row:
            return None
        try:
            return Answer.model_validate_json(row[0])
        except ValueError:
            return None

    def answer_for_logs(self, channel: str, thread_ts: str, logs_key: str) -> str | None:
        with self.db.tx() as db:
            row = db.execute("SELECT id FROM answers WHERE channel=? AND thread_ts=? AND "
                             "logs_key=? ORDER BY created DESC", (channel, thread_ts, logs_key)
                             ).fetchone()
        return row[0] if row else None

    # Feedback.
    def add_feedback(self, answer_id: str, user: str, helpful: bool, reason: str | None = None
                     ) -> None:
        answer = self.answer(answer_id)
        top = answer.root_causes[0] if answer and answer.root_causes else None
        with self.db.tx() as db:  # a new vote keeps the reason given earlier
            db.execute('INSERT INTO feedback VALUES (?,?,?,?,?,?,?) ON CONFLICT (answer_id, '
                       '"user") DO UPDATE SET helpful=excluded.helpful, reason=COALESCE('
                       'excluded.reason, feedback.reason), category=excluded.category, '
                       'card=excluded.card, created=excluded.created',
                       (answer_id, user, int(helpful), reason or None,
                        top.category if top else "unknown", (top.card if top else None) or "-",
                        time.time()))

    def feedback_report(self) -> list[tuple[str, str, int, int]]:
        """(category, card, helpful, not helpful) rows, most feedback first."""
        with self.db.tx() as db:
            rows = db.execute(
                "SELECT category, card, SUM(helpful), SUM(1-helpful) FROM feedback "
                "GROUP BY category, card ORDER BY COUNT(*) DESC, category, card").fetchall()
        return [(str(cat), str(card), int(up), int(down)) for cat, card, up, down in rows]

    def feedback_reasons(self) -> list[tuple[str, str, str]]:
        with self.db.tx() as db:
            rows = db.execute("SELECT category, card, reason FROM feedback WHERE reason IS NOT "
                              "NULL AND reason != '' ORDER BY created").fetchall()
        return [(str(cat), str(card), str(reason)) for cat, card, reason in rows]

    # Audit trail.
    def audit(self, user: str, channel: str | None, node: str, tool: str, preset: str | None,
              outcome: str, detail: str = "") -> None:
        with self.db.tx() as db:
            db.execute('INSERT INTO audit (ts,"user",channel,node,tool,preset,outcome,detail) '
                       "VALUES (?,?,?,?,?,?,?,?)",
                       (time.time(), user, channel, node, tool, preset, outcome, detail[:2000]))

    def audit_rows(self) -> list[AuditRow]:
        with self.db.tx() as db:
            rows = db.execute('SELECT ts,"user",channel,node,tool,preset,outcome,detail FROM '
                              'audit ORDER BY id')
        return [AuditRow(ts=float(ts), user=user, channel=channel, node=node, tool=tool,
                         preset=preset, outcome=outcome, detail=detail)
                for ts, user, channel, node, tool, preset, outcome, detail in rows.rows]

    # Language preferences: scope is "user:U123" or "channel:C123".
    def set_lang(self, scope: str, lang: str | None) -> None:
        with self.db.tx() as db:
            if lang is None:
                db.execute("DELETE FROM prefs WHERE scope=?", (scope,))
            else:
                db.execute("INSERT INTO prefs VALUES (?,?) ON CONFLICT (scope) DO UPDATE SET "
                           "lang=excluded.lang", (scope, lang))

    def lang(self, scope: str) -> str | None:
        with self.db.tx() as db:
            row = db.execute("SELECT lang FROM prefs WHERE scope=?", (scope,)).fetchone()
        return row[0] if row else None

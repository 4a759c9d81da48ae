"""Slack's own SQLite state: the ids of the events already received (so Slack's retries are
not answered twice), each thread's log files (dedup fingerprints), stored answers,
feedback, audit and language preferences. A thread's memory itself is the one
`bot.threads.ThreadState`, in the same file (`Store.threads`)."""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.contract import Answer
from bot.threads import SqliteThreadStore, ThreadState

SCHEMA = """
CREATE TABLE IF NOT EXISTS fingerprints (
    channel TEXT, thread_ts TEXT, sha256 TEXT, name TEXT, path TEXT, size INTEGER, added REAL,
    PRIMARY KEY (channel, thread_ts, sha256));
CREATE TABLE IF NOT EXISTS answers (
    id TEXT PRIMARY KEY, channel TEXT, thread_ts TEXT, logs_key TEXT, answer TEXT, created REAL);
CREATE INDEX IF NOT EXISTS answers_logs ON answers (channel, thread_ts, logs_key);
CREATE TABLE IF NOT EXISTS feedback (
    answer_id TEXT, user TEXT, helpful INTEGER, reason TEXT, category TEXT, card TEXT,
    created REAL, PRIMARY KEY (answer_id, user));
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL, user TEXT, channel TEXT, node TEXT,
    tool TEXT, preset TEXT, outcome TEXT, detail TEXT);
CREATE TABLE IF NOT EXISTS prefs (scope TEXT PRIMARY KEY, lang TEXT);
CREATE TABLE IF NOT EXISTS events (event_id TEXT PRIMARY KEY, received REAL);
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
    """A small thread-safe wrapper over one SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._pruned = float("-inf")
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)
        self._db.commit()
        self.threads = SqliteThreadStore(self.path)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._db
                self._db.commit()
            except BaseException:
                self._db.rollback()
                raise

    def close(self) -> None:
        with self._lock:
            self._db.close()
        self.threads.close()

    def ping(self) -> bool:
        """Whether the database answers (for the health check)."""
        try:
            with self._tx() as db:
                db.execute("SELECT 1").fetchone()
            return True
        except sqlite3.Error:
            return False

    # Slack events already received: retries (X-Slack-Retry-Num) carry the same event_id.
    def claim_event(self, event_id: str, now: float | None = None) -> bool:
        """Record an event id; False when it was already received (a retry or a replay)."""
        now = time.time() if now is None else now
        with self._tx() as db:
            new = db.execute("INSERT OR IGNORE INTO events VALUES (?,?)",
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
        with self._tx() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO fingerprints VALUES (?,?,?,?,?,?,?)",
                (channel, thread_ts, ref.sha256, ref.name, ref.path, ref.size, time.time()))
            return cur.rowcount == 1

    def seen_log(self, channel: str, thread_ts: str, sha256: str) -> LogRef | None:
        with self._tx() as db:
            row = db.execute("SELECT sha256,name,path,size FROM fingerprints WHERE channel=? AND "
                             "thread_ts=? AND sha256=?", (channel, thread_ts, sha256)).fetchone()
        return LogRef(*row) if row else None

    def logs(self, channel: str, thread_ts: str) -> list[LogRef]:
        with self._tx() as db:
            rows = db.execute("SELECT sha256,name,path,size FROM fingerprints WHERE channel=? AND "
                              "thread_ts=? ORDER BY added", (channel, thread_ts)).fetchall()
        return [LogRef(*r) for r in rows]

    # Answers.
    def save_answer(self, channel: str, thread_ts: str, answer: Answer,
                    logs_key: str = "") -> str:
        answer_id = uuid.uuid4().hex[:16]
        with self._tx() as db:
            db.execute("INSERT INTO answers VALUES (?,?,?,?,?,?)",
                       (answer_id, channel, thread_ts, logs_key,
                        answer.model_dump_json(), time.time()))
        return answer_id

    def answer(self, answer_id: str) -> Answer | None:
        """A stored answer; None when there is none, or it was stored in an older shape."""
        with self._tx() as db:
            row = db.execute("SELECT answer FROM answers WHERE id=?", (answer_id,)).fetchone()
        if not row:
            return None
        try:
            return Answer.model_validate_json(row[0])
        except ValueError:
            return None

    def answer_for_logs(self, channel: str, thread_ts: str, logs_key: str) -> str | None:
        with self._tx() as db:
            row = db.execute("SELECT id FROM answers WHERE channel=? AND thread_ts=? AND "
                             "logs_key=? ORDER BY created DESC", (channel, thread_ts, logs_key)
                             ).fetchone()
        return row[0] if row else None

    # Feedback.
    def add_feedback(self, answer_id: str, user: str, helpful: bool, reason: str | None = None
                     ) -> None:
        answer = self.answer(answer_id)
        top = answer.root_causes[0] if answer and answer.root_causes else None
        with self._tx() as db:
            old = db.execute("SELECT reason FROM feedback WHERE answer_id=? AND user=?",
                             (answer_id, user)).fetchone()
            db.execute("INSERT OR REPLACE INTO feedback VALUES (?,?,?,?,?,?,?)",
                       (answer_id, user, int(helpful), reason or (old[0] if old else None),
                        top.category if top else "unknown", (top.card if top else None) or "-",
                        time.time()))

    def feedback_report(self) -> list[tuple[str, str, int, int]]:
        """(category, card, helpful, not helpful) rows, most feedback first."""
        with self._tx() as db:
            return db.execute(
                "SELECT category, card, SUM(helpful), SUM(1-helpful) FROM feedback "
                "GROUP BY category, card ORDER BY COUNT(*) DESC, category, card").fetchall()

    def feedback_reasons(self) -> list[tuple[str, str, str]]:
        with self._tx() as db:
            return db.execute("SELECT category, card, reason FROM feedback WHERE reason IS NOT "
                              "NULL AND reason != '' ORDER BY created").fetchall()

    # Audit trail.
    def audit(self, user: str, channel: str | None, node: str, tool: str, preset: str | None,
              outcome: str, detail: str = "") -> None:
        with self._tx() as db:
            db.execute("INSERT INTO audit (ts,user,channel,node,tool,preset,outcome,detail) "
                       "VALUES (?,?,?,?,?,?,?,?)",
                       (time.time(), user, channel, node, tool, preset, outcome, detail[:2000]))

    def audit_rows(self) -> list[dict[str, Any]]:
        with self._tx() as db:
            cur = db.execute("SELECT ts,user,channel,node,tool,preset,outcome,detail FROM audit "
                             "ORDER BY id")
            cols = [c[0] for c in cur.description]
            return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    # Language preferences: scope is "user:U123" or "channel:C123".
    def set_lang(self, scope: str, lang: str | None) -> None:
        with self._tx() as db:
            if lang is None:
                db.execute("DELETE FROM prefs WHERE scope=?", (scope,))
            else:
                db.execute("INSERT OR REPLACE INTO prefs VALUES (?,?)", (scope, lang))

    def lang(self, scope: str) -> str | None:
        with self._tx() as db:
            row = db.execute("SELECT lang FROM prefs WHERE scope=?", (scope,)).fetchone()
        return row[0] if row else None

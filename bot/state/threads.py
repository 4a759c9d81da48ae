"""One thread's memory, one model and one store, whoever answers (Slack's conversation,
the LLM agent, `ncclbot ask`).

Follow-up questions in a thread reuse the attachments already analyzed, the cards
already retrieved (which may then be cited again), the placeholder mapping of the
redactor (so `HOST_1` means the same host for the whole thread), the questions asked and
every root cause proposed so far. Slack keeps only what is truly Slack's elsewhere
(events, log files, stored answers, feedback, audit, preferences: `bot.slack.store`).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.agent.models import LogAnalysis, ProbeProposal
from bot.state.db import Database, SqliteDatabase, open_database

if TYPE_CHECKING:
    from bot.config import Settings

log = logging.getLogger(__name__)


class Turn(BaseModel):
    question: str
    explanation: str = ""
    summary: str = ""


class Candidate(BaseModel):
    """A root cause proposed in the thread (its best confidence so far)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    category: str
    card: str | None = None
    confidence: float = 0.0
    title: dict[str, str] = Field(default_factory=dict)

    @field_validator("confidence", mode="before")
    @classmethod
    def _none_is_zero(cls, value: object) -> object:
        return 0.0 if value is None else value

    @property
    def key(self) -> tuple[str, str | None]:
        return self.category, self.card


class ThreadState(BaseModel):
    """Everything a follow-up needs; `model_dump_json()` / `model_validate_json()` round-trip
    (fields written by other versions are dropped)."""

    thread_id: str | None = None
    # the conversation: questions (newest last), the last answer, the analysed set of logs
    # and every root cause proposed in the thread so far (best confidence each)
    questions: list[str] = Field(default_factory=list)
    last_answer_id: str | None = None
    analysis_key: str | None = None
    candidates: list[Candidate] = Field(default_factory=list)
    # the LLM agent's memory
    attachments: dict[str, str] = Field(default_factory=dict)  # display name -> path
    analyses: dict[str, LogAnalysis] = Field(default_factory=dict)  # name -> analyze_log result
    log_files: dict[str, list[str]] = Field(default_factory=dict)  # name -> files analyze_log read
    evidence: dict[str, dict[str, str]] = Field(default_factory=dict)  # file -> {line: text}
    seen_cards: list[str] = Field(default_factory=list)  # card ids returned by a tool
    placeholders: dict[str, str] = Field(default_factory=dict)  # HOST_1 -> original
    turns: list[Turn] = Field(default_factory=list)
    proposals: list[ProbeProposal] = Field(default_factory=list)

    def see_card(self, card_id: str) -> None:
        if card_id not in self.seen_cards:
            self.seen_cards.append(card_id)

    def analyzed_files(self) -> set[str]:
        """The log files (archive members included) analyze_log returned in this thread."""
        return {f for files in self.log_files.values() for f in files}


class ThreadStore(Protocol):
    """Where thread state lives: in memory, or the state database (SQLite or PostgreSQL) so
    threads survive a restart and are shared by replicas."""

    def get(self, thread_id: str) -> ThreadState | None: ...

    def put(self, state: ThreadState) -> None: ...


class InMemoryThreadStore:
    """A process-local store; states are kept as JSON so they behave like a persisted one."""

    def __init__(self, max_threads: int = 1000) -> None:
        self._data: dict[str, str] = {}
        self._lock = threading.Lock()
        self.max_threads = max_threads

    def get(self, thread_id: str) -> ThreadState | None:
        with self._lock:
            raw = self._data.get(thread_id)
        return ThreadState.model_validate_json(raw) if raw is not None else None

    def put(self, state: ThreadState) -> None:
        if state.thread_id is None:
            return
        with self._lock:
            self._data.pop(state.thread_id, None)
            self._data[state.thread_id] = state.model_dump_json()
            while len(self._data) > self.max_threads:
                self._data.pop(next(iter(self._data)))


class SqlThreadStore:
    """Thread states in the state database (table `thread_state`, SQLite or PostgreSQL);
    safe to share between threads, processes and replicas. Keeps the `max_threads` most
    recently used, for `ttl_s`."""

    SCHEMA = """CREATE TABLE IF NOT EXISTS thread_state (
        thread_id TEXT PRIMARY KEY, state TEXT NOT NULL, updated REAL NOT NULL);
        CREATE INDEX IF NOT EXISTS thread_state_updated ON thread_state(updated);"""

    def __init__(self, db: Database, max_threads: int = 10_000,
                 ttl_s: float = 30 * 86400) -> None:
        self.db = db
        self.max_threads = max_threads
        self.ttl_s = ttl_s
        db.create(self.SCHEMA)

    @property
    def path(self) -> Path | None:
        """The SQLite file (None on PostgreSQL)."""
        return self.db.path

    def get(self, thread_id: str) -> ThreadState | None:
        with self.db.tx() as tx:
            row = tx.execute("SELECT state FROM thread_state WHERE thread_id=?",
                             (thread_id,)).fetchone()
        if row is None:
            return None
        try:
            return ThreadState.model_validate_json(row[0])
        except ValidationError as exc:
            log.warning("thread %s: stored state unreadable, starting afresh (%s)",
                        thread_id, str(exc)[:200])
            return None

    def put(self, state: ThreadState) -> None:
        if state.thread_id is None:
            return
        now = time.time()
        with self.db.tx() as tx:
            tx.execute("INSERT INTO thread_state VALUES (?,?,?) ON CONFLICT (thread_id) DO "
                       "UPDATE SET state=excluded.state, updated=excluded.updated",
                       (state.thread_id, state.model_dump_json(), now))
            tx.execute("DELETE FROM thread_state WHERE updated < ?", (now - self.ttl_s,))
            tx.execute("DELETE FROM thread_state WHERE thread_id NOT IN (SELECT thread_id "
                       "FROM thread_state ORDER BY updated DESC LIMIT ?)", (self.max_threads,))

    def __len__(self) -> int:
        with self.db.tx() as tx:
            row = tx.execute("SELECT COUNT(*) FROM thread_state").fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self.db.close()


class SqliteThreadStore(SqlThreadStore):
    """A thread store of its own in the SQLite file `path`."""

    def __init__(self, path: str | Path, max_threads: int = 10_000,
                 ttl_s: float = 30 * 86400) -> None:
        super().__init__(SqliteDatabase(path), max_threads, ttl_s)


def open_thread_store(settings: Settings) -> SqlThreadStore:
    """The thread store in the state database the settings name."""
    return SqlThreadStore(open_database(settings))

"""Local incidents in the state database (SQLite, or PostgreSQL shared by replicas).

One row per incident (its JSON, and the normalised salient lines the index is built from,
so a replica rebuilds its small local index without re-reading logs), at most one per
Slack thread. Every change bumps one counter in the same transaction (`version`), which
each answer reads to know whether its local index is current; every change is audited
(`memory_audit`). Who asked in a thread is noted here too (`note_asker`), since only the
asker and on-call people may resolve it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from bot.errors import InputError
from bot.memory.model import LocalIncident
from bot.state.db import Database, Tx

SCHEMA = """
CREATE TABLE IF NOT EXISTS local_incidents (
    id TEXT PRIMARY KEY, channel TEXT, thread_ts TEXT, category TEXT, card TEXT,
    answer_id TEXT, created REAL, updated REAL, body TEXT, lines TEXT);
CREATE UNIQUE INDEX IF NOT EXISTS local_incidents_thread ON local_incidents (channel, thread_ts);
CREATE TABLE IF NOT EXISTS memory_version (k INTEGER PRIMARY KEY, version INTEGER);
INSERT INTO memory_version VALUES (1, 0) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS memory_audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL, "user" TEXT, action TEXT, incident TEXT,
    detail TEXT);
CREATE TABLE IF NOT EXISTS thread_askers (
    channel TEXT, thread_ts TEXT, "user" TEXT, PRIMARY KEY (channel, thread_ts))
"""


class MemoryChangeError(InputError):
    """A change the memory refuses (a thread resolved already, an id taken or unknown)."""


@dataclass(frozen=True)
class Row:
    """What the local index needs of one incident."""

    incident: LocalIncident
    lines: tuple[str, ...]


class MemoryStore:
    """Local incidents over one `Database`; thread-safe, shared by replicas."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.create(SCHEMA)

    # -- reading ----------------------------------------------------------------------------
    def version(self) -> int:
        """The change counter (one small read: every answer asks)."""
        with self.db.tx() as tx:
            row = tx.execute("SELECT version FROM memory_version WHERE k=1").fetchone()
        return int(row[0]) if row else 0

    def get(self, incident_id: str) -> LocalIncident | None:
        with self.db.tx() as tx:
            row = tx.execute("SELECT body FROM local_incidents WHERE id=?",
                             (incident_id,)).fetchone()
        return LocalIncident.model_validate_json(row[0]) if row else None

    def for_thread(self, channel: str, thread_ts: str) -> LocalIncident | None:
        with self.db.tx() as tx:
            row = tx.execute("SELECT body FROM local_incidents WHERE channel=? AND thread_ts=?",
                             (channel, thread_ts)).fetchone()
        return LocalIncident.model_validate_json(row[0]) if row else None

    def all(self) -> list[LocalIncident]:
        with self.db.tx() as tx:
            rows = tx.execute("SELECT body FROM local_incidents ORDER BY created, id").fetchall()
        return [LocalIncident.model_validate_json(r[0]) for r in rows]

    def rows(self) -> tuple[int, list[Row]]:
        """(version, every incident with its salient lines), read in one transaction."""
        with self.db.tx() as tx:
            v = tx.execute("SELECT version FROM memory_version WHERE k=1").fetchone()
            rows = tx.execute("SELECT body, lines FROM local_incidents ORDER BY created, id"
                              ).fetchall()
        return (int(v[0]) if v else 0,
                [Row(LocalIncident.model_validate_json(b), tuple(json.loads(ln)))
                 for b, ln in rows])

    def stamps(self) -> dict[str, float]:
        """Every incident's id and when it last changed (what an index diffs against)."""
        with self.db.tx() as tx:
            rows = tx.execute("SELECT id, updated FROM local_incidents").fetchall()
        return {str(i): float(u) for i, u in rows}

    def rows_for(self, ids: list[str]) -> list[Row]:
        """The incidents `ids` with their salient lines (those still there)."""
        out: list[Row] = []
        for at in range(0, len(ids), 500):
            chunk = ids[at:at + 500]
            with self.db.tx() as tx:
                rows = tx.execute("SELECT body, lines FROM local_incidents WHERE id IN ("
                                  + ",".join("?" * len(chunk)) + ")", chunk).fetchall()
            out += [Row(LocalIncident.model_validate_json(b), tuple(json.loads(ln)))
                    for b, ln in rows]
        return out

    def count(self) -> int:
        with self.db.tx() as tx:
            row = tx.execute("SELECT COUNT(*) FROM local_incidents").fetchone()
        return int(row[0]) if row else 0

    # -- changing ---------------------------------------------------------------------------
    def add(self, inc: LocalIncident, user: str, action: str = "add") -> None:
        """Store a new incident; MemoryChangeError when its id or thread is taken."""
        now = time.time()
        with self.db.tx() as tx:
            if inc.channel and inc.thread_ts and tx.execute(
                    "SELECT id FROM local_incidents WHERE channel=? AND thread_ts=?",
                    (inc.channel, inc.thread_ts)).fetchone():
                raise MemoryChangeError("this thread is resolved already; correct it instead")
            done = tx.execute(
                "INSERT INTO local_incidents VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                (inc.id, inc.channel, inc.thread_ts, inc.category, inc.card, inc.answer_id,
                 now, now,
                 inc.model_dump_json(), json.dumps(inc.salient()))).rowcount
            if done != 1:
                raise MemoryChangeError(f"an incident with id {inc.id} exists already")
            self._changed(tx, user, action, inc.id, f"{inc.category} {inc.card or '-'}")

    def add_many(self, incs: list[LocalIncident], user: str, action: str = "import") -> int:
        """Store many in one transaction (ids or threads already taken are skipped); how many
        were stored."""
        now, stored = time.time(), 0
        with self.db.tx() as tx:
            for inc in incs:
                stored += tx.execute(
                    "INSERT INTO local_incidents VALUES (?,?,?,?,?,?,?,?,?,?) "
                    "ON CONFLICT DO NOTHING",
                    (inc.id, inc.channel, inc.thread_ts, inc.category, inc.card, inc.answer_id,
                     now, now, inc.model_dump_json(), json.dumps(inc.salient()))).rowcount
            if stored:
                self._changed(tx, user, action, f"{stored} incidents", "")
        return stored

    def replace(self, inc: LocalIncident, user: str) -> None:
        """Correct a stored incident (same id)."""
        with self.db.tx() as tx:
            done = tx.execute(
                "UPDATE local_incidents SET category=?, card=?, answer_id=?, updated=?, body=?, "
                "lines=? WHERE id=?", (inc.category, inc.card, inc.answer_id, time.time(),
                                       inc.model_dump_json(),
                               json.dumps(inc.salient()), inc.id)).rowcount
            if done != 1:
                raise MemoryChangeError(f"no local incident {inc.id}")
            self._changed(tx, user, "correct", inc.id, f"{inc.category} {inc.card or '-'}")

    def forget(self, incident_id: str, user: str) -> bool:
        """Delete one; False when there was none."""
        with self.db.tx() as tx:
            done = tx.execute("DELETE FROM local_incidents WHERE id=?",
                              (incident_id,)).rowcount == 1
            if done:
                self._changed(tx, user, "forget", incident_id, "")
        return done

    def _changed(self, tx: Tx, user: str, action: str, incident: str, detail: str) -> None:
        tx.execute("UPDATE memory_version SET version = version + 1 WHERE k=1")
        tx.execute('INSERT INTO memory_audit (ts,"user",action,incident,detail) VALUES '
                   "(?,?,?,?,?)", (time.time(), user, action, incident, detail[:500]))

    def audit(self, user: str, action: str, incident: str, detail: str = "") -> None:
        """Record a refused or failed attempt (changes are audited with the change)."""
        with self.db.tx() as tx:
            tx.execute('INSERT INTO memory_audit (ts,"user",action,incident,detail) VALUES '
                       "(?,?,?,?,?)", (time.time(), user, action, incident, detail[:500]))

    def audit_rows(self) -> list[tuple[str, str, str, str]]:
        """(user, action, incident, detail), oldest first."""
        with self.db.tx() as tx:
            rows = tx.execute('SELECT "user", action, incident, detail FROM memory_audit '
                              "ORDER BY id").fetchall()
        return [(str(u), str(a), str(i), str(d)) for u, a, i, d in rows]

    def corrections(self) -> list[tuple[str, str, str, str | None]]:
        """Answers found not helpful whose thread was then resolved: (answer id, what the
        answer led with, the right category, the right card) - the labels of wrong answers.
        Empty when this database has no Slack feedback."""
        try:
            with self.db.tx() as tx:
                rows = tx.execute(
                    "SELECT DISTINCT f.answer_id, f.category, l.category, l.card FROM feedback f "
                    "JOIN local_incidents l ON l.answer_id = f.answer_id WHERE f.helpful = 0 "
                    "ORDER BY f.answer_id").fetchall()
        except self.db.errors:
            return []
        return [(str(a), str(was), str(cat), card) for a, was, cat, card in rows]

    def downvoted(self, answer_id: str) -> bool:
        """Whether someone found this answer not helpful (False without Slack feedback)."""
        try:
            with self.db.tx() as tx:
                row = tx.execute("SELECT 1 FROM feedback WHERE answer_id=? AND helpful=0",
                                 (answer_id,)).fetchone()
        except self.db.errors:
            return False
        return row is not None

    # -- who asked --------------------------------------------------------------------------
    def note_asker(self, channel: str, thread_ts: str, user: str) -> None:
        """The first person to ask in a thread is its asker."""
        with self.db.tx() as tx:
            tx.execute("INSERT INTO thread_askers VALUES (?,?,?) ON CONFLICT DO NOTHING",
                       (channel, thread_ts, user))

    def asker(self, channel: str, thread_ts: str) -> str | None:
        with self.db.tx() as tx:
            row = tx.execute('SELECT "user" FROM thread_askers WHERE channel=? AND thread_ts=?',
                             (channel, thread_ts)).fetchone()
        return str(row[0]) if row else None

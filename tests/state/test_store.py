"""The state store's contract, on SQLite and on PostgreSQL alike; two replicas on one
database claim every event exactly once; a database that cannot be reached is one line."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.answering.contract import Answer
from bot.config import load_settings
from bot.errors import ConfigError, StateError
from bot.slack.store import EVENT_TTL_S, LogRef, Store
from bot.state.db import Database, PostgresDatabase, redact_url
from bot.state.threads import SqlThreadStore, ThreadState, Turn
from tests.state.replica import EVENTS

ROOT = Path(__file__).resolve().parents[2]
OpenDb = Callable[[], Database]


def answer(category: str, card: str) -> Answer:
    return Answer.model_validate({"verdict": "diagnosed", "summary": "s", "diagnosis": {
        "root_causes": [{"category": category, "card": card, "confidence": 0.7}]}})


def test_events_are_claimed_once_and_forgotten_after_a_day(open_db: OpenDb) -> None:
    store = Store(open_db())
    assert store.claim_event("Ev1", now=1000.0) and not store.claim_event("Ev1", now=1001.0)
    again = Store(open_db())  # a restart, or another replica
    assert not again.claim_event("Ev1", now=1002.0)
    assert again.claim_event("Ev2", now=1000.0 + EVENT_TTL_S + 1)  # prunes Ev1 (first claim)
    assert again.claim_event("Ev1", now=1000.0 + EVENT_TTL_S + 2)
    # sub-second times are kept exactly (not a 4-byte float on PostgreSQL)
    assert store.claim_event("Ev3", now=1_700_000_000.25)
    with store.db.tx() as tx:
        row = tx.execute("SELECT received FROM events WHERE event_id=?", ("Ev3",)).fetchone()
    assert row == (1_700_000_000.25,)


def test_logs_answers_feedback_audit_and_prefs(open_db: OpenDb) -> None:
    store = Store(open_db())
    a, b = LogRef("aa", "a.log", "/d/aa", 10), LogRef("bb", "b.log", "/d/bb", 20)
    assert store.add_log("C1", "1.1", a) and store.add_log("C1", "1.1", b)
    assert not store.add_log("C1", "1.1", a)  # the same content again
    assert store.seen_log("C1", "1.1", "bb") == b and store.seen_log("C2", "1.1", "bb") is None
    assert store.logs("C1", "1.1") == [a, b]

    first = store.save_answer("C1", "1.1", answer("rank_crashed", "host-oom"), logs_key="k")
    assert store.answer(first) == answer("rank_crashed", "host-oom")
    assert store.answer("nope") is None and store.answer_for_logs("C1", "1.1", "k") == first
    with store.db.tx() as tx:  # an answer stored in an older shape is no answer
        tx.execute("UPDATE answers SET answer=? WHERE id=?", ('{"old": 1}', first))
    assert store.answer(first) is None
    second = store.save_answer("C1", "1.1", answer("nic_down", "ib-link"))

    store.add_feedback(second, "U1", False, "wrong node")
    store.add_feedback(second, "U1", True)  # changes the vote, keeps the reason
    store.add_feedback(second, "U2", False, "")
    store.add_feedback(first, "U1", True)
    assert store.feedback_report() == [("nic_down", "ib-link", 1, 1), ("unknown", "-", 1, 0)]
    assert store.feedback_reasons() == [("nic_down", "ib-link", "wrong node")]

    store.audit("U1", "C1", "gpu-node07", "probe", "quick", "ok", "x" * 3000)
    store.audit("U2", None, "gpu-node08", "env", None, "refused")
    rows = store.audit_rows()
    assert [(r["user"], r["channel"], r["outcome"]) for r in rows] == [
        ("U1", "C1", "ok"), ("U2", None, "refused")]
    assert len(rows[0]["detail"]) == 2000 and set(rows[0]) == {
        "ts", "user", "channel", "node", "tool", "preset", "outcome", "detail"}

    store.set_lang("user:U1", "zh")
    store.set_lang("user:U1", "en")
    store.set_lang("channel:C1", "zh")
    store.set_lang("channel:C1", None)
    assert store.lang("user:U1") == "en" and store.lang("channel:C1") is None
    assert store.ping()
    store.close()
    assert not store.ping()


def test_thread_memory_is_shared_bounded_and_tolerates_a_bad_row(open_db: OpenDb) -> None:
    store = Store(open_db())
    ctx = store.context("C1", "10.1")
    ctx.questions.append("why did it hang?")
    store.save_context("C1", "10.1", ctx)
    agent = SqlThreadStore(open_db())  # the agent's store, another connection
    state = agent.get("C1:10.1")
    assert state is not None and state.questions == ["why did it hang?"]
    state.turns.append(Turn(question="and now?"))
    agent.put(state)
    assert store.context("C1", "10.1").turns == [Turn(question="and now?")]
    assert store.has_thread("C1", "10.1") and not store.has_thread("C1", "10.2")

    small = SqlThreadStore(open_db(), max_threads=2)
    for i in range(4):
        small.put(ThreadState(thread_id=f"t{i}"))
    assert len(small) == 2 and small.get("t0") is None and small.get("t3") is not None
    with small.db.tx() as tx:
        tx.execute("UPDATE thread_state SET state='{not json' WHERE thread_id='t3'")
    assert small.get("t3") is None


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_two_replicas_claim_every_event_exactly_once(backend: str, request: pytest.FixtureRequest,
                                                     tmp_path: Path) -> None:
    """Two processes get the same 100 events, each one to three times in its own order,
    and race: together they win every event once."""
    where = (request.getfixturevalue("postgres_url") if backend == "postgres"
             else str(tmp_path / "state.sqlite3"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    replicas = [subprocess.Popen([sys.executable, "-m", "tests.state.replica", where, str(seed)],
                                 cwd=ROOT, env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True) for seed in (1, 2)]
    try:
        for r in replicas:  # both connected and ready, then both go at once
            assert r.stdout is not None and r.stdout.readline().strip() == "ready"
        for r in replicas:
            assert r.stdin is not None
            r.stdin.write("go\n")
            r.stdin.flush()
        results = [json.loads(r.communicate(timeout=240)[0]) for r in replicas]
    finally:
        for r in replicas:
            if r.poll() is None:
                r.kill()
    assert all(r.returncode == 0 for r in replicas)
    won = [e for res in results for e in res["won"]]
    assert sorted(won) == sorted(EVENTS)  # each event once, by one replica or the other
    assert sum(res["delivered"] for res in results) >= 2 * len(EVENTS)


def test_postgres_health_follows_the_server(postgres_server: str) -> None:
    """The database vanishes (connections cut): ping says so without raising; it comes
    back: the pool reconnects and ping answers again."""
    import psycopg

    from tests import pg

    with pg.fresh_database(postgres_server) as url:
        store = Store(PostgresDatabase(url, wait_s=2))
        assert store.claim_event("Ev1") and store.ping()
        name = url.rsplit("/", 1)[1]
        with psycopg.connect(postgres_server, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
            assert not store.ping()
            admin.execute(f"CREATE DATABASE {name}")
        deadline = time.monotonic() + 120  # the pool's reconnection backs off
        while not store.ping() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert store.ping()
        store.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_database_is_one_line_without_the_password() -> None:
    url = f"postgresql://bot:s3cretpw@127.0.0.1:{_closed_port()}/ncclbot"
    with pytest.raises(StateError) as err:
        PostgresDatabase(url, connect_timeout_s=5)
    message = err.value.message
    assert "\n" not in message and "s3cretpw" not in message
    assert message.startswith("cannot reach the state database PostgreSQL "
                              "postgresql://bot:***@127.0.0.1:")


@pytest.mark.parametrize("command", [["feedback", "report"], ["serve", "slack", "--http"]])
def test_cli_says_in_one_line_that_the_database_is_unreachable(command: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCLBOT_", "SLACK_"))}
    env.update(NCCLBOT_DATABASE_URL=f"postgresql://bot:s3cretpw@127.0.0.1:{_closed_port()}/x",
               SLACK_BOT_TOKEN="xoxb-1", SLACK_SIGNING_SECRET="s", NCCLBOT_DATA_DIR=os.environ[
                   "NCCLBOT_DATA_DIR"], NCCLBOT_SLACK_API_URL="http://127.0.0.1:9/api/")
    out = subprocess.run([sys.executable, "-m", "bot.cli.main", *command], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == StateError.exit_code
    assert "Traceback" not in out.stderr and "s3cretpw" not in out.stderr + out.stdout
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot reach the state database" in errors[0]
    assert "bot:***@127.0.0.1" in errors[0]


def test_database_url_setting() -> None:
    settings = load_settings(database_url="postgresql://bot:pw@db:5432/ncclbot")
    assert "pw" not in repr(settings) and settings.database_url is not None
    assert load_settings(database_url="").database_url is None
    with pytest.raises(ConfigError) as err:
        load_settings(database_url="mysql://bot:pw@db/x")
    assert "postgresql://" in err.value.message and "pw@" not in err.value.message
    assert redact_url("postgresql://bot:pw@db:5432/n?sslmode=require") == (
        "postgresql://bot:***@db:5432/n?sslmode=require")
    assert redact_url("postgresql://bot@db/n") == "postgresql://bot@db/n"

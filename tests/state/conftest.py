"""A state store on each backend: the SQLite file and the session's PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.state.db import Database, PostgresDatabase, SqliteDatabase

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def open_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Database]]:
    """Opens the test's database (each call a new connection, as another process would);
    every one is closed afterwards."""
    opened: list[Database] = []
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")

        def make() -> Database:
            opened.append(PostgresDatabase(url))
            return opened[-1]
    else:
        def make() -> Database:
            opened.append(SqliteDatabase(tmp_path / "state.sqlite3"))
            return opened[-1]

    yield make
    for db in opened:
        db.close()

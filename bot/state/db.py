"""The state database behind one interface: a SQLite file (the default) or PostgreSQL
(`NCCLBOT_DATABASE_URL`), which several bot replicas can share.

Callers write their SQL once, with `?` placeholders, in the subset both dialects
understand (upserts are `INSERT ... ON CONFLICT`, a column named `user` is quoted).
Schemas say `REAL` and `INTEGER PRIMARY KEY AUTOINCREMENT`; PostgreSQL reads them as
`DOUBLE PRECISION` and `BIGSERIAL PRIMARY KEY`. psycopg is imported only for PostgreSQL.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

from bot.errors import StateError

if TYPE_CHECKING:
    from bot.config import Settings

log = logging.getLogger(__name__)


@dataclass
class Rows:
    """What one statement returned, read at once: rows, their column names, rows changed."""

    rowcount: int
    columns: list[str] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows


class Tx(ABC):
    """One transaction: statements run in it commit together, or not at all."""

    @abstractmethod
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows: ...


def statements(script: str) -> list[str]:
    """The statements of a schema script (no `;` inside one)."""
    return [s.strip() for s in script.split(";") if s.strip()]


class Database(ABC):
    """A state database: transactions, a ping for the health check, and its name for logs
    (no password)."""

    #: the SQLite file, None for a server
    path: Path | None = None
    #: what the driver raises when the database fails
    errors: tuple[type[Exception], ...] = ()

    @abstractmethod
    def tx(self) -> AbstractContextManager[Tx]:
        """A context manager giving a `Tx` (committed on success, rolled back on error)."""

    @abstractmethod
    def create(self, schema: str) -> None:
        """Create the tables of `schema` that are missing (several processes may race)."""

    def ping(self) -> bool:
        """Whether the database answers (why not is logged)."""
        try:
            with self.tx() as tx:
                tx.execute("SELECT 1")
            return True
        except self.errors as exc:
            log.warning("state database %s: %s", self.describe(), self.reason(exc))
            return False

    def reason(self, exc: Exception) -> str:
        """The first line of a driver's error."""
        return (str(exc).strip().splitlines() or [type(exc).__name__])[0]

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def describe(self) -> str: ...


class _SqliteTx(Tx):
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        cur = self._db.execute(sql, tuple(params))
        columns = [c[0] for c in cur.description or ()]
        return Rows(cur.rowcount, columns, cur.fetchall() if columns else [])


class SqliteDatabase(Database):
    """One SQLite file (WAL), one connection shared by the threads of this process."""

    errors = (sqlite3.Error,)

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        # Switching a new file to WAL takes an exclusive lock without waiting the busy
        # timeout: two replicas starting at once on one file see "database is locked".
        deadline = time.monotonic() + 30
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    @contextmanager
    def tx(self) -> Iterator[Tx]:
        with self._lock:
            try:
                yield _SqliteTx(self._db)
                self._db.commit()
            except BaseException:
                self._db.rollback()
                raise

    def create(self, schema: str) -> None:
        with self.tx() as tx:
            for stmt in statements(schema):
                tx.execute(stmt)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def describe(self) -> str:
        return f"SQLite {self.path}"


#: The authority of a URL: `scheme://user:PASSWORD@` up to the last `@` before the path
#: (an unencoded `@` or `/` in a password stays inside what is hidden).
_URL_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@?#]*:)(\S*)(@[^@\s]*)$")
_URL_USERINFO_ANY = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@?#]*:)([^\s@]*)(@)")
#: `?password=` / `&sslpassword=` (libpq's query form) and `password=` keywords
#: (`host=h password='a b'`), quoted or not.
_PASSWORD_PARAM = re.compile(
    r"(?i)((?:^|(?<=[\s?&;]))(?:ssl)?(?:password|passwd|pwd)\s*=\s*)"
    r"('(?:[^'\\]|\\.)*'?|\"[^\"]*\"?|[^\s&#;]*)")
MASK = "***"


def redact_url(url: str) -> str:
    """A database URL (or libpq keyword string) with every password replaced by `***`:
    in the authority, in `?password=` and in `password=` keywords; malformed URLs too.
    Never raises (for logs and messages)."""
    out = _URL_USERINFO.sub(lambda m: m.group(1) + MASK + m.group(3), url.strip(), count=1)
    out = _URL_USERINFO_ANY.sub(lambda m: m.group(1) + MASK + m.group(3), out)
    return _PASSWORD_PARAM.sub(lambda m: m.group(1) + MASK if m.group(2) else m.group(0), out)


def url_passwords(url: str) -> list[str]:
    """Every password `url` carries, as libpq and as a plain URL parser read it (either may
    fail on a malformed URL: what the other finds still counts)."""
    found: list[str] = []
    try:
        from psycopg.conninfo import conninfo_to_dict

        found.append(str(conninfo_to_dict(url).get("password") or ""))
    except Exception:  # noqa: BLE001 - malformed or no psycopg: the other readings remain
        pass
    try:
        found.append(unquote(urlsplit(url).password or ""))
    except ValueError:
        pass
    m = _URL_USERINFO.search(url.strip())
    if m:
        found.append(m.group(2))
    found += [m.group(2).strip("'\"") for m in _PASSWORD_PARAM.finditer(url)]
    return sorted({p for p in found if len(p) >= 3 and p != MASK}, key=len, reverse=True)


def scrub_url_secrets(text: str, url: str) -> str:
    """`text` (a driver's error, a log line) with `url`'s passwords hidden wherever they
    appear: the URL itself, each password and its percent-encoded form."""
    text = text.replace(url, redact_url(url))
    for password in url_passwords(url):
        for form in (password, quote(password, safe="")):
            text = text.replace(form, MASK)
    return redact_url(text)


class _UrlScrubber(logging.Filter):
    """Hides a database URL's passwords in the records of the driver's loggers (the pool
    logs its connection failures itself)."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a broken record is logging's own problem
            return True
        scrubbed = scrub_url_secrets(message, self.url)
        if scrubbed != message:
            record.msg, record.args = scrubbed, None
        return True


def _scrub_driver_logs(url: str) -> None:
    for name in ("psycopg", "psycopg.pool"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _UrlScrubber) and f.url == url for f in logger.filters):
            logger.addFilter(_UrlScrubber(url))


#: PostgreSQL's spelling of the SQLite column types the schemas use.
_PG_TYPES = ((re.compile(r"\bINTEGER PRIMARY KEY AUTOINCREMENT\b"), "BIGSERIAL PRIMARY KEY"),
             (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"))
#: A key of the advisory lock that serialises schema creation between replicas.
_SCHEMA_LOCK = 0x6E63636C


class _PostgresTx(Tx):
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        cur = self._conn.execute(sql.replace("?", "%s"), tuple(params))
        columns = [c.name for c in cur.description or ()]
        return Rows(cur.rowcount, columns, cur.fetchall() if columns else [])


class PostgresDatabase(Database):
    """A PostgreSQL server through a small psycopg pool (connections checked before use,
    replaced when broken; a transaction waits at most `wait_s` for one). Unreachable at
    start: a StateError in one line."""

    def __init__(self, url: str, max_connections: int = 8, connect_timeout_s: int = 10,
                 wait_s: float = 10.0) -> None:
        import psycopg
        from psycopg_pool import ConnectionPool

        self._url = url
        self.errors = (psycopg.Error,)
        extra: dict[str, Any] = ({} if "connect_timeout" in url
                                 else {"connect_timeout": connect_timeout_s})
        try:  # once by hand: psycopg's own message says why (refused, auth, no database)
            psycopg.connect(url, **extra).close()
        except Exception as exc:  # noqa: BLE001 - a malformed URL raises more than Error
            raise self._unreachable(exc) from None
        _scrub_driver_logs(url)
        self._pool = ConnectionPool(url, min_size=1, max_size=max_connections, kwargs=extra,
                                    check=ConnectionPool.check_connection, open=False,
                                    name="ncclbot-state", timeout=wait_s)
        try:
            self._pool.open(wait=True, timeout=connect_timeout_s * 2)
        except Exception as exc:  # noqa: BLE001 - PoolTimeout and the like, in one line
            self._pool.close()
            raise self._unreachable(exc) from None

    def _unreachable(self, exc: Exception) -> StateError:
        return StateError(f"cannot reach the state database {self.describe()}: "
                          f"{self.reason(exc)}",
                          hint="Check NCCLBOT_DATABASE_URL (postgresql://USER:PASSWORD@HOST:"
                          "PORT/DB) and that the server accepts connections from here.")

    def reason(self, exc: Exception) -> str:
        """The first line of a psycopg error, without the password should it be quoted
        (libpq quotes a malformed URL whole)."""
        return scrub_url_secrets(super().reason(exc), self._url)

    @contextmanager
    def tx(self) -> Iterator[Tx]:
        with self._pool.connection() as conn:  # commits on success, rolls back on error
            yield _PostgresTx(conn)

    def create(self, schema: str) -> None:
        with self.tx() as tx:
            tx.execute(f"SELECT pg_advisory_xact_lock({_SCHEMA_LOCK})")
            for stmt in statements(schema):
                for pattern, spelling in _PG_TYPES:
                    stmt = pattern.sub(spelling, stmt)
                tx.execute(stmt)

    def close(self) -> None:
        self._pool.close()

    def describe(self) -> str:
        return f"PostgreSQL {redact_url(self._url)}"


def open_database(settings: Settings) -> Database:
    """PostgreSQL when `database_url` is set, else the SQLite file `state_db`."""
    if settings.database_url is not None:
        db: Database = PostgresDatabase(settings.database_url.get_secret_value())
    else:
        db = SqliteDatabase(settings.state_db)
    log.info("state database: %s", db.describe())
    return db

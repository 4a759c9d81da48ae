"""The local memory as an answer sees it: one `MemoryStore` per state database per process,
and the nearest-incident index with the team's incidents, current on every request.

Each answer reads the memory's change counter (one small query); the small local index is
rebuilt from the stored salient lines only when the counter moved, so an incident stored
or forgotten by any replica counts from the next answer on, without a restart and without
touching the bundled index. A state database that fails is logged and the bundled index
answers alone.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.diagnosis.nearest import (
    IncidentIndex,
    LocalIndex,
    NeighbourIndex,
    WithLocal,
    local_doc,
)
from bot.memory.store import MemoryStore
from bot.state.db import Database, SqliteDatabase, open_database

if TYPE_CHECKING:
    from bot.config import Settings

log = logging.getLogger(__name__)

_lock = threading.Lock()
_stores: dict[str, MemoryStore] = {}


@dataclass
class _Built:
    version: int
    base: IncidentIndex
    local: LocalIndex | None
    #: each indexed incident's last change, by id
    stamps: dict[str, float]

    @property
    def index(self) -> NeighbourIndex:
        if self.local is None or self.local.size == 0:
            return self.base
        return WithLocal(self.base, self.local)


#: Past this share of documents added or removed since its build, the local index is built
#: again (its weights drift from the corpus's as it grows).
REBUILD_AT = 0.2


_built: dict[str, _Built] = {}
_changing = threading.Lock()


def _key(settings: Settings) -> str:
    if settings.database_url is not None:
        return settings.database_url.get_secret_value()
    return str(settings.state_db.resolve())


def attach(settings: Settings, db: Database) -> MemoryStore:
    """The memory over a database the caller has opened already (the Slack app's)."""
    with _lock:
        key = _key(settings)
        store = _stores.get(key)
        if store is None or (store.db is not db and _closed(store)):
            store = _stores[key] = MemoryStore(db)
        return store


def _closed(store: MemoryStore) -> bool:
    try:
        store.version()
        return False
    except Exception:  # noqa: BLE001 - any failure: replace it
        return True


def memory(settings: Settings, create: bool = False) -> MemoryStore | None:
    """This process's memory for the settings' database; None when it is a SQLite file
    that does not exist yet and `create` is False (nothing was ever stored)."""
    key = _key(settings)
    with _lock:
        store = _stores.get(key)
        if store is not None:
            return store
        if settings.database_url is None and not settings.state_db.exists() and not create:
            return None
        db = (open_database(settings) if settings.database_url is not None
              else SqliteDatabase(settings.state_db))
        store = _stores[key] = MemoryStore(db)
        return store


def forget_stores() -> None:
    """Drop this process's stores and indexes (tests, after closing databases)."""
    with _lock:
        _stores.clear()
        _built.clear()


def version(settings: Settings | None) -> int | None:
    """The memory's change counter (None without a memory)."""
    if settings is None:
        return None
    try:
        store = memory(settings)
        return store.version() if store is not None else None
    except Exception as exc:  # noqa: BLE001 - the bundled knowledge still answers
        log.warning("local incidents unavailable: %s", str(exc).splitlines()[0] if str(exc)
                    else type(exc).__name__)
        return None


def index_for(settings: Settings | None, base: IncidentIndex) -> NeighbourIndex:
    """The bundled index, with the team's local incidents when there are any: as they are
    now in the database, by one small read when nothing changed, by reading only what
    changed when something did."""
    if settings is None:
        return base
    try:
        store = memory(settings)
        if store is None:
            return base
        key = _key(settings)
        v = store.version()
        built = _built.get(key)
        if built is not None and built.base is base and built.version == v:
            return built.index
        with _changing:  # one thread brings it up to date; the others then find it so
            built = _built.get(key)
            v = store.version()
            if built is not None and built.base is base and (
                    built.version == v or _update(store, built, v)):
                return built.index
            built = _built[key] = _build(store, base)
            return built.index
    except Exception as exc:  # noqa: BLE001 - the bundled knowledge still answers
        log.warning("local incidents unavailable: %s", str(exc).splitlines()[0] if str(exc)
                    else type(exc).__name__)
        return base


def _build(store: MemoryStore, base: IncidentIndex) -> _Built:
    v, rows = store.rows()
    local = LocalIndex([local_doc(r.incident, r.lines) for r in rows], base) if rows else None
    return _Built(v, base, local, store.stamps())


def _update(store: MemoryStore, built: _Built, version_now: int) -> bool:
    """Bring `built` up to the database by what changed; False when a build is due."""
    stamps = store.stamps()
    changed = [i for i, t in stamps.items() if built.stamps.get(i) != t]
    gone = [i for i in built.stamps if i not in stamps or i in changed]
    local = built.local
    if local is None or (local.added + len(local.dead) + len(changed) + len(gone)
                         > REBUILD_AT * max(1, len(stamps))):
        return False
    rows = store.rows_for(changed)
    local.remove(f"local:{i}" for i in gone)
    local.add([local_doc(r.incident, r.lines) for r in rows])
    built.stamps, built.version = stamps, version_now
    return True

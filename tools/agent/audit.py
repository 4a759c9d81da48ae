"""The audit log: one JSON line per request (who, what, decision, duration, outcome)."""

from __future__ import annotations

import json
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO


class AuditLog:
    """Appends JSON lines to a file (or stderr when no path); thread-safe, flushed per line.
    Past `max_bytes` the file is rotated (`audit.log` -> `audit.log.1` ...; `backups` kept),
    so a flood of requests cannot fill the disk."""

    def __init__(self, path: Path | None, max_bytes: int = 50 * 2**20, backups: int = 5) -> None:
        self.path = path
        self.max_bytes, self.backups = max_bytes, backups
        self._lock = threading.Lock()
        self._fh: TextIO | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - held for the process

    def write(self, **record: object) -> None:
        stamped = {"time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                   **record}
        line = json.dumps(stamped, ensure_ascii=False, default=str, sort_keys=False) + "\n"
        with self._lock:
            if self._fh is not None and self.path is not None and \
                    self._fh.tell() + len(line) > self.max_bytes:
                self._rotate()
            fh = self._fh or sys.stderr
            fh.write(line)
            fh.flush()

    def _rotate(self) -> None:
        assert self._fh is not None and self.path is not None
        self._fh.close()
        for i in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{i}")
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{i + 1}"))
        self.path.replace(self.path.with_name(f"{self.path.name}.1"))
        self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - held

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

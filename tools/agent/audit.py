"""The audit log: one JSON line per request (who, what, decision, duration, outcome)."""

from __future__ import annotations

import json
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO


class AuditLog:
    """Appends JSON lines to a file (or stderr when no path); thread-safe, flushed per line."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._fh: TextIO | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - held for the process

    def write(self, **record: Any) -> None:
        record = {"time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                  **record}
        line = json.dumps(record, ensure_ascii=False, default=str, sort_keys=False) + "\n"
        with self._lock:
            fh = self._fh or sys.stderr
            fh.write(line)
            fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

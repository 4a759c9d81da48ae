"""Downloading attached logs from Slack: streaming, size-capped, hashed, content-addressed."""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.logs.sources import looks_binary

LOG_SUFFIXES = (".log", ".txt", ".gz", ".zip", ".out", ".err")
CHUNK = 1 << 20


@dataclass
class Download:
    """A downloaded log (path is content-addressed: <dir>/<sha256>)."""

    name: str
    path: Path
    sha256: str
    size: int


@dataclass
class Rejected:
    name: str
    reason: str


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def safe_name(name: str) -> str:
    """A file name without directories or odd characters (keeps the extension)."""
    base = re.sub(r"[^\w.+-]", "_", Path(name.replace("\\", "/")).name).lstrip(".")
    return base[:120] or "log.txt"


def precheck(file: dict[str, Any], max_bytes: int) -> str | None:
    """Why a Slack file object is not worth downloading, or None."""
    name = file.get("name") or file.get("title") or file.get("id", "file")
    size = int(file.get("size") or 0)
    if file.get("mode") in ("tombstone", "hidden_by_limit") or file.get("is_external"):
        return "is not available to the bot (deleted, external or hidden)"
    lower = name.lower()
    is_text = file.get("filetype") in ("text", "log") or str(
        file.get("mimetype", "")).startswith("text/")
    if not lower.endswith(LOG_SUFFIXES) and not is_text:
        return "is not a log file (accepted: .log .txt .gz .zip)"
    if size > max_bytes:
        return f"is {human(size)}, over the {human(max_bytes)} limit; attach a .gz or an excerpt"
    return None


def download(url: str, token: str, name: str, dest_dir: Path, max_bytes: int,
             on_bytes: Callable[[int], None] | None = None, timeout: float = 60.0
             ) -> Download | Rejected:
    """Stream one private file to disk with the bot token; reject binary or oversized files."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    digest = hashlib.sha256()
    size = 0
    fd, tmp = tempfile.mkstemp(dir=dest_dir, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(req, timeout=timeout) as resp:
            ctype = resp.headers.get("Content-Type", "")
            if ctype.startswith("text/html"):
                return Rejected(name, "could not be downloaded (Slack answered with a login page;"
                                " the bot needs the files:read scope)")
            first = True
            while chunk := resp.read(CHUNK):
                if first:
                    first = False
                    if not chunk.startswith((b"\x1f\x8b", b"PK\x03\x04")) and looks_binary(chunk):
                        return Rejected(name, "looks like a binary file, not a text log")
                size += len(chunk)
                if size > max_bytes:
                    return Rejected(name, f"is over the {human(max_bytes)} limit; attach a .gz")
                digest.update(chunk)
                out.write(chunk)
                if on_bytes:
                    on_bytes(len(chunk))
        if size == 0:
            return Rejected(name, "is empty")
        sha = digest.hexdigest()
        final = dest_dir / sha / safe_name(name)
        final.parent.mkdir(exist_ok=True)
        Path(tmp).replace(final)
        tmp = ""
        return Download(name, final, sha, size)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        return Rejected(name, f"could not be downloaded ({exc})")
    finally:
        if tmp:
            Path(tmp).unlink(missing_ok=True)

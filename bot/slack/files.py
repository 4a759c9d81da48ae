"""Downloading attached logs from Slack: streaming, size-capped, hashed, content-addressed."""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from bot.logs.flight_recorder import looks_like_dump
from bot.logs.sources import looks_binary
from tools.units import format_size

if TYPE_CHECKING:
    from bot.slack.payloads import SlackFile

LOG_SUFFIXES = (".log", ".txt", ".gz", ".zip", ".out", ".err", ".pkl", ".pickle", ".json")
#: Flight Recorder dumps as torch names them (`TORCH_FR_DUMP_TEMP_FILE` + rank).
DUMP_NAME = re.compile(r"(?:fr|nccl)_trace|trace_rank|flight_?recorder", re.IGNORECASE)
CHUNK = 1 << 20


@dataclass
class Download:
    """A downloaded log. The path is addressed by the file's bytes (<dir>/<sha256>/<name>);
    `fingerprint` is of its content (see `Fingerprint`), what duplicates are found by."""

    name: str
    path: Path
    sha256: str
    size: int
    fingerprint: str = ""


class Fingerprint:
    """The content of a log, whatever its packaging: the bytes of a plain file, the
    decompressed bytes of a .gz (so a log and its .gz match; gzip headers carry a
    timestamp, so compressing the same log twice gives other bytes), and for a .zip the
    CRC-32 and size of every member, from its central directory (names left out). Fed
    chunk by chunk while downloading."""

    #: Stop hashing the decompressed stream past this many bytes per compressed byte (a
    #: gzip bomb); the raw bytes then stand for the content.
    MAX_RATIO = 200

    def __init__(self) -> None:
        self.raw = hashlib.sha256()
        self._plain = hashlib.sha256()
        self._gz: zlib._Decompress | None = None
        self._gz_ok = True
        self._zip = False
        self._raw_n = self._out_n = 0

    def update(self, chunk: bytes) -> None:
        if self._raw_n == 0:
            self._zip = chunk.startswith(b"PK\x03\x04")
            if chunk.startswith(b"\x1f\x8b"):
                self._gz = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.raw.update(chunk)
        self._raw_n += len(chunk)
        if self._gz is not None and self._gz_ok:
            self._gunzip(chunk)

    def _gunzip(self, data: bytes) -> None:
        gz = self._gz
        try:
            while gz is not None and data and self._gz_ok:
                out = gz.decompress(data, CHUNK)
                self._out_n += len(out)
                self._plain.update(out)
                if self._out_n > self.MAX_RATIO * max(self._raw_n, CHUNK):
                    self._gz_ok = False
                if gz.eof:  # the next gzip member, if any
                    data = gz.unused_data
                    gz = self._gz = zlib.decompressobj(16 + zlib.MAX_WBITS)
                else:
                    data = gz.unconsumed_tail
        except zlib.error:
            self._gz_ok = False

    def content(self, path: Path) -> str:
        """The content fingerprint, once every chunk is in (`path`: the file on disk)."""
        if self._gz is not None and self._gz_ok:
            return self._plain.hexdigest()  # same as the plain log's
        if not self._zip:
            return self.raw.hexdigest()
        try:
            with zipfile.ZipFile(path) as archive:
                members = sorted((i.CRC, i.file_size) for i in archive.infolist()
                                 if not i.is_dir())
            return "zip:" + hashlib.sha256(repr(members).encode()).hexdigest()
        except (zipfile.BadZipFile, OSError):
            return self.raw.hexdigest()


@dataclass
class Rejected:
    name: str
    reason: str


human = format_size


def safe_name(name: str) -> str:
    """A file name without directories or odd characters (keeps the extension)."""
    base = re.sub(r"[^\w.+-]", "_", Path(name.replace("\\", "/")).name).lstrip(".")
    return base[:120] or "log.txt"


def precheck(file: SlackFile, max_bytes: int) -> str | None:
    """Why a Slack file object is not worth downloading, or None."""
    size = file.size or 0
    if file.mode in ("tombstone", "hidden_by_limit") or file.is_external:
        return "is not available to the bot (deleted, external or hidden)"
    lower = file.label.lower()
    is_text = file.filetype in ("text", "log") or (file.mimetype or "").startswith("text/")
    if not lower.endswith(LOG_SUFFIXES) and not is_text and not DUMP_NAME.search(lower):
        return ("is not a log file (accepted: .log .txt .gz .zip, and Flight Recorder dumps "
                "such as fr_trace_<rank>)")
    if size > max_bytes:
        return f"is {human(size)}, over the {human(max_bytes)} limit; attach a .gz or an excerpt"
    return None


def file_url_refused(url: str, api_url: str | None = None) -> str | None:
    """Why the bot must not fetch `url` with its token, or None when it may: only https
    URLs on Slack's own hosts (files.slack.com and the like), or the origin of a configured
    Slack API override (a local Slack in tests). The bot token never goes anywhere else."""
    parts = urlsplit(url)
    if api_url:
        own = urlsplit(api_url)
        if (parts.scheme, parts.netloc) == (own.scheme, own.netloc):
            return None
    host = (parts.hostname or "").lower()
    if parts.scheme != "https":
        return "has no https download URL"
    if parts.username or parts.password or not (host == "slack.com"
                                                 or host.endswith(".slack.com")):
        return "is not hosted by Slack (not downloaded)"
    return None


def download(url: str, token: str, name: str, dest_dir: Path, max_bytes: int,
             on_bytes: Callable[[int], None] | None = None, timeout: float = 60.0
             ) -> Download | Rejected:
    """Stream one private file to disk with the bot token; reject binary or oversized files
    (the caller checks the URL with `file_url_refused` first)."""
    if not url.startswith(("https://", "http://")):
        return Rejected(name, "has no downloadable http(s) URL")
    dest_dir.mkdir(parents=True, exist_ok=True)
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    digest = Fingerprint()
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
                    if (not chunk.startswith((b"\x1f\x8b", b"PK\x03\x04"))
                            and not looks_like_dump(chunk, name) and looks_binary(chunk)):
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
        sha = digest.raw.hexdigest()
        final = dest_dir / sha / safe_name(name)
        final.parent.mkdir(exist_ok=True)
        Path(tmp).replace(final)
        tmp = ""
        return Download(name, final, sha, size, digest.content(final))
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        return Rejected(name, f"could not be downloaded ({exc})")
    finally:
        if tmp:
            Path(tmp).unlink(missing_ok=True)

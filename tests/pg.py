"""A throwaway PostgreSQL server for the tests: initdb into a temporary directory, the
server on a free 127.0.0.1 port (its unix socket in the same directory), stopped and
removed afterwards. As root it runs as the `postgres` OS user (PostgreSQL refuses root).
Never touches a cluster of the system's own."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

#: How long the server may take to start on a loaded machine (not a timing assertion).
START_LIMIT_S = 120.0
USER = "ncclbot"


def bindir() -> Path | None:
    """The newest installed PostgreSQL's bin directory (Debian's layout, then PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _as_owner(argv: list[str]) -> list[str]:
    """`argv` run as the `postgres` OS user when we are root."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def postgres_server(bin_dir: Path) -> Iterator[str]:
    """Start a server; yields the URL of its `postgres` database (user `ncclbot`, trust)."""
    root = Path(tempfile.mkdtemp(prefix="ncclbot-pg-"))  # in /tmp: reachable by `postgres`
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        shutil.chown(sock, "postgres", "postgres")
    proc: subprocess.Popen[bytes] | None = None
    try:
        subprocess.run(_as_owner([str(bin_dir / "initdb"), "-D", str(data), "-U", USER,
                                  "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"]),
                       check=True, capture_output=True, timeout=START_LIMIT_S)
        port = _free_port()
        with (root / "server.log").open("wb") as log:
            proc = subprocess.Popen(_as_owner([
                str(bin_dir / "postgres"), "-D", str(data), "-p", str(port), "-h", "127.0.0.1",
                "-k", str(sock), "-c", "fsync=off", "-c", "synchronous_commit=off",
                "-c", "full_page_writes=off", "-c", "max_connections=200"]),
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_LIMIT_S
        while subprocess.run([str(bin_dir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p",
                              str(port), "-U", USER], check=False).returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (root / "server.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the test PostgreSQL did not start:\n{tail}")
            time.sleep(0.2)
        yield f"postgresql://{USER}@127.0.0.1:{port}/postgres"
    finally:
        if proc is not None:
            _stop(proc, data)
        shutil.rmtree(root, ignore_errors=True)


def _stop(proc: subprocess.Popen[bytes], data: Path) -> None:
    """A fast shutdown (SIGINT to the postmaster), then SIGKILL if it lingers."""
    try:
        pid = int((data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pid = proc.pid
    for sig in (signal.SIGINT, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        try:
            proc.wait(timeout=30)
            return
        except subprocess.TimeoutExpired:
            continue


_NUMBER = iter(range(1, 1_000_000))


@contextlib.contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new, empty database on the server for one test; dropped afterwards."""
    import psycopg

    name = f"t{os.getpid()}_{next(_NUMBER)}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield server_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

"""Container health check for the bot image (standard library only).

HTTP mode (`ncclbot serve slack --http --port P`): GET http://127.0.0.1:P/healthz.
Socket Mode (the default): the process keeps a WebSocket to Slack open, so healthy
means PID 1 is alive and the container has at least one ESTABLISHED TCP connection.
Exit 0 when healthy, 1 otherwise.
"""

from __future__ import annotations

import sys
import urllib.request
from pathlib import Path

ESTABLISHED = "01"


def cmdline() -> list[str]:
    try:
        return Path("/proc/1/cmdline").read_bytes().decode("utf-8", "replace").split("\0")
    except OSError:
        return []


def http_port(args: list[str]) -> int | None:
    if "--http" not in args:
        return None
    for i, a in enumerate(args):
        if a == "--port" and i + 1 < len(args):
            return int(args[i + 1])
        if a.startswith("--port="):
            return int(a.split("=", 1)[1])
    return 3000


def has_established() -> bool:
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        if any(len(r.split()) > 3 and r.split()[3] == ESTABLISHED for r in rows):
            return True
    return False


def main() -> int:
    args = cmdline()
    if not args or not args[0]:
        return 1
    port = http_port(args)
    if port is not None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=4) as r:
                return 0 if r.status == 200 else 1
        except OSError:
            return 1
    return 0 if has_established() else 1


if __name__ == "__main__":
    sys.exit(main())

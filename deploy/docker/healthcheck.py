"""Container health check for the bot image (standard library only).

The bot reports its real state on GET /healthz: 200 once the retrieval index is open and
the state database answers, and in Socket Mode also while the websocket to Slack is
connected; 503 otherwise.

HTTP mode (`ncclbot serve slack --http --port P`): GET http://127.0.0.1:P/healthz.
Socket Mode (the default): GET http://127.0.0.1:H/healthz, H from `--health-port`
(default 3000). With `--health-port 0` (no health endpoint) healthy means the container
has at least one ESTABLISHED TCP connection.
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


def option(args: list[str], name: str, default: int) -> int:
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return int(args[i + 1])
        if a.startswith(name + "="):
            return int(a.split("=", 1)[1])
    return default


def http_port(args: list[str]) -> int | None:
    """The port serving /healthz, or None when there is none."""
    if "--http" in args:
        return option(args, "--port", 3000)
    return option(args, "--health-port", 3000) or None


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

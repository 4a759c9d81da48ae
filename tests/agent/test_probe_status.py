"""`/v1/probe/status`: who holds the node and which step (k of N) its probe is in, read
from a real gloo probe that hangs on a known step."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from tests.agent.conftest import serve_inprocess

pytest.importorskip("torch")

PROBE = {"backend": "gloo", "nproc": 2, "collectives": ["all_reduce"], "min_bytes": 1024,
         "max_bytes": 65536, "factor": 8.0, "warmup": 1, "iters": 2,
         "collective_timeout": 4, "timeout": 60}


def test_status_follows_a_running_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCLBOT_PROBE_FAULT", "hang:rank=1:collective=all_reduce:bytes=8192")
    with serve_inprocess(tmp_path, "status", allow_faults=True, gpu_processes=list,
                         force_users=()) as agent:
        with agent.client(user="slack:UBOB") as c:
            assert c.probe_status() == {"running": False, "holder": None, "since": None,
                                        "progress": None}
        done: dict = {}
        runner = threading.Thread(target=lambda: done.update(
            result=agent.client(user="slack:UBOB", timeout=90).run("probe", PROBE)))
        runner.start()
        seen = []
        with agent.client(user="slack:UEVE") as c:
            deadline = time.monotonic() + 120  # generous: a busy machine
            while runner.is_alive() and time.monotonic() < deadline:
                seen.append(c.probe_status())
                time.sleep(0.2)
        runner.join(60)
        assert done["result"].status == "error"  # the hang was detected and bounded
        hung = [s for s in seen if (s.get("progress") or {}).get("step") == 2]
        assert hung, seen
        assert hung[-1]["running"] and hung[-1]["holder"] == "slack:UBOB" and hung[-1]["since"]
        assert hung[-1]["progress"] == {"step": 2, "steps": 3, "collective": "all_reduce",
                                        "bytes": 8192, "ranks": 2}
        with agent.client(user="slack:UEVE") as c:
            assert c.probe_status()["running"] is False
        audit = [json.loads(x) for x in agent.audit_lines()]
        polls = [a for a in audit if a.get("path") == "/v1/probe/status"]
        assert polls and all(a.get("user") == "slack:UEVE" for a in polls[1:])

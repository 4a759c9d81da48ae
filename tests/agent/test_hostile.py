"""Issue 18 on the node agent: idle sockets, floods of unsigned requests, forged hosts."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import httpx

from tests.agent.conftest import LOOPBACK, SECRET, Agent
from tools.agent.audit import AuditLog
from tools.agent.auth import signed_headers


def _post(agent: Agent, path: str, body: dict, target: str | None = None) -> httpx.Response:
    payload = json.dumps(body).encode()
    headers = signed_headers(SECRET.encode(), "POST", target or agent.target, path, payload,
                             "slack:U1")
    return httpx.post(agent.url + path, content=payload, timeout=60,
                      headers={**headers, "Content-Type": "application/json"})


def test_idle_sockets_do_not_lock_out_signed_requests(agent: Agent) -> None:
    port = int(agent.url.rsplit(":", 1)[1])
    idle = [socket.create_connection((LOOPBACK, port), timeout=10) for _ in range(70)]
    try:
        r = _post(agent, "/v1/env", {"import_torch": False})
        assert r.status_code == 200 and r.json()["status"] == "success"
    finally:
        for s in idle:
            s.close()


def test_unsigned_requests_are_audited_bounded_and_claimed_only(agent: Agent) -> None:
    before = len(agent.audit_lines())
    r = httpx.post(agent.url + "/v1/env/" + "x" * 5000, content=b"{}", timeout=30,
                   headers={"X-Ncclbot-User": "slack:CEO" + "!" * 3000})
    assert r.status_code in (401, 404)
    line = json.loads(agent.audit_lines()[before])
    assert line["decision"] == "deny" and line["user"] is None
    assert line["claimed_user"].startswith("slack:CEO") and len(line["claimed_user"]) <= 201
    assert len(line["path"]) <= 201


def test_a_host_with_userinfo_is_not_this_agent(agent: Agent) -> None:
    forged = f"gpu-node-99:8470@{agent.target}"
    r = _post(agent, "/v1/env", {"import_torch": False}, target=forged)
    assert r.status_code == 401


def test_the_audit_log_rotates_by_size(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl", max_bytes=2000, backups=2)
    for i in range(200):
        log.write(user="u", path=f"/v1/env/{i}")
    log.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]
    assert all((tmp_path / f).stat().st_size <= 2000 for f in files)

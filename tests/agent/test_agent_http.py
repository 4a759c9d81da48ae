"""A real agent process on 127.0.0.1: signatures, replay, bounds, hostile input, audit."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.agent.conftest import SECRET, Agent, start_agent, stop_agent
from tools.agent.auth import signed_headers

PROBE = {"backend": "gloo", "nproc": 2, "min_bytes": 1024, "max_bytes": 1024, "iters": 1,
         "warmup": 0, "collectives": ["all_reduce"], "timeout": 60}


def sign(agent: Agent, path: str, payload: bytes, user: str = "slack:U1", *,
         secret: str = SECRET, now: float | None = None) -> dict[str, str]:
    return signed_headers(secret.encode(), "POST", agent.target, path, payload, user, now=now)


def post(agent: Agent, path: str, body: object = None, *, secret: str = SECRET,
         now: float | None = None, headers: dict[str, str] | None = None,
         raw: bytes | None = None) -> httpx.Response:
    payload = raw if raw is not None else json.dumps(body or {}).encode()
    h = headers or sign(agent, path, payload, secret=secret, now=now)
    return httpx.post(agent.url + path, content=payload, timeout=60,
                      headers={**h, "Content-Type": "application/json"})


def test_signed_request_succeeds_and_health_is_public(agent: Agent) -> None:
    assert httpx.get(agent.url + "/health").json() == {"status": "ok"}  # nothing about probes
    r = post(agent, "/v1/env", {"import_torch": False})
    assert r.status_code == 200
    assert r.json()["tool"] == "env" and r.json()["status"] == "success"
    schema = httpx.get(agent.url + "/openapi.json").json()
    assert {"/v1/topo", "/v1/env", "/v1/probe", "/v1/xid", "/health"} <= set(schema["paths"])


def test_unsigned_wrong_stale_and_replayed_requests_get_401(agent: Agent) -> None:
    r = httpx.post(agent.url + "/v1/env", json={})
    assert r.status_code == 401 and "unsigned" in r.json()["detail"]
    assert post(agent, "/v1/env", {}, secret="wrong-secret-0123456789").status_code == 401
    stale = post(agent, "/v1/env", {}, now=time.time() - 400)
    assert stale.status_code == 401 and "stale" in stale.json()["detail"]
    payload = b"{}"
    h = sign(agent, "/v1/env", payload)
    assert post(agent, "/v1/env", headers=h, raw=payload).status_code == 200
    again = post(agent, "/v1/env", headers=h, raw=payload)
    assert again.status_code == 401 and "replayed" in again.json()["detail"]
    tampered = post(agent, "/v1/env", headers={**h, "X-Ncclbot-User": "slack:ADMIN"}, raw=payload)
    assert tampered.status_code == 401
    other_path = post(agent, "/v1/topo", headers=h, raw=payload)
    assert other_path.status_code == 401


HOSTILE = [
    ("/v1/xid", {"file": "../../etc/shadow"}, 422),
    ("/v1/xid", {"file": "/var/log/../../etc/shadow"}, 422),
    ("/v1/xid", {"file": "/etc/passwd"}, 422),
    ("/v1/xid", {"file": "/var/log/kern.log\x00.txt"}, 422),
    ("/v1/topo", {"topo_file": "/etc/shadow"}, 422),
    ("/v1/probe", {**PROBE, "max_bytes": 2**40}, 422),
    ("/v1/probe", {**PROBE, "iters": -1}, 422),
    ("/v1/probe", {**PROBE, "nproc": 0}, 422),
    ("/v1/probe", {**PROBE, "nproc": 10_000}, 422),
    ("/v1/probe", {**PROBE, "timeout": 1e9}, 422),
    ("/v1/probe", {**PROBE, "iters": "lots"}, 422),
    ("/v1/probe", {**PROBE, "min_bytes": "NaN"}, 422),
    ("/v1/probe", {**PROBE, "collectives": ["rm -rf /"]}, 422),
    ("/v1/probe", {**PROBE, "nccl_tests": "/tmp/evil"}, 422),
    ("/v1/probe", {**PROBE, "plot": "/etc/cron.d/x"}, 422),
    ("/v1/probe", {**PROBE, "command": "id"}, 422),
    ("/v1/probe", {**PROBE, "rendezvous": {"master_addr": "1.2.3.4; id", "master_port": 29500,
                                           "node_rank": 0, "nnodes": 2}}, 422),
    ("/v1/probe", {**PROBE, "rendezvous": {"master_addr": "127.0.0.1", "master_port": 22,
                                           "node_rank": 3, "nnodes": 2}}, 422),
    ("/v1/run", {"argv": ["id"]}, 404),
    # each value within its bound, together too big
    ("/v1/probe", {**PROBE, "nproc": 64, "max_bytes": 8 * 2**30}, 422),
    ("/v1/probe", {**PROBE, "backend": "gloo", "nproc": 16, "max_bytes": 2**30}, 422),
    ("/v1/probe", {**PROBE, "min_bytes": 1, "max_bytes": 8 * 2**30, "factor": 1.01}, 422),
    ("/v1/probe", {**PROBE, "max_bytes": 2**30, "min_bytes": 2**20, "iters": 1000,
                   "warmup": 1000, "timeout": 1, "collectives": ["all_reduce", "alltoall"]},
     422),
    # strict types: no bool/str/float coercion to int, no str to bool
    ("/v1/probe", {**PROBE, "iters": True}, 422),
    ("/v1/probe", {**PROBE, "iters": "5"}, 422),
    ("/v1/probe", {**PROBE, "nproc": 2.0}, 422),
    ("/v1/probe", {**PROBE, "force": "yes"}, 422),
    ("/v1/probe", {**PROBE, "force": 1}, 422),
    ("/v1/env", {"import_torch": "false"}, 422),
    ("/v1/probe/check", {"force": "true"}, 422),
    # torchrun's rendezvous is not for remote callers (they send `rendezvous`)
    ("/v1/probe", {**PROBE, "rdzv_endpoint": "10.0.0.1:29400", "nnodes": 2}, 422),
    ("/v1/probe", {**PROBE, "nnodes": 2}, 422),
]


@pytest.mark.parametrize(("path", "body", "code"), HOSTILE,
                         ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(HOSTILE)])
def test_hostile_inputs_are_rejected(agent: Agent, path: str, body: dict, code: int) -> None:
    r = post(agent, path, body)
    assert r.status_code == code, r.text
    if code == 422:
        assert r.json()["detail"].startswith("invalid parameters:")


def test_out_of_bounds_message_is_clear(agent: Agent) -> None:
    r = post(agent, "/v1/probe", {**PROBE, "iters": 5000})
    assert r.status_code == 422
    assert "iters" in r.json()["detail"] and "1000" in r.json()["detail"]
    r = post(agent, "/v1/probe", {**PROBE, "backend": "nccl", "nproc": 64,
                                  "max_bytes": 8 * 2**30})
    assert r.status_code == 422
    assert "nproc 64 x max_bytes 8 GiB = 512 GiB" in r.json()["detail"]
    assert "at most 64 GiB" in r.json()["detail"]


def test_probe_check_is_signed_and_says_ready(agent: Agent) -> None:
    assert httpx.post(agent.url + "/v1/probe/check", json={}).status_code == 401
    r = post(agent, "/v1/probe/check", {})
    assert r.status_code == 200 and r.json() == {"ready": True}
    forced = post(agent, "/v1/probe/check", {"force": True})  # slack:U1 may not force
    assert forced.status_code == 403 and forced.json()["reason"] == "force_not_allowed"


def test_malformed_json_and_oversized_body(agent: Agent) -> None:
    assert post(agent, "/v1/env", raw=b"{not json").status_code == 422
    huge = json.dumps({"topo_text": "x" * (2 * 2**20)}).encode()
    r = post(agent, "/v1/topo", raw=huge)
    assert r.status_code == 413 and "bytes" in r.json()["detail"]
    # over the limit without a Content-Length (chunked) is refused too (signed: an
    # unsigned request is refused before its body is read)
    r = httpx.post(agent.url + "/v1/topo", content=iter([b"x" * 2**20, b"x" * 2**20]),
                   headers=sign(agent, "/v1/topo", b"x" * 2**21))
    assert r.status_code == 413
    r = httpx.post(agent.url + "/v1/topo", content=iter([b"x" * 2**20, b"x" * 2**20]))
    assert r.status_code == 401


def test_concurrent_probe_gets_409_with_holder(agent: Agent) -> None:
    pytest.importorskip("torch")  # the first probe must really run
    first: dict[str, httpx.Response] = {}
    t = threading.Thread(target=lambda: first.setdefault("r", post(agent, "/v1/probe", PROBE)))
    t.start()
    deadline = time.monotonic() + 120  # generous: a busy machine
    while post(agent, "/v1/probe/check", {}).status_code == 200:  # signed: who holds it
        assert time.monotonic() < deadline, "first probe never started"
        time.sleep(0.05)
    h = sign(agent, "/v1/probe", json.dumps(PROBE).encode(), "slack:U2")
    second = post(agent, "/v1/probe", PROBE, headers=h)
    t.join(60)
    assert second.status_code == 409
    body = second.json()
    assert body["holder"] == "slack:U1" and body["since"] and "busy" in body["detail"]
    assert first["r"].status_code == 200 and first["r"].json()["status"] == "success"


def test_every_request_leaves_one_audit_line(tmp_path: Path) -> None:
    # a fresh agent: past 20 refusals per address and 10 s (this module makes many) the
    # rest are summarised (test_door_floods.py), not written one by one
    agent = start_agent(tmp_path)
    try:
        _every_request_leaves_one_audit_line(agent)
    finally:
        stop_agent(agent)


def _every_request_leaves_one_audit_line(agent: Agent) -> None:
    before = len(agent.audit_lines())
    httpx.get(agent.url + "/health")
    post(agent, "/v1/env", {"import_torch": False})
    httpx.post(agent.url + "/v1/env", json={})
    post(agent, "/v1/probe", {**PROBE, "iters": -1})
    post(agent, "/v1/xid", {"file": "/var/log/kern.log"})
    lines = [json.loads(x) for x in agent.audit_lines()[before:]]
    assert len(lines) == 5
    assert [x["status"] for x in lines] == [200, 200, 401, 422, 200]
    assert lines[1]["user"] == "slack:U1" and lines[1]["decision"] == "allow"
    assert lines[1]["outcome"] == "success" and lines[1]["duration_ms"] >= 0
    assert lines[2]["decision"] == "deny" and "unsigned" in lines[2]["reason"]
    assert lines[3]["outcome"] == "rejected" and "iters" in lines[3]["reason"]
    assert lines[4]["tool"] == "xid" and lines[4]["params"] == {"file": "/var/log/kern.log"}

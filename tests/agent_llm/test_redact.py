"""Redaction before the model: secrets always, hosts/IPs/users as stable placeholders."""

from __future__ import annotations

import json

import pytest

from bot.agent.redact import Redactor
from tests.agent_llm.conftest import PLANTED, secret_preamble


@pytest.mark.parametrize("hosts", [False, True])
def test_secrets_always_go(hosts: bool):
    text = secret_preamble() + " ".join([
        f"token {PLANTED['slack']}", PLANTED["github"], PLANTED["openai"],
        "API_KEY=abc123def MY_SESSION_KEY=zzz", '{"password": "p@ss"}'])
    out = Redactor(hosts=hosts).redact(text)
    for value in [*PLANTED.values(), "abc123def", "zzz", "p@ss"]:
        assert value not in out
    assert "NCCL_IB_PKEY=3" in Redactor(hosts=hosts).redact("NCCL_IB_PKEY=3")


def test_hosts_ips_users_become_stable_placeholders_and_come_back():
    r = Redactor(hosts=True)
    text = ("node-a:123:456 [0] NCCL INFO NET/IB : Using mlx5_0 10.0.0.5<0>\n"
            "MASTER_ADDR=gpu-7.cluster.local ssh bob@node-a /home/carol/run.sh fe80::1")
    red = r.redact(text)
    for original in ("node-a", "10.0.0.5", "gpu-7.cluster.local", "bob", "carol", "fe80::1"):
        assert original not in red
    assert red.count("HOST_1") == 2  # node-a, twice, same placeholder
    assert r.redact(red) == red  # idempotent
    assert r.restore(red) == text
    again = Redactor(hosts=True, mapping=r.mapping)  # a thread's mapping, reloaded
    assert again.redact("node-a is slow") == "HOST_1 is slow"


def test_hosts_kept_when_disabled_and_versions_untouched():
    text = "host node-a 10.0.0.5 NCCL version 2.21.5+cuda12.4 torch 2.13.0 at 23:04:07"
    assert Redactor(hosts=False).redact(text) == text
    red = Redactor(hosts=True).redact(text)
    assert "2.21.5+cuda12.4" in red and "2.13.0" in red and "23:04:07" in red


def test_json_payload_stays_json_and_secret_keys_vanish():
    r = Redactor(hosts=True)
    doc = json.dumps({"data": {"env": {"NCCLBOT_AGENT_SECRET": "s3cr3t", "NCCL_DEBUG": "INFO"},
                               "host": "node-b", "line": f"token={PLANTED['hf']}"}})
    out = r.redact_payload(doc)
    data = json.loads(out)
    assert data["data"]["env"] == {"NCCLBOT_AGENT_SECRET": "[REDACTED]", "NCCL_DEBUG": "INFO"}
    assert data["data"]["host"] == "HOST_1" and PLANTED["hf"] not in out

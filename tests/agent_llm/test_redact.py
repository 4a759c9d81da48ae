"""Redaction before the model: secrets always, hosts/IPs/users as stable placeholders."""

from __future__ import annotations

import json

import pytest
from langchain_core.language_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from bot.agent.graph import system_prompt
from bot.agent.providers import Budget, GuardedChatModel
from bot.agent.redact import Redactor
from tests.agent_llm.conftest import PLANTED, QUESTION, secret_preamble


@pytest.mark.parametrize("hosts", [False, True])
def test_secrets_always_go(hosts: bool):
    text = secret_preamble() + " ".join([
        f"token {PLANTED['slack']}", PLANTED["github"], PLANTED["openai"],
        "API_KEY=abc123def MY_SESSION_KEY=zzz", '{"password": "p@ss"}'])
    out = Redactor(hosts=hosts).redact(text)
    for value in [*PLANTED.values(), "abc123def", "zzz", "p@ss"]:
        assert value not in out
    assert "NCCL_IB_PKEY=3" in Redactor(hosts=hosts).redact("NCCL_IB_PKEY=3")


SECRET_FORMATS = [
    ("python train.py --password hunter2hunter2 --lr 3", "hunter2hunter2"),
    ("deepspeed run.py --api-key zzzSECRETzzz", "zzzSECRETzzz"),
    ("mysql -u svc -phunter2 -h db1 prod", "hunter2"),
    ("mysqldump --user=svc -pS3cr3tPw prod > dump.sql", "S3cr3tPw"),
    ("sshpass -p 'letmein99' ssh node", "letmein99"),
    ("wandb: API key 0badc0de0123456789abcdef0123456789abcdef", "0badc0de0123456789abcdef"),
    ("wandb: Appending key for api.wandb.ai: 0badc0de0123456789abcdef0123456789abcdef",
     "0badc0de0123456789abcdef"),
    ("export WANDB_API_KEY=wb0123456789secret", "wb0123456789secret"),
    ("aws: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG"),
    ("AKIAIOSFODNN7EXAMPLE\nwJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "bPxRfiCYEXAMPLEKEY"),
    ("private key: MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7", "MIIEvQIBADAN"),
    ("secret_key = 'kd93jKD93kdk3D9d'", "kd93jKD93kdk3D9d"),
]


@pytest.mark.parametrize(("text", "secret"), SECRET_FORMATS)
@pytest.mark.parametrize("hosts", [False, True])
def test_secret_formats_tools_redact_misses(text: str, secret: str, hosts: bool):
    r = Redactor(hosts=hosts)
    out = r.redact(text)
    assert secret not in out and "[REDACTED]" in out
    assert r.redact(out) == out  # idempotent


def test_counts_and_ordinary_flags_are_not_secrets():
    text = "vllm serve --max-num-batched-tokens 8192 --lr 3e-4 --port 8000 -p 4"
    assert Redactor().redact(text) == text
    assert Redactor().redact_obj({"max_tokens": 512}) == {"max_tokens": 512}


def test_structured_payloads_lose_every_secret():
    r = Redactor(hosts=True)
    data = {"password": 12345678, "tokens": ["tokA1", "tokB2"], "auth": {"user": "bob", "n": 3},
            "argv": ["python", "--api-key", "zzz", "--lr", "3"],
            "cmd": ["mysql", "--password", "pw99"], "gpu-node-9": {"ok": True},
            "hosts": ["sjc-a100-017", "a100-box3"], "SLURM_JOB_USER": "harry"}
    out = r.redact_obj(data)
    assert out["password"] == "[REDACTED]" and out["tokens"] == ["[REDACTED]"] * 2
    assert out["auth"] == {"user": "[REDACTED]", "n": "[REDACTED]"}
    assert out["argv"] == ["python", "--api-key", "[REDACTED]", "--lr", "3"]
    assert out["cmd"][2] == "[REDACTED]"
    text = json.dumps(out)
    for gone in ("12345678", "tokA1", "zzz", "pw99", "gpu-node-9", "sjc-a100-017", "a100-box3",
                 "harry"):
        assert gone not in text
    assert r.restore_obj(out)["hosts"] == ["sjc-a100-017", "a100-box3"]
    assert "gpu-node-9" in r.restore_obj(out)  # keys come back too


CLUSTER_NAMES = [
    ("sjc-a100-017:1234:5678 [0] NCCL INFO Bootstrap : Using eth0", "sjc-a100-017"),
    ("#  Rank  0 Group  0 Pid  12345 on  a100-box3 device  0 [0x07] NVIDIA A100-SXM4-80GB",
     "a100-box3"),
    ("#  Rank  1 Group  0 Pid  12346 on     zeta device  1 [0x0b] NVIDIA H100", "zeta"),
    ("rank 3 on dgx01 and n017 hung", "dgx01"),
    ("rank 3 on dgx01 and n017 hung", "n017"),
    ("MASTER_ADDR=alpha-master torchrun ...", "alpha-master"),
    ("torchrun --master_addr beta9 --master_port 29500", "beta9"),
    ("The client socket has timed out while trying to connect to (node-a, 29500).", "node-a"),
    ("kappa: NCCL INFO x\nkappa: NCCL WARN y\n", "kappa"),
    ("SLURM_JOB_NODELIST=gpu[01-03] srun", "gpu02"),
    ("SLURM_JOB_NODELIST=gpu[01-03] srun", "gpu[01-03]"),
    ("SLURM_JOB_USER=harry srun", "harry"),
    ("python /home/erin/run/train.py", "erin"),
    ("ls /mnt/users/frank/ckpt", "frank"),
    ("hostname: ip-10-0-1-23", "ip-10-0-1-23"),
    ("NET/IB : peer 2001:db8::8a2e:370:7334 down", "2001:db8::8a2e:370:7334"),
    ("Bootstrap : Using ib0:fe80::ba59:9f03:1a:2b3c%ib0<0>", "fe80::ba59:9f03:1a:2b3c%ib0"),
    ("NET/Socket : Using [0]eth0:10.0.0.5<0>", "10.0.0.5"),
]


@pytest.mark.parametrize(("text", "name"), CLUSTER_NAMES)
def test_cluster_hosts_users_and_addresses_are_found(text: str, name: str):
    r = Redactor(hosts=True)
    red = r.redact(text)
    assert name not in red and name in r.mapping.values()
    assert r.restore(red) == text


def test_ordinary_words_stay():
    text = ("all-reduce NCCL 2.21.5+cuda12.4 on A100-SXM4-80GB a100-80gb h100-sxm5 cuda-12.4 "
            "gpt-4 mlx5_0 eth0 ib0 GPU0 rank-3 x86_64 sm90 fp16 bf16 llama-3-70b nccl-tests "
            "torch 2.13.0 top-k a100 H100 at 23:04:07, c10d::ProcessGroupNCCL x[::2] ::1 "
            "Multi-node: put every host in a hostfile; nproc_per_node=G; MASTER_ADDR:MASTER_PORT "
            "both on CUDA device 1000; --master_addr is empty; user: 3")
    r = Redactor(hosts=True)
    assert r.redact(text) == text, r.mapping
    prompt = system_prompt()
    assert Redactor(hosts=True).redact(prompt) == prompt


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


def test_log_file_stems_are_hidden_but_other_dotted_names_are_not_cut():
    r = Redactor(hosts=True)
    r.learn("HOST", ["sjc-a100-017", "node-a"])
    assert r.redact("see sjc-a100-017.log and sjc-a100-017.err") == "see HOST_1.log and HOST_1.err"
    assert r.redact("node-a.cluster.local") != "HOST_2.cluster.local"


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


def test_the_whole_request_is_learned_before_any_message_is_replaced():
    """A name recognisable only in a later message (a tool output) is hidden in the
    question that came before it, in the same request."""
    r = Redactor(hosts=True)
    seen: list[list] = []
    guarded = GuardedChatModel(inner=FakeMessagesListChatModel(responses=[AIMessage("x")]),
                               redactor=r, budget=Budget(10, 100), on_request=seen.append)
    tool_out = json.dumps({"tool": "env", "data": {"hostname": "omega", "argv": ["--token", "t0k"]}})
    messages = [SystemMessage("sys"), HumanMessage("is omega broken? " + QUESTION),
                AIMessage("", tool_calls=[{"name": "node_env", "args": {"node": "omega"},
                                           "id": "c1"}]),
                ToolMessage(tool_out, tool_call_id="c1")]
    out = guarded.redact_messages(messages)
    sent = json.dumps([m.model_dump() for m in out])
    assert "omega" not in sent and "t0k" not in sent and seen == [out]
    assert out[2].tool_calls[0]["args"] == {"node": r.redact("omega")}
    for value in (PLANTED["cli_password"], PLANTED["mysql"], PLANTED["wandb"],
                  PLANTED["aws_secret"], PLANTED["der_key"], "sjc-a100-017", "dgx01", "n017",
                  "2001:db8::8a2e:370:7334", "harry", "/home/erin"):
        assert value not in sent, value

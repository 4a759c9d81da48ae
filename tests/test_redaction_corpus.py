"""The planted-secret corpus: no shape reaches a model request, a Slack message or a node's
output (the same rules at every door). End-to-end through Slack and the model server:
tests/slack/test_redaction_doors.py and tests/agent_llm/test_redaction_doors.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.agent.redact import Redactor
from bot.agent.redact_rules import strip_secrets
from tools.redact import REDACTED, redact_argv, redact_env, redact_text

PLANTED: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent / "fixtures" / "secrets" / "planted.yaml").read_text(encoding="utf-8"))


def fragments(case: dict[str, Any]) -> list[str]:
    """Everything of one planted secret that must vanish."""
    return [case["secret"], *case.get("also", [])]


def leaked(text: str, cases: list[dict[str, Any]] = PLANTED) -> list[str]:
    """The planted fragments found in `text`, as written or JSON-escaped."""
    return [f for c in cases for f in fragments(c)
            if f in text or json.dumps(f)[1:-1] in text]


def test_the_corpus_has_every_shape() -> None:
    assert len(PLANTED) >= 60
    assert len({p["secret"] for p in PLANTED}) == len(PLANTED)
    assert all(f in p["line"] for p in PLANTED for f in fragments(p))


@pytest.mark.parametrize("case", PLANTED, ids=[p["line"][:40] for p in PLANTED])
def test_no_planted_secret_survives(case: dict[str, Any]) -> None:
    for door in (strip_secrets, redact_text, Redactor(hosts=True).redact,
                 Redactor(hosts=False).redact_payload):  # Slack, the node, the model's
        out = door(case["line"])
        assert leaked(out, [case]) == [], door
        assert REDACTED in out
    # the same in a longer text, on a line of its own, and as a value in a JSON payload
    text = f"before\n{case['line']}\nafter"
    assert leaked(strip_secrets(text), [case]) == []
    payload = json.dumps({"tool": "env", "data": {"stdout": case["line"]}})
    assert leaked(Redactor(hosts=True).redact_payload(payload), [case]) == []
    assert leaked(strip_secrets(payload), [case]) == []


def test_redaction_is_idempotent() -> None:
    for case in PLANTED:
        once = strip_secrets(case["line"])
        assert strip_secrets(once) == once


def test_json_is_redacted_as_json() -> None:
    doc = {"env": {"DB_PASSWORD": "correct horse battery staple", "NCCL_DEBUG": "INFO",
                   "ports": [1, 2]}, "private_key_id": "9f8e7d6c", "token_count": 7,
           "nested": {"auth": {"user": "u", "retries": 3}}, "enabled": True}
    out = json.loads(redact_text(json.dumps(doc)))
    assert out == {"env": {"DB_PASSWORD": REDACTED, "NCCL_DEBUG": "INFO", "ports": [1, 2]},
                   "private_key_id": REDACTED, "token_count": 7,
                   "nested": {"auth": {"user": REDACTED, "retries": REDACTED}},
                   "enabled": True}
    # a pretty-printed document stays pretty; one with nothing secret is left as it was
    assert "\n" in redact_text(json.dumps(doc, indent=2))
    plain = '{"a": 1,   "b": "NCCL_DEBUG=INFO"}'
    assert redact_text(plain) == plain
    # the quoted value inside a JSON string loses all four words
    line = r'{"cmd": "DB_PASSWORD=\"correct horse battery staple\" python train.py"}'
    out_line = redact_text(line)
    assert json.loads(out_line)["cmd"] == f'DB_PASSWORD="{REDACTED}" python train.py'
    for word in ("correct", "horse", "battery", "staple"):
        assert word not in out_line
    # not valid JSON (cut off): the text rules still take the whole quoted value
    cut = r'..."cmd": "DB_PASSWORD=\"correct horse battery staple\" python'
    assert not any(w in redact_text(cut) for w in ("horse", "battery", "staple"))
    # a JSON object inside a log line is redacted as JSON, the rest of the line kept
    embedded = 'step 3 config={"api": {"client_secret": "s e c r e t"}, "lr": 0.1} done'
    assert redact_text(embedded) == (f'step 3 config={{"api": {{"client_secret": "{REDACTED}"}}, '
                                     f'"lr": 0.1}} done')


def test_nccl_echo_of_a_secret_parameter_only() -> None:
    secret = "gpu1:1:1 [0] NCCL INFO NCCL_IB_PASSWORD set by environment to a b c."
    assert redact_text(secret) == (f"gpu1:1:1 [0] NCCL INFO NCCL_IB_PASSWORD set by "
                                   f"environment to {REDACTED}.")
    plain = "gpu1:1:1 [0] NCCL INFO NCCL_SHM_DISABLE set by environment to 1."
    assert redact_text(plain) == plain


def test_command_lines_of_a_hang_sample() -> None:
    line = ("python train.py --password pw1 --password=pw2 --secret pw3 --wandb-key pw4 "
            "--api-key pw5 --token pw6 -p 8 --port 29500 --max-tokens 512 --tokenizer gpt2 "
            "--nproc-per-node 8 --master-addr node1")
    out = redact_text(line)
    assert not any(f"pw{i}" in out for i in range(1, 7))
    for kept in ("-p 8", "--port 29500", "--max-tokens 512", "--tokenizer gpt2",
                 "--nproc-per-node 8", "--master-addr node1"):
        assert kept in out
    # an argv list keeps a value with spaces whole
    assert redact_argv(["train.py", "--db-password", "a b c", "--lr", "3"]) == [
        "train.py", "--db-password", REDACTED, "--lr", "3"]


def test_environment_names() -> None:
    env = {"NCCL_IB_PWD": "x1", "MYSQL_PWD": "x2", "LDAP_PASSWD": "x3", "A_SECRET": "x4",
           "B_TOKEN": "x5", "C_KEY": "x6", "PWD": "/home/u", "OLDPWD": "/tmp",
           "NCCL_IB_PKEY": "0", "KEYBOARD": "us"}
    out = redact_env(env)
    assert [k for k, v in out.items() if v == REDACTED] == list(env)[:6]
    assert out["PWD"] == "/home/u" and out["NCCL_IB_PKEY"] == "0"


def test_everyday_log_lines_are_left_alone() -> None:
    for line in (
        "/usr/local/lib/python3.10/dist-packages/torch/distributed/c10d_logger.py",
        "NCCL_IB_HCA=mlx5_0,mlx5_1 NCCL_SOCKET_IFNAME=eth0 NCCL_IB_PKEY=0",
        "[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=4711, OpType=ALLREDUCE, NumelIn=262144, Timeout(ms)=600000)",
        "max_tokens=2048 num_tokens=512 tokenizer=Qwen/Qwen2-7B",
        "sha256:3f5a9c0d2e7b1a4c6d8e0f2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c",
        "PWD=/home/alice/run OLDPWD=/home/alice",
        "gpu1:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
        '{"step": 10, "loss": 2.31, "lr": [0.001, 0.002], "tokens": 4096}',
        "torchrun --nnodes 2 --nproc-per-node 8 -p 4 train.py --batch-size 8",
    ):
        assert strip_secrets(line) == line


def test_secrets_inside_quoted_values_of_other_names() -> None:
    """A quoted value after a name that is not secret is searched too (a Slack report's
    JSON, a launcher's `--env "TOKEN=x"`)."""
    for line in ('"text": "private_key_id: 0a1b2c3d4e5f"',
                 'cmd="export DB_PASSWORD=0a1b2c3d4e5f && run"',
                 'srun --export "HF_HOME=/x,RUN_TOKEN=0a1b2c3d4e5f" python'):
        assert "0a1b2c3d4e5f" not in redact_text(line), line


def test_a_json_block_inside_markdown_is_redacted_as_json() -> None:
    doc = json.dumps({"notes": ["see", "NCCL_IB_PWD=ibPw9 set"],
                      "env": {"client_secret": "multi word secret"}}, indent=2)
    report = f"# Report\n\n```json\n{doc}\n```\ntail"
    out = redact_text(report)
    assert "ibPw9" not in out and "multi word secret" not in out and "word" not in out
    assert out.startswith("# Report\n\n```json\n{") and out.endswith("\n```\ntail")
    block = out.split("```json\n", 1)[1].rsplit("\n```", 1)[0]
    assert json.loads(block)["env"]["client_secret"] == REDACTED


def test_every_door_uses_the_same_rules() -> None:
    """Slack's door, the model's and the node's (the hang sample's command lines go
    through `tools.redact.redact_text`) give the same result on every planted line."""
    from tools.hang import collect

    assert collect.redact_text is redact_text
    for case in PLANTED:
        assert strip_secrets(case["line"]) == redact_text(case["line"])

"""Secrets never leave the node: names that look secret, values that look like credentials."""

from __future__ import annotations

import pytest

from tools.redact import REDACTED, is_secret_name, redact_env, redact_text

SECRETS = [
    "hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6",
    "sk-" + "proj-Abcdefghijklmnopqrstuvwx0123",
    "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKl",
    "AKIA" + "IOSFODNN7EXAMPLE",
    "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789",
    "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "glpat-" + "xxxxxxxxxxxxxxxxxxxx",
]


@pytest.mark.parametrize("secret", SECRETS)
def test_credential_shaped_values_are_redacted(secret: str) -> None:
    out = redact_text(f"export SOMETHING={secret} # trailing")
    assert secret not in out and REDACTED in out
    assert redact_env({"NOT_SECRET_NAME": secret})["NOT_SECRET_NAME"] == REDACTED


@pytest.mark.parametrize("name", ["HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY",
                                  "DB_PASSWORD", "MY_PASSWD", "GOOGLE_CREDENTIALS",
                                  "SSH_AUTH_SOCK", "SESSION_COOKIE", "OPENAI_KEY",
                                  "NCCLBOT_AGENT_SECRET", "SLACK_SIGNING_SECRET"])
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)
    assert redact_env({name: "plain-value"})[name] == REDACTED


@pytest.mark.parametrize("name", ["NCCL_IB_PKEY", "NCCL_SOCKET_IFNAME", "PWD", "MASTER_ADDR",
                                  "KEYBOARD_LAYOUT", "CUDA_VISIBLE_DEVICES"])
def test_ordinary_names_are_kept(name: str) -> None:
    assert not is_secret_name(name)
    assert redact_env({name: "0x8001"})[name] == "0x8001"


def test_text_patterns() -> None:
    assert redact_text("https://bob:s3cr3t@example.com/x") == f"https://bob:{REDACTED}@example.com/x"
    assert redact_text("Authorization: Bearer abcdefghijklmnop123") == (
        f"Authorization: Bearer {REDACTED}")
    assert redact_text("password=hunter2 next") == f"password={REDACTED} next"
    # JSON stays JSON: the value is redacted, the string stays a string
    assert redact_text('{"api_key": "abc"}') == f'{{"api_key": "{REDACTED}"}}'
    key = "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----"
    assert redact_text(key) == REDACTED
    plain = "NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=eth0 rank 3 timed out after 600000 ms"
    assert redact_text(plain) == plain


def test_empty_secret_stays_empty() -> None:
    assert redact_env({"HF_TOKEN": ""}) == {"HF_TOKEN": ""}

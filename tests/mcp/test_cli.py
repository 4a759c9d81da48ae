"""`ncclbot serve mcp` without the `mcp` extra, and the pure parts of the server's policy."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bot.config import Settings
from bot.errors import ConfigError
from bot.mcp.auth import bearer_ok, check_http_token, is_loopback
from bot.mcp.backend import PolicyError, check_probe_identity, safe_name
from tests.mcp.conftest import ROOT, ncclbot_argv, server_env


def test_without_the_extra_one_line_says_what_to_install(tmp_path: Path) -> None:
    # an `mcp` that cannot be imported, as on a machine without the extra
    (tmp_path / "mcp").mkdir()
    (tmp_path / "mcp" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'mcp'\", name='mcp')\n")
    env = server_env(tmp_path / "data")
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    proc = subprocess.run([*ncclbot_argv(), "serve", "mcp"], env=env, cwd=ROOT, text=True,
                          capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 3
    assert proc.stderr.strip().splitlines() == [
        "error: `ncclbot serve mcp` needs the optional package 'mcp': pip install "
        "'ncclbot[mcp]' (add 'ncclbot[retrieval]' for ask and search_knowledge)"]


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("0.0.0.0", False), ("::", False), ("10.0.0.5", False),
    ("gpu-node-1", False)])
def test_loopback_binds(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_token_rules() -> None:
    assert check_http_token("127.0.0.1", None) is None
    assert check_http_token("127.0.0.1", "  ") is None
    token = "x" * 32
    assert check_http_token("0.0.0.0", token) == token
    with pytest.raises(ConfigError, match="needs a bearer token"):
        check_http_token("0.0.0.0", None)
    with pytest.raises(ConfigError, match="too short"):
        check_http_token("127.0.0.1", "short")
    assert bearer_ok(f"Bearer {token}", token) and bearer_ok(f"bearer  {token} ", token)
    assert not bearer_ok(None, token) and not bearer_ok(f"Basic {token}", token)
    assert not bearer_ok(f"Bearer {token}x", token) and not bearer_ok("Bearer ", token)


def test_probe_identity_is_on_call() -> None:
    settings = Settings(oncall_users=["alice", "U123"])
    assert check_probe_identity(settings, "alice") == "alice"
    with pytest.raises(PolicyError, match="needs an on-call identity"):
        check_probe_identity(settings, None)
    with pytest.raises(PolicyError, match="not on call"):
        check_probe_identity(settings, "mallory")


def test_pasted_log_names_stay_inside_their_folder() -> None:
    taken: set[str] = set()
    assert safe_name("../../etc/passwd", taken) == "passwd"
    assert safe_name("C:\\logs\\rank 3.log", taken) == "rank_3.log"
    assert safe_name("passwd", taken) == "2-passwd"
    assert safe_name("..", taken) == "pasted.log"
    assert safe_name("nccl_trace_rank_3", taken) == "nccl_trace_rank_3"


def test_ask_without_retrieval_says_what_to_install(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    from bot.mcp import backend

    monkeypatch.setattr(backend, "RETRIEVAL_MODULES", ("numpy", "ncclbot_not_installed_mod"))
    got = backend.Backend(Settings(data_dir=tmp_path), backend.Policy(user="mcp:t")).ask(
        "why did rank 5 die?")
    assert got.verdict == "error"
    assert "ncclbot_not_installed_mod is not installed" in got.text
    assert "pip install 'ncclbot[retrieval]'" in got.text

"""deploy/systemd/ncclbot-agent.service: dedicated user and the hardening directives."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.deploy.conftest import DEPLOY

UNIT = DEPLOY / "systemd" / "ncclbot-agent.service"


def directives() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    text = UNIT.read_text(encoding="utf-8").replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        out.setdefault(key.strip(), []).append(value.strip())
    return out


def test_unit_runs_as_dedicated_user():
    d = directives()
    assert d["User"] == ["ncclbot"]
    assert "serve agent" in d["ExecStart"][0]
    assert "--audit-log" in d["ExecStart"][0]
    assert d["EnvironmentFile"][0].startswith("/etc/ncclbot/")


def test_unit_hardening():
    d = directives()
    assert d["NoNewPrivileges"] == ["yes"]
    assert d["ProtectSystem"] == ["strict"]
    assert d["ProtectHome"] == ["yes"]
    assert d["PrivateTmp"] == ["yes"]
    assert d["LimitMEMLOCK"] == ["infinity"]
    assert "/var/log/ncclbot" in d["ReadWritePaths"][0].split()
    caps = d["CapabilityBoundingSet"][-1].split()
    assert set(caps) <= {"CAP_IPC_LOCK"}
    families = set(d["RestrictAddressFamilies"][0].split())
    assert families <= {"AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"}


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_analyze_verify():
    out = subprocess.run(["systemd-analyze", "verify", str(UNIT)], capture_output=True,
                         text=True, timeout=20, check=False)
    # The venv is not installed here; anything else is a real problem with the unit.
    problems = [ln for ln in (out.stdout + out.stderr).splitlines()
                if UNIT.name in ln and "is not executable" not in ln]
    assert not problems, "\n".join(problems)

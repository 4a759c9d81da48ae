"""Agents as real processes (or in-process uvicorn) on 127.0.0.1 only."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.nodes.client import NodeClient
from bot.nodes.inventory import Node

ROOT = Path(__file__).resolve().parents[2]
SECRET = "test-secret-0123456789abcdef"
LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


@dataclass
class Agent:
    name: str
    url: str
    audit: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def node(self) -> Node:
        return Node(name=self.name, url=self.url)

    @property
    def target(self) -> str:
        """The Host header a client sends to this agent (signed with every request)."""
        return self.url.split("://", 1)[1]

    def client(self, secret: str = SECRET, user: str = "slack:U1", **kw: Any) -> NodeClient:
        return NodeClient(self.node, secret.encode(), user, **kw)

    def audit_lines(self) -> list[str]:
        return self.audit.read_text().splitlines() if self.audit.exists() else []


def wait_healthy(url: str, proc: subprocess.Popen[bytes] | None = None, limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"agent exited with {proc.returncode}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"agent at {url} did not come up")


def spawn_agent(tmp: Path, name: str = "node-a", env: dict[str, str] | None = None,
                oncall: tuple[str, ...] = ("slack:ONCALL",)) -> Agent:
    """`ncclbot serve agent` as a subprocess on a free loopback port (not yet waited for);
    `oncall`: the users it lets force probes and read a hanging job's stacks."""
    port = free_port()
    audit = tmp / f"{name}-audit.jsonl"
    argv = [sys.executable, "-m", "bot.cli.main", "serve", "agent", "--host", LOOPBACK,
            "--port", str(port), "--audit-log", str(audit),
            *(a for user in oncall for a in ("--force-user", user))]
    if os.geteuid() == 0:
        argv.append("--allow-root")
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("NCCLBOT_")}
    full_env.update(NCCLBOT_AGENT_SECRET=SECRET, GLOO_SOCKET_IFNAME="lo",
                    NCCLBOT_DATA_DIR=str(tmp / "data"), **(env or {}))
    log = open(tmp / f"{name}.log", "wb")  # noqa: SIM115 - lives as long as the agent
    proc = subprocess.Popen(argv, cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT)
    return Agent(name, f"http://{LOOPBACK}:{port}", audit, proc)


def start_agent(tmp: Path, name: str = "node-a", env: dict[str, str] | None = None,
                oncall: tuple[str, ...] = ("slack:ONCALL",)) -> Agent:
    agent = spawn_agent(tmp, name, env, oncall)
    wait_healthy(agent.url, agent.proc)
    return agent


def start_agents(tmp: Path, envs: dict[str, dict[str, str]]) -> dict[str, Agent]:
    """Several agents started at once (name -> extra env); stopped again if one fails."""
    agents = {name: spawn_agent(tmp, name, env) for name, env in envs.items()}
    try:
        for a in agents.values():
            wait_healthy(a.url, a.proc)
    except BaseException:
        for a in agents.values():
            stop_agent(a)
        raise
    return agents


def use_inventory(tmp: Path, agents: dict[str, Agent], monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the bot (NCCLBOT_NODES_FILE, secret) at `agents` by name."""
    inv = tmp / "nodes.yaml"
    inv.write_text("nodes:\n" + "".join(f'  {n}: {{url: "{a.url}"}}\n'
                                        for n, a in agents.items()))
    monkeypatch.setenv("NCCLBOT_NODES_FILE", str(inv))
    monkeypatch.setenv("NCCLBOT_AGENT_SECRET", SECRET)
    return inv


def faulty(spec: str) -> dict[str, str]:
    """Agent env injecting the test-only probe fault `spec` (allowed explicitly)."""
    return {"NCCLBOT_PROBE_FAULT": spec, "NCCLBOT_AGENT_ALLOW_FAULTS": "1"}


def stop_agent(agent: Agent) -> None:
    if agent.proc is not None and agent.proc.poll() is None:
        agent.proc.terminate()
        try:
            agent.proc.wait(10)
        except subprocess.TimeoutExpired:
            agent.proc.kill()
            agent.proc.wait()


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    a = start_agent(tmp_path_factory.mktemp("agent"))
    yield a
    stop_agent(a)


@contextlib.contextmanager
def serve_inprocess(tmp: Path, name: str = "inproc", **kwargs: Any) -> Iterator[Agent]:
    """create_app(**kwargs) under uvicorn in a thread on a free loopback port."""
    import uvicorn

    from tools.agent.app import create_app

    audit = tmp / f"{name}-audit.jsonl"
    app = create_app(secret=SECRET.encode(), audit_log=audit, **kwargs)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host=LOOPBACK, port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    a = Agent(name, f"http://{LOOPBACK}:{port}", audit)
    try:
        wait_healthy(a.url)
        yield a
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture
def inprocess_agent(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Agent]:
    """create_app(...) under uvicorn in a thread; `request.param` are create_app kwargs."""
    with serve_inprocess(tmp_path, **getattr(request, "param", {})) as a:
        yield a

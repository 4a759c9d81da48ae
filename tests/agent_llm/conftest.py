"""Fixtures: a scripted local LLM server, settings pointing at it, a crash log with planted secrets."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.agent.state import InMemoryConversationStore
from bot.config import Settings
from tests.agent_llm.llm_server import ScriptedLLM, tool_messages
from tools.result import ToolResult

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "fixtures" / "cases"
OOM_CARD = "cuda-oom-on-one-rank-others-timeout"

#: Secrets planted in logs, questions and tool outputs; none may reach the model server.
PLANTED = {
    "hf": "hf_PLANTEDabcdefghijklmnopqrstu",
    "password": "hunter2planted",
    "bearer": "PLANTEDbearerTOKEN123456",
    "aws": "AKIAPLANTED000000000",
    "slack": "xoxb-PLANTED-1234567890-abcdef",
    "github": "ghp_PLANTEDabcdefghijklmnopqrstuvwxyz0123",
    "openai": "sk-PLANTEDabcdefghijklmnopqrstuvwx",
    "urlpass": "urlPLANTEDpass",
    "key": "PLANTEDPRIVATEKEYBODY",
}
HOSTS = ("gpu-node-7.cluster.local", "10.9.8.7", "liangxianchen-funasr-15wh-train-lxc0-w-0")


def secret_preamble() -> str:
    return "\n".join([
        f"export HF_TOKEN={PLANTED['hf']}",
        f"db password={PLANTED['password']} MASTER_ADDR=gpu-node-7.cluster.local",
        f"curl -H 'Authorization: Bearer {PLANTED['bearer']}' http://10.9.8.7:8000/",
        f"AWS_ACCESS_KEY_ID={PLANTED['aws']}",
        f"git clone https://alice:{PLANTED['urlpass']}@github.example.com/org/repo",
        "-----BEGIN RSA PRIVATE KEY-----", PLANTED["key"], "-----END RSA PRIVATE KEY-----",
    ]) + "\n"


@pytest.fixture
def crash_log(tmp_path: Path) -> Path:
    case = yaml.safe_load((CASES / f"{OOM_CARD}.yaml").read_text(encoding="utf-8"))
    path = tmp_path / "train.log"
    log = case["log"].replace("CUDA out of memory. Tried",
                              f"CUDA out of memory (token={PLANTED['openai']}). Tried", 1)
    path.write_text(secret_preamble() + log, encoding="utf-8")
    return path


@pytest.fixture
def llm() -> Iterator[Callable[..., ScriptedLLM]]:
    servers: list[ScriptedLLM] = []

    def start(*script: Any) -> ScriptedLLM:
        srv = ScriptedLLM(list(script)).__enter__()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.__exit__(None, None, None)


def settings_for(srv: ScriptedLLM, **kw: Any) -> Settings:
    base: dict[str, Any] = {"llm_provider": "openai", "llm_model": "scripted",
                            "llm_base_url": srv.base_url, "llm_api_key": "test-key",
                            "llm_timeout_s": 5.0, "redact_hosts": True}
    return Settings(**{**base, **kw})


@pytest.fixture
def store() -> InMemoryConversationStore:
    return InMemoryConversationStore()


def answer(**fields: Any) -> dict[str, Any]:
    """A scripted final answer step."""
    return {"content": json.dumps({"explanation": "", **fields})}


def analysis(request: dict[str, Any]) -> dict[str, Any]:
    """The analyze_log data the model was sent."""
    return next(t["data"] for t in tool_messages(request) if t.get("tool") == "analyze_log"
                and t["status"] == "success")


def grounded_final(request: dict[str, Any]) -> dict[str, Any]:
    """A final answer built, like a good model would, from the analyze_log result it saw."""
    rc = analysis(request)["root_causes"][0]
    return answer(explanation="Rank 2 on HOST_1 ran out of GPU memory; the others timed out.",
                  root_causes=[{"category": rc["category"], "card": rc["card"],
                                "confidence": 0.85, "evidence": rc["evidence"][:1]}],
                  remediation=[{"card": rc["card"], "step": 3, "note": "quickest"},
                               {"card": rc["card"], "step": 2}],
                  citations=[rc["card"]])


def assert_no_secrets(srv: ScriptedLLM, hosts: bool = True) -> None:
    text = srv.all_text()
    for name, value in PLANTED.items():
        assert value not in text, f"planted {name} secret reached the model"
    if hosts:
        for h in HOSTS:
            assert h not in text, f"host {h} reached the model"


class RecordedNodes:
    """A NodeBackend answering from recorded ToolResults; records every call."""

    def __init__(self, results: dict[str, ToolResult] | None = None) -> None:
        self.results = results or {}
        self.calls: list[tuple[str, str, dict[str, Any] | None]] = []

    def run(self, node: str, tool: str, params: dict[str, Any] | None = None) -> ToolResult:
        self.calls.append((node, tool, params))
        if tool in self.results:
            return self.results[tool]
        return ToolResult.failed(tool, f"node {tool} --node {node}", f"unknown node {node!r}")

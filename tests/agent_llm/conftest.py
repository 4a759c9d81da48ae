"""Fixtures: a scripted local LLM server, settings pointing at it, a crash log with planted secrets."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.config import Settings
from bot.state.threads import InMemoryThreadStore
from tests.agent_llm.llm_server import ScriptedLLM, tool_messages
from tools.result import ToolResult

ROOT = Path(__file__).resolve().parents[2]
OOM_LOG = ROOT / "tests" / "fixtures" / "logs" / "oom-one-rank.yaml"
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
    # Formats tools.redact misses on its own:
    "cli_password": "PLANTEDcliPass99",  # --password VALUE
    "mysql": "PLANTEDmysqlPw7",  # mysql -pVALUE
    "wandb": "0badc0de0123456789abcdef0123456789abcdef",  # wandb: API key <40 hex>
    "wandb_env": "PLANTEDwandbEnv0123",  # WANDB_API_KEY=
    "aws_secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiPLANTED0KEY1",  # bare, near "aws"
    "der_key": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCPLANTED",  # private key: MII...
    "json_number": "87654321",  # {"password": 87654321}
    "token_list": "PLANTEDlistTok1",  # {"tokens": [...]}
    "argv": "PLANTEDargvKey9",  # ["--api-key", VALUE]
}
HOSTS = ("gpu-node-7.cluster.local", "10.9.8.7", "liangxianchen-funasr-15wh-train-lxc0-w-0",
         "sjc-a100-017", "a100-box3", "dgx01", "n017", "node-a", "harry", "erin",
         "2001:db8::8a2e:370:7334", "fe80::ba59:9f03:1a:2b3c%ib0")
#: Hosts only the attached log tells apart from words (ALPHA7_LINE's NCCL prefix).
LOG_HOSTS = ("alpha7",)
#: A question carrying the formats above: nothing of it may reach the model, not even in
#: the first request.
QUESTION = ("Why did my job die? rank 3 on sjc-a100-017 hung, a100-box3 and dgx01 too, n017 "
            "was fine; then alpha7 crashed. TCPStore could not connect to (node-a, 29500); "
            "addrs 2001:db8::8a2e:370:7334 and fe80::ba59:9f03:1a:2b3c%ib0. SLURM_JOB_USER=harry, "
            f"code in /home/erin/run. I ran python train.py --password {PLANTED['cli_password']} "
            f"and mysql -u svc -p{PLANTED['mysql']} -h db1; wandb: API key {PLANTED['wandb']}; "
            f"aws secret {PLANTED['aws_secret']}; private key: {PLANTED['der_key']}; my slack "
            f"token is {PLANTED['slack']}, github {PLANTED['github']}")
#: alpha7 is only recognisable from the log's structure (NCCL's host:pid:tid prefix).
ALPHA7_LINE = "alpha7:3301:3301 [1] NCCL INFO comm 0x5581 rank 1 nranks 8 - Init COMPLETE\n"


def secret_preamble() -> str:
    return "\n".join([
        f"export HF_TOKEN={PLANTED['hf']}",
        f"db password={PLANTED['password']} MASTER_ADDR=gpu-node-7.cluster.local",
        f"curl -H 'Authorization: Bearer {PLANTED['bearer']}' http://10.9.8.7:8000/",
        f"AWS_ACCESS_KEY_ID={PLANTED['aws']}",
        f"git clone https://alice:{PLANTED['urlpass']}@github.example.com/org/repo",
        "-----BEGIN RSA PRIVATE KEY-----", PLANTED["key"], "-----END RSA PRIVATE KEY-----",
        f"export WANDB_API_KEY={PLANTED['wandb_env']}",
    ]) + "\n" + ALPHA7_LINE


@pytest.fixture
def crash_log(tmp_path: Path) -> Path:
    case = yaml.safe_load((OOM_LOG).read_text(encoding="utf-8"))
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
def store() -> InMemoryThreadStore:
    return InMemoryThreadStore()


def answer(**fields: Any) -> dict[str, Any]:
    """A scripted final answer step."""
    return {"content": json.dumps({"explanation": "", **fields})}


def analysis(request: dict[str, Any]) -> dict[str, Any]:
    """The analyze_log data the model was sent."""
    return next(t["data"] for t in tool_messages(request) if t.get("tool") == "analyze_log"
                and t["status"] == "success")


def grounded_final(request: dict[str, Any]) -> dict[str, Any]:
    """A final answer built, like a good model would, from the analyze_log result it saw."""
    data = analysis(request)
    rc = data["root_causes"][0]
    host = data["input"]["hosts"][0]  # a placeholder: the model never sees the name
    return answer(explanation=f"Rank 2 on {host} ran out of GPU memory; the others timed out.",
                  root_causes=[{"category": rc["category"], "card": rc["card"],
                                "confidence": 0.85, "evidence": rc["evidence"][:1]}],
                  remediation=[{"card": rc["card"], "step": 3, "note": "quickest"},
                               {"card": rc["card"], "step": 2}],
                  citations=[rc["card"]])


def assert_no_secrets(srv: ScriptedLLM, hosts: bool = True, log: bool = True) -> None:
    """No planted secret (and, with `hosts`, no planted host, IP or user) in any request;
    `log`: the crash_log was attached, so the hosts only it reveals count too."""
    assert srv.raw, "the model server received nothing"
    text = srv.all_text()
    for name, value in PLANTED.items():
        assert value not in text and json.dumps(value)[1:-1] not in text, \
            f"planted {name} secret reached the model"
    if hosts:
        for h in (*HOSTS, *(LOG_HOSTS if log else ())):
            rx = rf"(?<![\w.-]){re.escape(json.dumps(h)[1:-1])}(?![\w-])"
            assert not re.search(rx, text), f"host {h} reached the model"


def inventory(tmp_path: Path, *names: str) -> Path:
    """A node inventory (NCCLBOT_NODES_FILE) naming `names`."""
    path = tmp_path / "nodes.yaml"
    nodes = {n: {"url": f"https://10.0.0.{i + 10}:8470"} for i, n in enumerate(names)}
    path.write_text(yaml.safe_dump({"nodes": nodes}), encoding="utf-8")
    return path


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


@pytest.fixture(scope="session", autouse=True)
def _warm_retrieval_index(shared_index_dir: Path, tmp_path_factory: pytest.TempPathFactory
                          ) -> None:
    """Build the session's retrieval index before any agent test: building it inside an
    agent's turn would spend the turn's time budget and make the answer fall back."""
    from bot.answering.knowledge import bundled_cards
    from bot.retrieval.search import get_retriever

    settings = Settings(data_dir=tmp_path_factory.mktemp("warm"), index_dir=shared_index_dir)
    get_retriever(settings, list(bundled_cards()), progress=False)

"""Replay the recorded agent cases (see README.md); `llm_live` runs them on a real endpoint."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.config import Settings
from tests.agent_llm.conftest import RecordedNodes, inventory
from tests.agent_llm.llm_server import ScriptedLLM
from tests.answer_json import respond
from tools.result import ToolResult

HERE = Path(__file__).resolve().parent
CASES = sorted(p.parent for p in HERE.glob("*/case.yaml"))
#: Read at import: the shared conftest clears NCCLBOT_* before each test.
LIVE_LLM = {k.removeprefix("NCCLBOT_").lower(): v for k, v in os.environ.items()
            if k.startswith("NCCLBOT_LLM_")}
NODE_TOOLS = {"node_env": "env", "node_topology": "topo", "probe": "probe"}


def load(case: Path) -> dict[str, Any]:
    return yaml.safe_load((case / "case.yaml").read_text(encoding="utf-8"))


def script(spec: dict[str, Any]) -> list[dict[str, Any]]:
    steps = []
    for step in spec["model"]:
        if "tool_calls" in step:
            steps.append({"tool_calls": [(c["name"], c.get("args", {}))
                                         for c in step["tool_calls"]]})
        else:
            content = step["content"]
            steps.append({"content": content if isinstance(content, str)
                          else json.dumps(content)})
    return steps


def recorded_nodes(case: Path) -> RecordedNodes:
    results = {NODE_TOOLS[p.stem]: ToolResult.model_validate_json(p.read_text(encoding="utf-8"))
               for p in sorted((case / "recorded").glob("*.json"))}
    return RecordedNodes(results)


def check(spec: dict[str, Any], out: dict[str, Any]) -> None:
    exp = spec["expected"]
    causes = out["diagnosis"]["root_causes"]
    assert causes, "no root cause"
    assert causes[0]["category"] in exp["categories"]
    if "cards" in exp:
        assert causes[0]["card"] in exp["cards"]
    text = json.dumps(out, ensure_ascii=False)
    for fact in exp.get("facts", []):
        assert fact in text, f"expected fact {fact!r} missing"


def case_settings(spec: dict[str, Any], tmp_path: Path, **kw: Any) -> Settings:
    """The case's settings overrides, and its node inventory (`nodes:`) when it has one."""
    extra = dict(spec.get("settings", {}))
    if spec.get("nodes"):
        extra["nodes_file"] = inventory(tmp_path, *spec["nodes"])
    return Settings(**{**extra, **kw})


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_replay(case: Path, tmp_path: Path) -> None:
    spec = load(case)
    with ScriptedLLM(script(spec)) as srv:
        settings = case_settings(spec, tmp_path, llm_provider="openai", llm_model="recorded",
                                 llm_base_url=srv.base_url, llm_timeout_s=5)
        out = respond(spec["question"], [case / a for a in spec.get("attachments", [])],
                      settings=settings, nodes=recorded_nodes(case))
        sent = srv.all_text()
        first = srv.raw[0].decode()
    exp = spec["expected"]
    check(spec, out)
    assert out["llm"]["used"] is exp["llm_used"]
    if exp["llm_used"]:
        assert sorted(t["tool"] for t in out["llm"]["tools"]) == sorted(exp["tools"])
    notes = "\n".join(out.get("notes", []))
    for piece in exp.get("notes", []):
        assert piece in notes
    if not exp.get("notes") and exp["llm_used"]:
        assert out["notes"] == []
    for secret in exp.get("forbidden", []):
        assert secret not in sent, f"{secret!r} reached the model"
        assert secret not in first, f"{secret!r} reached the model in the first request"


@pytest.mark.llm_live
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_live(case: Path, tmp_path: Path) -> None:
    spec = load(case)
    if not spec["expected"]["llm_used"]:
        pytest.skip("case scripts a misbehaving model")
    settings = case_settings(spec, tmp_path, **LIVE_LLM)
    assert settings.llm_provider, "set NCCLBOT_LLM_PROVIDER/_MODEL/_BASE_URL for live runs"
    out = respond(spec["question"], [case / a for a in spec.get("attachments", [])],
                  settings=settings, nodes=recorded_nodes(case))
    assert out["llm"]["used"], out.get("notes")
    check({"expected": {"categories": spec["expected"]["categories"]}}, out)

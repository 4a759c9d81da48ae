"""`ncclbot serve mcp` over stdio, through the real `mcp` client: the tools, the answers and
the resources an agent gets."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from tests.mcp.conftest import (
    OOM_CARD,
    ROOT,
    SAMPLE,
    ncclbot_argv,
    run_stdio,
    server_env,
    structured,
)
from tools.registry import TOOLS

READ_TOOLS = {"analyze_logs", "ask", "search_knowledge", "get_card", "similar_incidents",
              "node_topology", "node_env", "node_xid", "node_hang", "node_libs"}
CJK = re.compile(r"[\u4e00-\u9fff]")


def test_lists_typed_tools_and_resources(data_dir: Path) -> None:
    async def steps(s: ClientSession) -> tuple[Any, Any, Any]:
        return await s.list_tools(), await s.list_resources(), await s.list_resource_templates()

    tools, resources, templates = run_stdio(server_env(data_dir), steps)
    by_name = {t.name: t for t in tools.tools}
    assert set(by_name) == READ_TOOLS  # no node_probe without --allow-probes
    analyze = by_name["analyze_logs"]
    assert analyze.input_schema["properties"]["lang"]["enum"] == ["en", "zh", "both"]
    assert "LogText" in json.dumps(analyze.input_schema)
    assert analyze.annotations is not None and analyze.annotations.read_only_hint
    assert set(by_name["ask"].input_schema["properties"]["lang"]["enum"]) == {
        "en", "zh", "both", "auto"}
    assert by_name["ask"].input_schema["required"] == ["question"]
    # results are the Answer contract (`ncclbot schema answer`) or a node ToolResult
    assert "root_causes" in json.dumps(analyze.output_schema)
    assert "findings" in json.dumps(by_name["node_env"].output_schema)
    # every node tool's arguments are its ToolSpec's: the fields its McpTool names, typed and
    # bounded by the tool's parameter model, plus where it runs
    for spec in TOOLS.values():
        if spec.mcp is None or not spec.idempotent:
            continue
        props = by_name[spec.mcp.name].input_schema["properties"]
        assert set(props) - {"node", "nodes", "lang"} == set(spec.mcp.fields), spec.name
        for name in spec.mcp.fields:
            field = spec.params.model_fields[name]
            assert props[name]["description"] == field.description
            assert props[name].get("default") == spec.mcp.defaults.get(
                name, field.get_default(call_default_factory=True))
    topo_text = by_name["node_topology"].input_schema["properties"]["topo_text"]
    assert topo_text["anyOf"][0]["maxLength"] == 200_000  # the bound of TopoParams
    assert by_name["node_env"].input_schema["properties"]["import_torch"]["default"] is False
    assert {str(r.uri) for r in resources.resources} >= {"ncclbot://cards",
                                                         "ncclbot://incidents",
                                                         "ncclbot://skill"}
    assert {t.uri_template for t in templates.resource_templates} == {
        "ncclbot://cards/{card_id}", "ncclbot://incidents/{incident_id}"}


def test_analyze_sample_names_rank_5_oom_with_evidence(data_dir: Path) -> None:
    async def steps(s: ClientSession) -> dict[str, Any]:
        return structured(await s.call_tool("analyze_logs", {"paths": [str(SAMPLE)]}))

    got = run_stdio(server_env(data_dir), steps)
    top = got["diagnosis"]["root_causes"][0]
    assert got["verdict"] == "diagnosed"
    assert (top["category"], top["card"]) == ("rank_crashed", OOM_CARD)
    assert got["diagnosis"]["suspects"][0]["rank"] == 5
    oom = [e for e in top["evidence"] if "OutOfMemoryError" in e["text"]]
    assert oom and oom[0]["file"] == SAMPLE.name and oom[0]["rank"] == 5
    # the same answer `ncclbot analyze --json` prints (host names aside, which are
    # placeholders for an agent as for any LLM)
    cli = json.loads(subprocess.run([*ncclbot_argv(), "analyze", str(SAMPLE), "--json"],
                                    env=server_env(data_dir), cwd=ROOT, check=True,
                                    capture_output=True, text=True, timeout=300).stdout)
    cli_top = cli["diagnosis"]["root_causes"][0]
    assert [(e["file"], e["line"]) for e in top["evidence"]] == [
        (e["file"], e["line"]) for e in cli_top["evidence"]]
    assert [c["card"] for c in got["citations"]] == [c["card"] for c in cli["citations"]]
    assert "gpu-node-17" in cli["summary"] and "gpu-node-17" not in got["summary"]


def test_ask_in_chinese_with_a_pasted_log(data_dir: Path) -> None:
    question = "为什么 rank 5 先退出，其他 rank 都在 allreduce 上超时了？"

    async def steps(s: ClientSession) -> dict[str, Any]:
        return structured(await s.call_tool("ask", {
            "question": question, "lang": "zh",
            "logs": [{"name": "train.log", "content": SAMPLE.read_text(encoding="utf-8")}]}))

    got = run_stdio(server_env(data_dir), steps)
    assert got["lang"] == "zh" and got["question"] == question
    top = got["diagnosis"]["root_causes"][0]
    assert top["card"] == OOM_CARD
    assert set(top["title"]) == {"zh"} and CJK.search(top["title"]["zh"])
    assert list(got["remediation"]) == ["zh"] and CJK.search(got["remediation"]["zh"][0])
    assert {e["file"] for e in top["evidence"]} == {"train.log"}
    assert got["retrieval"], "ask ranks the cards for the question"


def test_card_resource_and_knowledge_tools(data_dir: Path) -> None:
    async def steps(s: ClientSession) -> tuple[Any, ...]:
        card = await s.read_resource(f"ncclbot://cards/{OOM_CARD}")
        index = await s.read_resource("ncclbot://cards")
        skill = await s.read_resource("ncclbot://skill")
        with pytest.raises(MCPError, match="no card"):
            await s.read_resource("ncclbot://cards/no-such-card")
        found = structured(await s.call_tool("search_knowledge", {
            "query": "CUDA out of memory on one rank, others watchdog timeout"}))
        got = structured(await s.call_tool("get_card", {"card_id": OOM_CARD, "lang": "zh"}))
        incidents = json.loads((await s.read_resource("ncclbot://incidents")).contents[0].text)
        incident = await s.read_resource(incidents[0]["uri"])
        return card, index, skill, found, got, incidents, incident

    card, index, skill, found, got, incidents, incident = run_stdio(server_env(data_dir), steps)
    one = json.loads(incident.contents[0].text)
    assert one["id"] == incidents[0]["id"] and one["source"] == incidents[0]["source"]
    assert one["log"] and one["resolution"]
    data = json.loads(card.contents[0].text)
    assert data["id"] == OOM_CARD and data["sources"] and data["title"]["zh"]
    assert card.contents[0].mime_type == "application/json"
    assert OOM_CARD in {c["id"] for c in json.loads(index.contents[0].text)}
    assert "analyze_logs" in skill.contents[0].text
    assert found["status"] == "success"
    assert OOM_CARD in [c["card"] for c in found["data"]["cards"]]
    assert got["status"] == "success" and got["data"]["sources"]
    assert CJK.search(" ".join(got["data"]["remediation_zh"]))


def test_bad_input_is_an_answer_not_a_crash(data_dir: Path, tmp_path: Path) -> None:
    async def steps(s: ClientSession) -> tuple[dict[str, Any], ...]:
        missing = structured(await s.call_tool("analyze_logs",
                                               {"paths": [str(tmp_path / "nope.log")]}))
        stdin = structured(await s.call_tool("analyze_logs", {"paths": ["-"]}))
        empty = structured(await s.call_tool("analyze_logs", {}))
        node = structured(await s.call_tool("node_env", {"node": "gpu-node-404"}))
        return missing, stdin, empty, node

    missing, stdin, empty, node = run_stdio(server_env(data_dir), steps)
    assert missing["verdict"] == "error" and "no such file" in missing["text"]
    assert stdin["verdict"] == "error" and "MCP stream" in stdin["text"]
    assert empty["verdict"] == "error" and "nothing to analyze" in empty["text"]
    assert node["status"] == "error" and node["tool"] == "env"
    assert "NCCLBOT_NODES_FILE" in node["error"] or "inventory" in node["error"]

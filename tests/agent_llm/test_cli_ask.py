"""`ncclbot ask` through the agent when a provider is configured; deterministic otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from bot.cli.main import app
from tests.agent_llm.conftest import (
    OOM_CARD,
    QUESTION,
    ROOT,
    RecordedNodes,
    answer,
    assert_no_secrets,
    grounded_final,
    inventory,
    settings_for,
)
from tests.answer_json import agent_answer

ANALYZE = {"tool_calls": [("analyze_log", {"attachment": "train.log"}),
                          ("propose_probe", {"node": "HOST_1", "preset": "quick"})]}


@pytest.fixture
def llm_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """NCCLBOT_LLM_* pointing at a scripted server, and an inventory naming gpu-node-7."""

    def point(srv) -> None:
        monkeypatch.setenv("NCCLBOT_LLM_PROVIDER", "openai")
        monkeypatch.setenv("NCCLBOT_LLM_MODEL", "scripted")
        monkeypatch.setenv("NCCLBOT_LLM_BASE_URL", srv.base_url)
        monkeypatch.setenv("NCCLBOT_LLM_TIMEOUT_S", "5")
        monkeypatch.setenv("NCCLBOT_REDACT_HOSTS", "1")
        monkeypatch.setenv("NCCLBOT_NODES_FILE", str(inventory(tmp_path, "gpu-node-7")))

    return point


def test_ask_answers_through_the_llm(llm, llm_env, crash_log: Path):
    srv = llm(ANALYZE, grounded_final)
    llm_env(srv)
    out = CliRunner().invoke(app, ["ask", QUESTION, "--log", str(crash_log), "--json",
                                   "--lang", "zh"])
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["llm"]["used"] is True and len(srv.requests) == 2
    # one step's tools run in threads: which finishes first is not the test's business
    assert sorted(t["tool"] for t in result["llm"]["tools"]) == ["analyze_log", "propose_probe"]
    assert result["diagnosis"]["root_causes"][0]["card"] == OOM_CARD
    assert set(result["remediation"]) == {"zh"}  # --lang reaches the agent
    assert "Chinese" in srv.requests[0]["messages"][-1]["content"]
    # --json: the probe is not put to anyone, and the answer says so.
    assert result["suggested_probes"][0] == {**result["suggested_probes"][0],
                                             "node": "gpu-node-7", "status": "declined"}
    assert any("probe not run (quick on gpu-node-7)" in n and "--json" in n
               for n in result["notes"])
    assert_no_secrets(srv)


def test_ask_without_a_terminal_declines_the_probe_and_says_so(llm, llm_env, crash_log: Path):
    srv = llm(ANALYZE, grounded_final)
    llm_env(srv)
    out = CliRunner().invoke(app, ["ask", "why did it die?", "--log", str(crash_log),
                                   "--lang", "en"], input="y\n")
    assert out.exit_code == 0, out.output
    assert "Explanation" in out.stdout and "ran out of GPU memory" in out.stdout
    assert "Probe quick on gpu-node-7: declined" in out.stdout
    assert "stdin is not a terminal" in out.stdout
    assert "Run the NCCL probe" not in out.output  # never prompted


def test_ask_falls_back_like_the_agent(llm, llm_env, crash_log: Path):
    srv = llm(answer(explanation="It is DNS.", citations=["made-up-card"]))
    llm_env(srv)
    out = CliRunner().invoke(app, ["ask", "why?", "--log", str(crash_log), "--json"])
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["llm"]["used"] is False and len(srv.requests) == 1
    assert result["diagnosis"]["root_causes"][0]["card"] == OOM_CARD
    assert any("deterministic answer" in n for n in result["notes"])


def test_ask_reads_a_log_from_stdin_once_for_the_agent(llm, llm_env, crash_log: Path):
    srv = llm({"tool_calls": [("analyze_log", {"attachment": "stdin.log"})]}, grounded_final)
    llm_env(srv)
    out = CliRunner().invoke(app, ["ask", "why?", "--log", "-", "--json"],
                             input=crash_log.read_bytes())
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["llm"]["used"], result["notes"]
    assert result["diagnosis"]["root_causes"][0]["evidence"][0]["file"] == "stdin.log"
    assert_no_secrets(srv)


def test_interactive_confirmation_runs_the_probe_only_on_yes(llm, crash_log: Path,
                                                           tmp_path: Path):
    """The prompt itself (what `ask` does in a terminal), driven through typer."""
    ran: list[RecordedNodes] = []

    def command() -> None:
        srv = llm(ANALYZE, grounded_final)
        settings = settings_for(srv, nodes_file=inventory(tmp_path, "gpu-node-7"))
        ran.append(RecordedNodes())
        result = agent_answer("why?", [str(crash_log)], "en", settings, interactive=True,
                              nodes=ran[-1])
        typer.echo(json.dumps(result["suggested_probes"]))

    cli = typer.Typer()
    cli.command()(command)
    out = CliRunner().invoke(cli, [], input="y\n")
    assert out.exit_code == 0, out.output
    assert "Run the NCCL probe 'quick' on node gpu-node-7" in out.output
    assert [c[:2] for c in ran[-1].calls] == [("gpu-node-7", "probe")]
    out = CliRunner().invoke(cli, [], input="n\n")
    assert ran[-1].calls == [] and '"status": "declined"' in out.stdout


def test_ask_without_a_provider_never_imports_langchain():
    code = ("import sys, json\n"
            "from typer.testing import CliRunner\n"
            "from bot.cli.main import app\n"
            "r = CliRunner().invoke(app, ['ask', 'NCCL socket ifname wrong', '--json'])\n"
            "assert r.exit_code == 0, r.output\n"
            "print(json.dumps({'llm': json.loads(r.stdout)['llm'] is not None,\n"
            "                  'langchain': sorted(m for m in sys.modules\n"
            "                                      if m.startswith(('langchain', 'langgraph')))}))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"llm": False, "langchain": []}

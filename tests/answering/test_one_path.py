"""One deterministic path: the same log gives the same answer through every door.

The bundled sample and one real incident's log go to `ncclbot analyze --json` and the MCP
`analyze_logs` (logs without a question), and, with one question, to `ncclbot ask --json`,
the Slack app (a real HTTP app against the fake Slack Web API) and the LLM agent's
fallback (an LLM that cannot be reached). Each kind of input gives the same verdict,
certainty, headline, root-cause categories and confidences everywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.answering.contract import Answer
from bot.answering.troubleshooter import Question, Troubleshooter
from bot.config import Settings, load_settings
from tests.conftest import ROOT
from tests.slack.conftest import serving
from tests.slack.fake_slack import FakeSlack

QUESTION = "why did my training job crash?"
INCIDENT = ROOT / "knowledge" / "incidents" / "llava-ddp-one-rank-index-assert-others-timeout.yaml"


@pytest.fixture(params=["sample", "incident"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """The bundled sample, or a real incident's log as its reporter posted it."""
    if request.param == "sample":
        return ROOT / "examples" / "sample-8rank-oom.log"
    path = tmp_path / "train.log"
    path.write_text(yaml.safe_load(INCIDENT.read_text(encoding="utf-8"))["log"],
                    encoding="utf-8")
    return path


def decided(answer: dict[str, Any]) -> dict[str, Any]:
    """What must agree between doors: the verdict, the headline and, per root cause, its
    category, certainty and confidence."""
    return {"verdict": answer["verdict"], "headline": answer["headline"].get("en"),
            "causes": [(rc["category"], rc["certainty"], rc["confidence"])
                       for rc in answer["diagnosis"]["root_causes"]]}


def cli(*args: str, data_dir: Path) -> dict[str, Any]:
    env = {**os.environ, "NCCLBOT_DATA_DIR": str(data_dir)}
    proc = subprocess.run([sys.executable, "-m", "bot.cli.main", *args, "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def slack_answer(slack: FakeSlack, make_app: Any, log: Path, text: str) -> dict[str, Any]:
    """The answer the Slack app stored for a mention with the log attached."""
    app, deps = make_app(http=True)
    with serving(app, deps.settings) as poster:
        f = slack.add_file("train.log", log.read_bytes())
        poster.event({"type": "app_mention", "user": "UALICE", "channel": "C1", "ts": "70.1",
                      "text": f"<@UBOT> {text}".strip(), "files": [f]})

        def stored() -> Answer | None:
            with deps.store.db.tx() as db:
                row = db.execute("SELECT id FROM answers WHERE channel=?", ("C1",)).fetchone()
            return deps.store.answer(row[0]) if row else None

        found = slack.wait_for(stored, timeout=300)
    return found.model_dump(mode="json")


def test_logs_alone_answer_alike_through_analyze_mcp_and_slack(
        log: Path, tmp_path: Path, slack: FakeSlack, make_app: Any) -> None:
    from bot.mcp.backend import Backend, Policy

    by_cli = cli("analyze", str(log), data_dir=tmp_path / "cli")
    # host names as they are (the MCP server hides them by default, as from an LLM)
    plain = Settings(data_dir=tmp_path / "mcp", redact_hosts=False)
    by_mcp = Backend(plain, Policy(user="mcp:t")).analyze_logs(
        [str(log)], None).model_dump(mode="json")
    by_slack = slack_answer(slack, make_app, log, "")
    assert by_cli["diagnosis"]["root_causes"], by_cli["summary"]
    assert decided(by_mcp) == decided(by_cli)
    assert decided(by_slack) == decided(by_cli)
    assert by_mcp["notes"] == by_cli["notes"]  # the same input kind: brief=False for both


def test_a_question_answers_alike_through_ask_slack_and_the_agents_fallback(
        log: Path, tmp_path: Path, slack: FakeSlack, make_app: Any) -> None:
    """`ncclbot ask`, a Slack mention and the Troubleshooter with an LLM that cannot be
    reached (the agent declines; the same deterministic path answers, saying why)."""
    pytest.importorskip("langchain_openai")
    by_cli = cli("ask", QUESTION, "--log", str(log), data_dir=tmp_path / "cli")
    by_slack = slack_answer(slack, make_app, log, QUESTION)
    unreachable = load_settings(data_dir=tmp_path / "llm", llm_provider="openai",
                                llm_model="m", llm_base_url="http://127.0.0.1:9/v1",
                                llm_timeout_s=2)
    fallback = Troubleshooter(unreachable).answer(Question(QUESTION, (str(log),)))
    assert fallback.llm is not None and fallback.llm.used is False
    assert any(n.startswith("LLM unavailable (") for n in fallback.notes)
    by_fallback = fallback.model_dump(mode="json")
    assert by_cli["question"] == QUESTION and by_cli["diagnosis"]["root_causes"]
    assert decided(by_slack) == decided(by_cli)
    assert decided(by_fallback) == decided(by_cli)
    # the fallback's notes are the deterministic answer's, then why the LLM did not answer
    assert by_fallback["notes"][:len(by_cli["notes"])] == by_cli["notes"]

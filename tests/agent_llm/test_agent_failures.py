"""Hallucinations, malformed answers, timeouts and missing providers: never a hang or empty reply."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bot.agent.graph import MAX_TOOL_ROUNDS
from tests.agent_llm.conftest import (
    OOM_CARD,
    QUESTION,
    ROOT,
    analysis,
    answer,
    assert_no_secrets,
    grounded_final,
    settings_for,
)
from tests.answer_json import respond

ANALYZE = {"tool_calls": [("analyze_log", {"attachment": "train.log"})]}


def _deterministic(out: dict) -> None:
    assert out["llm"]["used"] is False
    assert out["diagnosis"]["root_causes"][0]["card"] == OOM_CARD  # the analysis still answers
    assert out["summary"]


def test_hallucinated_card_is_dropped_and_said(llm, crash_log: Path):
    def final(req: dict) -> dict:
        rc = analysis(req)["root_causes"][0]
        return answer(explanation="two causes",
                      root_causes=[
                          {"category": "rank_crashed", "card": "gpu-melted-by-cosmic-rays",
                           "confidence": 0.9, "evidence": rc["evidence"][:1]},
                          {"category": "not_a_category", "card": OOM_CARD, "confidence": 1.7,
                           "evidence": [*rc["evidence"][:1],
                                        {"file": "train.log", "line": 99999,
                                         "text": "NCCL WARN invented line"}]}],
                      remediation=[{"card": "gpu-melted-by-cosmic-rays", "step": 1},
                                   {"card": OOM_CARD, "step": 42}],
                      citations=["gpu-melted-by-cosmic-rays", OOM_CARD])

    srv = llm(ANALYZE, final)
    out = respond(QUESTION, [crash_log], settings=settings_for(srv))
    assert out["llm"]["used"]
    causes = out["diagnosis"]["root_causes"]
    assert [c["card"] for c in causes] == [OOM_CARD]
    assert causes[0]["category"] == "rank_crashed" and causes[0]["confidence"] == 1.0
    assert len(causes[0]["evidence"]) == 1
    assert [c["card"] for c in out["citations"]] == [OOM_CARD]
    notes = "\n".join(out["notes"])
    assert "gpu-melted-by-cosmic-rays" in notes and "no tool returned it" in notes
    assert "repaired category 'not_a_category'" in notes
    assert "dropped evidence train.log:99999" in notes
    assert "step" in notes and "#42" in notes
    kinds = sorted({d["kind"] for d in out["llm"]["dropped"]})
    assert kinds == ["category", "citation", "evidence", "remediation", "root_cause"]
    # Remediation fell back to the steps of the card that survived.
    assert len(out["remediation"]["en"]) >= 3
    assert_no_secrets(srv)


def test_only_hallucinations_fall_back_to_deterministic(llm, crash_log: Path):
    srv = llm(ANALYZE, answer(explanation="It is DNS.",
                              root_causes=[{"category": "rank_crashed", "card": "made-up-card",
                                            "confidence": 0.9}],
                              citations=["made-up-card"]))
    out = respond(QUESTION, [crash_log], settings=settings_for(srv))
    _deterministic(out)
    assert_no_secrets(srv)
    assert any("made-up-card" in n for n in out["notes"])
    assert any("deterministic answer" in n for n in out["notes"])


def test_malformed_answer_is_repaired_once(llm, crash_log: Path):
    srv = llm(ANALYZE, {"content": "The root cause is OOM, I think."}, grounded_final)
    out = respond(QUESTION, [crash_log], settings=settings_for(srv))
    assert out["llm"]["used"] and out["diagnosis"]["root_causes"][0]["card"] == OOM_CARD
    assert any("malformed" in n for n in out["notes"])
    assert "could not be used" in srv.requests[-1]["messages"][-1]["content"]
    assert_no_secrets(srv)


def test_malformed_twice_falls_back(llm, crash_log: Path):
    srv = llm(ANALYZE, {"content": "{not json"}, {"content": '{"root_causes": "nope"}'})
    out = respond(QUESTION, [crash_log], settings=settings_for(srv))
    _deterministic(out)
    assert any("malformed twice" in n for n in out["notes"])
    assert_no_secrets(srv)


def test_timeout_falls_back_fast(llm, crash_log: Path):
    from bot.config import Settings

    # Warm the deterministic path first (the retrieval index is built once per session, ~40 s
    # here): what is timed is the LLM's timeout and the fallback, not the first index build.
    warm = respond("why?", [crash_log], settings=Settings())
    assert warm["llm"] is None and warm["diagnosis"]["root_causes"][0]["card"] == OOM_CARD
    srv = llm({"sleep": 10, "content": "{}"})
    out = respond("why?", [crash_log], settings=settings_for(srv, llm_timeout_s=0.5))
    # the client gave up on its own timeout (the server would have answered after 10 s)
    _deterministic(out)
    assert any(n.startswith("LLM unavailable (") and "Timeout" in n for n in out["notes"])


def test_token_budget_refuses_the_call_that_would_exceed_it(llm, crash_log: Path):
    # 20 output tokens per scripted reply; the answer's budget is 4 x 10 = 40 tokens: the
    # third call is refused before it is sent.
    srv = llm({"tool_calls": [("search_knowledge", {"query": "oom"})]},
              {"tool_calls": [("get_card", {"id": OOM_CARD})]},
              grounded_final)
    out = respond(QUESTION, [crash_log], settings=settings_for(srv, llm_max_tokens=10))
    assert len(srv.requests) == 2 and len(srv.script) == 1
    _deterministic(out)
    note = next(n for n in out["notes"] if "token budget" in n)
    assert note.startswith("LLM answer abandoned") and "40 of 40 output tokens" in note
    assert "deterministic answer" in note and not any("LLM unavailable" in n
                                                       for n in out["notes"])
    assert_no_secrets(srv)


def test_running_out_of_tool_rounds_says_so(llm, crash_log: Path):
    srv = llm(*[{"tool_calls": [("search_knowledge", {"query": f"oom {i}"})]}
                for i in range(MAX_TOOL_ROUNDS + 5)])
    # the rounds, not the clock, must stop it: a budget no busy machine reaches
    out = respond(QUESTION, [crash_log], settings=settings_for(srv, llm_timeout_s=120.0))
    _deterministic(out)
    assert len(srv.requests) <= MAX_TOOL_ROUNDS + 1 and srv.script  # stopped, not exhausted
    assert any(f"still calling tools after {MAX_TOOL_ROUNDS} rounds" in n for n in out["notes"])
    assert not any("LLM unavailable" in n for n in out["notes"])
    assert_no_secrets(srv)


def test_explanation_may_not_name_cards_no_tool_returned(llm, crash_log: Path):
    other = "nccl-socket-ifname-matches-no-interface"

    def final(req: dict) -> dict:
        rc = analysis(req)["root_causes"][0]
        return answer(explanation=f"It is {rc['card']}, not {other} nor gpu-melted-by-cosmic-rays.",
                      root_causes=[{"category": rc["category"], "card": rc["card"],
                                    "confidence": 0.8},
                                   {"category": "rank_crashed",
                                    "card": "gpu-melted-by-cosmic-rays", "confidence": 0.2}],
                      citations=[rc["card"]])

    srv = llm(ANALYZE, final)
    out = respond(QUESTION, [crash_log], settings=settings_for(srv))
    assert out["llm"]["used"]
    assert out["explanation"] == (f"It is {OOM_CARD}, not [unverified card] nor "
                                  "[unverified card].")
    notes = "\n".join(out["notes"])
    assert f"removed card id '{other}' from the explanation" in notes
    assert "removed card id 'gpu-melted-by-cosmic-rays' from the explanation" in notes
    assert_no_secrets(srv)


def test_server_error_falls_back(llm, crash_log: Path):
    srv = llm()  # empty script: HTTP 500
    out = respond(QUESTION, [crash_log], settings=settings_for(srv))
    _deterministic(out)
    assert any(n.startswith("LLM unavailable (") for n in out["notes"])
    assert len(srv.requests) == 1  # no retries
    assert_no_secrets(srv)


def test_unreachable_endpoint_falls_back(crash_log: Path):
    from bot.config import Settings

    s = Settings(llm_provider="openai", llm_model="m", llm_base_url="http://127.0.0.1:9/v1",
                 llm_timeout_s=2)
    out = respond("why?", [crash_log], settings=s)
    _deterministic(out)
    assert any("LLM unavailable" in n for n in out["notes"])


def test_provider_misconfigured_falls_back(crash_log: Path):
    from bot.config import Settings

    out = respond("why?", [crash_log], settings=Settings(llm_provider="ollama"))
    _deterministic(out)
    assert any("NCCLBOT_LLM_MODEL" in n for n in out["notes"])


def test_no_provider_is_deterministic_without_langchain(crash_log: Path, tmp_path: Path):
    """No provider: the Troubleshooter alone decides not to ask an LLM (no note, no `llm`),
    and nothing imports LangChain."""
    code = ("import sys, json; from bot.config import Settings; "
            "from bot.answering.troubleshooter import Question, Troubleshooter; "
            f"t = Troubleshooter(Settings(data_dir={str(tmp_path)!r})); "
            f"out = t.answer(Question('why?', ({str(crash_log)!r},))); "
            "assert not [m for m in sys.modules if m.startswith('langchain')]; "
            "print(json.dumps({'notes': out.notes, 'llm': out.llm, "
            "'card': out.root_causes[0].card}))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"notes": [], "llm": None, "card": OOM_CARD}


def test_without_the_llm_extra_the_answer_is_deterministic(crash_log: Path, tmp_path: Path):
    """A provider configured but LangChain not installed: the agent declines with a typed
    reason (`AgentDeclined`), and the Troubleshooter answers deterministically with a clear
    note, no ImportError (an import hook hides the llm extra in a fresh interpreter)."""
    code = (
        "import sys, json, importlib.abc\n"
        "class Hide(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('langchain', 'langchain_core', 'langgraph',\n"
        "                                  'langchain_openai', 'langchain_ollama'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Hide())\n"
        "from bot.agent import AgentDeclined, respond\n"
        "from bot.config import Settings\n"
        "from bot.answering.troubleshooter import Question, Troubleshooter\n"
        "s = Settings(llm_provider='openai', llm_model='m', llm_base_url='http://127.0.0.1:9/v1',\n"
        f"             data_dir={str(tmp_path)!r})\n"
        f"declined = respond('why?', [{str(crash_log)!r}], settings=s)\n"
        "assert isinstance(declined, AgentDeclined), declined\n"
        f"out = Troubleshooter(s).answer(Question('why?', ({str(crash_log)!r},)))\n"
        "print(json.dumps({'notes': out.notes, 'llm': out.llm.model_dump(),\n"
        "                  'card': out.root_causes[0].card,\n"
        "                  'declined': list(declined.notes)}))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["llm"]["used"] is False and out["card"] == OOM_CARD
    assert any("`llm` extra is not installed" in n and "pip install 'ncclbot[llm]'" in n
               for n in out["notes"])
    assert out["declined"] == out["notes"]


def test_ollama_unreachable_falls_back(crash_log: Path):
    from bot.config import Settings

    s = Settings(llm_provider="ollama", llm_model="llama3", llm_base_url="http://127.0.0.1:9",
                 llm_timeout_s=2)
    out = respond("why?", [crash_log], settings=s)
    _deterministic(out)
    assert any(n.startswith("LLM unavailable (") for n in out["notes"])

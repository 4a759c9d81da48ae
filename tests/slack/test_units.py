"""Pure parts: rendering limits, language choice, rate limits, the feedback report command."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from bot.answering.contract import Answer
from bot.slack import blocks
from bot.slack.lang import choose
from bot.slack.ratelimit import Limits, RateLimiter
from bot.slack.store import Store


def make(**fields: object) -> Answer:
    """An answer with just these fields (verdict and summary filled in when not given)."""
    return Answer.model_validate({"verdict": "diagnosed", "summary": "", **fields})


def test_language_choice() -> None:
    assert choose(None, None, "why does it hang?") == "both"
    assert choose(None, None, "为什么 allreduce 超时了？") == "zh"
    assert choose("en", "zh", "为什么超时") == "en"
    assert choose(None, "zh", "why") == "zh"


def test_rate_limits() -> None:
    now = [0.0]
    rl = RateLimiter(2, 10.0, clock=lambda: now[0])
    assert rl.hit("u") == 0 and rl.hit("u") == 0 and rl.hit("u") > 0
    now[0] = 11.0
    assert rl.hit("u") == 0
    lim = Limits(probes_per_user=(1, 60), probes_per_node=(5, 60))
    assert lim.probe("a", "n1") is None
    assert "too many" in (lim.probe("a", "n2") or "")
    assert lim.claim_node("n1") and not lim.claim_node("n1")
    lim.release_node("n1")
    assert lim.claim_node("n1")
    # /nccl hang on eight nodes is one diagnostic for the person, one for each node
    lim = Limits(probes_per_user=(1, 60), probes_per_node=(1, 60))
    assert lim.hang("a", [f"n{i}" for i in range(8)]) is None
    assert "too many" in (lim.hang("b", ["n3"]) or "")


def test_render_respects_slack_limits() -> None:
    from bot.slack.message import FIRST_MAX, details_message, first_message, message_text

    answer = make(summary="x" * 5000, diagnosis={"root_causes": [
        {"category": "rank_crashed", "card": "c", "confidence": 0.9, "certainty": "likely",
         "title": {"en": "t" * 400}}], "suspects": []},
                  remediation={"en": [f"step {i} " + "y" * 300 for i in range(200)]},
                  citations=[], notes=[f"n{i}" for i in range(100)],
                  similar_incidents=[{"source": "https://github.com/a/b/issues/1",
                                      "title": "z" * 500, "category": "rank_crashed",
                                      "resolution": "r" * 900, "score": 0.5}])
    first = first_message(answer, "both", "a1")
    assert len(message_text(first.blocks)) <= FIRST_MAX
    assert len(first.blocks[0]["text"]["text"]) <= 150 and first.blocks[-1]["type"] == "actions"
    r = details_message(answer, "both")
    assert r.truncated and len(r.blocks) <= 50
    assert all(len(b.get("text", {}).get("text", "")) <= 3000 for b in r.blocks)


def test_feedback_report_cli(tmp_path: Path, monkeypatch) -> None:
    from bot.cli.main import app

    monkeypatch.setenv("NCCLBOT_DATA_DIR", str(tmp_path))
    store = Store(tmp_path / "ncclbot.sqlite3")
    aid = store.save_answer("C", "1", make(diagnosis={"root_causes": [
        {"category": "rank_crashed", "card": "host-oom", "confidence": 0.7}]}))
    store.add_feedback(aid, "U1", True)
    store.add_feedback(aid, "U2", False, "wrong card")
    out = CliRunner().invoke(app, ["feedback", "report", "--reasons"])
    assert out.exit_code == 0, out.output
    assert "rank_crashed" in out.output and "host-oom" in out.output
    assert "50%" in out.output and "wrong card" in out.output


def test_clip_keeps_code_fences_balanced() -> None:
    code = "```" + "\n".join(f"line {i:04d} " + "x" * 30 for i in range(110)) + "```"
    assert len(code) > 4000
    body, cut = blocks.clip("*Evidence*\n" + code)
    assert cut and len(body) <= blocks.MAX_TEXT
    assert body.count("```") % 2 == 0 and body.endswith("```\n…")
    # wherever the cut falls (even inside a fence), the result stays balanced
    for n in range(2990, 3010):
        for text in (code[:n] + "```tail```" + "y" * 3000, "a" * n + "```" + "b" * 3000 + "```"):
            body, _ = blocks.clip(text)
            assert len(body) <= blocks.MAX_TEXT and body.count("```") % 2 == 0, n
    section, _ = blocks.section(code)
    assert section["text"]["text"].count("```") == 2
    one_line = "```" + "y" * 4000 + "```"  # no line boundary to cut at
    body, _ = blocks.clip(one_line)
    assert body.startswith("```y") and body.endswith("y\n```\n…") and len(body) <= 3000


def test_limits_come_from_settings() -> None:
    from bot.config import load_settings

    s = load_settings(slack_asks_per_user=2, slack_probes_per_user=1, slack_probes_per_node=3,
                      slack_rate_window_s=60)
    lim = Limits.from_settings(s)
    assert (lim.asks_per_user.limit, lim.asks_per_user.window_s) == (2, 60)
    assert lim.probes_per_user.limit == 1 and lim.probes_per_node.limit == 3
    assert lim.asks_per_user.hit("u") == 0 and lim.asks_per_user.hit("u") == 0
    assert lim.asks_per_user.hit("u") > 0


def test_usergroup_members_are_cached_for_the_ttl() -> None:
    from bot.slack.authz import OncallAuthz

    class Client:
        calls = 0

        def usergroups_users_list(self, usergroup: str) -> dict:
            Client.calls += 1
            return {"users": ["UBOB"]}

    now = [0.0]
    authz = OncallAuthz(Client(), "S1", ["UALICE"], ttl_s=300, clock=lambda: now[0])
    assert authz.allowed_now("UBOB") is None  # unknown until looked up
    assert authz.allowed_now("UALICE") is True  # listed users need no lookup
    assert authz.allowed("UBOB") and not authz.allowed("UEVE") and authz.allowed("UBOB")
    assert Client.calls == 1
    assert authz.allowed_now("UBOB") is True and authz.allowed_now("UEVE") is False
    now[0] = 301.0
    assert authz.allowed_now("UEVE") is None
    assert authz.allowed("UBOB") and Client.calls == 2
    assert OncallAuthz(Client(), None, []).allowed_now("UBOB") is False


def test_render_agent_explanation_and_suggested_probes() -> None:
    from bot.slack.message import details_message, first_message

    answer = make(summary="S", explanation="Rank 2 ran out of memory <first>.",
                  diagnosis={"root_causes": [{"category": "rank_crashed", "card": "c",
                                              "confidence": 0.8}],
                             "suspects": [{"host": "n1", "rank": 0}]},
                  probes=["topo"],
                  suggested_probes=[{"node": "n2", "preset": "gloo", "reason": "ring",
                                     "status": "proposed"},
                                    {"node": "n3", "preset": "quick", "status": "declined"}])
    r = first_message(answer, "both", "a1")
    sections = [b["text"]["text"] for b in r.blocks if b["type"] == "section"]
    assert "Rank 2 ran out of memory &lt;first&gt;." in sections
    buttons = [e for e in r.blocks[-1]["elements"] if e["action_id"].startswith("ncclbot_probe")]
    # the agent's proposal, then the leading card's diagnostic on the suspect's node
    assert [b["text"]["text"] for b in buttons] == ["Run probe gloo on n2", "Run topo on n1"]
    assert json.loads(buttons[0]["value"]) == {"node": "n2", "tool": "probe", "preset": "gloo",
                                               "a": "a1"}
    assert "`probe gloo` on `n2`: ring" in json.dumps(details_message(answer).blocks)


def test_candidates_are_merged_and_offered() -> None:
    from bot.slack.blocks import others
    from bot.slack.conversation import earlier_notes, merge_candidates
    from bot.state.threads import ThreadState

    def ans(*causes: tuple[str, str, float]) -> Answer:
        return make(diagnosis={"root_causes": [{"category": c, "card": k, "confidence": p}
                                            for c, k, p in causes]})

    first = merge_candidates([], ans(("a", "ka", 0.5), ("b", "kb", 0.3)))
    both = merge_candidates(first, ans(("b", "kb", 0.7)))
    assert [(c.category, c.confidence) for c in both] == [("b", 0.7), ("a", 0.5)]
    assert [c.category for c in others(both, ans(("b", "kb", 0.7)))] == ["a"]
    ctx = ThreadState(last_answer_id="x", candidates=first)
    assert "leading candidate was a (50%" in earlier_notes(ctx, ans(("b", "kb", 0.7)))[0]
    assert earlier_notes(ctx, ans(("a", "ka", 0.6))) == []
    other = blocks.render_other_causes(ans(("b", "kb", 0.7)), "en", both)
    assert "Also considered earlier" in json.dumps(other.blocks)
    assert ThreadState.model_validate_json(json.dumps({"questions": ["q"], "future": 1})).questions == [
        "q"]


def test_fingerprint_is_the_content_not_the_packaging(tmp_path: Path) -> None:
    import gzip
    import io
    import zipfile

    from bot.slack.files import Fingerprint

    def fp(data: bytes, chunk: int = 7) -> str:
        f = Fingerprint()
        for i in range(0, len(data), chunk):
            f.update(data[i:i + chunk])
        path = tmp_path / "f"
        path.write_bytes(data)
        return f.content(path)

    log = b"rank 0: NCCL WARN timeout\n" * 500
    assert fp(log) == fp(log, 1000)
    one, two = gzip.compress(log, mtime=1), gzip.compress(log, mtime=2)
    assert one != two and fp(one) == fp(two) == fp(log)
    assert fp(gzip.compress(log[:100]) + gzip.compress(log[100:])) == fp(log)  # members
    assert fp(gzip.compress(log + b"x")) != fp(log)

    def zipped(name: str) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(name, log)
        return buf.getvalue()

    assert fp(zipped("a.log")) == fp(zipped("b/c.log")) != fp(log)
    assert fp(b"\x1f\x8bnot really gzip" * 10) == fp(b"\x1f\x8bnot really gzip" * 10)


def test_answerer_turns_any_failure_into_an_answer() -> None:
    from bot.answering.troubleshooter import Question, Troubleshooter
    from bot.config import load_settings
    from bot.errors import InputError

    s = load_settings(llm_provider="openai")

    def broken(question: str, **kw: object) -> dict:
        raise ImportError("No module named 'langchain'")

    out = Troubleshooter(s, respond=broken).answer(Question("why?"))
    assert out.verdict == "error" and "ImportError" in out.text

    def bad_log(paths: object) -> None:
        raise InputError("rank0.zip: not a readable zip archive", hint="Attach it again.")

    out = Troubleshooter(load_settings(), analyzer=bad_log).answer(Question("", ("rank0.zip",)))
    assert out.verdict == "error" and "not a readable zip" in out.text


def test_probe_progress_text_is_only_for_the_askers_running_probe() -> None:
    from bot.slack.nodes import progress_text
    from tools.agent.models import StatusReply

    def reply(**fields: object) -> StatusReply:  # the agent's JSON, read as the bot reads it
        return StatusReply.model_validate(fields)

    prog = {"step": 3, "steps": 8, "collective": "all_reduce", "bytes": 4_200_000, "ranks": 8}
    running = {"running": True, "holder": "slack:UBOB", "since": "2026-11-23T10:00:00+00:00",
               "progress": prog}
    assert progress_text(reply(**running), "slack:UBOB") == "step 3/8: all_reduce, 4.01 MiB"
    assert progress_text(reply(**running), "slack:UEVE") is None  # someone else's probe
    assert progress_text(reply(running=False), "slack:UBOB") is None
    assert progress_text(reply(**{**running, "progress": None}), "slack:UBOB") is None
    start = {**running, "progress": {**prog, "step": 0, "collective": "init"}}
    assert progress_text(reply(**start), "slack:UBOB") == "starting 8 rank(s), step 0/8"
    done = {**running, "progress": {**prog, "step": 8, "collective": "finish"}}
    assert progress_text(reply(**done), "slack:UBOB") == "all 8 steps done, collecting results"


def test_seen_before_lists_linked_past_incidents_with_their_fix() -> None:
    from bot.slack.message import details_message, first_message

    answer = make(summary="Most likely: shm_ipc_container", verdict="diagnosed",
                  diagnosis={"root_causes": [{"category": "shm_ipc_container", "card": "c",
                                              "confidence": 0.7}]},
                  similar_incidents=[{"source": "https://github.com/NVIDIA/nccl/issues/473",
                                      "title": "unhandled system error in docker <b>",
                                      "category": "shm_ipc_container",
                                      "resolution": "Started the container with --ipc=host.",
                                      "score": 0.61}])
    for rendered in (first_message(answer, "en", "a1"), details_message(answer, "en")):
        text = json.dumps(rendered.blocks)
        assert "Seen before" in text and "<https://github.com/NVIDIA/nccl/issues/473|" in text
        assert "--ipc=host" in text and "<b>" not in text  # escaped
    assert "Seen before" not in json.dumps(first_message(make(), "en", "a1").blocks)


def test_every_preset_the_agent_can_suggest_makes_a_working_button() -> None:
    from bot.slack.message import first_buttons
    from bot.slack.nodes import params_for
    from tools.probe.presets import PROBE_PRESETS

    for preset in PROBE_PRESETS:
        answer = make(diagnosis={"root_causes": []},
                   suggested_probes=[{"node": "gpu-node-3", "preset": preset,
                                      "status": "proposed"}])
        actions = first_buttons(answer, "a1", "en", False)
        value = json.loads(next(e["value"] for e in actions["elements"]
                                if e["action_id"].startswith("ncclbot_probe")))
        assert value["node"] == "gpu-node-3" and value["preset"] == preset
        assert params_for(value["tool"], value["preset"]) == PROBE_PRESETS[preset]


def test_one_thread_memory_for_slack_and_the_agent(tmp_path: Path) -> None:
    """Slack's conversation and the LLM agent read and write the same ThreadState."""
    from bot.state.threads import SqliteThreadStore

    store = Store(tmp_path / "state.sqlite3")
    ctx = store.context("C1", "10.1")
    ctx.questions.append("why did it hang?")
    store.save_context("C1", "10.1", ctx)
    agent = SqliteThreadStore(tmp_path / "state.sqlite3")  # what the Troubleshooter hands over
    state = agent.get("C1:10.1")
    assert state is not None and state.questions == ["why did it hang?"]
    state.attachments["train.log"] = "/data/train.log"
    agent.put(state)
    again = store.context("C1", "10.1")
    assert again.attachments == {"train.log": "/data/train.log"}
    assert again.questions == ["why did it hang?"] and store.has_thread("C1", "10.1")
    assert not store.has_thread("C1", "10.2")


def test_first_messages_of_real_answers_stay_within_the_limits() -> None:
    """Every first message, rendered as Slack shows it: at most 800 characters of text and
    50 blocks, no section over 3,000 characters, no raw JSON, one language."""
    import re

    from bot.answering.analysis import analyze_sources, answer_from_analysis
    from bot.answering.knowledge import bundled_cards
    from bot.knowledge.incidents import load_incidents
    from bot.logs.sources import text_source
    from bot.slack.message import FIRST_MAX, first_message, message_text

    cjk = re.compile(r"[\u4e00-\u9fff]")
    cards = list(bundled_cards())
    incidents = load_incidents()[::12]
    assert len(incidents) >= 10
    for inc in incidents:
        report, diagnosis = analyze_sources([text_source("job.log", inc.log)], None, cards)
        answer = answer_from_analysis(report, diagnosis, cards, "both")
        for lang in ("en", "zh", "both"):
            r = first_message(answer, lang, "a1", ["Accepted: job.log (12 KiB)"])
            text = message_text(r.blocks)
            assert len(text) <= FIRST_MAX and len(r.blocks) <= 50, (inc.id, lang, len(text))
            assert all(len(b.get("text", {}).get("text", "")) <= 3000 for b in r.blocks)
            assert not re.search(r'[{\[]\s*"[^"]+"\s*:', text), (inc.id, text)  # no JSON
            if lang != "zh":
                assert not cjk.search(text), (inc.id, text)  # English only
            elif answer.root_causes:
                assert cjk.search(r.blocks[0]["text"]["text"]), inc.id  # a Chinese headline


def test_the_bot_token_only_goes_to_slack_hosts() -> None:
    from bot.slack.files import file_url_refused

    assert file_url_refused("https://files.slack.com/files-pri/T1-F1/download/a.log") is None
    assert file_url_refused("http://127.0.0.1:8080/files-pri/x", "http://127.0.0.1:8080/api/") \
        is None  # a configured local Slack
    for bad in ("file:///etc/passwd", "http://files.slack.com/x", "https://evil.example/x",
                "https://files.slack.com.evil.example/x", "https://user:pw@files.slack.com/x",
                "http://127.0.0.1:9999/x"):
        assert file_url_refused(bad, "http://127.0.0.1:8080/api/") is not None, bad


def test_a_hang_or_timeout_answer_offers_to_sample_the_job_live() -> None:
    from bot.slack.message import first_buttons

    watchdog = {"file": "rank5.log", "line": 3, "text": "[Rank 5] Watchdog caught collective "
                "operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=600000)"}

    def buttons(category: str, kinds: tuple[str, ...] = ("rule",), verdict: str = "unknown"
                ) -> list[dict[str, object]]:
        answer = make(verdict=verdict,
                      diagnosis={"root_causes": [{"category": category, "card": None,
                                                  "confidence": 0.6, "kinds": list(kinds),
                                                  "evidence": [watchdog] if kinds != (
                                                      "question",) else []}],
                                 "suspects": [{"rank": 5, "host": "gpu-node-17"}]},
                      input={"hosts": ["gpu-node-17", "gpu-node-18", "localhost"]})
        return first_buttons(answer, "a1", "en", False)["elements"]  # type: ignore[no-any-return]

    hang = [e for e in buttons("straggler_or_imbalance") if "stuck" in json.dumps(e)]
    assert len(hang) == 1
    value = json.loads(str(hang[0]["value"]))
    assert value == {"nodes": ["gpu-node-17", "gpu-node-18"], "tool": "hang", "a": "a1"}
    assert not [e for e in buttons("rank_crashed") if "stuck" in json.dumps(e)]
    # no evidence of a hang (only a question's words, or a log without a failure): no offer
    assert not [e for e in buttons("straggler_or_imbalance", ("question",))
                if "stuck" in json.dumps(e)]
    assert not [e for e in buttons("straggler_or_imbalance", verdict="no_evidence")
                if "stuck" in json.dumps(e)]

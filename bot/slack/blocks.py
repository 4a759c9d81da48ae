"""Block Kit rendering of answers, statuses and diagnostics (pure: an `Answer` or a tool
result in, Block Kit dicts out).

Slack limits: 3000 characters per section text, 50 blocks per message. Anything cut is
flagged (`Rendered.truncated`) so the caller attaches the full report as a file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.contract import Answer, PerLanguage, RootCauseOut

MAX_TEXT = 3000
MAX_BLOCKS = 50
MAX_CAUSES = 3
MAX_EVIDENCE = 3
MAX_LINE = 400

ACTION_PROBE = "ncclbot_probe"
ACTION_OTHER = "ncclbot_other_causes"
ACTION_UP = "ncclbot_feedback_up"
ACTION_DOWN = "ncclbot_feedback_down"
VIEW_REASON = "ncclbot_feedback_reason"

HEADINGS = {
    "remediation": {"en": "Remediation", "zh": "修复建议"},
    "verify": {"en": "Verify", "zh": "验证"},
    "next": {"en": "Next steps", "zh": "下一步"},
}


@dataclass
class Rendered:
    """A message: blocks, the notification text, and whether something was cut."""

    blocks: list[dict[str, Any]]
    text: str
    truncated: bool = False
    notes: list[str] = field(default_factory=list)


def langs(lang: str) -> tuple[str, ...]:
    return ("en", "zh") if lang == "both" else (lang,)


def clip(text: str, limit: int = MAX_TEXT) -> tuple[str, bool]:
    """Cut text to `limit` characters on a line boundary where possible, keeping code
    fences balanced: a cut inside a ``` block closes it before the ellipsis."""
    if len(text) <= limit:
        return text, False
    tail, fence = "\n…", "\n```"
    cut = text[: limit - len(tail) - len(fence)]
    if "\n" in cut[limit // 2:]:
        cut = cut[: cut.rindex("\n")]
    if text[len(cut):].startswith("`"):
        cut = cut.rstrip("`")  # never split a fence: ``|` would read as an opening ``
    if cut.count("```") % 2:
        cut += fence
    return cut + tail, True


def section(text: str) -> tuple[dict[str, Any], bool]:
    body, cut = clip(text)
    return {"type": "section", "text": {"type": "mrkdwn", "text": body}}, cut


def context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": clip(text)[0]}]}


def esc(text: str) -> str:
    """Escape Slack's control characters in free text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def code(text: str) -> str:
    return esc(text.replace("```", "ˋˋˋ"))


def _pick(d: Any, lang: str) -> str:
    if not d:
        return ""
    return " / ".join(str(d[lg]) for lg in langs(lang) if d.get(lg))


def nodes_named(answer: Answer, limit: int = 3) -> list[str]:
    """Hosts the analysis names (suspects first), for the probe buttons."""
    out: list[str] = []
    for s in answer.diagnosis.suspects:
        if s.host and s.host not in out:
            out.append(s.host)
    return out[:limit]


def cause_text(rc: RootCauseOut, n: int, lang: str) -> str:
    name = _pick(rc.category_name, lang) or rc.category
    title = _pick(rc.title, lang)
    lines = [f"*{n}. {esc(title or name)}*  ·  `{rc.category}`  ·  "
             f"confidence {rc.confidence:.0%}"]
    if title:
        lines.append(f"_{esc(name)}_")
    if rc.evidence:
        shown = "\n".join(f"{e.file}:{e.line}: {code(e.text[:MAX_LINE])}"
                          for e in rc.evidence[:MAX_EVIDENCE])
        lines.append(f"```{shown}```")
    return "\n".join(lines)


def suspects_text(answer: Answer) -> str:
    rows = []
    for i, s in enumerate(answer.diagnosis.suspects, 1):
        who = ", ".join(x for x in (f"rank {s.rank}" if s.rank is not None else "",
                                    f"host `{s.host}`" if s.host else "") if x)
        rows.append(f"{i}. {who or 'unknown'}: {esc(s.reason)}")
    return "*Suspects*\n" + "\n".join(rows[:5]) if rows else ""


def steps_text(kind: str, steps: PerLanguage | None, lang: str) -> list[str]:
    out = []
    for lg in langs(lang):
        items = (steps or {}).get(lg) or []  # type: ignore[call-overload]  # lg is en or zh
        if items:
            body = "\n".join(f"{i}. {esc(s)}" for i, s in enumerate(items, 1))
            out.append(f"*{HEADINGS[kind][lg]}*\n{body}")
    return out


def citations_text(answer: Answer, lang: str) -> str:
    rows = []
    for c in answer.citations:
        title = _pick(c.title, "en" if lang == "both" else lang) or c.card
        links = " ".join(f"<{u}|[{i}]>" for i, u in enumerate(c.sources, 1))
        rows.append(f"`{c.card}` {esc(title)} {links}".strip())
    return "*Sources*\n" + "\n".join(rows) if rows else ""


def seen_before_text(answer: Answer) -> str:
    """Similar past incidents as linked titles with what fixed them."""
    rows = []
    for inc in answer.similar_incidents[:3]:
        rows.append(f"• <{inc.source}|{esc(inc.title)[:120]}> ({inc.category}): "
                    f"{esc(inc.resolution)[:200]}")
    return "*Seen before*\n" + "\n".join(rows) if rows else ""


def button(text: str, action_id: str, value: str, style: str | None = None) -> dict[str, Any]:
    b: dict[str, Any] = {"type": "button", "action_id": action_id, "value": value[:2000],
                         "text": {"type": "plain_text", "text": text[:75], "emoji": True}}
    if style:
        b["style"] = style
    return b


def others(candidates: Sequence[dict[str, Any]], answer: Answer) -> list[dict[str, Any]]:
    """The candidates (earlier answers' causes) that this answer does not list."""
    shown = {(rc.category, rc.card) for rc in answer.root_causes}
    return [c for c in candidates if (c.get("category"), c.get("card")) not in shown]


def proposed_probes(answer: Answer) -> list[Any]:
    """The agent's suggested probes that name a node and are still only proposed."""
    return [s for s in answer.suggested_probes if s.node and s.status == "proposed"]


def probe_targets(answer: Answer, limit: int = 4) -> list[tuple[str, str, str]]:
    """(tool, node, preset) for the probe buttons: the agent's suggestions first, then the
    hosts the analysis names (quick preset), without repeats."""
    out: list[tuple[str, str, str]] = []
    for s in proposed_probes(answer):
        out.append(("probe", s.node, s.preset or "quick"))
    probes = answer.probes
    tool = "probe" if "probe" in probes or not probes else probes[0]
    out += [(tool, node, "quick") for node in nodes_named(answer)]
    return list(dict.fromkeys(out))[:limit]


def answer_buttons(answer: Answer, answer_id: str, more_causes: bool = False
                   ) -> dict[str, Any]:
    """Probe buttons (on-call only, checked on click), other causes, feedback."""
    elements = []
    for i, (tool, node, preset) in enumerate(probe_targets(answer)):
        label = f"Run {tool} on {node}" if preset == "quick" else f"Run {tool} {preset} on {node}"
        elements.append(button(label, f"{ACTION_PROBE}:{i}",
                               json.dumps({"node": node, "tool": tool, "preset": preset,
                                           "a": answer_id}),
                               "primary" if i == 0 else None))
    if more_causes or len(answer.root_causes) > 1:
        elements.append(button("Other possible causes", ACTION_OTHER, answer_id))
    elements.append(button("👍 Helpful", ACTION_UP, answer_id))
    elements.append(button("👎 Not helpful", ACTION_DOWN, answer_id))
    return {"type": "actions", "block_id": f"ncclbot_actions:{answer_id}", "elements": elements}


def suggested_text(answer: Answer) -> str:
    rows = [f"• `probe {esc(s.preset or 'quick')}` on `{esc(s.node)}`"
            + (f": {esc(s.reason)}" if s.reason else "")
            for s in proposed_probes(answer)]
    return "*Suggested diagnostics* (on-call can run them below)\n" + "\n".join(rows) \
        if rows else ""


def render_answer(answer: Answer, lang: str = "both", answer_id: str = "",
                  notes: list[str] | tuple[str, ...] = (), more_causes: bool = False
                  ) -> Rendered:
    """The threaded answer: verdict, the LLM's explanation (when there is one), causes with
    evidence, suspects, remediation, suggested probes, sources. `more_causes`: the thread
    has earlier candidates, so "Other possible causes" is offered even for one cause."""
    texts: list[str] = [f"*{esc(answer.summary or answer.verdict)}*"]
    for extra in (answer.explanation, answer.text):
        if extra.strip():
            texts.append(esc(extra.strip()))
    for n, rc in enumerate(answer.root_causes[:1], 1):
        texts.append(cause_text(rc, n, lang))
    if sus := suspects_text(answer):
        texts.append(sus)
    texts += steps_text("remediation", answer.remediation, lang)
    texts += steps_text("next", answer.next_steps, lang)
    if sug := suggested_text(answer):
        texts.append(sug)
    if seen := seen_before_text(answer):
        texts.append(seen)
    if cit := citations_text(answer, lang):
        texts.append(cit)
    return assemble(texts, answer_buttons(answer, answer_id, more_causes) if answer_id else None,
                    list(notes) + answer.notes, text=answer.summary or "ncclbot answer")


def render_other_causes(answer: Answer, lang: str = "both",
                        earlier: list[dict[str, Any]] | tuple[dict[str, Any], ...] = ()
                        ) -> Rendered:
    """The answer's other root causes, then candidates earlier answers in the thread had."""
    causes = answer.root_causes
    texts = ["*Other possible causes*"] + [cause_text(rc, n, lang) + _rc_steps(rc, lang)
                                           for n, rc in enumerate(causes[1:], 2)]
    rows = [f"• {esc(_pick(c.get('title'), lang) or str(c.get('category')))}  ·  "
            f"`{c.get('category')}`  ·  confidence {float(c.get('confidence') or 0):.0%}"
            for c in others(earlier, answer)]
    if rows:
        texts.append("*Also considered earlier in this thread*\n" + "\n".join(rows[:10]))
    if len(causes) < 2 and not rows:
        texts.append("No other candidate matched the evidence.")
    return assemble(texts, None, [], text="Other possible causes")


def _rc_steps(rc: RootCauseOut, lang: str) -> str:
    steps: dict[str, list[str]] = {str(k): v for k, v in rc.remediation.items()}
    first = [f"{lg}: {esc(v[0])}" for lg in langs(lang) if (v := steps.get(lg))]
    return ("\n" + "\n".join(first)) if first else ""


def assemble(texts: list[str], actions: dict[str, Any] | None, notes: list[str],
             text: str) -> Rendered:
    """Sections under the 50-block limit, notes as context, the actions last."""
    blocks: list[dict[str, Any]] = []
    truncated = False
    budget = MAX_BLOCKS - (1 if actions else 0) - (1 if notes else 0) - 1
    for t in texts:
        if len(blocks) >= budget:
            truncated = True
            break
        block, cut = section(t)
        truncated |= cut
        blocks.append(block)
    if notes:
        blocks.append(context("\n".join(f"• {esc(n)}" for n in notes[:20])))
    if truncated:
        blocks.append(context("The answer was shortened for Slack; the full report is attached."))
    if actions:
        blocks.append(actions)
    return Rendered(blocks, clip(text, 2900)[0], truncated)


def full_report(answer: Answer) -> str:
    """The whole answer as Markdown, for the attached file."""
    lines = [f"# {answer.summary}", ""]
    for n, rc in enumerate(answer.root_causes, 1):
        lines.append(f"## {n}. {rc.category} ({rc.confidence:.0%}) card {rc.card}")
        lines += [f"- {_pick(rc.title, 'both')}", ""]
        lines += [f"    {e.file}:{e.line}: {e.text}" for e in rc.evidence]
        for lg, steps in rc.remediation.items():
            lines += ["", f"### remediation ({lg})"] + [f"{i}. {s}" for i, s in enumerate(steps, 1)]
        lines.append("")
    lines += ["## JSON", "", "```json", answer.to_json(), "```"]
    return "\n".join(lines)


def status(text: str) -> Rendered:
    return Rendered([{"type": "context", "elements": [
        {"type": "mrkdwn", "text": f":hourglass_flowing_sand: {esc(text)}"}]}], text)


def message(text: str) -> Rendered:
    block, _ = section(text)
    return Rendered([block], clip(text, 2900)[0])


HELP = """*ncclbot* troubleshoots NCCL and distributed-training failures.
• Mention me or DM me with a question, and attach crash logs (.log .txt .gz .zip); I answer \
in the thread and remember the thread's logs for follow-up questions.
• `/nccl ask QUESTION` ask without a log
• `/nccl probe NODE [quick|full|gloo]` run a bounded NCCL bandwidth probe on NODE (on-call only)
• `/nccl topo NODE` · `/nccl env NODE` · `/nccl xid NODE` node diagnostics (on-call only)
• `/nccl lang en|zh|both|auto [channel]` answer language for you (or this channel)
• `/nccl help` this text"""


def help_message() -> Rendered:
    return message(HELP)


def tool_result(node: str, tool: str, result: dict[str, Any]) -> Rendered:
    """A node diagnostic's result: status, findings, then the data (truncated)."""
    status_ = result.get("status", "error")
    icon = {"success": ":white_check_mark:", "unavailable": ":grey_question:"}.get(
        status_, ":x:")
    texts = [f"{icon} *{tool}* on `{esc(node)}`: {status_}"]
    if result.get("error"):
        texts.append(f"*Error*: {esc(str(result['error']))}")
    findings = result.get("findings") or []
    if findings:
        texts.append("*Findings*\n" + "\n".join(
            f"• [{f.get('severity')}] {esc(str(f.get('message')))}"
            + (f" (card `{f['card']}`)" if f.get("card") else "") for f in findings[:15]))
    data = result.get("data") or {}
    if data:
        texts.append("```" + code(json.dumps(data, ensure_ascii=False, indent=1)[:2800]) + "```")
    notes = [f"invocation: {result['invocation']}"] if result.get("invocation") else []
    return assemble(texts, None, notes, text=f"{tool} on {node}: {status_}")


def reason_modal(answer_id: str, channel: str, thread_ts: str) -> dict[str, Any]:
    """The optional 'why not helpful' dialog."""
    return {
        "type": "modal", "callback_id": VIEW_REASON,
        "private_metadata": json.dumps({"a": answer_id, "c": channel, "t": thread_ts}),
        "title": {"type": "plain_text", "text": "Thanks for the feedback"},
        "submit": {"type": "plain_text", "text": "Send"},
        "blocks": [{"type": "input", "block_id": "reason", "optional": True,
                    "label": {"type": "plain_text", "text": "What was wrong? (optional)"},
                    "element": {"type": "plain_text_input", "action_id": "text",
                                "multiline": True, "max_length": 1000}}],
    }

"""What an answer looks like in Slack (pure: an `Answer` in, Block Kit out).

Read at 3 a.m. in a 460 px thread pane, so the first message is short and in the reader's
language: a header with the verdict in plain words, the suspect, the top three steps,
"seen before" as one linked title, a context line and buttons tied to the finding
(at most `FIRST_MAX` characters of text). Everything else is posted in the thread only
when asked for: the details (evidence lines, suspects, every step, verify steps, sources
with their titles), the other language, the other possible causes. A question asked in a
thread that already has an answer gets a short reply to that question (`follow_up`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.answering.answer import CERTAINTY_WORDS
from bot.answering.contract import Answer, Lang, RootCauseOut
from bot.answering.followup import MAX_CHARS
from bot.logs.crossrank import rank_line_in, reason_in
from bot.render.lang import evidence_in
from bot.render.seen import resolution_in, seen_title
from bot.render.seen import source_name as _source_name
from bot.render.text import cut_words, shorten
from bot.slack.blocks import (
    ACTION_DOWN,
    ACTION_OTHER,
    ACTION_PROBE,
    ACTION_UP,
    MAX_EVIDENCE,
    MAX_LINE,
    Block,
    Rendered,
    assemble,
    button,
    code,
    context,
    esc,
    others,
    proposed_probes,
    suggested_text,
)
from bot.slack.payloads import DecideButton, LangButton, RunButton
from bot.slack.resolve import ACTION_RESOLVE, seen_line
from tools.probe.summary import probe_summary
from tools.registry import TOOLS, default_preset, summarise
from tools.result import Finding, ToolResult

#: The first message's text (header, sections, context), in characters.
FIRST_MAX = 800
#: A follow-up reply's text, in characters (the reply's own bound).
FOLLOW_UP_MAX = MAX_CHARS
HEADER_MAX = 150
ACTION_DETAILS = "ncclbot_details"
ACTION_LANG = "ncclbot_other_language"

WORDS: dict[str, dict[str, str]] = {
    "en": {**CERTAINTY_WORDS["en"],
           "unknown": "Unclear", "suspect": "Suspect", "steps": "What to do",
           "seen": "Seen before", "details": "Details",
           "other": "Other possible causes", "switch": "中文", "no_evidence":
           "No failure evidence found in the log.", "error": "I could not answer that.",
           "more": "Evidence, all steps, verify steps and sources: *Details*.",
           "verify": "Verify", "sources": "Sources",
           "suspects": "Suspects", "ranks": "Ranks", "next": "What would help",
           "steps_all": "Steps", "confidence": "confidence", "helpful": "👍 Helpful",
           "not_helpful": "👎 Not helpful", "from": "From the thread's answer",
           "why_stuck": "Why is it stuck?", "resolved": "✅ Resolved",
           "decide": "The question that decides", "run": "Run {tool} on {node}"},
    "zh": {**CERTAINTY_WORDS["zh"], "unknown": "不确定",
           "suspect": "可疑", "steps": "建议步骤", "seen": "以前见过",
           "details": "详情", "other": "其他可能原因",
           "switch": "English", "no_evidence": "日志中没有发现故障证据。",
           "error": "无法回答这个问题。", "more": "证据、全部步骤、验证方法和来源：点 *详情*。",
           "verify": "验证", "sources": "来源", "suspects": "可疑 rank",
           "ranks": "各 rank 情况", "next": "还需要的信息", "steps_all": "步骤",
           "confidence": "置信度", "helpful": "👍 有帮助", "not_helpful": "👎 没帮助",
           "from": "根据本线程的分析", "why_stuck": "为什么卡住？", "resolved": "✅ 已解决",
           "decide": "能确定原因的问题", "run": "在 {node} 上运行 {tool}"},
}


def primary(lang: str) -> Lang:
    """The reader's language: Chinese when chosen, English otherwise (both: English first)."""
    return "zh" if lang == "zh" else "en"


def other(lang: Lang) -> Lang:
    return "en" if lang == "zh" else "zh"


def _pick(texts: dict[Lang, str], lg: Lang) -> str:
    d: dict[str, str] = {str(k): v for k, v in texts.items()}
    return d.get(lg) or d.get("en") or d.get("zh") or ""


def _steps(per_lang: dict[Lang, list[str]] | None, lg: Lang) -> list[str]:
    d: dict[str, list[str]] = {str(k): v for k, v in (per_lang or {}).items()}
    return [slack_wording(s) for s in d.get(lg) or d.get("en") or []]


_CLI_NODE = re.compile(rf"`ncclbot node ({'|'.join(TOOLS)})(?: --node [\w.-]+)?`")
_CLI_LOG = re.compile(r"\s*[(（]`--log FILE`[)）]")


def slack_wording(text: str) -> str:
    """Steps written for the terminal, said the Slack way: the slash command instead of
    `ncclbot node ...`, attaching to the thread instead of `--log FILE`."""
    return _CLI_NODE.sub(r"`/nccl \1 NODE`", _CLI_LOG.sub("", text))


def cause_title(rc: RootCauseOut, lg: Lang) -> str:
    """The card's title when the card's own evidence matched, else the cause's category."""
    if rc.matched:
        return _pick(rc.title, lg) or _pick(rc.category_name, lg) or rc.category
    return _pick(rc.category_name, lg) or _pick(rc.title, lg) or rc.category


def full_headline(answer: Answer, lg: Lang) -> str:
    """The answer's own first line in `lg` (`Answer.headline`), or '' for older answers."""
    heads: dict[str, str] = {str(k): v for k, v in answer.headline.items()}
    return heads.get(lg) or ""


def headline(answer: Answer, lg: Lang) -> str:
    """The verdict in plain words, with the suspect (the header and the notification): the
    answer's headline, shortened by sentence to fit a header."""
    if full := full_headline(answer, lg):
        return shorten(full, HEADER_MAX)
    w = WORDS[lg]
    if answer.verdict == "error":
        return w["error"] if lg == "zh" else answer.summary or w["error"]
    if not answer.root_causes:
        return w["no_evidence"] if answer.verdict == "no_evidence" else answer.summary
    rc = answer.root_causes[0]
    word = w[rc.certainty or "weak"] if answer.verdict == "diagnosed" else w["unknown"]
    sep = "：" if lg == "zh" else ": "
    who = suspect_name(answer, lg)
    tail = f" — {who}" if who else ""
    title = cause_title(rc, lg)
    room = HEADER_MAX - len(word) - len(sep) - len(tail)
    title = cut_words(title, max(10, room))
    return shorten(f"{word}{sep}{title}{tail}", HEADER_MAX)


def suspect_name(answer: Answer, lg: Lang) -> str:
    """`rank 5 on gpu-node-17` (`gpu-node-17 上的 rank 5`), or empty without a suspect."""
    if not answer.diagnosis.suspects:
        return ""
    s = answer.diagnosis.suspects[0]
    rank = f"rank {s.rank}" if s.rank is not None else ""
    if lg == "zh":
        return f"{s.host} 上的 {rank}" if s.host and rank else (s.host or rank)
    return " on ".join(x for x in (rank, s.host or "") if x)


def short_reason(reason: str) -> str:
    """The part of a suspect's reason that says what happened (e.g. 'failed first: oom')."""
    parts = [p.strip() for p in reason.split(";") if p.strip()]
    best = next((p for p in parts if p.startswith(("failed first", "最先出错"))),
                parts[0] if parts else "")
    return best[:90]


def suspect_line(answer: Answer, lg: Lang) -> str:
    if not answer.diagnosis.suspects:
        return ""
    s = answer.diagnosis.suspects[0]
    w = WORDS[lg]
    who_rank = f"rank {s.rank}" if s.rank is not None else ""
    if lg == "zh":
        who = f"{s.host} 上的 {who_rank}" if s.host and who_rank else (s.host or who_rank)
        why = f"（{esc(short_reason(reason_in(s.reason, lg)))}）" if s.reason else ""
    else:
        who = " on ".join(x for x in (who_rank, s.host or "") if x)
        why = f" ({esc(short_reason(s.reason))})" if s.reason else ""
    return f"*{w['suspect']}*{'：' if lg == 'zh' else ': '}{esc(who or '?')}{why}"


def _budgeted_steps(steps: Sequence[str], budget: int) -> str:
    """Numbered steps, each cut so that all of them fit in `budget` characters."""
    steps = steps[:max(0, budget // 64)]  # fewer steps rather than lines past the budget
    if not steps:
        return ""
    per = max(60, budget // len(steps) - 4)
    lines = []
    for i, s in enumerate(steps, 1):
        text = cut_words(s, per)
        lines.append(f"{i}. {esc(text)}")
    return "\n".join(lines)


def _seen_before(answer: Answer, lg: Lang, budget: int) -> str:
    if not answer.similar_incidents or budget < 60:
        return ""
    inc = answer.similar_incidents[0]
    if inc.local:  # the team's own: where, when, what fixed it, who, the thread
        return (f"*{WORDS[lg]['seen']}*{'：' if lg == 'zh' else ': '}"
                f"{seen_line(inc, budget - len(WORDS[lg]['seen']) - 4, lg)}")
    title = esc(cut_words(seen_title(inc, lg),
                          max(20, budget // 2)))
    line = f"*{WORDS[lg]['seen']}*{'：' if lg == 'zh' else ': '}<{inc.source}|{title}>"
    left = budget - len(title) - len(WORDS[lg]["seen"]) - 8
    if left > 30 and (fix := resolution_in(inc, lg)):
        fix = shorten(fix, left)
        line += f" — {esc(fix)}"
    return line


def message_text(blocks: Sequence[Block]) -> str:
    """What a reader sees of the blocks, as text (header, sections, context; not buttons)."""
    out = []
    for b in blocks:
        if b["type"] in ("header", "section") and "text" in b:
            out.append(b["text"]["text"])
        elif b["type"] == "context":
            out += [t if isinstance(t := e.get("text", ""), str) else t["text"]
                    for e in b.get("elements", [])]
    return "\n".join(out)


def first_message(answer: Answer, lang: str = "both", answer_id: str = "",
                  notes: Sequence[str] = (), more_causes: bool = False) -> Rendered:
    """The answer's first message: at most `FIRST_MAX` characters of text, one language."""
    lg = primary(lang)
    w = WORDS[lg]
    head = headline(answer, lg)
    blocks: list[Block] = [{"type": "header",
                                     "text": {"type": "plain_text", "text": head,
                                              "emoji": True}}]
    parts: list[str] = []
    if rest := full_headline(answer, lg)[len(head):].strip():  # what did not fit the header
        parts.append(f"*{esc(rest)}*")
    if answer.verdict != "no_evidence" and (sus := suspect_line(answer, lg)):
        parts.append(sus)
    explanation = (answer.explanation or answer.text).strip()
    if explanation:
        parts.append(esc(shorten(explanation, 300)))
    if answer.deciding is not None:
        parts.append(f"*{w['decide']}*{'：' if lg == 'zh' else ': '}"
                     f"{esc(_pick(answer.deciding.text, lg))}")
    rc = answer.root_causes[0] if answer.root_causes else None
    foot = []
    if rc is not None and answer.verdict != "no_evidence":
        foot.append(f"`{rc.category}` · {w[rc.certainty or 'weak']} "
                    f"({w['confidence']} {rc.confidence:.0%})")
    if answer.verdict not in ("error",) and (answer.root_causes or answer.next_steps):
        foot.append(w["more"])
    foot += [esc(n)[:160] for n in [*notes, *answer.notes][:2]]
    foot_text = "\n".join(foot)
    used = len(head) + sum(len(p) for p in parts) + len(foot_text) + 10
    steps = _steps(answer.remediation, lg)[:3] or _steps(answer.next_steps, lg)[:3]
    # "seen before" (what fixed it last time, the team's own thread) goes before the steps'
    # budget: with little room the steps are fewer, never the line that names the fix
    seen = _seen_before(answer, lg, min(220, FIRST_MAX - used - 2))
    if steps:
        body = _budgeted_steps(steps, FIRST_MAX - used - (len(seen) + 1 if seen else 0)
                               - len(w["steps"]) - 6)
        if body:
            parts.append(f"*{w['steps']}*\n{body}")
    if seen:
        parts.append(seen)
    over = len(head) + sum(len(p) + 1 for p in parts) + len(foot_text) + 1 - FIRST_MAX
    while over > 0 and parts:  # the estimate was short: cut the longest part to fit
        # the "seen before" line last: its links (the thread, the fix) are never cut
        cuttable = [k for k in range(len(parts)) if parts[k] != seen] or list(range(len(parts)))
        i = max(cuttable, key=lambda k: len(parts[k]))
        keep = max(0, len(parts[i]) - over - 1)
        over -= len(parts[i]) - keep - (1 if keep else 0)
        parts[i] = cut_words(parts[i], keep) if keep > 20 else ""
        parts = [p for p in parts if p]
    for p in parts:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": p}})
    if foot_text:
        blocks.append(context(foot_text))
    if answer_id and answer.deciding is not None:
        blocks.append(deciding_buttons(answer, answer_id, lg))
    if answer_id:
        blocks.append(first_buttons(answer, answer_id, lg, more_causes))
    return Rendered(blocks, head)


ACTION_DECIDE = "ncclbot_decide"
ANSWER_WORDS = {"en": {"yes": "Yes", "no": "No"}, "zh": {"yes": "是", "no": "否"}}


def deciding_buttons(answer: Answer, answer_id: str, lg: Lang) -> Block:
    """One button per answer to the deciding question; a click is evidence (the value:
    the answer id, the question id and the answer)."""
    q = answer.deciding
    assert q is not None
    return {"type": "actions", "block_id": f"ncclbot_decide:{answer_id}",
            "elements": [button(ANSWER_WORDS[lg].get(a, a), f"{ACTION_DECIDE}:{a}",
                                DecideButton(a=answer_id, q=q.id, v=a).encode())
                         for a in q.answers]}


def first_buttons(answer: Answer, answer_id: str, lg: Lang, more_causes: bool
                  ) -> Block:
    """Details, other causes, the other language, diagnostics the finding calls for, and
    feedback (only on an answer that names a cause)."""
    w = WORDS[lg]
    elements = []
    has_cause = bool(answer.root_causes) and answer.verdict != "no_evidence"
    if answer.root_causes or answer.next_steps:
        elements.append(button(w["details"], ACTION_DETAILS, answer_id, "primary"))
    if more_causes or len(answer.root_causes) > 1:
        elements.append(button(w["other"], ACTION_OTHER, answer_id))
    if answer.root_causes:
        elements.append(button(w["switch"], ACTION_LANG,
                               LangButton(a=answer_id, lang=other(lg)).encode()))
    for i, (tool, node, preset) in enumerate(finding_probes(answer)):
        label = w["run"].format(tool=tool if preset == default_preset(tool)
                                else f"{tool} {preset}", node=node)
        elements.append(button(label, f"{ACTION_PROBE}:{i}", RunButton(
            node=node, tool=tool, preset=preset, a=answer_id).encode()))
    if hosts := stuck_hosts(answer):
        elements.append(button(w["why_stuck"], f"{ACTION_PROBE}:hang", RunButton(
            nodes=hosts, tool="hang", a=answer_id).encode()))
    if has_cause:
        elements.append(button(w["helpful"], ACTION_UP, answer_id))
        elements.append(button(w["not_helpful"], ACTION_DOWN, answer_id))
    if answer.verdict != "error":  # the team's memory: what it really was
        elements.append(button(w["resolved"], ACTION_RESOLVE, answer_id))
    return {"type": "actions", "block_id": f"ncclbot_actions:{answer_id}", "elements": elements}


def finding_probes(answer: Answer, limit: int = 3) -> list[tuple[str, str, str]]:
    """(tool, node, preset) buttons tied to the finding: the agent's proposals, then the
    diagnostic the leading cause's card names, on the hosts the analysis suspects."""
    out = [("probe", s.node, s.preset or default_preset("probe"))
           for s in proposed_probes(answer)]
    if answer.verdict == "no_evidence":  # nothing failed: no node to suspect
        return out[:limit]
    hosts = list(dict.fromkeys(s.host for s in answer.diagnosis.suspects if s.host))[:2]
    tool = "probe" if "probe" in answer.probes else (answer.probes[0] if answer.probes else "")
    if tool:
        out += [(tool, h, default_preset(tool)) for h in hosts]
    return list(dict.fromkeys(out))[:limit]


#: causes under which a job may still be hanging now: worth sampling its ranks live
HANG_CATEGORIES = frozenset({"straggler_or_imbalance", "timeout_too_short",
                             "collective_mismatch"})


def stuck_hosts(answer: Answer, limit: int = 8) -> list[str]:
    """The hosts a "Why is it stuck?" button samples: those the answer names, when its
    leading cause is a hang or timeout (suspects first, then every host in the logs)."""
    if (not answer.root_causes or answer.root_causes[0].category not in HANG_CATEGORIES
            or answer.verdict == "no_evidence" or not hang_seen(answer)):
        return []
    hosts = [s.host for s in answer.diagnosis.suspects if s.host]
    hosts += answer.input.hosts if answer.input else []
    return [h for h in dict.fromkeys(hosts) if h and h != "localhost"][:limit]


def hang_seen(answer: Answer) -> bool:
    """Whether the answer rests on evidence of a hang in the logs (a timeout, a rank that
    never reported), not only on a question's words."""
    rc = answer.root_causes[0]
    return bool(rc.evidence) and bool({"signature", "detected", "rule", "nearest"}
                                      & set(rc.kinds or ["rule"]))


def details_message(answer: Answer, lang: str = "both") -> Rendered:
    """The details, in the thread on request: evidence lines, suspects, every step, verify
    steps, what would help, the ranks, sources with their titles, notes."""
    lg = primary(lang)
    w = WORDS[lg]
    texts: list[str] = []
    for n, rc in enumerate(answer.root_causes[:3], 1):
        lines = [f"*{n}. {esc(cause_title(rc, lg))}* · `{rc.category}` · "
                 f"{w[rc.certainty or 'weak']} ({rc.confidence:.0%})"]
        if rc.evidence:
            shown = "\n".join(
                f"{e.file}:{e.line}: {code(evidence_in(e.line, e.text, lg)[:MAX_LINE])}"
                for e in rc.evidence[:MAX_EVIDENCE])
            lines.append(f"```{shown}```")
        texts.append("\n".join(lines))
    if answer.diagnosis.suspects:
        rows = [f"• {esc(' '.join(x for x in (f'rank {s.rank}' if s.rank is not None else '', s.host or '') if x) or '?')}: {esc(reason_in(s.reason, lg))}"  # noqa: E501
                for s in answer.diagnosis.suspects[:5]]
        texts.append(f"*{w['suspects']}*\n" + "\n".join(rows))
    if answer.diagnosis.ranks:
        texts.append(f"*{w['ranks']}*\n" + "\n".join(f"• {esc(rank_line_in(r, lg))}" for r in
                                                     answer.diagnosis.ranks[:6]))
    texts += step_sections(answer, lg, "steps_all")
    if sug := suggested_text(answer, lg):
        texts.append(sug)
    if answer.similar_incidents:
        texts.append(f"*{w['seen']}*\n" + "\n".join(
            (f"• {seen_line(i, 240, lg)}" if i.local else
             f"• <{i.source}|{esc(cut_words(seen_title(i, lg), 120))}> (`{i.category}`)"
             + (f": {esc(shorten(fix, 240))}" if (fix := resolution_in(i, lg)) else ""))
            for i in answer.similar_incidents[:3]))
    if answer.citations:
        texts.append(f"*{w['sources']}*\n" + "\n".join(
            f"• {esc(_pick(c.title, lg) or c.card)} (`{c.card}`): "
            + ", ".join(f"<{u}|{_source_name(u)}>" for u in c.sources[:3])
            for c in answer.citations))
    return assemble(texts, None, list(answer.notes), text=f"{w['details']}: {headline(answer, lg)}",
                    lang=lg)


def other_language_message(answer: Answer, lang: Lang) -> Rendered:
    """The headline, suspect and steps in the other language (on request)."""
    texts = [f"*{esc(headline(answer, lang))}*"]
    if sus := suspect_line(answer, lang):
        texts.append(sus)
    texts += step_sections(answer, lang, "steps")
    return assemble(texts, None, [], text=headline(answer, lang), lang=lang)


def step_sections(answer: Answer, lg: Lang, heading: str) -> list[str]:
    """The steps, verify steps and what would help, numbered, each under its heading."""
    w = WORDS[lg]
    return [f"*{w[key]}*\n" + "\n".join(f"{i}. {esc(s)}" for i, s in enumerate(steps, 1))
            for key, steps in ((heading, _steps(answer.remediation, lg)),
                               ("verify", _steps(answer.verify, lg)),
                               ("next", _steps(answer.next_steps, lg))) if steps]


def follow_up_message(text: str, lang: str, answer_id: str = "",
                      cards: Sequence[str] = ()) -> Rendered:
    """A short reply to a follow-up question (at most `FOLLOW_UP_MAX` characters)."""
    lg = primary(lang)
    body = shorten(text, FOLLOW_UP_MAX)
    blocks: list[Block] = [{"type": "section", "text": {"type": "mrkdwn", "text": esc(body)}}]
    if cards:
        blocks.append(context(f"{WORDS[lg]['from']}: " + ", ".join(f"`{c}`" for c in cards)))
    if answer_id:
        blocks.append({"type": "actions", "block_id": f"ncclbot_followup:{answer_id}",
                       "elements": [button(WORDS[lg]["details"], ACTION_DETAILS, answer_id)]})
    return Rendered(blocks, body[:150])


__all__ = [
    "ACTION_DECIDE",
    "ACTION_DETAILS",
    "ACTION_LANG",
    "FIRST_MAX",
    "FOLLOW_UP_MAX",
    "details_message",
    "first_message",
    "follow_up_message",
    "headline",
    "message_text",
    "other_language_message",
    "others",
]


# -- node diagnostics -----------------------------------------------------------------------

ICONS = {"success": ":white_check_mark:", "unavailable": ":grey_question:"}
SEVERITY_ORDER = {"error": 0, "critical": 0, "warning": 1, "warn": 1, "info": 2}


@dataclass
class Attachment:
    """A file posted in the thread beside a message (the raw result, a chart)."""

    filename: str
    title: str
    content: bytes


def _findings(result: ToolResult) -> list[Finding]:
    return sorted(result.findings, key=lambda f: SEVERITY_ORDER.get(f.severity, 3))


def diagnostic_message(node: str, tool: str, result: ToolResult
                       ) -> tuple[Rendered, list[Attachment]]:
    """A node diagnostic's result: the verdict first, findings, a compact table (probe);
    the raw result (and the probe's busbw chart) as files, never as message text."""
    status = result.status
    icon = ICONS.get(status, ":x:")
    findings = _findings(result)
    rows = list(result.data.get("results") or []) if tool == "probe" else []
    if result.error:
        verdict = result.error[:300]
    elif tool == "probe":
        verdict = probe_summary(rows)[0]
    else:  # the tool's own one-line summary (its ToolSpec)
        verdict = summarise(tool, result)
    texts = [f"{icon} *{tool}* on `{esc(node)}` ({status}): {esc(verdict)}"]
    if findings:
        texts.append("*Findings*\n" + "\n".join(
            f"• [{f.severity}] {esc(f.message)}"
            + (f" (card `{f.card}`)" if f.card else "") for f in findings[:8]))
    if rows:
        texts.append("```" + code("\n".join(probe_summary(rows)[1])) + "```")
    notes = [f"invocation: {result.invocation}"] if result.invocation else []
    files = [Attachment(f"{tool}-{node}.json", f"{tool} on {node}: the whole result",
                        json.dumps(result.model_dump(mode="json"), ensure_ascii=False,
                                   indent=1).encode())]
    if rows:
        chart = busbw_chart(rows, f"{tool} on {node}")
        if isinstance(chart, bytes):
            files.insert(0, Attachment(f"busbw-{node}.png", f"busbw on {node}", chart))
        else:
            notes.append(chart)
    notes.append("The whole result is attached as a file.")
    return assemble(texts, None, notes, text=f"{tool} on {node}: {verdict}"[:150]), files


def busbw_chart(rows: Sequence[dict[str, Any]], title: str) -> bytes | str:
    """The busbw-per-size chart as PNG bytes, or why there is none."""
    import tempfile
    from pathlib import Path

    from tools.probe.plot import plot_busbw

    with tempfile.TemporaryDirectory(prefix="ncclbot-chart-") as tmp:
        path = Path(tmp) / "busbw.png"
        error = plot_busbw(list(rows), str(path), title)
        if error:
            return f"no chart: {error}"
        return path.read_bytes()

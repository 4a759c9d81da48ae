"""Block Kit rendering of answers, statuses and diagnostics (pure: an `Answer` or a tool
result in, Block Kit dicts out).

Slack limits: 3000 characters per section text, 50 blocks per message. Anything cut is
flagged (`Rendered.truncated`) so the caller attaches the full report as a file. What an
answer's messages say is `bot.slack.message`; this module holds the pieces.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import ConfigDict, with_config
from typing_extensions import Required, TypedDict

from bot.answering.contract import Answer, ProbeSuggestion, RootCauseOut, Titles
from bot.state.threads import Candidate

MAX_TEXT = 3000
MAX_BLOCKS = 50
MAX_EVIDENCE = 3
MAX_LINE = 400

ACTION_PROBE = "ncclbot_probe"
ACTION_OTHER = "ncclbot_other_causes"
ACTION_UP = "ncclbot_feedback_up"
ACTION_DOWN = "ncclbot_feedback_down"
VIEW_REASON = "ncclbot_feedback_reason"

# Block Kit as the Web API takes it (https://api.slack.com/reference/block-kit). Only the
# keys ncclbot writes or reads are named; a message's blocks that Slack sends back with a
# button click keep any other key (`extra="allow"`), so they can be posted back unchanged.
_KEEP = ConfigDict(extra="allow")


@with_config(_KEEP)
class Text(TypedDict, total=False):
    """A text object: `plain_text` or `mrkdwn`."""

    type: Required[str]
    text: Required[str]
    emoji: bool


@with_config(_KEEP)
class Option(TypedDict):
    text: Text
    value: str


@with_config(_KEEP)
class OptionGroup(TypedDict):
    label: Text
    options: list[Option]


@with_config(_KEEP)
class Element(TypedDict, total=False):
    """A block element: a button, a select, a text input, or a context block's text (whose
    `text` is a string)."""

    type: Required[str]
    action_id: str
    value: str
    text: Text | str
    style: str
    placeholder: Text
    options: list[Option]
    option_groups: list[OptionGroup]
    initial_option: Option
    initial_value: str
    max_length: int
    multiline: bool


@with_config(_KEEP)
class Block(TypedDict, total=False):
    """A layout block: section, header, context, actions or input."""

    type: Required[str]
    block_id: str
    text: Text
    elements: list[Element]
    label: Text
    element: Element
    optional: bool


class View(TypedDict, total=False):
    """A modal (`views.open`)."""

    type: Required[str]
    callback_id: str
    private_metadata: str
    title: Text
    submit: Text
    blocks: list[Block]


def wire(blocks: Sequence[Block]) -> list[dict[str, Any]]:
    """Blocks as the Web API client's signature takes them (the same dicts): the one place
    Block Kit leaves its types."""
    return cast("list[dict[str, Any]]", list(blocks))


def wire_view(view: View) -> dict[str, Any]:
    """A modal as `views.open` takes it (the same dict)."""
    return cast("dict[str, Any]", view)


@dataclass
class Rendered:
    """A message: blocks, the notification text, and whether something was cut."""

    blocks: list[Block]
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


def section(text: str) -> tuple[Block, bool]:
    body, cut = clip(text)
    return {"type": "section", "text": {"type": "mrkdwn", "text": body}}, cut


def context(text: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": clip(text)[0]}]}


def esc(text: str) -> str:
    """Escape Slack's control characters in free text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def code(text: str) -> str:
    return esc(text.replace("```", "ˋˋˋ"))


def _pick(d: Titles | dict[str, str] | None, lang: str) -> str:
    texts: dict[str, str] = {str(k): v for k, v in (d or {}).items()}
    return " / ".join(texts[lg] for lg in langs(lang) if texts.get(lg))


def cause_text(rc: RootCauseOut, n: int, lang: str) -> str:
    name = _pick(rc.category_name, lang) or rc.category
    title = _pick(rc.title, lang)
    lines = [f"*{n}. {esc(title or name)}*  ·  `{rc.category}`  ·  "
             f"confidence {rc.confidence:.0%}"]
    if title:
        lines.append(esc(name))  # not in italics: Chinese reads badly slanted
    if rc.evidence:
        shown = "\n".join(f"{e.file}:{e.line}: {code(e.text[:MAX_LINE])}"
                          for e in rc.evidence[:MAX_EVIDENCE])
        lines.append(f"```{shown}```")
    return "\n".join(lines)


def button(text: str, action_id: str, value: str, style: str | None = None) -> Element:
    b: Element = {"type": "button", "action_id": action_id, "value": value[:2000],
                         "text": {"type": "plain_text", "text": text[:75], "emoji": True}}
    if style:
        b["style"] = style
    return b


def others(candidates: Sequence[Candidate], answer: Answer) -> list[Candidate]:
    """The candidates (earlier answers' causes) that this answer does not list."""
    shown = {(rc.category, rc.card) for rc in answer.root_causes}
    return [c for c in candidates if c.key not in shown]


def proposed_probes(answer: Answer) -> list[ProbeSuggestion]:
    """The agent's suggested probes that name a node and are still only proposed."""
    return [s for s in answer.suggested_probes if s.node and s.status == "proposed"]


#: the "Suggested diagnostics" block's words, in the thread's language
SUGGESTED_WORDS = {
    "en": {"head": "*Suggested diagnostics* (on-call can run them below)", "on": "on"},
    "zh": {"head": "*建议运行的诊断*（值班人员可用下面的按钮运行）", "on": "节点"},
}


def suggested_text(answer: Answer, lang: str = "en") -> str:
    """The agent's proposed probes, one line each, headed in `lang` (zh or en)."""
    w = SUGGESTED_WORDS["zh" if lang == "zh" else "en"]
    rows = [f"• `probe {esc(s.preset or 'quick')}` {w['on']} `{esc(s.node)}`"
            + (f"{'：' if lang == 'zh' else ': '}{esc(s.reason)}" if s.reason else "")
            for s in proposed_probes(answer)]
    return f"{w['head']}\n" + "\n".join(rows) if rows else ""


OTHER_WORDS = {
    "en": {"head": "Other possible causes", "earlier": "Also considered earlier in this thread",
           "none": "No other candidate matched the evidence.",
           "likely": "likely", "possible": "possible", "weak": "unclear"},
    "zh": {"head": "其他可能原因", "earlier": "本线程之前考虑过的原因",
           "none": "没有其他与证据相符的候选。",
           "likely": "很可能", "possible": "可能", "weak": "不确定"},
}


def render_other_causes(answer: Answer, lang: str = "both",
                        earlier: Sequence[Candidate] = ()
                        ) -> Rendered:
    """The answer's other root causes, one line each in one language (the thread's), then
    candidates earlier answers in the thread had."""
    lg = "zh" if lang == "zh" else "en"
    w = OTHER_WORDS[lg]
    lines = []
    for rc in answer.root_causes[1:]:
        name = _pick(rc.title, lg) if rc.matched else _pick(rc.category_name, lg)
        name = _short(name or rc.category)
        lines.append(f"• {esc(name)} · `{rc.category}` · {w[rc.certainty or 'weak']} "
                     f"({rc.confidence:.0%})")
    texts = [f"*{w['head']}*\n" + "\n".join(lines)] if lines else []
    rows = [f"• {esc(_short(_pick(c.title, lg) or c.category))} · "
            f"`{c.category}` · {c.confidence:.0%}"
            for c in others(earlier, answer)]
    if rows:
        texts.append(f"*{w['earlier']}*\n" + "\n".join(rows[:10]))
    if not lines and not rows:
        texts.append(w["none"])
    return assemble(texts, None, [], text=w["head"], lang=lg)


def _short(text: str, limit: int = 110) -> str:
    from bot.render.text import shorten

    return shorten(text, limit)


def _rc_steps(rc: RootCauseOut, lang: str) -> str:
    steps: dict[str, list[str]] = {str(k): v for k, v in rc.remediation.items()}
    first = [f"{lg}: {esc(v[0])}" for lg in langs(lang) if (v := steps.get(lg))]
    return ("\n" + "\n".join(first)) if first else ""


SHORTENED = {"en": "The answer was shortened for Slack; the full report is attached.",
             "zh": "回答太长，已为 Slack 缩短；完整报告见附件。"}


def assemble(texts: list[str], actions: Block | None, notes: list[str],
             text: str, lang: str = "en") -> Rendered:
    """Sections under the 50-block limit, notes as context, the actions last."""
    blocks: list[Block] = []
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
        blocks.append(context(SHORTENED["zh" if lang == "zh" else "en"]))
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


_MENTION = re.compile(r"<@[A-Z0-9]+>")


def esc_keep_mentions(text: str) -> str:
    """Escape free text but keep user mentions (`<@U123>`) working."""
    out, last = [], 0
    for m in _MENTION.finditer(text):
        out += [esc(text[last:m.start()]), m.group(0)]
        last = m.end()
    return "".join([*out, esc(text[last:])])


def status(text: str) -> Rendered:
    return Rendered([{"type": "context", "elements": [
        {"type": "mrkdwn", "text": f":hourglass_flowing_sand: {esc_keep_mentions(text)}"}]}],
        text)


def message(text: str) -> Rendered:
    block, _ = section(text)
    return Rendered([block], clip(text, 2900)[0])


def _node_help() -> str:
    """One line per node tool, from its ToolSpec (usage, title)."""
    from tools.registry import TOOLS

    return "\n".join(f"• `/nccl {s.name} {s.usage}` {s.headline} (on-call only)"
                     for s in TOOLS.values())


HELP = """*ncclbot* troubleshoots NCCL and distributed-training failures.
• Mention me or DM me with a question, and attach crash logs (.log .txt .gz .zip); I answer \
in the thread and remember the thread's logs for follow-up questions.
• `/nccl ask QUESTION` ask without a log
""" + _node_help() + """
• `/nccl lang en|zh|both|auto [channel]` answer language for you (or this channel)
• `/nccl help` this text"""


def help_message() -> Rendered:
    return message(HELP)



def reason_modal(answer_id: str, channel: str, thread_ts: str) -> View:
    """The optional 'why not helpful' dialog."""
    from bot.slack.payloads import FormMeta

    return {
        "type": "modal", "callback_id": VIEW_REASON,
        "private_metadata": FormMeta(a=answer_id, c=channel, t=thread_ts).encode(),
        "title": {"type": "plain_text", "text": "Thanks for the feedback"},
        "submit": {"type": "plain_text", "text": "Send"},
        "blocks": [{"type": "input", "block_id": "reason", "optional": True,
                    "label": {"type": "plain_text", "text": "What was wrong? (optional)"},
                    "element": {"type": "plain_text_input", "action_id": "text",
                                "multiline": True, "max_length": 1000}}],
    }

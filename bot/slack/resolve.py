"""The "Resolved" form, its confirmation and how the team's own incidents read in later
answers (pure: Block Kit in and out).

Whatever a person typed (the fix, a title) is shown inert: Slack's control characters
escaped, the mrkdwn markers swapped for look-alikes, links and mentions broken, so a
resolution can never format, link or ping anything in a later answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from bot.answering.contract import Answer, SimilarIncident
from bot.render.text import cut_words
from bot.slack.blocks import Block, Element, Option, View, button, context, esc
from bot.slack.payloads import FormMeta, SubmittedView
from bot.state.threads import Candidate

ACTION_RESOLVE = "ncclbot_resolve"
ACTION_CORRECT = "ncclbot_resolve_correct"
ACTION_FORGET = "ncclbot_resolve_forget"
VIEW_RESOLVE = "ncclbot_resolve_form"
NEW = "new"
MAX_OPTION = 75

_USER = re.compile(r"^[UW][A-Z0-9]{1,20}$")
_CHANNEL = re.compile(r"^[CGD][A-Z0-9]{1,20}$")
_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def inert(text: str) -> str:
    """Free text that Slack shows as it is: no bold/italic/strike/code, no links, no
    mentions (`<@U..>`, `<!here>`, `@here`), no auto-linked URLs."""
    out = esc(text)
    for a, b in (("*", "∗"), ("~", "∼"), ("`", "ˋ"), ("@", "＠"), ("://", "∶//"),
                 ("#", "＃")):
        out = out.replace(a, b)
    return _EDGE_UNDERSCORE.sub("＿", out)


def safe_url(url: str | None) -> str | None:
    """A link Slack may show: http(s), with nothing that breaks `<url|text>`."""
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or re.search(r"[\s<>|]", url):
        return None
    return url


def user_ref(who: str | None) -> str:
    return f"<@{who}>" if who and _USER.match(who) else inert(who or "?")


def channel_ref(channel: str | None) -> str:
    return f"<#{channel}>" if channel and _CHANNEL.match(channel) else inert(channel or "?")


#: the words of a team's own resolution, in the thread's language
SEEN_WORDS = {
    "en": {"team": "this team", "thread": "thread", "link": "link",
           "by": " (resolved by {who})", "head": "Seen in {where} on {date} — fixed by "},
    "zh": {"team": "本团队", "thread": "线程", "link": "链接",
           "by": "（由 {who} 解决）", "head": "{date} 在 {where} 见过——修复方法："},
}


def seen_line(inc: SimilarIncident, budget: int = 600, lang: str = "en") -> str:
    """"Seen in #ml-infra on 2026-11-12 — fixed by … (resolved by @alice)" and the thread,
    in at most `budget` characters (the fix is shortened; links are never cut); the fixed
    words in Chinese for `lang` zh (the fix as the team wrote it)."""
    w = SEEN_WORDS["zh" if lang == "zh" else "en"]
    where = channel_ref(inc.seen_in) if inc.seen_in else w["team"]
    links = [f"<{u}|{name}>" for u, name in ((safe_url(inc.source), w["thread"]),
                                              (safe_url(inc.link), w["link"])) if u]
    tail = w["by"].format(who=user_ref(inc.resolved_by)) + (
        " · " + " · ".join(links) if links else "")
    head = w["head"].format(where=where, date=inc.date)
    room = max(20, budget - len(head) - len(tail))
    fix = inert(inc.resolution)
    if len(fix) > room:
        fix = fix[: room - 1]
        fix = fix[: fix.rfind("&")] if fix.rfind("&") > fix.rfind(";") else fix  # no half escape
        fix += "…"
    return head + fix + tail


#: the form's fixed words, (English, Chinese): a Chinese thread gets a Chinese form
_FORM: dict[str, tuple[str, str]] = {
    "candidates": ("This answer's candidates", "本次回答的候选原因"),
    "cards": ("Cards", "知识卡片"),
    "categories": ("Categories", "原因类别"),
    "new_group": ("Something new", "新的原因"),
    "new": ("Something new (give it a title and a category)", "新的原因（请填写标题和类别）"),
    "pick": ("Pick the cause", "选择原因"),
    "category": ("Category", "类别"),
    "title": ("Resolved", "已解决"),
    "save": ("Save", "保存"),
    "cause_label": ("What was the cause?", "原因是什么？"),
    "title_label": ("Title (for something new)", "标题（新的原因时填写）"),
    "category_label": ("Category (for something new)", "类别（新的原因时填写）"),
    "fix_label": ("What fixed it?", "是什么解决了它？"),
    "link_label": ("Link (PR, runbook, ticket)", "链接（PR、运维手册、工单）"),
    "saved_note": ("Saved for this team: later answers to the same failure name this cause "
                   "first and link this thread. The log is kept redacted and bounded.",
                   "为本团队保存：之后遇到同样的故障时，回答会首先给出这个原因并链接本讨论串。"
                   "日志会脱敏并限制大小后保存。"),
    "malformed": ("This form is malformed; press Resolved on the answer again.",
                  "表单格式有误，请在回答上重新点击“已解决”。"),
    "pick_cause": ("Pick the cause.", "请选择原因。"),
    "needs_title": ("Something new needs a short title.", "新的原因需要一个简短的标题。"),
    "pick_listed": ("Pick one of the listed causes.", "请从列出的原因中选择一个。"),
    "say_fix": ("Say in a line or two what fixed it.", "请用一两句话说明是什么解决了它。"),
    "bad_link": ("A link must start with http:// or https://.",
                 "链接必须以 http:// 或 https:// 开头。"),
}


def form_word(key: str, lang: str) -> str:
    """One of the form's fixed words in the thread's language (zh, else English)."""
    en, zh = _FORM[key]
    return zh if lang == "zh" else en


@dataclass(frozen=True)
class Choice:
    """What the form's cause menu offers: a value and its label."""

    value: str
    label: str


def cause_choices(answer: Answer | None, cards: Sequence[tuple[str, str, str]],
                  categories: Sequence[tuple[str, str]],
                  earlier: Sequence[Candidate] = (), lang: str = "en"
                  ) -> list[tuple[str, list[Choice]]]:
    """Option groups: the answer's (and thread's) candidates first, then every card, every
    category, and something new. `cards` are (id, category, title); `categories` (id, name),
    both already in the thread's language `lang`. A value is `card:ID`, `cat:ID` or `new`."""
    seen: set[str] = set()
    first: list[Choice] = []
    for cat, card in [*((rc.category, rc.card) for rc in (answer.root_causes if answer else [])),
                      *(c.key for c in earlier)]:
        value = f"card:{card}" if card else f"cat:{cat}"
        if value in seen:
            continue
        seen.add(value)
        title = next((t for cid, _, t in cards if cid == card), "") if card else ""
        first.append(Choice(value, f"{title or cat} ({cat})"))
    groups = [(form_word("candidates", lang), first[:20]),
              (form_word("cards", lang), [Choice(f"card:{cid}", f"{title} ({cat})")
                                          for cid, cat, title in cards
                                          if f"card:{cid}" not in seen][:100]),
              (form_word("categories", lang), [Choice(f"cat:{cid}", name)
                                               for cid, name in categories
                                               if f"cat:{cid}" not in seen][:100]),
              (form_word("new_group", lang), [Choice(NEW, form_word("new", lang))])]
    return [(label, items) for label, items in groups if items]


def _option(c: Choice) -> Option:
    text = cut_words(c.label, MAX_OPTION)  # never inside a code span or a word
    return {"text": {"type": "plain_text", "text": text}, "value": c.value[:150]}


@dataclass(frozen=True)
class FormFill:
    """What the form starts with when it corrects a resolution."""

    value: str = ""
    title: str = ""
    category: str = ""
    fix: str = ""
    link: str = ""


def resolve_modal(answer_id: str, channel: str, thread_ts: str,
                  groups: list[tuple[str, list[Choice]]], categories: Sequence[tuple[str, str]],
                  current: FormFill | None = None, lang: str = "en") -> View:
    """The form: the cause, a title and category for something new, what fixed it, a link.
    `current` fills it in to correct a resolution; `lang` is the thread's language (its
    errors come back in it too)."""
    cur = current or FormFill()

    def w(key: str) -> str:
        return form_word(key, lang)

    select: Element = {"type": "static_select", "action_id": "value",
                              "placeholder": {"type": "plain_text", "text": w("pick")},
                              "option_groups": [{"label": {"type": "plain_text",
                                                           "text": label[:75]},
                                                 "options": [_option(c) for c in items]}
                                                for label, items in groups]}
    chosen = [c for _, items in groups for c in items if c.value == cur.value]
    if chosen:
        select["initial_option"] = _option(chosen[0])
    new_cat: Element = {"type": "static_select", "action_id": "value",
                               "placeholder": {"type": "plain_text", "text": w("category")},
                               "options": [_option(Choice(cid, name))
                                           for cid, name in categories][:100]}
    if cur.category:
        match = [Choice(cid, name) for cid, name in categories if cid == cur.category]
        if match:
            new_cat["initial_option"] = _option(match[0])

    def text_input(block: str, label: str, limit: int, optional: bool, multiline: bool = False,
                   initial: str | None = None) -> Block:
        element: Element = {"type": "plain_text_input", "action_id": "value",
                                   "max_length": limit, "multiline": multiline}
        if initial:
            element["initial_value"] = initial[:limit]
        return {"type": "input", "block_id": block, "optional": optional,
                "label": {"type": "plain_text", "text": label}, "element": element}

    link: Element = {"type": "url_text_input", "action_id": "value"}
    if cur.link:
        link["initial_value"] = cur.link
    return {
        "type": "modal", "callback_id": VIEW_RESOLVE,
        "private_metadata": FormMeta(a=answer_id, c=channel, t=thread_ts,
                                     l="zh" if lang == "zh" else "").encode(),
        "title": {"type": "plain_text", "text": w("title")},
        "submit": {"type": "plain_text", "text": w("save")},
        "blocks": [
            {"type": "input", "block_id": "cause",
             "label": {"type": "plain_text", "text": w("cause_label")}, "element": select},
            text_input("title", w("title_label"), 150, True,
                       initial=cur.title),
            {"type": "input", "block_id": "category", "optional": True,
             "label": {"type": "plain_text", "text": w("category_label")},
             "element": new_cat},
            text_input("fix", w("fix_label"), 500, False, multiline=True,
                       initial=cur.fix),
            {"type": "input", "block_id": "link", "optional": True,
             "label": {"type": "plain_text", "text": w("link_label")},
             "element": link},
            context(w("saved_note")),
        ],
    }


@dataclass(frozen=True)
class Submission:
    """A filled-in form, read and checked."""

    answer_id: str
    channel: str
    thread_ts: str
    value: str
    title: str
    category: str | None
    fix: str
    link: str | None


def read_submission(view: SubmittedView | None
                    ) -> tuple[Submission | None, dict[str, str]]:
    """The form's values, or the errors to show beside its fields (block id -> message).
    `view` None: the submission could not be read at all."""
    view = view or SubmittedView()
    meta = FormMeta.decode(view.private_metadata)
    meta_ok = meta is not None and bool(meta.a and meta.c and meta.t)
    cause = view.input("cause").selected or ""
    category = view.input("category").selected
    title = (view.input("title").value or "").strip()
    fix = (view.input("fix").value or "").strip()
    link = (view.input("link").value or "").strip() or None
    lang = meta.l if meta is not None else ""
    errors: dict[str, str] = {}
    if not meta_ok:
        errors["fix"] = form_word("malformed", lang)
    if not cause:
        errors["cause"] = form_word("pick_cause", lang)
    elif cause == NEW and not title:
        errors["title"] = form_word("needs_title", lang)
    elif not (cause == NEW or cause.startswith(("card:", "cat:"))):
        errors["cause"] = form_word("pick_listed", lang)
    if not fix:
        errors["fix"] = form_word("say_fix", lang)
    if link and safe_url(link) is None:
        errors["link"] = form_word("bad_link", lang)
    if errors or meta is None:
        return None, errors
    return Submission(meta.a, meta.c, meta.t, cause, title, category or None, fix, link), {}


def resolved_message(incident_id: str, who: str, cause: str, fix: str, corrected: bool,
                     label_note: str = "", lang: str = "en") -> tuple[list[Block], str]:
    """The thread's note that it is resolved, with Correct and Forget, in the thread's
    language (`lang` zh: Chinese; the cause and the fix as given)."""
    if lang == "zh":
        verb = "更正了" if corrected else "解决了"
        text = (f":white_check_mark: {user_ref(who)} {verb}本线程：`{esc(cause)}`——修复方法："
                f"{inert(fix).rstrip('。.')}。以后同样的故障会首先给出这个原因。")
        saved, correct, forget, head = f"已保存为 `{incident_id}`。", "更正", "忘掉", "已解决"
    else:
        verb = "corrected" if corrected else "resolved"
        text = (f":white_check_mark: {user_ref(who)} {verb} this thread: `{esc(cause)}` — "
                f"fixed by {inert(fix)}. Later answers to the same failure will name it first.")
        saved, correct, forget, head = f"Saved as `{incident_id}`.", "Correct", "Forget", \
            "Resolved"
    blocks: list[Block] = [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]
    blocks.append(context(saved + (f" {label_note}" if label_note else "")))
    blocks.append({"type": "actions", "block_id": f"ncclbot_resolved:{incident_id}",
                   "elements": [button(correct, ACTION_CORRECT, incident_id),
                                button(forget, ACTION_FORGET, incident_id, "danger")]})
    return blocks, f"{head}: {cause}"

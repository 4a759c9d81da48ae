"""Which language(s) an answer is rendered in."""

from __future__ import annotations

import re

LANGS = ("en", "zh", "both")
_CJK = re.compile(r"[\u4e00-\u9fff]")


def is_chinese(text: str) -> bool:
    """True when a question is mostly Chinese (CJK among its letters)."""
    cjk = len(_CJK.findall(text))
    latin = len(re.findall(r"[A-Za-z]", re.sub(r"<[^>]*>|`[^`]*`", "", text)))
    return cjk >= 2 and cjk * 2 >= latin // 2


def choose(user_pref: str | None, channel_pref: str | None, question: str) -> str:
    """User preference, then channel preference, then zh for Chinese questions, else both."""
    for pref in (user_pref, channel_pref):
        if pref in LANGS:
            return pref
    return "zh" if is_chinese(question) else "both"

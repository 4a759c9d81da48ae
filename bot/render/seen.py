"""A past incident ("seen before") in the reader's language (pure): the terminal and Slack."""

from __future__ import annotations

from bot.answering.contract import SimilarIncident
from bot.retrieval.tokenize import has_cjk


def source_name(url: str) -> str:
    """A link's short name: owner/repo#123 for GitHub threads, else the host and path."""
    bare = url.split("://", 1)[-1].rstrip("/")
    parts = bare.split("/")
    if parts[0] == "github.com" and len(parts) >= 5 and parts[3] in ("issues", "pull",
                                                                      "discussions"):
        return f"{parts[1]}/{parts[2]}#{parts[4]}"
    return bare[:60]


def seen_title(inc: SimilarIncident, lg: str) -> str:
    """A past incident's name in `lg`: its Chinese title (`title_zh`) in Chinese, its title
    when written in the reader's language, else the thread's short name and the cause in the
    reader's words."""
    if lg == "zh" and inc.title_zh:
        return inc.title_zh
    if (lg == "zh") == has_cjk(inc.title):
        return inc.title
    from bot.knowledge.taxonomy import category as taxonomy_category

    try:
        cause = taxonomy_category(inc.category).short(lg)
    except KeyError:
        cause = inc.category
    name = source_name(inc.source)
    return f"{name}（{cause}）" if lg == "zh" else f"{name} ({cause})"


def resolution_in(inc: SimilarIncident, lg: str) -> str:
    """What fixed it in the reader's language: the Chinese resolution (`resolution_zh`) in
    Chinese, the resolution when written in the reader's language, else '' (the link has it)."""
    if lg == "zh" and inc.resolution_zh:
        return inc.resolution_zh
    return inc.resolution if (lg == "zh") == has_cjk(inc.resolution) else ""

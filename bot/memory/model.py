"""A local incident: one resolved failure of this team, in the shape of the corpus (pure).

What is kept of a log is bounded and redacted: the distinct salient lines the
nearest-incident channel compares on (the first `HEAD` and the last `TAIL`), each with
`CONTEXT` lines around it, at most `MAX_LOG_LINES` lines of `MAX_LINE` characters. Secrets
are always stripped (`bot.agent.redact_rules.strip_secrets`, the rule used everywhere);
host names, IPs and user names become placeholders unless the team allows them
(`NCCLBOT_MEMORY_KEEP_HOSTS`). Free text a person typed (the fix, a title, the question)
is stripped of secrets and control characters and bounded; Slack renders it inert.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from bot.agent.redact import Redactor
from bot.agent.redact_rules import strip_secrets
from bot.knowledge.cards import CategoryId, Slug
from bot.knowledge.incidents import MAX_LOG_LINES, MAX_QUOTE_CHARS, Confirmation, Incident
from bot.logs.prefixes import clean
from bot.logs.salient import salient_key, salient_lines

HEAD, TAIL, CONTEXT = 40, 20, 1
MAX_LINE = 400
MAX_FIX, MAX_TITLE, MAX_QUESTION = 500, 150, 1000

Role = Literal["asker", "oncall", "cli", "import"]
Origin = Literal["slack", "cli", "import"]


class ResolvedBy(BaseModel):
    """Who confirmed the cause, as what, and when."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    who: str
    role: Role
    when: dt.datetime


class LocalIncident(BaseModel):
    """One of the team's own incidents (the corpus's fields, plus where it was resolved)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: Slug
    title: Annotated[str, StringConstraints(min_length=1, max_length=MAX_TITLE)]
    #: the thread's permalink, or the link given with `incidents add --source`
    source: str | None = None
    #: an optional link given with the fix (PR, runbook, ticket)
    link: str | None = None
    date: dt.date
    category: CategoryId
    secondary: list[CategoryId] = Field(default_factory=list)
    card: str | None = None
    log: str
    resolution: Annotated[str, StringConstraints(min_length=1, max_length=MAX_FIX)]
    confirmed_by: ResolvedBy
    versions: dict[str, str] = Field(default_factory=dict)
    hardware: str | None = None
    question: str | None = None
    origin: Origin = "cli"
    channel: str | None = None
    channel_name: str | None = None
    thread_ts: str | None = None
    #: what the bot's answer led with when the thread was resolved (a wrong answer's label)
    answered: str | None = None
    #: the Slack answer the resolution was given on
    answer_id: str | None = None

    @property
    def url(self) -> str:
        return self.source or self.link or ""

    def salient(self) -> list[str]:
        """The normalised lines the nearest-incident channel compares on."""
        return salient_lines(self.log.splitlines())


def new_id() -> str:
    return f"local-{uuid.uuid4().hex[:10]}"


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]")


def plain(text: str | None, limit: int) -> str:
    """Typed text as one bounded plain line: no secrets, no control or invisible
    characters, whitespace collapsed."""
    if not text:
        return ""
    one = " ".join(_CONTROL.sub(" ", strip_secrets(text)).split())
    return one if len(one) <= limit else one[: limit - 1].rstrip() + "…"


_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def tame(text: str) -> str:
    """A typed title without what Slack's mrkdwn would act on (it shows as a heading)."""
    text = re.sub(r"[*~`<>|]", "", text).replace("@", "＠")
    return " ".join(_EDGE_UNDERSCORE.sub(" ", text).split())


def excerpt(lines: Iterable[str], head: int = HEAD, tail: int = TAIL,
            context: int = CONTEXT) -> list[str]:
    """The distinct salient lines of a log (the first `head`, and the `tail` seen last, as
    `bot.logs.salient.SalientLines` keeps them), each with `context` lines before and after,
    at most MAX_LOG_LINES (streamed)."""
    first: dict[str, list[str]] = {}
    last: OrderedDict[str, list[str]] = OrderedDict()  # by latest occurrence, as the index
    before: deque[str] = deque(maxlen=context)
    open_block: list[str] | None = None
    need = 0
    for raw in lines:
        line = clean(raw.rstrip("\r\n"))[:MAX_LINE]
        if open_block is not None and need > 0:
            open_block.append(line)
            need -= 1
        key = salient_key(raw) if line else None
        if key and key not in first:
            if key in last:
                last.move_to_end(key)
            else:
                block = [*before, line]
                if len(first) < head:
                    first[key] = block
                else:
                    last[key] = block
                    if len(last) > tail:
                        last.popitem(last=False)
                open_block, need = block, context
        before.append(line)
    start, end = _flat(first.values()), _flat(last.values())
    if len(start) + len(end) > MAX_LOG_LINES:  # the end keeps at least a third
        start = start[:MAX_LOG_LINES - min(len(end), MAX_LOG_LINES // 3)]
        end = end[len(end) - (MAX_LOG_LINES - len(start)):]
    return [*start, *end]


def _flat(blocks: Iterable[list[str]]) -> list[str]:
    out: list[str] = []
    for block in blocks:
        for line in block:
            if line.strip() and (not out or out[-1] != line):
                out.append(line)
    return out


class Redaction:
    """The redaction every stored text goes through: secrets always, hosts unless kept."""

    def __init__(self, keep_hosts: bool) -> None:
        self.redactor = Redactor(hosts=not keep_hosts)

    def learn(self, *texts: str) -> None:
        for text in texts:
            self.redactor.learn_structure(text)
            self.redactor.learn_text(text)

    def __call__(self, text: str) -> str:
        return self.redactor.redact(text)


def capture(*, log_lines: Iterable[str], category: str, resolution: str, who: str,
            role: Role, keep_hosts: bool, title: str | None = None, card: str | None = None,
            source: str | None = None, link: str | None = None, question: str | None = None,
            versions: Mapping[str, str] | None = None, origin: Origin = "cli",
            channel: str | None = None, channel_name: str | None = None,
            thread_ts: str | None = None, answered: str | None = None,
            answer_id: str | None = None, incident_id: str | None = None,
            now: dt.datetime | None = None) -> LocalIncident:
    """A local incident from a log and what fixed it, bounded and redacted (raises
    ValueError, pydantic's, on an unknown category or empty fix)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    kept = excerpt(log_lines)
    red = Redaction(keep_hosts)
    log_text = "\n".join(kept)
    red.learn(log_text, question or "")
    fix = red(plain(resolution, MAX_FIX))
    if not fix:
        raise ValueError("the fix is empty: say in a line or two what fixed it")
    name = tame(red(plain(title, MAX_TITLE))) or tame(_title_from(kept, category)) or category
    return LocalIncident(
        id=incident_id or new_id(), title=name, source=source or None, link=link or None,
        date=now.date(), category=category, card=card or None,
        log="\n".join(red(line) for line in kept) or "(no log)", resolution=fix,
        confirmed_by=ResolvedBy(who=who, role=role, when=now),
        versions={str(k): red(str(v))[:80] for k, v in (versions or {}).items()},
        question=red(plain(question, MAX_QUESTION)) or None, origin=origin, channel=channel,
        channel_name=channel_name, thread_ts=thread_ts, answered=answered,
        answer_id=answer_id)


def _title_from(lines: list[str], category: str) -> str:
    """A title when none was typed: the first failure line of the log, else the category."""
    for line in lines:
        if salient_key(line):
            return plain(line, MAX_TITLE)
    return category.replace("_", " ")


# -- the corpus format (export / import) ---------------------------------------------------

def to_corpus(inc: LocalIncident) -> Incident:
    """The corpus form of a local incident (raises ValueError when it has no link at all:
    the corpus cites every incident)."""
    url = inc.source or inc.link
    if not url:
        raise ValueError(f"{inc.id} has no source link (give one with `ncclbot incidents "
                         "add --source URL`)")
    quote = inc.resolution if len(inc.resolution) >= 8 else f"Fixed: {inc.resolution}"
    return Incident.model_validate({
        "id": inc.id, "source": url, "repo": f"local/{_slugish(inc.channel_name or inc.origin)}",
        "title": inc.title, "date": inc.date, "category": inc.category,
        "secondary": inc.secondary, "card": inc.card, "log": inc.log,
        "resolution": inc.resolution,
        "confirmed_by": Confirmation(
            who="reporter" if inc.confirmed_by.role == "asker" else "maintainer",
            role="reporter" if inc.confirmed_by.role == "asker" else "maintainer",
            author=inc.confirmed_by.who, url=inc.link or url,
            quote=quote[:MAX_QUOTE_CHARS]),
        "versions": inc.versions, "hardware": inc.hardware, "question": inc.question})


def from_corpus(inc: Incident, keep_hosts: bool, now: dt.datetime | None = None
                ) -> LocalIncident:
    """An incident of another team's export, as a local one (redacted again here)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    red = Redaction(keep_hosts)
    red.learn(inc.log, inc.question or "")
    lines = inc.log.splitlines()[:MAX_LOG_LINES]
    return LocalIncident(
        id=inc.id, title=tame(red(plain(inc.title, MAX_TITLE))) or inc.category, source=inc.url,
        link=str(inc.confirmed_by.url) if inc.confirmed_by.url else None,
        date=inc.date or now.date(), category=inc.category, secondary=list(inc.secondary),
        card=inc.card, log="\n".join(red(line[:MAX_LINE]) for line in lines),
        resolution=red(plain(inc.resolution, MAX_FIX)),
        confirmed_by=ResolvedBy(who=inc.confirmed_by.author or inc.confirmed_by.who,
                                role="import", when=now),
        versions=dict(inc.versions), hardware=inc.hardware,
        question=red(plain(inc.question, MAX_QUESTION)) or None, origin="import")


def _slugish(text: str) -> str:
    return re.sub(r"[^\w.-]+", "-", text).strip("-") or "team"

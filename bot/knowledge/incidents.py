"""The incident corpus: one real public thread per file in `knowledge/incidents/*.yaml`.

An incident is what a reporter posted before the cause was known (`log`, verbatim), the
cause the thread established (`category`, `resolution`) and the comment that confirms it
(`confirmed_by`). The corpus feeds the nearest-incident channel of the diagnosis, the
"seen before" part of every answer, the signature report and the accuracy benchmark.
`sealed.yaml` beside the incidents lists the ids kept out of all development.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (
    AnyHttpUrl,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from bot.knowledge.cards import CategoryId, NonEmpty, Slug, knowledge_dir, yaml_mapping
from bot.knowledge.taxonomy import load_questions

MAX_LOG_LINES = 150
MAX_QUOTE_CHARS = 400

Repo = Annotated[str, StringConstraints(pattern=r"^[\w.-]+/[\w.-]+$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: who the author of a confirmation is in the thread: the person who opened it, a maintainer of
#: the project, another user commenting, or the author of the pull request that fixed it
Role = Literal["reporter", "maintainer", "commenter", "pr-author"]

#: the roles each legacy `who` value may take
ROLES_OF_WHO: dict[str, frozenset[str]] = {
    "maintainer": frozenset({"maintainer", "pr-author"}),
    "reporter": frozenset({"reporter", "pr-author"}),
    "contributor": frozenset({"commenter", "pr-author"}),
}


class Confirmation(_Strict):
    """Who established the cause in the thread, where, and their words.

    `role` and `url` were added in a backward-compatible way (optional in the schema);
    `ncclbot knowledge check` requires them on every incident of the corpus."""

    who: Literal["maintainer", "reporter", "contributor"]
    author: str | None = None
    role: Role | None = None
    #: the page where the quote stands: the thread itself, or the pull request it comes from
    url: AnyHttpUrl | None = None
    quote: Annotated[str, StringConstraints(strip_whitespace=True, min_length=8,
                                            max_length=MAX_QUOTE_CHARS)]


#: the fields that hold what the reporter said before the cause was known: a fact's quote must
#: stand in one of them (never in `resolution` or `confirmed_by`, written after the cause)
STATED_FIELDS = ("question", "question_zh", "hardware", "log")
MAX_FACT_QUOTE = 200


def squeeze(text: str) -> str:
    """Whitespace collapsed, for comparing a quote with the text it comes from."""
    return " ".join(text.split())


class Fact(_Strict):
    """The reporter's answer to a deciding question (`knowledge/taxonomy.yaml`, `questions`),
    stated before the cause was known, with the words it rests on (verbatim)."""

    value: NonEmpty
    quote: Annotated[str, StringConstraints(strip_whitespace=True, min_length=3,
                                            max_length=MAX_FACT_QUOTE)]

    @field_validator("value", mode="before")
    @classmethod
    def _yes_no_as_text(cls, value: object) -> object:
        # YAML 1.1 reads a bare yes/no as a boolean
        return ("yes" if value else "no") if isinstance(value, bool) else value


class Incident(_Strict):
    id: Slug
    source: AnyHttpUrl
    repo: Repo
    title: NonEmpty
    #: the title in Chinese (faithful and short), for "seen before" in a Chinese answer;
    #: without it a Chinese answer names the thread and its cause (`knowledge check` warns)
    title_zh: NonEmpty | None = None
    #: when the thread was opened, as the thread shows it; None when it could not be seen
    #: (never estimated). Undated incidents are never sealed.
    date: dt.date | None = None
    #: when a person last re-read the incident against its thread (log, quote, cause)
    checked: dt.date | None = None
    category: CategoryId
    secondary: list[CategoryId] = Field(default_factory=list)
    card: Slug | None = None
    log: NonEmpty
    resolution: NonEmpty
    #: what fixed it, in Chinese (faithful: numbers, settings, versions and error strings
    #: unchanged, in backticks), for a Chinese answer; without it a Chinese answer leaves the
    #: fix to the link (`knowledge check` warns)
    resolution_zh: NonEmpty | None = None
    confirmed_by: Confirmation
    versions: dict[str, str] = Field(default_factory=dict)
    hardware: str | None = None
    question: str | None = None
    question_zh: str | None = None
    #: answers to the deciding questions that the reporter stated before the cause was known,
    #: by question id; each quotes `question`, `question_zh`, `hardware` or `log`
    facts: dict[str, Fact] = Field(default_factory=dict)

    @field_validator("confirmed_by")
    @classmethod
    def _role_fits_who(cls, value: Confirmation) -> Confirmation:
        if value.role is not None and value.role not in ROLES_OF_WHO[value.who]:
            raise ValueError(f"role '{value.role}' does not fit who '{value.who}'")
        return value

    @field_validator("log")
    @classmethod
    def _bounded_log(cls, value: str) -> str:
        n = len(value.splitlines())
        if n > MAX_LOG_LINES:
            raise ValueError(f"log has {n} lines; trim it to the {MAX_LOG_LINES} most "
                             "informative (verbatim) lines")
        return value

    @field_validator("versions", mode="before")
    @classmethod
    def _versions_as_text(cls, value: object) -> object:
        if isinstance(value, dict):
            return {str(k): str(v) for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _forum_thread_names_its_site(self) -> Incident:
        conf = self.confirmed_by.url
        problem = forum_problem(str(self.source), self.repo, None if conf is None else str(conf))
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _facts_are_stated(self) -> Incident:
        problems = fact_problems(self.facts, self.stated())
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def stated(self) -> str:
        """What the reporter said before the cause was known (the fields a fact may quote)."""
        return "\n".join(v for f in STATED_FIELDS if (v := getattr(self, f)))

    @property
    def answered(self) -> dict[str, str]:
        """The annotated facts as answers, {question id: answer}."""
        return {k: f.value for k, f in self.facts.items()}

    @property
    def url(self) -> str:
        return str(self.source)

    @property
    def accepted(self) -> frozenset[str]:
        """The categories a diagnosis of this log may name and be right."""
        return frozenset({self.category, *self.secondary})


#: the site whose threads are filed under the repository their URL names (`owner/name`)
GITHUB_HOST = "github.com"


def url_host(url: str) -> str:
    """The host of a URL, lower-cased ('' when it has none)."""
    return (urlsplit(url).hostname or "").lower()


def forum_problem(source: str, repo: str, confirmed_at: str | None) -> str | None:
    """A thread outside GitHub (a forum Q&A: discuss.pytorch.org, forums.developer.nvidia.com,
    ...) is filed under its site, `repo: <host>/<forum section>`, and the post that confirms
    the cause stands on the same site; None when that holds or the thread is on GitHub."""
    host = url_host(source)
    if repo.startswith("local/"):  # the team's own incident (bot.memory): its link is theirs
        return None
    if host == GITHUB_HOST:
        return None
    if repo.split("/", 1)[0].lower() != host:
        return (f"repo: a thread outside GitHub is filed as '<host>/<forum section>' "
                f"(e.g. '{host}/distributed'), not '{repo}'")
    if confirmed_at is not None and url_host(confirmed_at) != host:
        return (f"confirmed_by.url: the confirming post of a {host} thread stands on {host} "
                f"(the asker's reply or the answer they accepted), not {confirmed_at}")
    return None


def fact_problems(facts: dict[str, Fact], stated: str) -> list[str]:
    """One line per fact that names no deciding question, gives an answer its question does
    not take, or quotes words that are not in `stated` (whitespace aside)."""
    known = {q.id: q for q in load_questions()}
    text = squeeze(stated)
    out = []
    for key, fact in facts.items():
        q = known.get(key)
        if q is None:
            out.append(f"facts.{key}: no deciding question '{key}' in knowledge/taxonomy.yaml "
                       f"(one of {', '.join(sorted(known))})")
        elif fact.value not in q.answers:
            out.append(f"facts.{key}: '{fact.value}' is not an answer of {key} "
                       f"({' or '.join(q.answers)})")
        if squeeze(fact.quote) not in text:
            out.append(f"facts.{key}: quote {fact.quote!r} is not in the reporter's "
                       f"{'/'.join(STATED_FIELDS)}")
    return out


class PreviousSeal(_Strict):
    """A sealed set that was replaced, kept so that its figures can be read beside the new ones."""

    sealed_on: dt.date
    rule: NonEmpty
    ids: list[Slug] = Field(min_length=1)


class Sealed(_Strict):
    """The held-back test set: chosen by thread date before any tuning, measured once a stop.

    `undated` names the incidents left out of the sealed pool because their thread date could
    not be read; `previous` keeps the sets this one replaced."""

    sealed_on: dt.date
    rule: NonEmpty
    ids: list[Slug] = Field(min_length=1)
    undated: list[Slug] = Field(default_factory=list)
    previous: list[PreviousSeal] = Field(default_factory=list)


def incidents_dir() -> Path:
    return knowledge_dir() / "incidents"


def incident_files(directory: Path | None = None) -> list[Path]:
    return sorted((directory or incidents_dir()).glob("*.yaml"), key=lambda p: p.name)


def parse_incident(text: str) -> Incident:
    return Incident.model_validate(yaml_mapping(text, "an incident"))


def load_incidents(files: Iterable[Path] | None = None) -> list[Incident]:
    """Load every incident (except `sealed.yaml`); the first defect raises with its file."""
    out = []
    for path in files if files is not None else incident_files():
        if path.name == SEALED_FILE:
            continue
        try:
            out.append(parse_incident(path.read_text(encoding="utf-8")))
        except Exception as exc:
            raise ValueError(f"{path.name}: {exc}") from exc
    return out


SEALED_FILE = "sealed.yaml"


def load_sealed(directory: Path | None = None) -> Sealed | None:
    path = (directory or incidents_dir()) / SEALED_FILE
    if not path.is_file():
        return None
    return Sealed.model_validate(yaml_mapping(path.read_text(encoding="utf-8"), SEALED_FILE))


def dev_and_sealed(directory: Path | None = None) -> tuple[list[Incident], list[Incident]]:
    """The corpus in `directory` (default: the bundled one) split into development and the
    sealed set (`sealed.yaml`'s ids; none without it), each in corpus order."""
    corpus = load_incidents(sorted(directory.glob("*.yaml")) if directory else None)
    spec = load_sealed(directory)
    sealed_ids = set(spec.ids) if spec else set()
    return ([i for i in corpus if i.id not in sealed_ids],
            [i for i in corpus if i.id in sealed_ids])


#: how many incidents the sealing rule of 2026-11-29 seals (the size of the set it replaced)
SEAL_SIZE = 28

SEAL_RULE = (
    "from the incidents that have a thread date and whose thread (source, compared "
    "case-insensitively without a trailing /) is not among the sources of any card in "
    "knowledge/cards, the {n} with the newest thread dates (order by (date, id) descending); "
    "undated incidents are listed under `undated` and stay in development"
)


def thread_key(url: str) -> str:
    """A thread URL as the sealing rule compares it."""
    return url.rstrip("/").lower()


def sealing_pool(incidents: Iterable[Incident], cited: Iterable[str]) -> list[Incident]:
    """The incidents the sealing rule may seal, newest thread first: dated, and their thread
    cited by no card (`cited`: every card source URL)."""
    taken = {thread_key(u) for u in cited}
    pool = [i for i in incidents if i.date is not None and thread_key(i.url) not in taken]
    return sorted(pool, key=lambda i: (i.date or dt.date.min, i.id), reverse=True)


def choose_sealed(incidents: Iterable[Incident], cited: Iterable[str],
                  n: int = SEAL_SIZE) -> list[str]:
    """The ids the sealing rule seals: the first `n` of `sealing_pool`, sorted by id."""
    return sorted(i.id for i in sealing_pool(incidents, cited)[:n])

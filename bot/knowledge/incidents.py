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

from pydantic import (
    AnyHttpUrl,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)

from bot.knowledge.cards import CategoryId, NonEmpty, Slug, knowledge_dir, yaml_mapping

MAX_LOG_LINES = 150
MAX_QUOTE_CHARS = 400

Repo = Annotated[str, StringConstraints(pattern=r"^[\w.-]+/[\w.-]+$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Confirmation(_Strict):
    """Who established the cause in the thread, and their words."""

    who: Literal["maintainer", "reporter", "contributor"]
    author: str | None = None
    #: where the quote is, when not in the thread itself (a linked pull request)
    url: AnyHttpUrl | None = None
    quote: Annotated[str, StringConstraints(strip_whitespace=True, min_length=8,
                                            max_length=MAX_QUOTE_CHARS)]


class Incident(_Strict):
    id: Slug
    source: AnyHttpUrl
    repo: Repo
    title: NonEmpty
    #: when the thread was opened, as the thread shows it; None when it could not be seen
    #: (never estimated). Undated incidents are never sealed.
    date: dt.date | None = None
    category: CategoryId
    secondary: list[CategoryId] = Field(default_factory=list)
    card: Slug | None = None
    log: NonEmpty
    resolution: NonEmpty
    confirmed_by: Confirmation
    versions: dict[str, str] = Field(default_factory=dict)
    hardware: str | None = None
    question: str | None = None
    question_zh: str | None = None

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

    @property
    def url(self) -> str:
        return str(self.source)

    @property
    def accepted(self) -> frozenset[str]:
        """The categories a diagnosis of this log may name and be right."""
        return frozenset({self.category, *self.secondary})


class Sealed(_Strict):
    """The held-back test set: chosen by thread date before any tuning, measured once a stop."""

    sealed_on: dt.date
    rule: NonEmpty
    ids: list[Slug] = Field(min_length=1)


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

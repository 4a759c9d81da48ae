"""The answer's JSON contract as a typed model: what `analyze --json` and `ask --json` print,
and `ncclbot schema answer` publishes (the fields of `../shared/design.md` stay; more fields
are welcome, so unknown ones are kept)."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Verdict = Literal["diagnosed", "unknown", "no_evidence"]
Certainty = Literal["likely", "possible", "weak"]
PerLanguage = dict[Literal["en", "zh"], list[str]]
Titles = dict[Literal["en", "zh"], str]


class _Open(BaseModel):
    """Typed where the contract says so; other fields pass through unchanged."""

    model_config = ConfigDict(extra="allow")


class EvidenceLine(_Open):
    file: str
    line: int = Field(ge=0)
    text: str
    rank: int | None = None
    host: str | None = None


class RootCauseOut(_Open):
    category: str = Field(description="an id of knowledge/taxonomy.yaml")
    card: str | None = Field(description="the card the cause comes from")
    confidence: float = Field(ge=0, le=1)
    certainty: Certainty | None = Field(default=None, description="the confidence in words")
    evidence: list[EvidenceLine] = Field(default_factory=list)


class SuspectOut(_Open):
    rank: int | None = None
    host: str | None = None
    reason: str = ""


class DiagnosisOut(_Open):
    verdict: Verdict | None = None
    root_causes: list[RootCauseOut] = Field(description="best first")
    suspects: list[SuspectOut] = Field(default_factory=list)


class Citation(_Open):
    card: str
    title: Titles
    sources: list[str]
    verified: bool = Field(default=True, description="every claim of the card quotes a source")


class SimilarIncident(_Open):
    source: str = Field(description="the public thread")
    title: str
    category: str
    resolution: str = Field(description="what fixed it")
    score: float = Field(ge=0, le=1)


class Answer(_Open):
    """One answer to a crash log or a question."""

    verdict: Verdict
    summary: str
    diagnosis: DiagnosisOut
    remediation: PerLanguage = Field(default_factory=dict)
    verify: PerLanguage = Field(default_factory=dict)
    citations: list[Citation] = Field(default_factory=list)
    similar_incidents: list[SimilarIncident] = Field(default_factory=list)
    next_steps: PerLanguage | None = None
    notes: list[str] = Field(default_factory=list)


def answer_json(answer: dict[str, Any]) -> str:
    """The answer as contract JSON: validated against `Answer` (a defect here is a bug, not
    bad input), with every contract field present."""
    model = Answer.model_validate(answer)
    return json.dumps(model.model_dump(mode="json", exclude_none=False), ensure_ascii=False,
                      indent=2)


def answer_schema() -> dict[str, Any]:
    return Answer.model_json_schema()

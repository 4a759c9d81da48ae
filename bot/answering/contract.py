"""The answer: one typed model for every answer ncclbot gives (analyze, ask, the agent, Slack,
errors). Renderers, the thread store and `--json` take an `Answer`; `ncclbot schema answer`
publishes its JSON Schema. The fields of the JSON contract in `../shared/design.md` stay.

One rule decides the verdict (`decide_verdict`); a few constructors build the answers that
do not come from a diagnosis (`Answer.error`, `Answer.failure`, `Answer.waiting_for_log`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from tools.result import ToolResult

Verdict = Literal["diagnosed", "unknown", "no_evidence", "error"]
Certainty = Literal["likely", "possible", "weak"]
Lang = Literal["en", "zh"]
PerLanguage = dict[Lang, list[str]]
Titles = dict[Lang, str]
LANGS: tuple[Lang, ...] = ("en", "zh")

#: A leading cause below this confidence is a candidate, not a diagnosis.
DIAGNOSED_FROM = 0.3


def langs_of(lang: str) -> tuple[Lang, ...]:
    """The languages an answer in `lang` (en, zh or both) carries."""
    if lang == "both":
        return LANGS
    if lang in LANGS:
        return (lang,)
    raise ValueError(f"lang must be en, zh or both, not {lang!r}")


def resolve_lang(question: str, lang: str) -> str:
    """en | zh | both; `auto` is the question's language (Chinese when it has CJK)."""
    if lang == "auto":
        from bot.retrieval.tokenize import has_cjk

        return "zh" if has_cjk(question) else "en"
    if lang not in ("en", "zh", "both"):
        raise ValueError(f"lang must be en, zh, both or auto, not {lang!r}")
    return lang


def decide_verdict(top_certainty: str | None, *, logs_given: bool, log_failure: bool,
                   grounded_question: bool = False) -> Verdict:
    """The one rule for an answer's verdict.

    - logs were given but show no failure: `no_evidence` (a question cannot turn an
      evidence-free log into a diagnosis; candidates are still listed, each "unclear");
    - a leading cause that is `likely`, backed by failure evidence in the logs or, without
      a log, by a question (or an LLM answer) that points at one card: `diagnosed`;
    - otherwise `unknown` (a `possible` cause is a candidate, not a diagnosis).

    The certainty each cause is stated with follows the verdict (`stated_certainty`), so
    `diagnosed` and a `likely` leading cause always go together.
    """
    if logs_given and not log_failure:
        return "no_evidence"
    if top_certainty != "likely":
        return "unknown"
    return "diagnosed" if log_failure or grounded_question else "unknown"


def stated_certainty(certainty: str | None, verdict: str) -> Certainty | None:
    """The certainty an answer states for a cause, telling the verdict's story everywhere
    (CLI, `--json`, Slack): with `no_evidence` every candidate is unclear (`weak`: the logs
    show no failure); a cause the verdict does not call a diagnosis is at most `possible`
    (e.g. a question alone, no log, that does not point at one card: no ground for
    `likely`); `likely` is said only of a `diagnosed` answer's leading cause."""
    if certainty not in ("likely", "possible", "weak"):
        return None
    if verdict == "no_evidence" or certainty == "weak":
        return "weak"
    return "likely" if certainty == "likely" and verdict == "diagnosed" else "possible"


class _Model(BaseModel):
    # the published schema is what `--json` prints: every field is always there
    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)


class EvidenceLine(_Model):
    file: str
    line: int = Field(ge=0)
    text: str
    rank: int | None = None
    host: str | None = None


class RootCauseOut(_Model):
    category: str = Field(description="an id of knowledge/taxonomy.yaml")
    card: str | None = Field(description="the card the cause comes from")
    confidence: float = Field(ge=0, le=1)
    certainty: Certainty | None = Field(default=None, description="the confidence in words")
    evidence: list[EvidenceLine] = Field(default_factory=list)
    category_name: Titles = Field(default_factory=dict)
    title: Titles = Field(default_factory=dict, description="the card's title")
    why: list[str] = Field(default_factory=list)
    remediation: PerLanguage = Field(default_factory=dict, description="the card's steps")
    local: str | None = Field(default=None, description="the team's own incident it rests on")
    matched: bool = Field(default=False, description="the card's own evidence matched (its "
                          "signature fired, or its incidents are the nearest ones)")
    kinds: list[str] = Field(default_factory=list, description="the kinds of evidence "
                             "behind the category: signature, detected, rule, nearest, "
                             "question, specific, asked, fact")


class SuspectOut(_Model):
    rank: int | None = None
    host: str | None = None
    reason: str = ""


class DiagnosisOut(_Model):
    verdict: Verdict | None = None
    root_causes: list[RootCauseOut] = Field(default_factory=list, description="best first")
    suspects: list[SuspectOut] = Field(default_factory=list)
    ranks: list[str] = Field(default_factory=list, description="what the ranks did, in lines")


class DecidingQuestion(_Model):
    """The one question that best tells the leading candidates apart (an undecided answer);
    answer it with `--fact ID=ANSWER` or the Slack buttons."""

    id: str
    text: Titles
    answers: list[str]
    sources: list[str] = Field(default_factory=list, description="threads where it decided")


class Citation(_Model):
    card: str
    title: Titles
    sources: list[str]
    verified: bool = Field(default=True, description="every claim of the card quotes a source")


class SimilarIncident(_Model):
    source: str = Field(description="the public thread")
    title: str
    #: the title in Chinese, where the incident has one (a Chinese answer shows it)
    title_zh: str | None = None
    category: str
    resolution: str = Field(description="what fixed it")
    #: what fixed it in Chinese, where the incident has it (a Chinese answer shows it)
    resolution_zh: str | None = None
    score: float = Field(ge=0, le=1)
    #: one of the team's own resolved incidents (listed before the corpus's)
    local: bool = False
    seen_in: str | None = Field(default=None, description="the Slack channel it was resolved in")
    date: str | None = None
    resolved_by: str | None = None
    link: str | None = Field(default=None, description="the PR, runbook or ticket given")
    id: str | None = None


class ChannelHit(BaseModel):
    """Where one retrieval channel (bm25, dense, signature) ranked a card, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True,
                              json_schema_serialization_defaults_required=True)

    rank: int = Field(ge=1)
    score: float
    reason: str = ""


class RetrievalHit(_Model):
    card: str
    category: str
    score: float
    why: list[str] = Field(default_factory=list)
    channels: dict[str, ChannelHit] = Field(default_factory=dict)


class ChosenStep(_Model):
    """A remediation step the LLM agent chose from a cited card."""

    card: str
    step: int = Field(ge=1)
    note: str = ""
    en: str | None = None
    zh: str | None = None


class ProbeSuggestion(_Model):
    node: str
    preset: str
    reason: str = ""
    status: str = "proposed"
    needs_confirmation: bool = True


class ProbeRun(_Model):
    node: str
    preset: str
    result: ToolResult


class ToolCall(_Model):
    """One tool call the LLM made: its arguments (JSON, as the model sent them), the outcome."""

    tool: str
    args: dict[str, JsonValue] = Field(default_factory=dict)
    status: str
    error: str | None = None


DroppedKind = Literal["root_cause", "category", "evidence", "citation", "remediation", "probe",
                      "explanation_card", "explanation_node"]


class Dropped(_Model):
    """A part of the LLM's answer validation removed: what kind, and what it named (only the
    fields that apply are written)."""

    kind: DroppedKind
    card: str | None = None
    reason: str | None = None
    value: str | None = None
    file: str | None = None
    line: int | None = None
    step: int | None = None
    preset: str | None = None
    node: str | None = None

    @model_serializer(mode="wrap")
    def _set_fields_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, str | int]:
        return {k: v for k, v in handler(self).items() if v is not None}


class LlmUse(_Model):
    used: bool
    model: str | None = None
    tools: list[ToolCall] = Field(default_factory=list)
    dropped: list[Dropped] = Field(default_factory=list)


class InputFile(_Model):
    """What was read from one log file (or archive member)."""

    name: str
    compressed_bytes: int = 0
    bytes_read: int = 0
    lines: int = 0
    problems: list[str] = Field(default_factory=list)


class InputSummary(_Model):
    """What the analysis read: files, bytes, lines, ranks, versions and env seen."""

    files: list[InputFile] = Field(default_factory=list)
    bytes: int = 0
    lines: int = 0
    engine: str = "re"
    ranks_seen: int = 0
    world_size: int | None = None
    hosts: list[str] = Field(default_factory=list)
    versions: dict[str, str] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    transports: dict[str, int] = Field(default_factory=dict)
    counts: dict[str, int] = Field(default_factory=dict)


class Answer(_Model):
    """One answer to a crash log or a question."""

    # frozen: built once, with its notes and `llm` passed in (`bot.answering.troubleshooter
    # .deterministic`, the agent's `compose_answer`); the docstring is the schema's
    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True,
                              frozen=True)

    verdict: Verdict
    summary: str
    #: the first line a reader sees, per language: what the log shows and the cause (a
    #: card's title only when that card's own evidence matched)
    headline: Titles = Field(default_factory=dict)
    #: the question that would decide between the candidates, and the answers already given
    deciding: DecidingQuestion | None = None
    facts: dict[str, str] = Field(default_factory=dict)
    #: a plain message when there is no diagnosis to show (errors, "attach a log")
    text: str = ""
    diagnosis: DiagnosisOut = Field(default_factory=DiagnosisOut)
    remediation: PerLanguage = Field(default_factory=dict)
    verify: PerLanguage = Field(default_factory=dict)
    citations: list[Citation] = Field(default_factory=list)
    similar_incidents: list[SimilarIncident] = Field(default_factory=list)
    next_steps: PerLanguage | None = None
    notes: list[str] = Field(default_factory=list)
    #: node diagnostics worth running for the leading causes (`ncclbot node <probe>`)
    probes: list[str] = Field(default_factory=list)
    #: what was read: files, bytes, lines, ranks, versions (None without logs)
    input: InputSummary | None = None
    question: str | None = None
    lang: Literal["en", "zh", "both"] | None = None
    #: whether the question alone points at one card
    specific: bool | None = None
    retrieval: list[RetrievalHit] = Field(default_factory=list)
    #: the LLM agent's account, chosen steps, probe proposals and runs (agent answers only)
    explanation: str = ""
    remediation_steps: list[ChosenStep] = Field(default_factory=list)
    suggested_probes: list[ProbeSuggestion] = Field(default_factory=list)
    probe_results: list[ProbeRun] = Field(default_factory=list)
    llm: LlmUse | None = None
    thread_id: str | None = None

    # -- constructors for answers without a diagnosis --------------------------------------

    @classmethod
    def plain(cls, verdict: Verdict, summary: str, text: str, notes: Sequence[str] = (),
              llm: LlmUse | None = None) -> Answer:
        return cls(verdict=verdict, summary=summary, text=text, notes=list(notes), llm=llm)

    @classmethod
    def error(cls, message: str, hint: str | None = None) -> Answer:
        """An expected failure (the message says what to do next)."""
        return cls.plain("error", "I could not analyze that.",
                         message + (f"\n{hint}" if hint else ""))

    @classmethod
    def failure(cls, exc: BaseException) -> Answer:
        """An unexpected failure (a missing optional package, a bug)."""
        return cls.plain("error", "I could not answer that.",
                         f"The answering backend failed ({type(exc).__name__}: "
                         f"{str(exc)[:300]}). The details are in the bot's log. Try again, or "
                         "run `ncclbot analyze` on the log.")

    # -- reading -----------------------------------------------------------------------------

    @property
    def root_causes(self) -> list[RootCauseOut]:
        return self.diagnosis.root_causes

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False, indent=2)


def answer_schema() -> dict[str, Any]:
    """The JSON Schema of what `analyze --json` and `ask --json` print."""
    return Answer.model_json_schema(mode="serialization")

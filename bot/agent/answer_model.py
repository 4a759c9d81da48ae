"""The structured final answer the model must return (as one JSON object), and its parser."""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")


class EvidenceRef(Loose):
    file: str = Field(description="log file name as analyze_log reported it")
    line: int = Field(description="1-based line number as analyze_log reported it")
    text: str = Field(description="the log line, copied from analyze_log output")


class RootCauseClaim(Loose):
    category: str = Field(description="a taxonomy category id")
    card: str = Field(description="id of a card returned by search_knowledge or get_card")
    confidence: float = Field(description="0..1")
    evidence: list[EvidenceRef] = Field(default_factory=list)
    why: str = ""


class RemediationStep(Loose):
    card: str = Field(description="the card the step comes from")
    step: int = Field(description="1-based index into that card's remediation list")
    note: str = Field("", description="optional: why this step, in this situation")


class ProbeSuggestion(Loose):
    node: str
    preset: str
    reason: str = ""


class AgentAnswer(Loose):
    explanation: str = Field(description="a short, plain explanation for the user")
    root_causes: list[RootCauseClaim] = Field(default_factory=list)
    remediation: list[RemediationStep] = Field(default_factory=list)
    citations: list[str] = Field(default_factory=list, description="card ids")
    probes: list[ProbeSuggestion] = Field(default_factory=list)


class AnswerParseError(ValueError):
    """The model's final message is not an AgentAnswer."""


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def _json_candidates(text: str) -> list[str]:
    out = [m.group(1) for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start >= 0 and end > start:
        out.append(text[start : end + 1])
    return out or [text]


def parse_answer(content: object) -> AgentAnswer:
    """Parse the model's final content (JSON, maybe fenced or with prose around it)."""
    if isinstance(content, list):  # content blocks
        content = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    text = str(content or "").strip()
    if not text:
        raise AnswerParseError("the final answer is empty")
    last: Exception | None = None
    for cand in _json_candidates(text):
        try:
            data = json.loads(cand)
        except ValueError as exc:
            last = exc
            continue
        if not isinstance(data, dict):
            last = ValueError("the answer must be a JSON object")
            continue
        try:
            return AgentAnswer.model_validate(data)
        except ValidationError as exc:
            last = exc
    raise AnswerParseError(f"not a valid answer object: {last}")


def schema_text() -> str:
    """The JSON schema of the answer, compact, for the system prompt."""
    return json.dumps(AgentAnswer.model_json_schema(), separators=(",", ":"))

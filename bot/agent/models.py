"""The typed records the LLM agent keeps and shows: card summaries, a log's analysis and
probe proposals.

They are models, not dicts, between modules; each is serialised only where it leaves:
shown to the model (`for_model()`: JSON without empty fields) or stored with the thread
(`bot.state.threads.ThreadState`, whose rows written as plain dicts by earlier versions still load:
the field names are the keys those dicts had).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from bot.answering.contract import EvidenceLine, InputSummary, SimilarIncident, SuspectOut


class _Shown(BaseModel):
    """A record shown to the model as JSON."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    def for_model(self) -> dict[str, JsonValue]:
        """The JSON the model reads (fields that are None left out)."""
        data: dict[str, JsonValue] = self.model_dump(mode="json", exclude_none=True)
        return data


class CardSummary(_Shown):
    """What the model sees of a card in a list: id, category, title and root cause."""

    card: str
    category: str
    title: str
    root_cause: str


class FoundCard(CardSummary):
    """A search_knowledge hit: the card, its fused score, why it ranked, each channel's rank."""

    score: float
    why: list[str] = Field(default_factory=list)
    channels: dict[str, int] = Field(default_factory=dict)


class CardDetail(CardSummary):
    """get_card: the whole card, remediation steps numbered."""

    also: list[str] = Field(default_factory=list)
    symptoms: list[str] = Field(default_factory=list)
    remediation: list[str] = Field(default_factory=list)
    verify: list[str] = Field(default_factory=list)
    probes: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)
    remediation_zh: list[str] | None = None


class CauseFound(_Shown):
    """One root cause analyze_log found, with the lines behind it."""

    category: str
    card: str | None = None
    confidence: float
    evidence: list[EvidenceLine] = Field(default_factory=list)
    why: list[str] = Field(default_factory=list)


class LogAnalysis(_Shown):
    """analyze_log's result for one attachment; kept in the thread for follow-ups."""

    attachment: str
    files: list[str] = Field(default_factory=list)
    verdict: str
    root_causes: list[CauseFound] = Field(default_factory=list)
    suspects: list[SuspectOut] = Field(default_factory=list)
    #: public threads with what fixed them: "has anyone seen this before?"
    similar_incidents: list[SimilarIncident] = Field(default_factory=list)
    #: what was read (the per-file list is in `files`)
    input: InputSummary = Field(default_factory=InputSummary)

    def for_model(self) -> dict[str, JsonValue]:
        data: dict[str, JsonValue] = self.model_dump(mode="json", exclude_none=True,
                                                     exclude={"input": {"files"}})
        return data

    @property
    def hosts(self) -> list[str]:
        return self.input.hosts


ProposalStatus = Literal["proposed", "confirmed", "declined"]


class ProbeProposal(BaseModel):
    """A probe the agent proposed on a node: run only once a person confirms it (the CLI's
    prompt, MCP's caller, Slack's button)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    node: str
    preset: str
    #: the preset's parameters, as the node agent's probe takes them
    params: dict[str, JsonValue] = Field(default_factory=dict)
    status: ProposalStatus = "proposed"

    @property
    def key(self) -> tuple[str, str]:
        return self.node, self.preset


#: asked before a proposed probe runs: whether a person confirmed it
#: True: run it; False: declined; a string: declined, and why (noted in the answer)
ConfirmProbe = Callable[[ProbeProposal], "bool | str"]

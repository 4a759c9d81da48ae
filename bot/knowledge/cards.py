"""The incident card: a strict schema and the loader for `knowledge/cards/*.yaml`.

A card is data, validated on load; unknown keys fail. See `knowledge/README.md`
for the format written out for editors.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Iterator
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    AfterValidator,
    AnyHttpUrl,
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StringConstraints,
    field_validator,
    model_validator,
)

from tools.registry import TOOLS

Slug = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]{2,80}$")]
NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]

#: What a card may say it concerns. Extend here (and in knowledge/README.md).
FRAMEWORKS: frozenset[str] = frozenset(
    [
        "pytorch",
        "nccl",
        "nccl-tests",
        "torchrun",
        "deepspeed",
        "megatron",
        "fsdp",
        "lightning",
        "accelerate",
        "transformers",
        "trl",
        "verl",
        "openrlhf",
        "vllm",
        "sglang",
        "ray",
        "slurm",
        "kubernetes",
        "docker",
        "torchtitan",
        "horovod",
        "jax",
        "colossalai",
        "mpi",
        "nemo",
        "cuda",
        "driver",
        "infiniband",
        "nvswitch",
    ]
)

#: Node diagnostics a card may suggest: the names of `tools.registry.TOOLS` (`ncclbot node
#: ...` commands; the registry imports only the tools' declarations, never their runners).
PROBES: frozenset[str] = frozenset(TOOLS)

#: Signatures at or above this weight are decisive: they must not fire on
#: unrelated fixtures. Lighter ones only support a diagnosis.
DECISIVE_WEIGHT = 0.5
#: A basis quote is short: the sentence that supports the claim.
MAX_QUOTE = 300


def _check_categories(values: list[str]) -> list[str]:
    from bot.knowledge.taxonomy import category_ids

    unknown = [v for v in values if v not in category_ids()]
    if unknown:
        raise ValueError(f"unknown categories {unknown}; see knowledge/taxonomy.yaml")
    return values


def _known_category(value: str) -> str:
    return _check_categories([value])[0]


#: A category id of knowledge/taxonomy.yaml (validated), for cards and incidents alike.
CategoryId = Annotated[str, AfterValidator(_known_category)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Bilingual(Strict):
    en: NonEmpty
    zh: NonEmpty


class BilingualList(Strict):
    en: list[NonEmpty] = Field(min_length=1)
    zh: list[NonEmpty] = Field(min_length=1)


class Basis(Strict):
    """Where a claim comes from: a source URL and a verbatim quote (<= 300 characters)."""

    source: AnyHttpUrl
    quote: Annotated[str, StringConstraints(strip_whitespace=True, min_length=4,
                                            max_length=MAX_QUOTE)]


class RootCause(Strict):
    en: NonEmpty
    zh: NonEmpty
    basis: list[Basis] = Field(default_factory=list)


class Step(Strict):
    """One remediation or verify step, with its basis and (for costly steps) its cost."""

    en: NonEmpty
    zh: NonEmpty
    basis: list[Basis] = Field(default_factory=list)
    cost: str | None = None


class Steps(RootModel[list[Step]]):
    """Ordered steps; `.en` / `.zh` give the texts of one language."""

    model_config = ConfigDict(frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _from_bilingual_lists(cls, value: object) -> object:
        """The older shape, {en: [...], zh: [...]}: steps without a basis."""
        if isinstance(value, dict) and set(value) <= {"en", "zh"}:
            en, zh = list(value.get("en") or []), list(value.get("zh") or [])
            if len(en) != len(zh):
                raise ValueError(f"{len(en)} English and {len(zh)} Chinese steps")
            return [{"en": a, "zh": b} for a, b in zip(en, zh, strict=True)]
        return value

    @field_validator("root")
    @classmethod
    def _not_empty(cls, value: list[Step]) -> list[Step]:
        if not value:
            raise ValueError("at least one step")
        return value

    @property
    def en(self) -> list[str]:
        return [s.en for s in self.root]

    @property
    def zh(self) -> list[str]:
        return [s.zh for s in self.root]

    def __iter__(self) -> Iterator[Step]:  # type: ignore[override]
        return iter(self.root)

    def __len__(self) -> int:
        return len(self.root)


class Proof(Strict):
    """Where a signature's line is printed: a source file pinned to a tag or commit (the URL
    names it, with `#L<line>`) and the verbatim format string or line quoted from it."""

    source: AnyHttpUrl
    quote: Annotated[str, StringConstraints(strip_whitespace=True, min_length=4,
                                            max_length=MAX_QUOTE)]


class Signature(Strict):
    """A regular expression over one log line (Python `re` syntax), with the real source of
    the line it matches (`proof`) where no incident of the corpus shows it."""

    name: Slug
    pattern: NonEmpty
    weight: float = Field(gt=0, le=1)
    ignore_case: bool = False
    proof: list[Proof] = Field(default_factory=list)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"pattern does not compile: {exc}") from exc
        if re.search(r"\(\?<?[=!]|\\[1-9]", value):
            raise ValueError("lookarounds and backreferences are not allowed")
        return value

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern, re.IGNORECASE if self.ignore_case else 0)

    @property
    def decisive(self) -> bool:
        return self.weight >= DECISIVE_WEIGHT


class Card(Strict):
    model_config = ConfigDict(extra="forbid", frozen=True, ignored_types=(cached_property,))

    id: Slug
    title: Bilingual
    category: CategoryId
    also: list[CategoryId] = Field(default_factory=list)
    frameworks: list[str] = Field(min_length=1)
    versions: list[NonEmpty] = Field(default_factory=list)
    symptoms: BilingualList
    signatures: list[Signature] = Field(default_factory=list)
    root_cause: RootCause
    remediation: Steps
    verify: Steps
    probes: list[str] = Field(default_factory=list)
    examples: list[NonEmpty] = Field(default_factory=list)
    sources: list[AnyHttpUrl] = Field(min_length=1)
    reviewed: dt.date

    @field_validator("frameworks")
    @classmethod
    def _known_frameworks(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - FRAMEWORKS)
        if unknown:
            raise ValueError(f"unknown frameworks {unknown}; known: {sorted(FRAMEWORKS)}")
        return value

    @field_validator("probes")
    @classmethod
    def _known_probes(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - PROBES)
        if unknown:
            raise ValueError(f"unknown probes {unknown}; known: {sorted(PROBES)}")
        return value

    @model_validator(mode="after")
    def _signatures_have_examples(self) -> Card:
        names = [s.name for s in self.signatures]
        if len(names) != len(set(names)):
            raise ValueError("signature names must be unique within a card")
        for sig in self.signatures:
            if not any(sig.regex.search(ex) for ex in self.examples) and not any(
                    sig.regex.search(p.quote) for p in sig.proof):
                raise ValueError(f"signature {sig.name!r} matches none of the card's examples "
                                 "(real lines) and none of its proofs (format strings)")
        return self

    def claims(self) -> list[tuple[str, list[Basis]]]:
        """Every claim of the card (root cause, each step) with its basis."""
        out: list[tuple[str, list[Basis]]] = [("root_cause", self.root_cause.basis)]
        out += [(f"remediation[{i}]", s.basis) for i, s in enumerate(self.remediation, 1)]
        out += [(f"verify[{i}]", s.basis) for i, s in enumerate(self.verify, 1)]
        return out

    @property
    def verified(self) -> bool:
        """Every claim quotes a source (the card has been re-checked against its sources)."""
        return all(basis for _, basis in self.claims())

    @property
    def source_urls(self) -> list[str]:
        return [str(u) for u in self.sources]

    def text(self, lang: str = "both") -> str:
        """All prose of the card in one string, for indexing and search."""
        parts: list[str] = []
        for lg in ("en", "zh") if lang == "both" else (lang,):
            parts.append(getattr(self.title, lg))
            parts.extend(getattr(self.symptoms, lg))
            parts.append(getattr(self.root_cause, lg))
            parts.extend(getattr(self.remediation, lg))
        parts.extend(self.examples)
        return "\n".join(parts)


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def knowledge_dir() -> Path:
    """Where the bundled knowledge lives (works from a wheel and from a checkout)."""
    return Path(str(resources.files("knowledge")))


def cards_dir() -> Path:
    return knowledge_dir() / "cards"


def taxonomy_path() -> Path:
    return knowledge_dir() / "taxonomy.yaml"


def healthy_logs() -> list[tuple[str, str]]:
    """The bundled logs of healthy runs (name, text): no signature may fire on them.
    `knowledge/healthy/index.yaml` says where each one comes from."""
    folder = knowledge_dir() / "healthy"
    return [(p.name, p.read_text(encoding="utf-8", errors="replace"))
            for p in sorted(folder.glob("*.log"))]


HEALTHY_INDEX = "index.yaml"


class HealthyLog(Strict):
    """Where a healthy log comes from: a public page (`url`) or how it was made here (`made`)."""

    file: NonEmpty
    url: AnyHttpUrl | None = None
    made: NonEmpty | None = None
    what: NonEmpty
    setup: NonEmpty
    excerpt: NonEmpty

    @model_validator(mode="after")
    def _has_origin(self) -> HealthyLog:
        if (self.url is None) == (self.made is None):
            raise ValueError(f"{self.file}: give exactly one of `url` and `made`")
        return self


class HealthyIndex(Strict):
    logs: list[HealthyLog] = Field(min_length=1)


def healthy_index(folder: Path | None = None) -> HealthyIndex:
    """`knowledge/healthy/index.yaml`, validated (raises on a defect)."""
    path = (folder or knowledge_dir() / "healthy") / HEALTHY_INDEX
    return HealthyIndex.model_validate(yaml_mapping(path.read_text(encoding="utf-8"),
                                                    HEALTHY_INDEX))


def card_files(directory: Path | None = None) -> list[Path]:
    return sorted((directory or cards_dir()).glob("*.yaml"))


def yaml_mapping(text: str, what: str) -> dict[str, Any]:
    """One knowledge file's YAML text as a mapping (raises ValueError naming `what`)."""
    data = yaml.load(text, Loader=_LOADER)  # CSafeLoader or SafeLoader
    if not isinstance(data, dict):
        raise ValueError(f"{what} must be a YAML mapping")
    return data


def parse_card(text: str) -> Card:
    """Parse one card's YAML text into a validated Card (raises on any defect)."""
    return Card.model_validate(yaml_mapping(text, "a card"))


def load_cards(files: Iterable[Path] | None = None) -> list[Card]:
    """Load and validate every card; the first defect raises with the file name."""
    cards = []
    for path in files if files is not None else card_files():
        try:
            cards.append(parse_card(path.read_text(encoding="utf-8")))
        except Exception as exc:
            raise ValueError(f"{path.name}: {exc}") from exc
    return cards

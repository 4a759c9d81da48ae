"""The root-cause categories (`knowledge/taxonomy.yaml`) and the questions that tell them
apart."""

from __future__ import annotations

from functools import lru_cache

import yaml
from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TellApart(_Frozen):
    """A text in both languages (what tells a category apart; its short name)."""

    en: str
    zh: str


class Category(_Frozen):
    id: str
    en: str
    zh: str
    #: the cause in a few words, as a headline names it
    name: TellApart
    tell_apart: TellApart

    def short(self, lang: str) -> str:
        return self.name.zh if lang == "zh" else self.name.en


class Implies(_Frozen):
    """What one answer to a deciding question means for the categories."""

    supports: tuple[str, ...] = ()
    rules_out: tuple[str, ...] = ()


class Basis(_Frozen):
    source: AnyHttpUrl
    quote: str = Field(min_length=4, max_length=300)


class Deciding(_Frozen):
    """A question that tells leading candidates apart; its answers are evidence."""

    id: str
    en: str
    zh: str
    answers: dict[str, Implies]
    basis: tuple[Basis, ...] = Field(min_length=1)
    #: leading categories for which the question is worth asking although its answers do not
    #: move them (a timeout that does not say why may be a topology or network fault)
    asked_for: tuple[str, ...] = ()

    def text(self, lang: str) -> str:
        return self.zh if lang == "zh" else self.en

    def categories(self) -> set[str]:
        return {c for a in self.answers.values()
                for c in (*a.supports, *a.rules_out)} | set(self.asked_for)


def _data() -> dict[str, object]:
    from bot.knowledge.cards import taxonomy_path

    data = yaml.safe_load(taxonomy_path().read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@lru_cache(maxsize=1)
def load_taxonomy() -> tuple[Category, ...]:
    return tuple(Category.model_validate(c) for c in _data()["categories"])  # type: ignore[attr-defined]


@lru_cache(maxsize=1)
def load_questions() -> tuple[Deciding, ...]:
    """The deciding questions; their categories are ids of the taxonomy."""
    ids = category_ids()
    out = tuple(Deciding.model_validate(q) for q in _data().get("questions") or [])  # type: ignore[attr-defined]
    for q in out:
        unknown = q.categories() - ids
        if unknown:
            raise ValueError(f"question {q.id}: unknown categories {sorted(unknown)}")
    return out


def question(qid: str) -> Deciding | None:
    return next((q for q in load_questions() if q.id == qid), None)


@lru_cache(maxsize=1)
def category_ids() -> frozenset[str]:
    return frozenset(c.id for c in load_taxonomy())


def category(cid: str) -> Category:
    for c in load_taxonomy():
        if c.id == cid:
            return c
    raise KeyError(cid)

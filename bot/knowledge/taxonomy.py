"""The root-cause categories (`knowledge/taxonomy.yaml`)."""

from __future__ import annotations

from functools import lru_cache

import yaml
from pydantic import BaseModel, ConfigDict


class TellApart(BaseModel):
    """What would tell a category apart from the others, in both languages."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    en: str
    zh: str


class Category(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    en: str
    zh: str
    tell_apart: TellApart


@lru_cache(maxsize=1)
def load_taxonomy() -> tuple[Category, ...]:
    from bot.knowledge.cards import taxonomy_path

    data = yaml.safe_load(taxonomy_path().read_text(encoding="utf-8"))
    return tuple(Category.model_validate(c) for c in data["categories"])


@lru_cache(maxsize=1)
def category_ids() -> frozenset[str]:
    return frozenset(c.id for c in load_taxonomy())


def category(cid: str) -> Category:
    for c in load_taxonomy():
        if c.id == cid:
            return c
    raise KeyError(cid)

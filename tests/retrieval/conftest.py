"""Shared fixtures: one index over all cards, built once per session in a temporary data dir."""

from __future__ import annotations

import pytest

from bot.config import Settings
from bot.retrieval.search import Retriever, get_retriever
from bot.service import bundled_cards


@pytest.fixture(scope="session")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return Settings(data_dir=tmp_path_factory.mktemp("ncclbot-data"))


@pytest.fixture(scope="session")
def retriever(settings: Settings) -> Retriever:
    return get_retriever(settings, list(bundled_cards()), progress=False)

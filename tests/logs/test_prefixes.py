"""Launcher prefixes and timestamps are peeled off and attributed (bot.logs.prefixes)."""

import pytest

from bot.logs.prefixes import clean, parse_line


@pytest.mark.parametrize(
    ("raw", "rank", "host", "body_start"),
    [
        ("[rank3]: torch.OutOfMemoryError: CUDA out of memory.", 3, None, "torch.OutOfMemoryError"),
        ("[default0]:Traceback (most recent call last):", None, None, "Traceback"),
        ("12: RuntimeError: boom", 12, None, "RuntimeError"),
        ("node-1: [rank7]: NCCL WARN x", 7, "node-1", "NCCL WARN"),
        ("(WorkerDict pid=123, ip=10.0.0.1) ERROR something", None, "10.0.0.1", "ERROR"),
        ("[2025-01-02 03:04:05,678][rank2]: hello", 2, None, "hello"),
        ("[rank1]:[E1120 03:59:01.123456 1234 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught",
         1, None, "[Rank 1] Watchdog"),
        ("E1120 03:59:01.123 1234 ProcessGroupNCCL.cpp:616] [Rank 9] Watchdog", 9, None, "[Rank 9]"),
        ("gpu-a100-03:2331:2666 [3] NCCL INFO NET/IB : Using", None, "gpu-a100-03", "gpu-a100-03:2331"),
        ("2025-11-20T03:59:01.123Z ERROR boom", None, None, "ERROR boom"),
        ("(RayWorkerVllm pid=4028887) ERROR 03-28 21:38:23 ray_utils.py:44] ncclUnhandledCudaError: x",
         None, None, "ncclUnhandledCudaError"),
    ],
)
def test_parse_line_attributes_rank_and_host(raw, rank, host, body_start):
    info = parse_line(clean(raw))
    assert info.rank == rank
    assert info.host == host
    assert info.body.startswith(body_start)


def test_timestamps_order_lines():
    a = parse_line("[2025-11-20 03:48:07,100] INFO x")
    b = parse_line("E1120 03:59:01.123 1 f.cc:1] y")
    assert a.ts is not None and b.ts is not None and a.ts < b.ts


def test_clean_strips_ansi_and_crlf():
    assert clean("\x1b[31mNCCL WARN bad\x1b[0m\r\n") == "NCCL WARN bad"


def test_words_followed_by_colon_are_not_hosts():
    info = parse_line("RuntimeError: NCCL error in: x")
    assert info.host is None and info.body.startswith("RuntimeError")

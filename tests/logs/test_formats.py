"""Message formats by version: one line per format the extractors target, each real (from a
public thread) or built exactly from the format string in the project's source (the version
and file are named next to it)."""

from __future__ import annotations

import pytest

from bot.answering.analysis import analyze_sources
from bot.knowledge.cards import load_cards
from bot.logs.analyze import analyzer_for
from bot.logs.sources import text_source

IB_COMPLETION = [
    # NCCL 2.18-2.20, src/transport/net_ib.cc:
    # "NET/IB : Got completion from peer %s with error %d, opcode %d, len %d, vendor err %d (%s)%s%s%s%s"
    ("node-1:1:2 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<55022> with error 12, "
     "opcode 0, len 0, vendor err 129 (Send)", 12, 129),
    # NCCL 2.21, src/transport/net_ib.cc:
    # "NET/IB : Got completion from peer %s with status=%d opcode=%d len=%d vendor err %d (%s)%s%s%s%s"
    ("node-1:1:2 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<55022> with status=12 "
     "opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.0.0.1 remoteGid ::ffff:10.0.0.2",
     12, 129),
    # NCCL 2.23-2.28, src/transport/net_ib.cc: "NET/IB: Got completion from peer %s with
    # status=%d opcode=%d len=%u vendor err %u (%s)%s%s%s%s hca %s"
    ("node-1:1:2 [0] NCCL WARN NET/IB: Got completion from peer 10.0.0.2<55022> with status=5 "
     "opcode=1 len=0 vendor err 249 (Recv) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2 "
     "hca mlx5_0", 5, 249),
    # NCCL >= 2.29, src/transport/net_ib/p2p.cc, ncclIbLogCompletionWithError: "NET/IB: Got
    # completion from peer %s with status=%s(%d) opcode=%s(%d) vendor_err=%u %s%s%s%s hca %s"
    ("node-1:12345:12400 [3] NCCL WARN NET/IB: Got completion from peer 10.1.1.2<49152> with "
     "status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129  localGid "
     "::ffff:10.1.1.1 remoteGids::ffff:10.1.1.2 hca mlx5_0", 12, 129),
]


@pytest.mark.parametrize(("line", "status", "vendor"), IB_COMPLETION)
def test_ib_completion_every_nccl_format(line: str, status: int, vendor: int) -> None:
    report = analyzer_for(load_cards()).analyze([text_source("ib.log", line + "\n")])
    fact = report.first("ib_completion")
    assert fact is not None, line
    assert fact.fields["status"] == status and fact.fields["vendor_err"] == vendor


def test_nccl_2_29_ib_line_is_diagnosed_as_infiniband() -> None:
    _, diagnosis = analyze_sources([text_source("ib.log", IB_COMPLETION[-1][0] + "\n")])
    assert diagnosis.root_causes[0].category == "infiniband_roce"


WATCHDOG_PROGRESS = [
    # PyTorch >= 2.4, ProcessGroupNCCL.cpp: logPrefix() (ends in "] ") + " failure detected by
    # watchdog at work sequence id: " ... — two spaces. Real line (verl thread, 2024):
    ("(WorkerDict pid=3490362) [rank1]:[E1118 20:32:23.957372583 ProcessGroupNCCL.cpp:2168] "
     "[PG ID 0 PG GUID 0(default_pg) Rank 1]  failure detected by watchdog at work sequence id: "
     "2635 PG status: last enqueued work: 2635, last completed work: 2634", 2635, 2634),
    # Earlier PyTorch (ProcessGroupNCCL.cpp: logPrefix(), "Exception (either an error or
    # timeout) detected by watchdog at work: ", seq, ", last enqueued NCCL work: ", ...);
    # a real line from a public thread:
    ("[rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 1] "
     "Exception (either an error or timeout) detected by watchdog at work: 6463, last enqueued "
     "NCCL work: 6463, last completed NCCL work: 6462.", 6463, 6462),
]


@pytest.mark.parametrize(("line", "seq", "completed"), WATCHDOG_PROGRESS)
def test_watchdog_progress_formats(line: str, seq: int, completed: int) -> None:
    report = analyzer_for(load_cards()).analyze([text_source("wd.log", line + "\n")])
    fact = report.first("work_progress")
    assert fact is not None, line
    assert fact.fields["seq"] == seq and fact.fields["last_completed"] == completed
    assert report.evidence_found


@pytest.mark.parametrize("line", [
    # NCCL <= 2.26, src/bootstrap.cc: INFO(NCCL_INIT, "Bootstrap : Using%s", line)
    "node-1:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
    # NCCL >= 2.27, src/bootstrap.cc: INFO(NCCL_BOOTSTRAP, "Bootstrap: Using%s", line)
    "node-1:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>",
])
def test_bootstrap_interface_both_spellings(line: str) -> None:
    report = analyzer_for(load_cards()).analyze([text_source("b.log", line + "\n")])
    fact = report.first("bootstrap_if")
    assert fact is not None and fact.fields["interface"].startswith("eth0")


@pytest.mark.parametrize("line", [
    # NCCL, src/include/checks.h: WARN("Cuda failure '%s'", cudaGetErrorString(err))
    "node-1:1:1 [0] NCCL WARN Cuda failure 'out of memory'",
    # nccl-tests, src/common.h: printf("%s: Test CUDA failure %s:%d '%s'\n", ...)
    "node-1: Test CUDA failure common.cu:892 'peer access is not supported between these two devices'",
    # a real line (vLLM's custom all-reduce check, sgl-project/sglang#552)
    "Failed: Cuda error /home/runner/work/vllm/vllm/csrc/custom_all_reduce.cuh:307 'peer access is "
    "not supported between these two devices'",
])
def test_cuda_check_macro_formats(line: str) -> None:
    report = analyzer_for(load_cards()).analyze([text_source("c.log", line + "\n")])
    assert report.first("cuda_error") is not None, line

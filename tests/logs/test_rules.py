"""Diagnosis rules on the shapes real logs take (each rule firing, and not firing).

The lines follow the formats of real tools (torch's ProcessGroupNCCL, nccl-tests, c10d's
TCPStore, DeepSpeed's launcher, Horovod, nvidia-smi, NCCL's own INFO/WARN lines).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.answering.analysis import analyze_sources
from bot.diagnosis.engine import Diagnosis
from bot.logs.sources import expand_inputs
from tests.logs.multirank import watchdog_line

NCCL_TESTS_HEAD = """\
# nThread 1 nGpus 4 minBytes 8 maxBytes 268435456 step: 2(factor) warmup iters: 5 iters: 20
#
# Using devices
#  Rank  0 Group  0 Pid  15833 on     node-a device  0 [0x02] NVIDIA RTX A6000
#  Rank  1 Group  0 Pid  15833 on     node-a device  1 [0x03] NVIDIA RTX A6000
#
#                                                       out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
"""
ROW = ("        8192          2048     float     sum      -1    8.72    0.94    0.94      0"
       "    8.59    0.95    0.95      0")


def diagnose_text(tmp_path: Path, text: str) -> Diagnosis:
    path = tmp_path / "job.log"
    path.write_text(text, encoding="utf-8")
    return analyze_sources(expand_inputs([str(path)]))[1]


def top(tmp_path: Path, text: str) -> str:
    d = diagnose_text(tmp_path, text)
    assert d.root_causes, "no cause at all"
    return d.root_causes[0].category


def categories(tmp_path: Path, text: str) -> list[str]:
    return [rc.category for rc in diagnose_text(tmp_path, text).root_causes]


@pytest.mark.parametrize(("line", "category"), [
    ("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:825, unhandled system error, "
     "NCCL version 2.7.8", None),  # ncclSystemError: network or shm, no context to choose
    ("UnknownError: ncclCommInitRank failed: unhandled cuda error", "version_incompatibility"),
    ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1333, invalid "
     "argument, NCCL version 2.14.3", "version_incompatibility"),
])
def test_nccl_error_text_is_read_as_its_code(tmp_path: Path, line: str,
                                             category: str | None) -> None:
    d = diagnose_text(tmp_path, line + "\n")
    assert d.root_causes
    if category:
        assert d.root_causes[0].category == category
    else:
        assert {"network_interface", "shm_ipc_container"} <= {r.category for r in d.root_causes}


def test_nccl_system_error_across_nodes_points_at_the_network(tmp_path: Path) -> None:
    log = ("[2024-01-08 16:13:56] [INFO] [multinode_runner.py:80:get_cmd] Running on the "
           "following workers: 10.0.0.1,10.0.0.2\n"
           "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:825, unhandled system error, "
           "NCCL version 2.18.1\n")
    assert top(tmp_path, log) == "network_interface"


def test_nccl_system_error_with_shm_transport_points_at_shm(tmp_path: Path) -> None:
    log = ("node:7389:7420 [0] NCCL INFO Channel 00 : 0[100000] -> 1[200000] via SHM/direct/direct\n"
           "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:825, unhandled system error\n")
    assert top(tmp_path, log) == "shm_ipc_container"


def test_nccl_tests_that_stop_before_any_result_are_a_p2p_hang(tmp_path: Path) -> None:
    assert top(tmp_path, NCCL_TESTS_HEAD) == "p2p_pcie_topology"
    assert top(tmp_path, NCCL_TESTS_HEAD + ROW + "\n") == "p2p_pcie_topology"


def test_nccl_tests_that_finish_are_not_a_hang(tmp_path: Path) -> None:
    done = NCCL_TESTS_HEAD + ROW + "\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 12.5\n"
    d = diagnose_text(tmp_path, done)
    assert d.verdict == "no_evidence" and not d.root_causes


def test_nccl_tests_failure_line_gives_the_code(tmp_path: Path) -> None:
    log = NCCL_TESTS_HEAD.replace("node-a device  1", "node-b device  1") + (
        "node-b: Test NCCL failure common.cu:959 'internal error - please report this issue "
        "to the NCCL developers / '\n")
    assert top(tmp_path, log) == "network_interface"  # two hosts: internal error at connect


def test_ib_channels_with_and_without_gdrdma(tmp_path: Path) -> None:
    mixed = ("n1:1:2 [1] NCCL INFO Channel 00/0 : 9[1a000] -> 2[6b000] [send] via NET/IB/0/GDRDMA\n"
             "n1:1:2 [1] NCCL INFO Channel 00/0 : 9[1a000] -> 2[6b000] [receive] via NET/IB/1\n")
    assert top(tmp_path, mixed) == "gpudirect_rdma"
    all_gdr = mixed.replace("via NET/IB/1", "via NET/IB/1/GDRDMA")
    assert "gpudirect_rdma" not in categories(tmp_path, all_gdr)


def test_ib_completion_error_4_is_the_gpudirect_path_and_12_the_fabric(tmp_path: Path) -> None:
    line = ("H100-2:19989:20082 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion "
            "from peer fe80::966d:ae03:8b:df78%ib0<53249> with error {}, opcode 32564, len 32564, "
            "vendor err {} (Send)\n")
    assert top(tmp_path, line.format(4, 81)) == "gpudirect_rdma"
    assert top(tmp_path, line.format(12, 129)) == "infiniband_roce"


def test_sigbus_in_nccl_is_shared_memory(tmp_path: Path) -> None:
    log = ("[8d6bf97c3bf4:3039 :0:3095] Caught signal 7 (Bus error: nonexistent physical address)\n"
           "    2 0x000000000007587d ncclGroupEnd()  ???:0\n")
    assert top(tmp_path, log) == "shm_ipc_container"


def test_oom_in_a_colocated_rollout_memory_pool_is_rl_weight_sync(tmp_path: Path) -> None:
    log = ("(WorkerDict pid=60511) [torch_memory_saver.cpp] CUresult error  result=2 "
           "file=csrc/torch_memory_saver.cpp func=cu_mem_create line=103\n")
    assert top(tmp_path, log) == "rl_weight_sync"
    plain = "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert top(tmp_path, plain) == "rank_crashed"


@pytest.mark.parametrize("line", [
    "[W socket.cpp:663] [c10d] The client socket has failed to connect to "
    "[::ffff:10.1.2.3]:29500 (errno: 110 - Connection timed out).",
    "torch.distributed.DistNetworkError: The client socket has failed to connect to any network "
    "address of (192.168.121.122, 1040).",
    "[W socket.cpp:601] [c10d] The IPv6 network addresses of (user, 53821) cannot be retrieved "
    "(gai error: -3 - Temporary failure in name resolution).",
])
def test_tcpstore_client_failures_are_rendezvous(tmp_path: Path, line: str) -> None:
    assert top(tmp_path, line + "\n") == "rendezvous_failure"


def test_every_rank_on_gpu0_in_nvidia_smi_is_device_assignment(tmp_path: Path) -> None:
    rows = "".join(f"|    0   N/A  N/A   {2695172 + i}      C   python train.py        "
                   f"{26167 if i == 0 else 871}MiB |\n" for i in range(8))
    assert top(tmp_path, rows) == "device_assignment"
    spread = "".join(f"|    {i}   N/A  N/A   {2695172 + i}      C   python train.py    "
                     "26167MiB |\n" for i in range(8))
    assert "device_assignment" not in categories(tmp_path, spread)


def test_acs_enabled_is_p2p(tmp_path: Path) -> None:
    log = "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl-\n"
    assert top(tmp_path, log) == "p2p_pcie_topology"


def test_other_ranks_timing_out_while_rank0_works_is_a_long_step(tmp_path: Path) -> None:
    log = "train: Scanning '../coco/labels/train' images and labels... 43718 found\n" + "".join(
        watchdog_line(r, 7) + "\n" for r in (1, 2, 3))
    assert top(tmp_path, log) == "timeout_too_short"


def test_rank0_alone_stuck_in_a_barrier_is_a_mismatch(tmp_path: Path) -> None:
    barrier = watchdog_line(0, 90, numel=1).replace("Timeout(ms)=600000", "Timeout(ms)=1800000")
    log = "`Trainer.fit` stopped: `max_epochs=3` reached.\n" + barrier + "\n"
    assert top(tmp_path, log) == "collective_mismatch"


def test_another_rank_stuck_in_a_barrier_waits_for_rank0(tmp_path: Path) -> None:
    log = "Clustering 111099511 points in 128D to 524288 clusters\n" + watchdog_line(1, 5, numel=1)
    assert top(tmp_path, log + "\n") == "timeout_too_short"


def test_horovod_stall_without_rank0_is_rank0_busy(tmp_path: Path) -> None:
    log = ("WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by "
           "subset\n of ranks and are waiting for remainder of ranks for more than 60 seconds.\n"
           "HVDAllReduce/HorovodAllreduce_grads_0 [ready ranks: 2, 6, 7, 3, 4, 1, 5],\n")
    assert categories(tmp_path, log)[0] in {"timeout_too_short", "straggler_or_imbalance"}
    assert "timeout_too_short" in categories(tmp_path, log)[:2]


def test_deepspeed_zero3_disagreement_is_a_mismatch_not_a_crash(tmp_path: Path) -> None:
    log = ("[rank7]:     raise RuntimeError(f\"Detected a disagreement on list length between "
           "rank0 and rank{dist.get_rank()}: \"\n"
           "[rank7]: RuntimeError: Detected a disagreement on list length between rank0 and rank7:\n")
    assert top(tmp_path, log) == "collective_mismatch"


def test_deepspeed_launcher_return_code_minus_9_is_a_kill(tmp_path: Path) -> None:
    log = ("[2023-11-13 16:59:54,760] [INFO] [launch.py:314:sigkill_handler] Killing subprocess 9439\n"
           "[2023-11-13 16:59:55,650] [ERROR] [launch.py:320:sigkill_handler] ['python', '-u', "
           "'train.py', '--local_rank=1'] exits with return code = -9\n")
    assert top(tmp_path, log) == "rank_crashed"


def test_rank_that_exited_without_timing_out_is_the_culprit(tmp_path: Path) -> None:
    log = "".join(watchdog_line(r, 15173) + "\n" for r in (0, 1, 2, 3)) + (
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: 5 "
        "(pid: 3777) of binary: /usr/bin/python3\n")
    d = diagnose_text(tmp_path, log)
    assert d.root_causes[0].category == "rank_crashed"
    assert d.suspects[0].rank == 5


SETUP = "".join(f"deepseek:2081556:2081564 [0] NCCL INFO Channel {c:02d}/16 : 0 1 2 3\n"
                for c in range(4))


def test_a_log_ending_in_nccl_set_up_is_an_init_hang(tmp_path: Path) -> None:
    assert top(tmp_path, SETUP) == "p2p_pcie_topology"
    nvls = SETUP + ("deepseek:2081556:2081564 [0] NCCL INFO NVLS Bind mem 0xac0000000 UC handle "
                    "0x7f3310ccb240 MC handle 0x7f3310ccaa20 size 1073741824\n")
    assert top(tmp_path, nvls) == "nvswitch_fabric"
    # The job went on after set-up: not a hang.
    assert not diagnose_text(tmp_path, SETUP + "step 1 loss 2.3\n" * 10).root_causes


def test_older_nccl_warn_formats_are_read(tmp_path: Path) -> None:
    log = "include/socket.h:344 WARN Socket creation failed : Address family not supported\n"
    assert top(tmp_path, log) == "network_interface"


def test_cuda_p2p_test_output_points_at_p2p(tmp_path: Path) -> None:
    log = ("[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]\n"
           "Device: 0, GeForce GTX 1080 Ti, pciBusID: 9, pciDeviceID: 0, pciDomainID:0\n"
           "Device=0 CAN Access Peer Device=1\n")
    assert top(tmp_path, log) == "p2p_pcie_topology"


def test_a_rank_initialised_twice_is_a_launch_mismatch(tmp_path: Path) -> None:
    twice = "".join(f"initializing ddp: GLOBAL_RANK: {r}, MEMBER: {r + 1}/8\n" * 2 for r in range(4))
    assert top(tmp_path, twice) == "rendezvous_failure"
    once = "".join(f"initializing ddp: GLOBAL_RANK: {r}, MEMBER: {r + 1}/8\n" for r in range(8))
    assert "rendezvous_failure" not in categories(tmp_path, once)


def test_horovod_shut_down_by_another_rank_is_a_crash(tmp_path: Path) -> None:
    log = ("[1,1]<stderr>:RuntimeError: Horovod has been shut down. This was caused by an exception "
           "on one of the ranks or an attempt to allreduce, allgather or broadcast a tensor after "
           "one of the ranks finished execution.\n")
    assert top(tmp_path, log) == "rank_crashed"


def test_an_exception_raised_in_rendezvous_code_is_a_rendezvous_failure(tmp_path: Path) -> None:
    log = ('  File "/usr/lib/python3.9/site-packages/torch/distributed/elastic/rendezvous/'
           'c10d_rendezvous_backend.py", line 113, in _call_store\n'
           "    return getattr(self._store, store_op)(*args, **kwargs)\n"
           "RuntimeError: Broken pipe\n")
    assert top(tmp_path, log) == "rendezvous_failure"


def test_rank0_silent_while_others_time_out_may_also_have_died(tmp_path: Path) -> None:
    log = "".join(watchdog_line(r, 15037) + "\n" for r in (1, 2, 3))
    # a candidate, not the answer: past incidents with only watchdog lines mostly had other
    # causes, so the nearest-incident channel ranks those first
    assert "rank_crashed" in categories(tmp_path, log)


def test_lower_case_oom_in_the_rollout_allocator(tmp_path: Path) -> None:
    log = "cuda error: out of memory at /workspace/csrc/cumem_allocator.cpp:62\n"
    assert top(tmp_path, log) == "rl_weight_sync"

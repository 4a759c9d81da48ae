"""`libs`: which GPU-stack libraries a running job's ranks loaded. Parsing on maps lines in
the kernel's format over real wheel layouts; end to end on a real python rank that imported
torch, through the CLI, the node agent (a real process) and the LLM's tool table."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tools.cli import node_app
from tools.libs.collect import findings, rank_libs
from tools.libs.maps import LoadedLib, family_of, loaded_libs, mapped_files, wheel_version

SITE = "/opt/conda/lib/python3.11/site-packages"
#: /proc/PID/maps lines (address perms offset dev inode path) of a CUDA rank whose NCCL,
#: cuDNN and cuBLAS come from pip wheels, driver and runtime from versioned files
MAPS = f"""\
7f1c00000000-7f1c00200000 r-xp 00000000 08:01 1234 {SITE}/nvidia/nccl/lib/libnccl.so.2
7f1c00200000-7f1c00400000 r--p 00200000 08:01 1234 {SITE}/nvidia/nccl/lib/libnccl.so.2
7f1c10000000-7f1c10100000 r-xp 00000000 08:01 1240 {SITE}/nvidia/cudnn/lib/libcudnn.so.9
7f1c10100000-7f1c10200000 r-xp 00000000 08:01 1241 {SITE}/nvidia/cudnn/lib/libcudnn_ops.so.9
7f1c20000000-7f1c20100000 r-xp 00000000 08:01 1250 /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
7f1c30000000-7f1c30100000 r-xp 00000000 08:01 1260 /usr/local/cuda/lib64/libcudart.so.12.4.127
7f1c40000000-7f1c40100000 r-xp 00000000 08:01 1270 {SITE}/torch/lib/libtorch_cuda.so
7f1c50000000-7f1c50100000 r-xp 00000000 08:01 1280 {SITE}/torch/lib/libgomp-a34b3233.so.1.0.0
7f1c60000000-7f1c60001000 rw-p 00000000 00:00 0
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
"""
WHEELS = {f"{SITE}": ["nvidia", "nvidia_nccl_cu12-2.21.5.dist-info",
                      "nvidia_cudnn_cu12-9.1.0.70.dist-info", "torch-2.4.0+cu121.dist-info"]}


def _list(path: str) -> list[str]:
    if path not in WHEELS:
        raise FileNotFoundError(path)
    return WHEELS[path]


def test_versions_from_file_names_and_wheels() -> None:
    assert len(mapped_files(MAPS)) == 7  # distinct files; anonymous maps and [stack] skipped
    assert family_of("/x/libcudnn_ops.so.9") == ("cudnn", "9")
    assert family_of("/x/libcudart_static.a") is None and family_of("/x/libc.so.6") is None
    libs = {(x.family, x.version, x.source) for x in loaded_libs(MAPS, _list)}
    assert libs == {("nccl", "2.21.5", "wheel"), ("cudnn", "9.1.0.70", "wheel"),
                    ("cuda_driver", "550.54.15", "file name"),
                    ("cuda_runtime", "12.4.127", "file name"),
                    ("torch_cuda", "2.4.0+cu121", "wheel"), ("openmp", "1.0.0", "file name")}
    assert wheel_version("cublas", f"{SITE}/nvidia/cublas/lib/libcublas.so.12", _list) is None


def test_findings_two_copies_and_ranks_that_disagree() -> None:
    a = rank_libs(10, 0, "j1", [LoadedLib("nccl", "/a/libnccl.so.2.18.1", "2.18.1", "file name")],
                  None)
    b = rank_libs(11, 1, "j1", [LoadedLib("nccl", "/b/libnccl.so.2.21.5", "2.21.5", "file name"),
                                LoadedLib("nccl", "/c/libnccl.so.2.18.1", "2.18.1", "file name")],
                  None)
    found = {f.rule: f.message for f in findings([a, b])}
    assert "rank 1 (pid 11) mapped 2 nccl libraries" in found["libs_two_copies"]
    assert "2.18.1 on rank(s) 0, 1; 2.21.5 on rank(s) 1" in found["libs_ranks_disagree"]
    assert findings([a]) == []


@contextlib.contextmanager
def torch_rank_process(run_id: str) -> Iterator[int]:
    """A real process marked as rank 0 of job `run_id`, which imported torch (so it mapped
    torch/lib/libtorch_cpu.so and the OpenMP runtime); its pid. Skips without torch."""
    pytest.importorskip("torch")
    env = {**os.environ, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1",
           "TORCHELASTIC_RUN_ID": run_id}
    proc = subprocess.Popen([sys.executable, "-c", "import sys, time, torch; "
                             "print('ready', flush=True); time.sleep(300)"],
                            env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def torch_rank() -> Iterator[int]:
    with torch_rank_process("libs-test") as pid:
        yield pid


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def test_cli_reads_a_real_rank(torch_rank: int) -> None:
    res = CliRunner().invoke(node_app, ["libs", "--pids", str(torch_rank), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    (rank,) = out["data"]["ranks"]
    assert rank["pid"] == torch_rank and rank["rank"] == 0 and rank["job"] == "libs-test"
    assert rank["versions"]["torch"] == [_torch_version()]  # from the wheel's dist-info
    assert "openmp" in rank["versions"]
    assert any(p.endswith("libtorch_cpu.so") for p in rank["paths"]["torch"])
    text = CliRunner(env={"COLUMNS": "200"}).invoke(node_app, ["libs", "--pids",
                                                               str(torch_rank)]).output
    assert "libraries loaded" in text and _torch_version() in text


def test_cli_says_when_no_rank_is_there(tmp_path: Path) -> None:
    res = CliRunner().invoke(node_app, ["libs", "--pids", str(os.getpid()), "--json"])
    assert res.exit_code == 2
    assert "no rank of a distributed job" in json.loads(res.output)["error"]
    bad = CliRunner().invoke(node_app, ["libs", "--pids", "12,x"])
    assert bad.exit_code == 2 and "whole numbers" in bad.output


def test_through_the_agent_process_and_the_llm_tool(torch_rank: int, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated /v1/libs route of a real agent process, reached through the NodeRunner
    as the LLM's node_libs tool reaches it (schema from the parameter model)."""
    from bot.agent.tools import tool_schema
    from bot.config import Settings
    from bot.nodes.runner import NodeRunner
    from tests.agent.conftest import start_agent, stop_agent, use_inventory

    schema = tool_schema("node_libs")
    assert schema["required"] == ["node"] and "job" in schema["properties"]
    agent = start_agent(tmp_path, "node-l")
    try:
        use_inventory(tmp_path, {"node-l": agent}, monkeypatch)
        runner = NodeRunner(Settings(), "ncclbot-llm-agent")
        result = runner.run("node-l", "libs", {"pids": [torch_rank]})
        assert result.status == "success", result.error
        assert result.data["versions"]["torch"] == [_torch_version()]
        last = json.loads(agent.audit_lines()[-1])
        assert last["path"] == "/v1/libs" and last["user"] == "ncclbot-llm-agent"
    finally:
        stop_agent(agent)

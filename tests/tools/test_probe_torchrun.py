"""`ncclbot node probe --nnodes 2 --rdzv-endpoint ...`: the sweep under torchrun's c10d
rendezvous, two "nodes" x 1 gloo rank on 127.0.0.1, both started here."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from tools.probe.params import ProbeParams
from tools.probe.run import torchrun_argv

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_nodes_through_c10d_rendezvous(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    endpoint = f"127.0.0.1:{_free_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCLBOT_", "PET_"))}
    env["GLOO_SOCKET_IFNAME"] = "lo"
    procs = []
    for node_rank in (0, 1):
        argv = [sys.executable, "-m", "bot.cli.main", "node", "probe", "--json",
                "--backend", "gloo", "--nproc", "1", "--nnodes", "2",
                "--node-rank", str(node_rank), "--rdzv-endpoint", endpoint,
                "--rdzv-id", "test-rdzv", "--min-bytes", "4096", "--max-bytes", "16384",
                "--factor", "4", "--iters", "2", "--warmup", "1",
                "--collectives", "all_reduce,all_gather,sendrecv",
                "--collective-timeout", "30", "--timeout", "120"]
        procs.append(subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE))
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=150)
        assert p.returncode == 0, (stdout.decode()[-2000:], stderr.decode()[-2000:])
        outs.append(json.loads(stdout))
    ranks = []
    for node_rank, out in enumerate(outs):
        assert out["status"] == "success", out["error"]
        data = out["data"]
        assert data["nnodes"] == 2 and data["node_rank"] == node_rank
        assert data["world_size"] == 2 and data["rendezvous"]["backend"] == "c10d"
        rows = data["results"]  # merged like the single-node path: one row per step
        assert {(r["collective"], r["bytes"]) for r in rows} == {
            (c, b) for c in ("all_reduce", "all_gather", "sendrecv") for b in (4096, 16384)}
        assert all(r["correct"] and r["busbw_gbps"] > 0 for r in rows)
        ar = next(r for r in rows if r["collective"] == "all_reduce")
        assert ar["busbw_gbps"] == pytest.approx(ar["algbw_gbps"], rel=1e-3)  # 2(n-1)/n, n=2
        ranks += data["ranks"]
    assert sorted(ranks) == [0, 1]  # each node ran one of the two global ranks


def test_torchrun_command_and_its_bounds() -> None:
    p = ProbeParams(backend="gloo", nnodes=2, node_rank=0, rdzv_endpoint="127.0.0.1:29400")
    argv = torchrun_argv(p, [1024], 1, Path("/tmp/x"))
    assert argv[1:3] == ["-m", "torch.distributed.run"]
    assert argv[argv.index("--rdzv-backend") + 1] == "c10d"
    assert "is_host=1" in argv[argv.index("--rdzv-conf") + 1]
    assert argv[argv.index("--local-addr") + 1] == "127.0.0.1"
    assert argv[argv.index("-m", 3) + 1] == "tools.probe.worker"
    remote = ProbeParams(backend="gloo", nnodes=4, rdzv_endpoint="gpu-node-17:29400")
    assert "--local-addr" not in torchrun_argv(remote, [1024], 8, Path("/tmp/x"))
    for bad in ({"nnodes": 2}, {"nnodes": 2, "node_rank": 2, "rdzv_endpoint": "h:1"},
                {"rdzv_endpoint": "h;id:29400"}, {"rdzv_endpoint": "h:99999"},
                {"rdzv_id": "a b"}):
        with pytest.raises(ValidationError):
            ProbeParams(backend="gloo", **bad)

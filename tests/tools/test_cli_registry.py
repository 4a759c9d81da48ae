"""The CLI (exit codes, JSON), run_local dispatch and the parameter models' bounds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES
from pydantic import ValidationError
from typer.testing import CliRunner

from tools.cli import node_app
from tools.probe.params import ProbeParams
from tools.registry import TOOLS, run_local, validate

runner = CliRunner()


def test_topo_without_gpu_exits_2_with_reason() -> None:
    res = runner.invoke(node_app, ["topo", "--json"])
    assert res.exit_code == 2
    data = json.loads(res.output)
    assert data["status"] == "unavailable" and data["error"].startswith("NVML not available")


def test_topo_file_readable_output() -> None:
    res = runner.invoke(node_app, ["topo", "--topo-file",
                                   str(FIXTURES / "topo/a100_sxm4_8gpu_18nic.txt")])
    assert res.exit_code == 0 and "NV12" in res.output and "nic_numa_mismatch" in res.output


def test_topo_file_missing_exits_1(tmp_path: Path) -> None:
    res = runner.invoke(node_app, ["topo", "--json", "--topo-file", str(tmp_path / "x")])
    assert res.exit_code == 1 and "cannot read" in json.loads(res.output)["error"]


def test_env_and_xid_commands() -> None:
    res = runner.invoke(node_app, ["env", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["tool"] == "env"
    res = runner.invoke(node_app, ["xid", "--file",
                                   str(FIXTURES / "dmesg/xid79-fallen-off-bus-aer.log")])
    assert res.exit_code == 0 and "Xid 79" in res.output


def test_probe_bad_params_exit_1() -> None:
    res = runner.invoke(node_app, ["probe", "--json", "--backend", "gloo", "--iters", "5000"])
    assert res.exit_code == 1 and "invalid parameters" in json.loads(res.output)["error"]


def test_run_local_dispatch_and_errors() -> None:
    assert run_local("nope").status == "error"
    assert run_local("topo", {"bogus": 1}).error.startswith("invalid parameters")
    text = (FIXTURES / "topo/pcie_workstation_5gpu.txt").read_text()
    assert run_local("topo", {"topo_text": text}).status == "success"
    assert set(TOOLS) == {"topo", "env", "probe", "xid", "hang", "libs"}
    assert all(len(spec.description) > 40 for spec in TOOLS.values())


@pytest.mark.parametrize("bad", [
    {"max_bytes": 9 * 2**30}, {"iters": 1001}, {"nproc": 65}, {"timeout": 1801},
    {"collective_timeout": 0}, {"factor": 1.0}, {"min_bytes": 4096, "max_bytes": 1024},
    {"collectives": ["gather"]}, {"backend": "mpi"}, {"extra": True}, {"warmup": -1},
])
def test_probe_params_reject(bad: dict) -> None:
    with pytest.raises(ValidationError):
        validate("probe", bad)


def test_probe_params_defaults() -> None:
    p = ProbeParams()
    assert p.backend == "nccl" and len(p.collectives) == 6 and p.max_bytes == 64 * 2**20


def test_tools_import_without_torch() -> None:
    code = ("import sys, tools.cli, tools.topo.collect, tools.env.collect, tools.xid.scan, tools.probe.run, "
            "tools.registry; assert sys.modules.get('torch') is None, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True,
                   cwd=Path(__file__).resolve().parents[2])


def test_every_card_id_exists() -> None:
    from tools.cards import RULE_CARDS

    cards = Path(__file__).resolve().parents[2] / "knowledge" / "cards"
    if not cards.is_dir():
        pytest.skip("knowledge/cards not present")
    missing = {r: c for r, c in RULE_CARDS.items() if c and not (cards / f"{c}.yaml").is_file()}
    assert missing == {}


def test_every_tool_is_declared_once_and_read_everywhere() -> None:
    """The cards' probe names, Slack's commands and the node agent's request models come
    from the one ToolSpec table."""
    from bot.knowledge.cards import PROBES
    from bot.slack.listeners.commands import NODE_TOOLS
    from bot.slack.nodes import TOOLS as SLACK_TOOLS
    from tools.agent.models import REQUESTS

    assert PROBES == set(TOOLS) == set(SLACK_TOOLS) == set(NODE_TOOLS) == set(REQUESTS)
    for spec in TOOLS.values():
        assert spec.description and callable(spec.run)
        assert validate(spec.name, None) == spec.params()
        assert issubclass(REQUESTS[spec.name], spec.params)
        assert REQUESTS[spec.name].model_config.get("strict") is True

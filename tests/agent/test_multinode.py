"""Agents on 127.0.0.1 running one gloo sweep together; an injected hang (node-c) or an
injected slow rank (node-e) is named, and no healthy node or link is blamed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from bot.nodes.commands import render_localization
from bot.nodes.localize import localize
from bot.nodes.multiprobe import run_group
from tests.agent.conftest import Agent, faulty, start_agents, stop_agent, use_inventory
from tools.probe.remote import group_request

pytest.importorskip("torch")  # every test runs a real gloo sweep

#: collective_timeout 10 s: it is also how long gloo's init_process_group waits for the other
#: node's rank, which on a busy machine may still be importing torch (with 4 s, under -n 2 at
#: load 24, a healthy node-d was blamed beside node-c); node-c's hang waits it out 3 times
PARAMS = {"backend": "gloo", "nproc": 1, "min_bytes": 4096, "max_bytes": 4096, "iters": 2,
          "warmup": 1, "collectives": ["all_reduce"], "collective_timeout": 10, "timeout": 60}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Agent]]:
    tmp = tmp_path_factory.mktemp("cluster")
    agents = start_agents(tmp, {
        "node-a": {}, "node-b": {}, "node-d": {},
        # node-c's ranks never get through the first all_reduce (test-only fault)
        "node-c": faulty("hang:collective=all_reduce"),
        # node-e's ranks stall 0.25 s before every timed all_reduce: a slow node
        "node-e": faulty("delay:seconds=0.25"),
    })
    yield agents
    for a in agents.values():
        stop_agent(a)


def test_healthy_pair_runs_one_sweep(cluster: dict[str, Agent]) -> None:
    clients = {n: a.client() for n, a in cluster.items()}
    run = run_group(clients, ["node-a", "node-b"], group_request(PARAMS))
    assert run.ok, run.error
    assert run.busbw_gbps and run.busbw_gbps > 0
    assert set(run.per_node) == {"node-a", "node-b"}


def test_hanging_node_is_named(cluster: dict[str, Agent]) -> None:
    clients = {n: cluster[n].client() for n in ("node-a", "node-b", "node-c", "node-d")}
    loc = localize(lambda g: run_group(clients, g, group_request(PARAMS)), list(clients))
    assert not loc.full.ok
    assert loc.verdict == "node", loc.as_dict()
    assert loc.culprits == ["node-c"]
    assert loc.nodes["node-c"].hung_here
    assert all(loc.nodes[n].verdict == "ok" for n in ("node-a", "node-b", "node-d"))
    # each agent wrote who asked and the rendezvous it joined
    lines = [json.loads(x) for x in cluster["node-c"].audit_lines()]
    probes = [x for x in lines if x["path"] == "/v1/probe"]
    assert probes and all(p["params"]["rendezvous"]["master_addr"] == "127.0.0.1" for p in probes)
    # the agents' real error texts render as text (never as rich markup)
    con = Console(record=True, width=200)
    render_localization(loc, con)
    text = con.export_text()
    assert "node-c is bad with every partner" in text and "culprit" in text


def test_slow_node_is_named_through_the_cli(cluster: dict[str, Agent], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.cli.main import app

    names = ("node-a", "node-b", "node-d", "node-e")
    use_inventory(tmp_path, {n: cluster[n] for n in names}, monkeypatch)
    result = CliRunner().invoke(app, [
        "node", "probe", "--nodes", ",".join(names), "--backend", "gloo", "--nproc", "1",
        "--min-bytes", "65536", "--max-bytes", "65536", "--iters", "2", "--warmup", "1",
        "--collectives", "all_reduce", "--collective-timeout", "10", "--timeout", "60",
        "--localize", "always", "--json"])
    loc = json.loads(result.output)
    assert result.exit_code == 1, result.output
    assert loc["full"]["ok"]  # slow, not broken: every rank finished
    assert loc["verdict"] == "node" and loc["culprits"] == ["node-e"], loc
    verdicts = {n: s["verdict"] for n, s in loc["nodes"].items()}
    assert verdicts == {"node-a": "ok", "node-b": "ok", "node-d": "ok", "node-e": "culprit"}
    for pair in loc["pairs"]:  # bad exactly when node-e is in it: no healthy link blamed
        assert pair["ok"] and pair["bad"] == ("node-e" in pair["nodes"]), pair
    e = loc["nodes"]["node-e"]
    assert e["median_busbw_gbps"] < 0.5 * e["peers_median_busbw_gbps"]

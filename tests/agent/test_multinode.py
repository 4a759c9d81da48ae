"""Four agents on 127.0.0.1 running one gloo sweep; the one with an injected hang is named."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.nodes.multiprobe import localize, run_group
from tests.agent.conftest import Agent, start_agent, stop_agent

PARAMS = {"backend": "gloo", "nproc": 1, "min_bytes": 4096, "max_bytes": 4096, "iters": 2,
          "warmup": 1, "collectives": ["all_reduce"], "collective_timeout": 4, "timeout": 60}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Agent]]:
    tmp = tmp_path_factory.mktemp("cluster")
    agents: dict[str, Agent] = {}
    try:
        for name in ("node-a", "node-b", "node-c", "node-d"):
            # node-c's ranks never get through the first all_reduce (test-only fault).
            env = {"NCCLBOT_PROBE_FAULT": "hang:collective=all_reduce"} if name == "node-c" else {}
            agents[name] = start_agent(tmp, name, env)
        yield agents
    finally:
        for a in agents.values():
            stop_agent(a)


def test_healthy_pair_runs_one_sweep(cluster: dict[str, Agent]) -> None:
    clients = {n: a.client() for n, a in cluster.items()}
    run = run_group(clients, ["node-a", "node-b"], PARAMS)
    assert run.ok, run.error
    assert run.busbw_gbps and run.busbw_gbps > 0
    assert set(run.per_node) == {"node-a", "node-b"}


def test_hanging_node_is_named(cluster: dict[str, Agent], tmp_path: Path) -> None:
    clients = {n: a.client() for n, a in cluster.items()}
    loc = localize(lambda g: run_group(clients, g, PARAMS), list(clients))
    assert not loc.full.ok
    assert loc.verdict == "node", loc.as_dict()
    assert loc.culprits == ["node-c"]
    assert loc.nodes["node-c"]["hung_here"]
    assert all(loc.nodes[n]["verdict"] == "ok" for n in ("node-a", "node-b", "node-d"))
    # each agent wrote who asked and the rendezvous it joined
    lines = [json.loads(x) for x in cluster["node-c"].audit_lines()]
    probes = [x for x in lines if x["path"] == "/v1/probe"]
    assert probes and all(p["params"]["rendezvous"]["master_addr"] == "127.0.0.1" for p in probes)

"""How long `ncclbot node hang` takes on a real hung 4-rank gloo job, here and through a node
agent on 127.0.0.1, against the reference: `py-spy dump` run on each rank one after the other
(what an on-call engineer does by hand, without comparing anything).

    .venv/bin/python benchmarks/hang.py [--runs 3]

Needs py-spy and root (or CAP_SYS_PTRACE); prints seconds per run and the verdict's rank.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    start = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed: {out.stderr[-800:]}")
    return time.monotonic() - start, out.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    from bot.nodes.client import cli_user
    from tests.agent.conftest import SECRET, start_agent, stop_agent
    from tests.hang.jobs import hung_job
    from tools.hang.stacks import py_spy

    spy = py_spy()
    if spy is None:
        raise SystemExit("py-spy is not installed (pip install py-spy)")
    ncclbot = [sys.executable, "-m", "bot.cli.main", "node", "hang", "--json", "--ras-port", "0"]
    with tempfile.TemporaryDirectory() as tmp, hung_job(Path(tmp), stuck_rank=2) as job:
        pids = ",".join(map(str, job.pids))
        agent = start_agent(Path(tmp), "gpu-node07", oncall=(cli_user(),))
        (Path(tmp) / "nodes.yaml").write_text(f'nodes:\n  gpu-node07: {{url: "{agent.url}"}}\n')
        env = {**os.environ, "NCCLBOT_NODES_FILE": f"{tmp}/nodes.yaml",
               "NCCLBOT_AGENT_SECRET": SECRET}
        try:
            rows: dict[str, list[float]] = {"py-spy dump x4 (reference)": [],
                                            "ncclbot node hang --pids": [],
                                            "ncclbot node hang --node (agent)": []}
            for _ in range(args.runs):
                start = time.monotonic()
                for pid in job.pids:
                    timed([spy, "dump", "--pid", str(pid)])
                rows["py-spy dump x4 (reference)"].append(time.monotonic() - start)
                took, out = timed([*ncclbot, "--pids", pids])
                rows["ncclbot node hang --pids"].append(took)
                suspect = json.loads(out)["diagnosis"]["suspects"][0]
                took, out = timed([*ncclbot, "--node", "gpu-node07"], env)
                rows["ncclbot node hang --node (agent)"].append(took)
                remote = json.loads(out)["diagnosis"]["suspects"][0]
        finally:
            stop_agent(agent)
    ref = statistics.median(rows["py-spy dump x4 (reference)"])
    for name, values in rows.items():
        med = statistics.median(values)
        print(f"{name:34s} median {med:5.2f} s  max {max(values):5.2f} s  "
              f"ratio {med / ref:4.1f}x")
    print(f"verdict here: rank {suspect['rank']} ({suspect['reason'][:80]}...)")
    print(f"verdict via the agent: rank {remote['rank']} on {remote['host']}")


if __name__ == "__main__":
    main()

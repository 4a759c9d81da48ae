"""Flight Recorder dumps through MCP: a real 4-rank gloo job's dumps (rank 2 skipped one
all_reduce), by folder and as pasted JSON, name rank 2."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

from mcp import ClientSession

from tests.logs import test_flight_recorder as fr
from tests.mcp.conftest import run_stdio, server_env, structured

job = fr.job  # the module-scoped fixture: the job run for real under torchrun


def test_dumps_by_folder_and_as_text_name_the_rank(data_dir: Path, job: Path) -> None:
    dumps = job / "dumps"
    pasted = [{"name": f"fr_trace_{r}.json",
               "content": json.dumps(pickle.loads((dumps / f"fr_trace_{r}").read_bytes()))}
              for r in range(4)]  # our own job's dumps: trusted plain data

    async def steps(s: ClientSession) -> tuple[dict[str, Any], dict[str, Any]]:
        return (structured(await s.call_tool("analyze_logs", {"paths": [str(dumps)]})),
                structured(await s.call_tool("analyze_logs", {"logs": pasted})))

    by_folder, by_text = run_stdio(server_env(data_dir), steps)
    for answer in (by_folder, by_text):
        suspect = answer["diagnosis"]["suspects"][0]
        assert suspect["rank"] == 2
        assert "never entered collective #4" in suspect["reason"]
        assert answer["diagnosis"]["root_causes"][0]["category"] == "collective_mismatch"

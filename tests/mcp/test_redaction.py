"""Nothing with a secret leaves through MCP: secrets planted in a log (on the very lines the
answer quotes as evidence) and in a question come back as [REDACTED], whichever tool."""

from __future__ import annotations

from pathlib import Path

import yaml
from mcp import ClientSession

from bot.answering.troubleshooter import analyze_paths
from bot.config import Settings
from tests.mcp.conftest import ROOT, SAMPLE, everything, run_stdio, server_env

PLANTED = yaml.safe_load((ROOT / "tests" / "fixtures" / "secrets" / "planted.yaml")
                         .read_text(encoding="utf-8"))
#: the sample's lines the answer quotes: rank 5's failed step and its OutOfMemoryError
QUOTED = (64, 74)


def planted_log(tmp: Path) -> tuple[Path, list[str]]:
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    per_line = 6
    for i, at in enumerate(QUOTED):
        lines[at] += " while uploading: " + "; ".join(
            p["line"] for p in PLANTED[i * per_line:(i + 1) * per_line])
    path = tmp / "rank-all.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, [p["secret"] for p in PLANTED[:per_line * len(QUOTED)]]


def test_planted_secrets_do_not_come_back(data_dir: Path, tmp_path: Path) -> None:
    log, secrets = planted_log(tmp_path)
    # without redaction the answer quotes them all (so the check below can fail)
    raw = analyze_paths([str(log)], Settings(data_dir=data_dir)).to_json()
    assert [s for s in secrets if s not in raw] == []
    question = f"rank 5 died after {PLANTED[20]['line']}; my HF token is {PLANTED[0]['secret']}"
    text_log = {"name": "pasted.log", "content": log.read_text(encoding="utf-8")}

    async def steps(s: ClientSession) -> list[str]:
        return [everything(await s.call_tool("analyze_logs", {"paths": [str(log)]})),
                everything(await s.call_tool("analyze_logs", {"logs": [text_log]})),
                everything(await s.call_tool("ask", {"question": question,
                                                     "paths": [str(log)]})),
                everything(await s.call_tool("similar_incidents", {"logs": [text_log]}))]

    outputs = run_stdio(server_env(data_dir), steps)
    for out in outputs[:3]:  # the answers name the cause's category
        assert "rank_crashed" in out
    assert "CUDA out of memory on one rank" in outputs[3]  # similar_incidents: the summary
    for out in outputs:
        leaked = [s for s in [*secrets, PLANTED[20]["secret"]] if s in out]
        assert leaked == []
    assert outputs[0].count("[REDACTED]") >= 6
    assert "rank 5 died after" in outputs[2]  # the question is echoed, stripped

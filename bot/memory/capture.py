"""Reading what a local incident keeps of a job's logs (the I/O edge of `bot.memory.model`)."""

from __future__ import annotations

from collections.abc import Sequence

#: What is read of a job's logs for an incident (only its salient lines are kept).
MAX_LOG_READ = 256 * 2**20
#: The analyzer reads the versions a log states from its first lines.
VERSION_LINES = 50_000


def read_lines(paths: Sequence[str], limit: int = MAX_LOG_READ) -> list[str]:
    """The text lines of logs (plain, .gz, .zip, folders), within `limit` bytes in all;
    what cannot be read is skipped (the excerpt is built from the rest)."""
    from bot.logs.sources import Limits, expand_inputs, read_chunks

    limits = Limits(limit)
    data = bytearray()
    for src in expand_inputs(list(paths)):
        for chunk in read_chunks(src, limits):
            data += chunk
            if len(data) > limit:
                break
        data += b"\n"
        if len(data) > limit:
            break
    return data.decode("utf-8", errors="replace").splitlines()


def versions_of(lines: Sequence[str]) -> dict[str, str]:
    """The versions the log states (NCCL, torch, CUDA), as the analyzer reads them."""
    from bot.answering.analysis import analyze_sources
    from bot.logs.sources import text_source

    try:
        report, _ = analyze_sources([text_source("log", "\n".join(lines[:VERSION_LINES]))])
    except Exception:  # noqa: BLE001 - versions are a nicety; the incident is kept without
        return {}
    return dict(report.versions)

"""A stand-in for a team's own data library (the novel failure of benchmarks/learning.py):
shards are written with a manifest format version; a reader older than the writer refuses
the shard with an error no public thread or card knows."""

from __future__ import annotations

READER_FORMAT = 2


class ManifestVersionError(RuntimeError):
    """A shard's manifest was written by a newer shardstore than this reader."""


def open_shard(path: str, index: int, written_with: int) -> list[int]:
    if written_with > READER_FORMAT:
        raise ManifestVersionError(
            f"shardstore: manifest format v{written_with} of shard {index:05d} at {path} is "
            f"newer than this reader (supports up to v{READER_FORMAT}); refusing to read "
            "partially understood shard metadata")
    return list(range(index, index + 4))

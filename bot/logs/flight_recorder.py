"""Flight Recorder dumps: PyTorch's per-rank record of its last collectives (pure, bounded).

A dump is what `torch._C._distributed_c10d._dump_fr_trace()` (or `TORCH_FR_DUMP_TEMP_FILE` /
`TORCH_NCCL_DEBUG_INFO_TEMP_FILE`, one file per rank, the rank at the end of the name)
writes: a pickle of plain data (`version`, `pg_config`, `pg_status`, `entries`), or the
same as JSON (`_dump_fr_trace_json`). Every entry is one collective a rank scheduled:
process group, `collective_seq_id`, `profiling_name` (`nccl:all_reduce`,
`gloo:all_reduce`), sizes, dtypes, state and the Python frames that called it.

**Pickle is code**: dumps are loaded with an unpickler that resolves no global at all, so
only builtin containers and scalars come back; a dump that names anything else (the way a
crafted pickle runs a command) is refused before anything runs.

The analysis does what `torch.distributed.flight_recorder.fr_trace` does for the first
question people ask: per process group, match collectives across ranks by sequence id;
the ranks that never entered a collective the others entered are suspects (with the
collective and where the others called it), and ranks that called different collectives
or sizes at the same sequence id are a mismatch (with both call sites). Members of a group
(its `pg_config`) that left no dump while every dump stands at the same collective are
suspects too: fr_trace's "missing dumps" are often exactly the culprit.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: A dump larger than this is not read (a rank's ring buffer of 20,000 entries is ~10 MiB).
MAX_DUMP_BYTES = 64 * 2**20
MAX_ENTRIES = 20_000
_RANK_IN_NAME = re.compile(r"(\d+)(?:\.(?:pkl|pickle|json|bin))?$")


class DumpError(ValueError):
    """A dump that cannot be read; the message says why and what to do."""


class _PlainDataUnpickler(pickle.Unpickler):
    """Builtin containers and scalars only: any global (class, function) is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise DumpError(f"refused: the dump references {module}.{name}; a Flight Recorder "
                        "dump holds only plain data, so this file is not one (nothing in it "
                        "was run)")


def looks_like_dump(head: bytes, name: str = "") -> bool:
    """Whether a file's first bytes (and name) say it is a Flight Recorder dump."""
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return True
    text = head[:4096].lstrip()
    return text.startswith(b"{") and b'"entries"' in head and (b'"pg_config"' in head
                                                               or b'"version"' in head)


@dataclass(frozen=True)
class FrEntry:
    pg: str
    seq: int
    op: str
    sizes: str
    state: str
    where: str  # the innermost frame outside torch, "file:line (function)"


@dataclass
class FrDump:
    name: str
    rank: int | None
    version: str
    entries: list[FrEntry]
    notes: list[str] = field(default_factory=list)
    #: the ranks of each process group, from the dump's `pg_config` (name -> ranks)
    groups: dict[str, list[int]] = field(default_factory=dict)


def _group_ranks(config: Any) -> dict[str, list[int]]:
    """`pg_config` maps a group's name to its `ranks`, a list or its text ("[0, 1, 2, 3]")."""
    out: dict[str, list[int]] = {}
    if not isinstance(config, dict):
        return out
    for name, cfg in list(config.items())[:1000]:
        ranks = cfg.get("ranks") if isinstance(cfg, dict) else None
        if isinstance(ranks, str):
            ranks = re.findall(r"\d+", ranks[:200_000])
        if isinstance(ranks, list) and ranks:
            try:
                out[str(name)] = [int(r) for r in ranks[:100_000]]
            except (TypeError, ValueError):
                continue
    return out


def _where(frames: Any) -> str:
    if not isinstance(frames, list):
        return ""
    user = [f for f in frames if isinstance(f, dict)
            and "/torch/" not in str(f.get("filename", ""))]
    f = (user or [f for f in frames if isinstance(f, dict)] or [{}])[0]
    return f"{f.get('filename', '?')}:{f.get('line', '?')} ({f.get('name', '?')})" if f else ""


def parse_dump(data: bytes, name: str) -> FrDump:
    """One rank's dump; `DumpError` (with the reason) when it cannot be used."""
    if len(data) > MAX_DUMP_BYTES:
        raise DumpError(f"{name}: {len(data)} bytes, over the {MAX_DUMP_BYTES} bytes a dump "
                        "may have")
    try:
        if data.lstrip()[:1] == b"{":
            raw = json.loads(data)
        else:
            raw = _PlainDataUnpickler(io.BytesIO(data)).load()
    except DumpError as exc:
        raise DumpError(f"{name}: {exc}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError,
            KeyError) as exc:
        raise DumpError(f"{name}: not a readable Flight Recorder dump (truncated or not one: "
                        f"{type(exc).__name__})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("entries"), list):
        raise DumpError(f"{name}: not a Flight Recorder dump (no 'entries' list)")
    notes = []
    items = raw["entries"]
    if len(items) > MAX_ENTRIES:
        notes.append(f"{name}: kept the last {MAX_ENTRIES} of {len(items)} entries")
        items = items[-MAX_ENTRIES:]
    entries = []
    for e in items:
        if not isinstance(e, dict) or e.get("is_p2p"):
            continue
        pg = e.get("process_group")
        pg_name = "/".join(str(x) for x in pg) if isinstance(pg, list | tuple) else str(
            e.get("pg_id", "?"))
        try:
            seq = int(e.get("collective_seq_id") or 0)
        except (TypeError, ValueError):
            continue
        entries.append(FrEntry(pg_name, seq, str(e.get("profiling_name", "?")),
                               str(e.get("input_sizes", "")), str(e.get("state", "?")),
                               _where(e.get("frames"))))
    m = _RANK_IN_NAME.search(name)
    return FrDump(name, int(m.group(1)) if m else None, str(raw.get("version", "?")), entries,
                  notes, _group_ranks(raw.get("pg_config")))


@dataclass
class FrFinding:
    """One thing the dumps show: a rank that never entered a collective, or a mismatch."""

    kind: str  # "missing" | "mismatch" | "no_dump"
    ranks: list[int]
    text: str
    dump: str


def _members(pg: str, dumps: Sequence[FrDump]) -> list[int]:
    """The ranks a process group ("<id>/<desc>") has, as the dumps' `pg_config` says; a lone
    config (gloo names the default group '') stands for the default group "0"."""
    pg_id = pg.split("/", 1)[0]
    for d in dumps:
        if pg_id in d.groups:
            return d.groups[pg_id]
        if len(d.groups) == 1 and pg_id == "0":
            return next(iter(d.groups.values()))
    return []


def analyze_dumps(dumps: Sequence[FrDump]) -> list[FrFinding]:
    """Per process group, the first collective some ranks never entered, and collectives
    that differ between ranks at the same sequence id."""
    by_rank = {d.rank: d for d in dumps if d.rank is not None}
    findings: list[FrFinding] = []
    groups: dict[str, dict[int, dict[int, FrEntry]]] = defaultdict(lambda: defaultdict(dict))
    for rank, dump in by_rank.items():
        for e in dump.entries:
            groups[e.pg][rank][e.seq] = e
    for pg, ranks in sorted(groups.items()):
        if len(ranks) < 2:
            continue
        last = {r: max(seqs) for r, seqs in ranks.items()}
        top = max(last.values())
        behind = sorted(r for r, s in last.items() if s < top)
        absent = [r for r in _members(pg, dumps) if r not in ranks]
        if absent and not behind and len(absent) <= max(1, len(ranks) // 2):
            # Every rank that wrote a dump reached the same collective; the ones that wrote
            # none were not there to write it (stuck elsewhere, or dead).
            ref = ranks[min(ranks)][top]
            findings.append(FrFinding(
                "no_dump", absent,
                f"rank(s) {', '.join(map(str, absent))} of process group {pg} left no Flight "
                f"Recorder dump, while rank(s) {', '.join(map(str, sorted(ranks)))} all "
                f"reached collective #{top} ({ref.op} {ref.sizes}) at {ref.where}",
                by_rank[min(ranks)].name))
        if behind:
            first_missing = min(last[r] for r in behind) + 1
            entered = sorted(r for r, seqs in ranks.items() if first_missing in seqs)
            ref = ranks[entered[0]][first_missing]
            for r in behind:
                mine = ranks[r].get(last[r])
                text = (f"rank {r} never entered collective #{last[r] + 1} ({ref.op} "
                        f"{ref.sizes}) of process group {pg}, which rank(s) "
                        f"{', '.join(map(str, entered))} entered at {ref.where}; its last was "
                        f"#{last[r]}" + (f" {mine.op} {mine.sizes} at {mine.where}" if mine
                                         else ""))
                findings.append(FrFinding("missing", [r], text, by_rank[r].name))
        for seq in sorted({s for seqs in ranks.values() for s in seqs}):
            calls = {r: seqs[seq] for r, seqs in ranks.items() if seq in seqs}
            kinds = defaultdict(list)
            for r, e in calls.items():
                kinds[(e.op, e.sizes)].append(r)
            if len(kinds) > 1:
                parts = [f"rank(s) {', '.join(map(str, rs))}: {op} {sizes} at "
                         f"{calls[rs[0]].where}" for (op, sizes), rs in kinds.items()]
                minority = min(kinds.values(), key=len)
                findings.append(FrFinding(
                    "mismatch", sorted(minority),
                    f"collective #{seq} of process group {pg} differs between ranks: "
                    + "; ".join(parts), by_rank[minority[0]].name))
                break  # the first mismatch explains the rest
    return findings

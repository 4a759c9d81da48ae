"""Flight Recorder dumps: PyTorch's per-rank record of its last collectives (pure, bounded).

A dump is what `torch._C._distributed_c10d._dump_fr_trace()` (or `TORCH_FR_DUMP_TEMP_FILE` /
`TORCH_NCCL_DEBUG_INFO_TEMP_FILE`, one file per rank, the rank at the end of the name)
writes: a pickle of plain data (`version`, `pg_config`, `pg_status`, `entries`), or the
same as JSON (`_dump_fr_trace_json`). Every entry is one collective a rank scheduled:
process group, `collective_seq_id`, `profiling_name` (`nccl:all_reduce`,
`gloo:all_reduce`), sizes, dtypes, state and the Python frames that called it.

**Pickle is code, and a memory bomb**: a dump is never unpickled in the bot's process.
`bot.logs.fr_sandbox` hands it to a child process with memory and CPU limits and a wall
timeout; there `bot.logs.fr_scan` first checks every opcode (no global, no `BUILD`, memo
indices in order, lengths inside the file, bounded nesting and expansion), an unpickler
that resolves no global at all loads it, and `dump_from_raw` keeps only bounded text and
integers (never the text of a container). A dump that fails any of this is one note.

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
import math
import pickle
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.logs.fr_scan import DumpError, scan_json, scan_pickle

__all__ = ["MAX_DUMP_BYTES", "DumpError", "FrDump", "FrEntry", "FrFinding", "analyze_dumps",
           "dump_from_raw", "looks_like_dump", "parse_dump", "parse_dump_here"]

#: A dump larger than this is not read (a rank's ring buffer of 20,000 entries is ~10 MiB).
MAX_DUMP_BYTES = 64 * 2**20
MAX_ENTRIES = 20_000
#: the longest text kept of any one field, and of a frame list
MAX_TEXT = 300
MAX_FRAMES = 64
#: the ranks kept of all process groups together (`pg_config`)
MAX_GROUP_RANKS = 200_000
_RANK_IN_NAME = re.compile(r"(?<!\d)(\d{1,7})(?:\.(?:pkl|pickle|json|bin))?$")
#: a sequence id, a rank: what fits in 63 bits (a crafted huge one is dropped, never printed)
_MAX_ID = 2**63 - 1


class _PlainDataUnpickler(pickle.Unpickler):
    """Builtin containers and scalars only: any global (class, function) is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise DumpError(f"refused: the dump references {module[:100]}.{name[:100]} (crafted "
                        "or damaged, nothing in it was run; get the rank's own dump)")


def looks_like_dump(head: bytes, name: str = "") -> bool:
    """Whether a file's first bytes (and name) say it is a Flight Recorder dump."""
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return True
    text = head[:4096].lstrip()
    # torch writes the keys sorted: "comm_lib_version", "entries" (all of the entries), ...,
    # "pg_config", "version", so only the start of the first entry is in a big dump's head
    return text.startswith(b"{") and b'"entries"' in head and any(
        key in head for key in (b'"pg_config"', b'"version"', b'"collective_seq_id"'))


@dataclass(frozen=True)
class FrEntry:
    pg: str
    seq: int
    op: str
    sizes: str
    state: str
    where: str  # the innermost frame outside torch, "file:line (function)"
    dtypes: str = ""  # input_dtypes as Python prints them ("['Float']"), when recorded
    #: when the rank scheduled it (`time_created_ns`: torch 2.13.0,
    #: torch/csrc/distributed/c10d/FlightRecorder.hpp `DEFINE_CONSTANT(time_created_key,
    #: "time_created_ns")`, FlightRecorderDetail.hpp `dict.insert(time_created_key,
    #: int64_t(e.time_created_))`), when recorded
    created_ns: int | None = None


@dataclass
class FrDump:
    name: str
    rank: int | None
    version: str
    entries: list[FrEntry]
    notes: list[str] = field(default_factory=list)
    #: the ranks of each process group, from the dump's `pg_config` (name -> ranks)
    groups: dict[str, list[int]] = field(default_factory=dict)


def _text(value: object, default: str = "?") -> str:
    """A scalar as bounded text; a container, or an integer too long to print, is `default`."""
    if isinstance(value, str):  # a lone surrogate (pickle allows it) would fail JSON later
        return value[:MAX_TEXT].encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value) if -_MAX_ID <= value <= _MAX_ID else default
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else default
    if isinstance(value, bytes):
        return value[:MAX_TEXT].decode("utf-8", "replace")
    return default


def _small_int(value: object) -> int | None:
    """An id (sequence id, rank) as an int in [0, 2**63); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        value = int(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and 0 <= value <= _MAX_ID:
        return value
    return None


def _sizes(value: object, budget: int = 120) -> str:
    """Nested lists of sizes as Python prints them ("[[8]]"), bounded in length and depth."""
    out: list[str] = []
    todo: list[object] = [value]
    depth = 0
    while todo and sum(map(len, out)) < budget:
        item = todo.pop()
        if item is _CLOSE:
            out.append("]")
            depth -= 1
        elif item is _COMMA:
            out.append(", ")
        elif isinstance(item, list | tuple):
            if depth >= 4:
                out.append("[…]")
                continue
            out.append("[")
            depth += 1
            todo.append(_CLOSE)
            head = list(item[:16])
            for i, x in enumerate(reversed(head)):
                todo.append(x)
                if i < len(head) - 1:
                    todo.append(_COMMA)
            if len(item) > 16:
                out.append(f"{len(item)} items: ")
        else:
            out.append(_text(item, "?"))
    text = "".join(out)
    return text if not todo and len(text) <= budget else text[:budget] + "…"


#: the fields torch writes in an entry and their types (a missing one is fine)
_FIELD_TYPES: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("profiling_name", str), ("state", str), ("input_sizes", (list, tuple)),
    ("input_dtypes", (list, tuple)),
    ("process_group", (list, tuple)), ("frames", list))

_CLOSE = object()
_COMMA = object()


def _group_ranks(config: object) -> dict[str, list[int]]:
    """`pg_config` maps a group's name to its `ranks`, a list or its text ("[0, 1, 2, 3]")."""
    out: dict[str, list[int]] = {}
    if not isinstance(config, dict):
        return out
    budget = MAX_GROUP_RANKS  # over all groups: a crafted config shares one huge list
    for name, cfg in list(config.items())[:1000]:
        ranks = cfg.get("ranks") if isinstance(cfg, dict) else None
        if isinstance(ranks, str):
            ranks = re.findall(r"\d{1,18}", ranks[:200_000])
        if isinstance(ranks, list) and ranks and len(ranks) <= budget:
            budget -= len(ranks)
            ids = [_small_int(r) for r in ranks]
            if all(i is not None for i in ids):
                out[_text(name)] = [i for i in ids if i is not None]
    return out


def _where(frames: object) -> str:
    """The innermost frame outside torch, "file:line (function)"; "" without frames."""
    if not isinstance(frames, list):
        return ""
    dicts = [f for f in frames[:MAX_FRAMES] if isinstance(f, dict)]
    user = [f for f in dicts if "/torch/" not in _text(f.get("filename"), "")]
    f = (user or dicts or [{}])[0]
    return (f"{_text(f.get('filename'))}:{_text(f.get('line'))} ({_text(f.get('name'))})"
            if f else "")


def looks_like_pickle(data: bytes) -> bool:
    return data.lstrip()[:1] != b"{"


def parse_dump_here(data: bytes, name: str) -> FrDump:
    """One rank's dump, read in this process: checked (`bot.logs.fr_scan`), loaded, and cut
    down to bounded fields. Only for a process that may die of it (the sandbox's child);
    everyone else calls `parse_dump`. `DumpError` (with the reason) when it cannot be used."""
    if len(data) > MAX_DUMP_BYTES:
        raise DumpError(f"{name}: {len(data)} bytes, over the {MAX_DUMP_BYTES} bytes a dump "
                        "may have")
    try:
        if not looks_like_pickle(data):
            scan_json(data)
            raw = json.loads(data)
        else:
            scan_pickle(data)
            raw = _PlainDataUnpickler(io.BytesIO(data)).load()
    except DumpError as exc:
        raise DumpError(f"{name}: {exc}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError,
            AttributeError, RecursionError) as exc:
        raise DumpError(f"{name}: not a readable Flight Recorder dump (truncated or not one: "
                        f"{type(exc).__name__})") from None
    return dump_from_raw(raw, name)


def dump_from_raw(raw: object, name: str) -> FrDump:
    """The fields the analysis uses, from a loaded dump of unknown shape: every one checked,
    bounded text or a small int; an entry with a field of the wrong type is skipped."""
    if not isinstance(raw, dict) or not isinstance(raw.get("entries"), list):
        raise DumpError(f"{name}: not a Flight Recorder dump (no 'entries' list)")
    notes = []
    items = raw["entries"]
    if len(items) > MAX_ENTRIES:
        notes.append(f"kept the last {MAX_ENTRIES} of {len(items)} entries")
        items = items[-MAX_ENTRIES:]
    entries = []
    skipped = 0
    odd: dict[str, int] = {}
    for e in items:
        if not isinstance(e, dict):
            skipped += 1
            continue
        if e.get("is_p2p") is True:
            continue
        for key, kinds in _FIELD_TYPES:
            if key in e and not isinstance(e[key], kinds):
                odd[key] = odd.get(key, 0) + 1
        frames = e.get("frames")
        if isinstance(frames, list) and not all(isinstance(f, dict)
                                                for f in frames[:MAX_FRAMES]):
            odd["frames"] = odd.get("frames", 0) + 1
        pg = e.get("process_group")
        pg_name = ("/".join(_text(x) for x in pg[:4]) if isinstance(pg, list | tuple)
                   else _text(e.get("pg_id")))
        seq = _small_int(e.get("collective_seq_id"))
        if seq is None:
            skipped += 1
            continue
        entries.append(FrEntry(pg_name, seq, _text(e.get("profiling_name")),
                               _sizes(e.get("input_sizes", "")), _text(e.get("state")),
                               _where(e.get("frames")),
                               _sizes(e["input_dtypes"]) if isinstance(
                                   e.get("input_dtypes"), list | tuple) else "",
                               _small_int(e.get("time_created_ns"))))
    if odd:
        notes.append("fields of an unexpected type, not used: " + ", ".join(
            f"{key} in {n} entries" for key, n in odd.items()))
    if skipped:
        notes.append(f"skipped {skipped} of {len(items)} entries that are not a collective "
                     "(not a mapping, or no integer collective_seq_id)")
    version = raw.get("version")
    if not isinstance(version, str | int | float):
        notes.append("its version is not text, not used")
    config = raw.get("pg_config")
    groups = _group_ranks(config)
    if config is not None and (not isinstance(config, dict) or len(groups) < len(config)):
        notes.append("some of its pg_config is not a mapping of groups to ranks, not used")
    m = _RANK_IN_NAME.search(name)
    return FrDump(name, int(m.group(1)) if m else None, _text(version), entries, notes,
                  groups)


def parse_dump(data: bytes, name: str) -> FrDump:
    """One rank's dump, read in a sandboxed child process (`bot.logs.fr_sandbox`);
    `DumpError` (with the reason) when it cannot be used. Many dumps: `read_dumps`."""
    from bot.logs.fr_sandbox import DumpInput, read_dumps

    (got,) = read_dumps([DumpInput(name, lambda: data)])
    if isinstance(got, DumpError):
        raise got
    return got


@dataclass
class FrFinding:
    """One thing the dumps show: a rank that never entered a collective, or a mismatch."""

    kind: str  # "missing" | "mismatch" | "no_dump" | "late"
    ranks: list[int]
    text: str
    dump: str
    #: of a mismatch, each rank's call at that sequence id ("gloo:all_reduce [[1024]]
    #: ['Double']"); its `ranks` are empty when as many ranks made each call (no minority)
    calls: dict[int, str] = field(default_factory=dict)


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
        late = _late(ranks, pg, by_rank)
        if late is not None:
            findings.append(late)
        for seq in sorted({s for seqs in ranks.values() for s in seqs}):
            calls = {r: seqs[seq] for r, seqs in ranks.items() if seq in seqs}
            kinds = defaultdict(list)
            for r, e in calls.items():
                kinds[(e.op, e.sizes, e.dtypes)].append(r)
            if len(kinds) > 1:
                parts = [f"rank(s) {', '.join(map(str, rs))}: {op} {sizes}"
                         + (f" {dtypes}" if dtypes else "") + f" at {calls[rs[0]].where}"
                         for (op, sizes, dtypes), rs in kinds.items()]
                minority = min(kinds.values(), key=len)
                tie = sum(len(rs) == len(minority) for rs in kinds.values()) > 1 and \
                    len({len(rs) for rs in kinds.values()}) == 1
                findings.append(FrFinding(
                    "mismatch", [] if tie else sorted(minority),
                    f"collective #{seq} of process group {pg} differs between ranks: "
                    + "; ".join(parts), by_rank[minority[0]].name,
                    {r: " ".join(x for x in (e.op, e.sizes, e.dtypes) if x)
                     for r, e in sorted(calls.items())}))
                break  # the first mismatch explains the rest
    return findings


#: how much later than every other rank a rank must have scheduled the same collective to
#: be the one they waited for (a step's own jitter is milliseconds; a stall is seconds)
LATE_NS = 3_000_000_000


def _late(ranks: dict[int, dict[int, FrEntry]], pg: str,
          by_rank: dict[int, FrDump]) -> FrFinding | None:
    """The first collective of a group that a few ranks scheduled seconds after all the others
    (`time_created_ns`): the others were waiting in it for them (a stall, a slow step)."""
    for seq in sorted({s for seqs in ranks.values() for s in seqs}):
        made = sorted((e.created_ns, r) for r, seqs in ranks.items()
                      if (e := seqs.get(seq)) is not None and e.created_ns is not None)
        if len(made) < 2:
            continue
        gaps = [(made[i + 1][0] - made[i][0], i + 1) for i in range(len(made) - 1)]
        gap, cut = max(gaps)
        on_time, late = made[:cut], made[cut:]
        spread = on_time[-1][0] - on_time[0][0]
        if gap >= LATE_NS and gap >= 10 * spread and len(late) <= max(1, len(made) // 4):
            rs = sorted(r for _, r in late)
            e = ranks[rs[0]][seq]
            return FrFinding(
                "late", rs,
                f"rank(s) {', '.join(map(str, rs))} scheduled collective #{seq} ({e.op} "
                f"{e.sizes}) of process group {pg} {gap / 1e9:.1f} s after the other "
                f"{len(on_time)} rank(s), which were waiting in it", by_rank[rs[0]].name)
    return None

"""Triangulate a live hang across a job's nodes (pure): which rank is the odd one out, where
it is, and what kind of hang it is.

Input is what the node agents' `hang` diagnostic sent back (`tools.hang.model.HangSample`):
every rank's Python stacks, Flight Recorder dumps asked for through the ranks' debug pipes,
NCCL RAS polls and a GPU sample. The kinds:

- `host_stuck`: most ranks wait in a collective and a few are somewhere else (a data loader,
  a checkpoint, a lock): those few are the culprits, in the function their stack shows;
- `desync`: ranks wait in different collectives, or the Flight Recorder dumps / RAS counts
  show some ranks behind the others;
- `dead_peer`: RAS reports ranks missing or dead;
- `device_stall`: every rank launched the same collective and none came back: a stuck kernel,
  a link or a GPU (RAS counts equal and frozen; Xid lines, busy GPUs);
- `unknown`: nothing stands out (or too little was sampled).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

from bot.diagnosis.hang_zh import node_note_zh
from bot.diagnosis.rules import Signal
from bot.logs.crossrank import ZhTable, reason_in, zh_by
from bot.logs.flight_recorder import DumpError, FrDump, FrFinding, analyze_dumps
from bot.logs.fr_sandbox import DumpInput, read_dumps
from bot.logs.model import Evidence
from tools.hang.model import Frame, HangSample, RankSample, ThreadStack
from tools.hang.ras import compare

Kind = Literal["host_stuck", "desync", "dead_peer", "device_stall", "progressing", "unknown"]

#: torch.distributed calls a rank waits in during a collective (distributed_c10d.py)
COLLECTIVES = frozenset({
    "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce_scatter",
    "reduce_scatter_tensor", "broadcast", "broadcast_object_list", "barrier", "monitored_barrier",
    "reduce", "all_to_all", "all_to_all_single", "gather", "gather_object", "scatter",
    "scatter_object_list", "send", "recv", "isend", "irecv", "batch_isend_irecv",
    "all_reduce_coalesced", "_coalescing_manager", "wait"})
#: a rank this share of the others or fewer is "odd one out"
MINORITY = 0.5


@dataclass
class RankPlace:
    """Where one rank is: in a collective (which, called from where) or elsewhere."""

    rank: int | None
    host: str
    pid: int
    collective: str | None
    site: str  # the innermost frame of the user's code: "function (file:line)"
    stack: str  # a few frames, innermost first, for people

    @property
    def who(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"


@dataclass
class Culprit:
    rank: int | None
    host: str | None
    reason: str


@dataclass
class HangVerdict:
    kind: Kind
    summary: str
    culprits: list[Culprit] = field(default_factory=list)
    signals: list[Signal] = field(default_factory=list)
    places: list[RankPlace] = field(default_factory=list)
    fr_findings: list[FrFinding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _is_torch(f: Frame) -> bool:
    path = f.file.replace("\\", "/")
    return "/torch/" in path or path.startswith("torch/") or "<frozen" in path


def _fmt(f: Frame) -> str:
    name = f.file.replace("\\", "/").rsplit("/", 1)[-1]
    return f"{f.function} ({name}:{f.line})" if f.line is not None else f"{f.function} ({name})"


def _main_thread(threads: Sequence[ThreadStack]) -> ThreadStack | None:
    named = [t for t in threads if t.name == "MainThread"]
    return next(iter(named or threads), None)


def place_of(sample: RankSample, host: str) -> RankPlace | None:
    """Where a rank's main thread is; None when its stack could not be read."""
    thread = _main_thread(sample.threads)
    if thread is None or not thread.frames:
        return None
    frames = thread.frames
    collective = next((f.function for f in frames if f.function in COLLECTIVES
                       and "distributed" in f.file), None)
    user = next((f for f in frames if not _is_torch(f)), frames[0])
    stack = " <- ".join(_fmt(f) for f in frames[:4])
    return RankPlace(sample.rank, host, sample.pid, collective, _fmt(user), stack)


def _ev(host: str, text: str, rank: int | None) -> Evidence:
    return Evidence(f"hang:{host}", 0, text, rank, host)


def _dumps(samples: Sequence[HangSample], notes: list[str]) -> list[FrDump]:
    """The ranks' Flight Recorder dumps, read in one sandboxed child (`read_dumps`); a dump
    that cannot be used is a note."""
    todo = [(s.host, r.rank, r.fr_dump_b64) for s in samples for r in s.ranks
            if r.fr_dump_b64 and r.rank is not None]
    got = read_dumps([DumpInput(f"{host}:fr_trace_{rank}", partial(_b64, b64))
                      for host, rank, b64 in todo])
    out = []
    for (host, rank, _), dump in zip(todo, got, strict=True):
        if isinstance(dump, DumpError):
            notes.append(f"{host} rank {rank}: Flight Recorder dump not used ({dump})")
            continue
        dump.rank = rank
        out.append(dump)
    return out


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text)
    except (binascii.Error, ValueError) as exc:
        raise OSError(f"not base64 ({exc})") from None


def _odd_ones(places: Sequence[RankPlace]) -> tuple[list[RankPlace], str] | None:
    """The few ranks whose place differs from the many, and what the many do."""
    groups: dict[tuple[str | None, str], list[RankPlace]] = defaultdict(list)
    for p in places:
        groups[(p.collective, p.site if p.collective is None else p.collective)].append(p)
    if len(groups) < 2:
        return None
    (big_key, big), *_ = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    rest = [p for key, ps in groups.items() if key != big_key for p in ps]
    if len(rest) > MINORITY * len(big):
        return None
    many = (f"{len(big)} of {len(places)} ranks wait in {big_key[0]}" if big_key[0]
            else f"{len(big)} of {len(places)} ranks are in {big[0].site}")
    return rest, many


JobKey = tuple[str, str, int]


def job_key(r: RankSample) -> JobKey:
    """What every rank of one job shares on every node: its run id (TORCHELASTIC_RUN_ID /
    SLURM_JOB_ID), its rendezvous (MASTER_ADDR:MASTER_PORT) and WORLD_SIZE."""
    return r.job or "", r.master or "", r.world_size or 0


def _job_names(keys: Sequence[JobKey]) -> dict[JobKey, str]:
    """Each job's run id, with its rendezvous and size only where two share a run id."""
    ids = Counter(k[0] for k in keys)
    return {k: (k[0] or "no job id") + (f" ({k[1] or 'no rendezvous'}, WORLD_SIZE {k[2]})"
                                         if ids[k[0]] > 1 else "") for k in keys}


def job_ranks(samples: Sequence[HangSample]) -> tuple[list[HangSample], list[str]]:
    """The samples with only ranks that can belong to their job: a rank >= its WORLD_SIZE
    and a second process with the same rank of the same job (first come, by node) are
    dropped, each with a note, and a job with more processes than its WORLD_SIZE is named."""
    notes: list[str] = []
    seen: dict[tuple[JobKey, int], str] = {}
    claimed: Counter[JobKey] = Counter()
    names = _job_names(sorted({job_key(r) for s in samples for r in s.ranks}))
    out = []
    for s in samples:
        kept = []
        for r in s.ranks:
            key = job_key(r)
            claimed[key] += 1
            where = f"{s.host} pid {r.pid}"
            if r.rank is not None and r.world_size and r.rank >= r.world_size:
                notes.append(f"{where} says rank {r.rank} of job {names[key]}, not below its "
                             f"WORLD_SIZE {r.world_size}: not counted")
            elif r.rank is not None and (key, r.rank) in seen:
                notes.append(f"{where} says rank {r.rank} of job {names[key]}, like "
                             f"{seen[(key, r.rank)]}: the second is not counted")
            else:
                if r.rank is not None:
                    seen[(key, r.rank)] = where
                kept.append(r)
        out.append(s.model_copy(update={"ranks": kept}))
    for key, n in sorted(claimed.items()):
        if key[2] and n > key[2]:
            notes.append(f"{n} processes claim to be ranks of job {names[key]}, more than its "
                         f"WORLD_SIZE {key[2]}: extra ones are not counted")
    return out, notes


def triangulate(samples: Sequence[HangSample]) -> HangVerdict:
    """The hang's kind, its culprits and the signals for the diagnosis (see module doc).
    Only ranks that can belong to their job count (`job_ranks`). Ranks of different jobs
    (run id, rendezvous and WORLD_SIZE) are compared within their own job only; the verdict
    is the job with the most ranks sampled (a stray process claiming a job of its own cannot
    take the answer over), the first with a culprit among equals."""
    samples, dropped = job_ranks(samples)
    jobs = sorted({job_key(r) for s in samples for r in s.ranks})
    if len(jobs) < 2:
        v = _one_job(samples)
        v.notes += dropped
    else:
        names = _job_names(jobs)
        each = [(job, sum(1 for s in samples for r in s.ranks if job_key(r) == job),
                 _one_job([s.model_copy(update={
                     "ranks": [r for r in s.ranks if job_key(r) == job], "notes": []})
                     for s in samples])) for job in jobs]
        job, _, v = max(each, key=lambda e: (e[1], bool(e[2].culprits)))
        named = ", ".join(names[j] for j in jobs)
        v.notes = [n for s in samples for n in s.notes] + dropped + [
            f"{len(jobs)} jobs run on these nodes ({named}): each was compared on its own; "
            f"this answer is about {names[job]} (pass --job to choose)"]
        for other, _, x in each:
            if other != job and x.culprits:
                v.notes.append(f"job {names[other]}: {x.culprits[0].reason}")
    _ras(samples, v)
    _gpu_and_xid(samples, v)
    v.summary = _summary(v)
    return v


def _one_job(samples: Sequence[HangSample]) -> HangVerdict:
    """Stacks and Flight Recorder dumps of one job's ranks."""
    notes = [n for s in samples for n in s.notes]
    places: list[RankPlace] = []
    for s in samples:
        for r in s.ranks:
            place = place_of(r, s.host)
            if place is None:
                notes.append(f"{s.host} pid {r.pid}: no stack ({r.stack_error or 'empty'})")
            else:
                places.append(place)
    findings = analyze_dumps(_dumps(samples, notes))
    v = HangVerdict("unknown", "", places=places, fr_findings=findings, notes=notes)

    odd = _odd_ones(places)
    if odd is not None:
        rest, many = odd
        for p in rest:
            where = f"in {p.collective} from {p.site}" if p.collective else f"in {p.site}"
            v.culprits.append(Culprit(p.rank, p.host, f"{p.who} on {p.host} is {where} while "
                                      f"{many}; its stack: {p.stack}"))
        if all(p.collective is None for p in rest):
            v.kind = "host_stuck"
            v.signals.append(Signal(
                "straggler_or_imbalance", 0.8, "one rank is stuck in its own code while the "
                "others wait for it in a collective (live stacks)",
                [_ev(p.host, c.reason, p.rank) for p, c in zip(rest, v.culprits, strict=True)]))
        else:
            v.kind = "desync"
            v.signals.append(Signal(
                "collective_mismatch", 0.8, "ranks wait in different collectives (live stacks)",
                [_ev(p.host, c.reason, p.rank) for p, c in zip(rest, v.culprits, strict=True)]))
    stuck = {c.rank for c in v.culprits} if v.kind == "host_stuck" else set()
    for f in findings:
        ev = [_ev("flight-recorder", f.text, f.ranks[0] if f.ranks else None)]
        if f.kind != "mismatch" and f.ranks and set(f.ranks) <= stuck:
            # the stuck rank never entered the collective the others are in: the same story
            v.signals.append(Signal("straggler_or_imbalance", 0.6, "its Flight Recorder shows "
                                    "it never entered the others' collective", ev))
            continue
        v.signals.append(Signal("collective_mismatch", 0.85 if f.kind == "mismatch" else 0.6,
                                "the ranks' Flight Recorder dumps disagree", ev))
        if v.kind in ("unknown", "device_stall"):
            v.kind = "desync"
        known = {c.rank for c in v.culprits}
        v.culprits += [Culprit(r, _host_of(samples, r), f.text) for r in f.ranks
                       if r not in known]

    if v.kind == "unknown" and places and all(p.collective for p in places):
        ops = Counter(p.collective for p in places)
        expected = max((r.world_size or 0 for s in samples for r in s.ranks), default=0)
        seen = {p.rank for p in places if p.rank is not None}
        if expected and len(seen) < expected:
            missing = sorted(set(range(expected)) - seen)
            v.notes.append(f"ranks {_ranges(missing)} were not sampled: run the diagnostic on "
                           "their nodes too; the rank holding the others up may be there")
        else:
            v.kind = "device_stall"
            op = ops.most_common(1)[0][0]
            v.signals += [
                Signal("gpu_hardware_fault", 0.35, f"every rank launched {op} and none came "
                       "back: a stuck kernel or GPU (live stacks)",
                       [_ev(places[0].host, f"all {len(places)} ranks wait in {op}", None)]),
                Signal("infiniband_roce", 0.25, "every rank waits in the same collective: a "
                       "link between nodes may have stalled it", []),
            ]
    return v


def _ras(samples: Sequence[HangSample], v: HangVerdict) -> None:
    """NCCL RAS, two polls: counts spread and frozen are a desync (the lowest ranks are
    behind), missing or dead ranks a dead peer, equal and frozen counts a stall on the device
    or a link (RAS counts launched operations, not finished ones), and counts that moved mean
    the job is progressing. RAS reports on every process of the job from any one node, so
    the first node's two polls are read (each node's would count the same ranks again)."""
    for s in [s for s in samples if len(s.ras) >= 2][:1]:
        rv = compare(s.ras[0], s.ras[1])
        ev = [_ev(f"{s.host}:ras", line, None) for line in rv.evidence[:4]]
        hosts = dict(zip(rv.culprit_ranks, rv.culprit_hosts, strict=False))
        new = [Culprit(r, hosts.get(r) or _host_of(samples, r), "NCCL RAS: " + "; ".join(
            rv.evidence[:2])) for r in rv.culprit_ranks if r not in {c.rank for c in v.culprits}]
        if rv.kind == "dead_peer":
            v.signals.append(Signal("rank_crashed", 0.75, "NCCL RAS reports ranks missing or "
                                    "dead", ev))
            v.culprits += new
            v.kind = "dead_peer" if v.kind in ("unknown", "device_stall") else v.kind
        elif rv.kind == "desync":
            v.signals += [Signal("collective_mismatch", 0.6, "NCCL RAS: some ranks launched "
                                 "fewer collectives than the others and stopped there", ev),
                          Signal("straggler_or_imbalance", 0.5, "NCCL RAS: ranks behind the "
                                 "others", ev)]
            v.culprits += new
            v.kind = "desync" if v.kind in ("unknown", "device_stall") else v.kind
        elif rv.kind == "stalled_equal" and v.kind == "unknown":
            v.kind = "device_stall"
            v.signals += [Signal("gpu_hardware_fault", 0.35, "NCCL RAS: every rank launched "
                                 "the same number of collectives and none moved", ev),
                          Signal("infiniband_roce", 0.25, "NCCL RAS: a stall on the device or "
                                 "a link between nodes", ev)]
        elif rv.kind == "progressing" and v.kind == "unknown":
            v.kind = "progressing"
            v.notes.append(f"{s.host}: NCCL RAS counts moved between the two polls: the job "
                           "is progressing, slowly perhaps, not hung")


def _gpu_and_xid(samples: Sequence[HangSample], v: HangVerdict) -> None:
    for s in samples:
        if s.xid:
            v.signals.append(Signal("gpu_hardware_fault", 0.8, f"Xid errors on {s.host} while "
                                    "the job hangs", [_ev(s.host, x, None) for x in s.xid[:3]]))
        busy = [g.index for g in s.gpus if g.utilization_pct and min(g.utilization_pct) >= 95]
        if busy and v.kind in ("device_stall", "desync", "host_stuck"):
            v.notes.append(f"{s.host}: GPU(s) {', '.join(map(str, busy))} at 100% while the "
                           "job hangs: NCCL kernels spin waiting for a peer that does not come")
        for note in (s.ras_note, s.gpu_note):
            if note:
                v.notes.append(f"{s.host}: {note}")


def _host_of(samples: Sequence[HangSample], rank: int) -> str | None:
    return next((s.host for s in samples for r in s.ranks if r.rank == rank), None)


def _ranges(ranks: Sequence[int]) -> str:
    return ", ".join(map(str, ranks[:16])) + (f" ... ({len(ranks)} ranks)" if len(ranks) > 16
                                              else "")


#: what the summary says when no rank is a culprit, per kind (the rest: `_NOBODY`)
_SUMMARIES = {
    "device_stall": {"en": "every rank waits in the same collective: the stall is on the "
                           "device or a link",
                     "zh": "每个 rank 都在同一个集合通信中等待：停滞发生在设备或链路上"},
    "progressing": {"en": "the job's collective counts are moving: it is slow, not stuck",
                    "zh": "作业的集合通信计数在增长：它只是慢，并没有卡住"},
}
_NOBODY = {"en": "no rank stands out in the stacks sampled",
           "zh": "采样到的调用栈中没有哪个 rank 与众不同"}
#: each kind of hang in Chinese (in English: the kind, its underscore a space)
_ZH_KINDS: dict[str, str] = {
    "host_stuck": "有 rank 卡在自己的代码中", "desync": "各 rank 的集合通信不一致",
    "dead_peer": "有 rank 已退出或失联", "device_stall": "设备或链路停滞",
    "progressing": "作业仍在推进", "unknown": "尚无定论",
}


def _summary(v: HangVerdict, lang: str = "en") -> str:
    if v.culprits:
        reason = reason_in(v.culprits[0].reason, lang)
        return reason.replace("; ", "；") if lang == "zh" else reason
    return _SUMMARIES.get(v.kind, _NOBODY)["zh" if lang == "zh" else "en"]


def headline(v: HangVerdict, lang: str) -> str:
    """The answer's first line in `lang` (en or zh): the kind of hang and what shows it."""
    if lang == "zh":
        return f"{_ZH_KINDS[v.kind]}：{_summary(v, 'zh')}"
    return f"{v.kind.replace('_', ' ')}: {v.summary}"


#: Each note `triangulate` writes (the English above), in Chinese; the node agent's own notes
#: are translated by `hang_zh` (in backticks when no pattern knows them).
_ZH_NOTES: ZhTable = tuple(
    (re.compile(p), f) for p, f in (
        (r"^(.+) rank (\d+): Flight Recorder dump not used \((.*)\)$",
         lambda m: f"{m[1]} rank {m[2]}：没有使用它的 Flight Recorder dump"
                   f"（{node_note_zh(m[3])}）"),
        (r"^(.+) pid (\d+): no stack \((.*)\)$",
         lambda m: f"{m[1]} pid {m[2]}：没有调用栈（"
                   f"{'空' if m[3] == 'empty' else node_note_zh(m[3])}）"),
        (r"^(.+) says rank (\d+) of job (.+), not below its WORLD_SIZE (\d+): not counted$",
         lambda m: f"{m[1]} 自称作业 {m[3]} 的 rank {m[2]}，但不小于其 WORLD_SIZE {m[4]}："
                   "不计入"),
        (r"^(.+) says rank (\d+) of job (.+), like (.+): the second is not counted$",
         lambda m: f"{m[1]} 自称作业 {m[3]} 的 rank {m[2]}，与 {m[4]} 相同：后者不计入"),
        (r"^(\d+) processes claim to be ranks of job (.+), more than its WORLD_SIZE (\d+): "
         r"extra ones are not counted$",
         lambda m: f"{m[1]} 个进程自称作业 {m[2]} 的 rank，多于其 WORLD_SIZE {m[3]}：多出的"
                   "不计入"),
        (r"^(\d+) jobs run on these nodes \((.+)\): each was compared on its own; this answer "
         r"is about (.+) \(pass --job to choose\)$",
         lambda m: f"这些节点上运行着 {m[1]} 个作业（{m[2]}）：各自单独比较；本回答针对 {m[3]}"
                   "（用 --job 选择）"),
        (r"^job (.+?): (.+)$", lambda m: f"作业 {m[1]}：{reason_in(m[2], 'zh')}"),
        (r"^ranks (.+) were not sampled: run the diagnostic on their nodes too; the rank "
         r"holding the others up may be there$",
         lambda m: f"rank {m[1]} 没有被采样：也在它们的节点上运行诊断；拖住其他 rank 的那个 "
                   "rank 可能在那里"),
        (r"^(.+): NCCL RAS counts moved between the two polls: the job is progressing, slowly "
         r"perhaps, not hung$",
         lambda m: f"{m[1]}：两次轮询之间 NCCL RAS 计数有变化：作业在推进（也许很慢），没有卡住"),
        (r"^(.+): GPU\(s\) (.+) at 100% while the job hangs: NCCL kernels spin waiting for a "
         r"peer that does not come$",
         lambda m: f"{m[1]}：作业卡住时 GPU {m[2]} 利用率为 100%：NCCL kernel 在空转，等待一个"
                   "不会到来的对端"),
    ))


def note_in(note: str, lang: str) -> str:
    """One of `triangulate`'s notes, or a node's, in `lang` (zh: in Chinese, a note no
    pattern knows in backticks; any other as it is)."""
    if lang != "zh":
        return note
    zh = zh_by(note, _ZH_NOTES)
    return zh if zh != note else node_note_zh(note) or note

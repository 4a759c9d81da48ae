"""Reading logs into a `LogReport`: scan, attribute, extract, stitch multi-line records."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from bot.errors import InputError
from bot.knowledge.cards import Card
from bot.logs.extract import (
    BENIGN_NCCL_WARN,
    BY_KIND,
    EXTRACTORS,
    NCCL_CODE_OF_TEXT,
    is_comm_exception,
)
from bot.logs.model import (
    Evidence,
    ExceptionRecord,
    Fact,
    FailureRecord,
    LogReport,
    SignatureHit,
    TimeoutRecord,
)
from bot.logs.prefixes import LineInfo, clean, parse_line
from bot.logs.salient import SALIENT_PATTERN, SETTINGS_LINE, body_key
from bot.logs.scanner import MAX_TEXT, Hit, LineCount, PatternSet, Tally, Trigger
from bot.logs.sources import ATTACH_HINT, Limits, LogSource, read_chunks

_DIGITS = str.maketrans("0123456789", "0000000000")
CRASH_KINDS = frozenset({"oom", "cuda_error", "signal", "exception"})
COUNT_ONLY = frozenset({"transport", "rank_prefix"})
#: Kinds whose words a settings printout also names (signals to handle, exit codes).
SETTINGS_KINDS = frozenset({"signal", "exit_code", "sigterm_sent"})


@dataclass
class _SourceState:
    """Multi-line records in progress within one source."""

    name: str
    #: what the analysis learned so far across sources: node (host) -> its first global rank
    bases: dict[str, int] = field(default_factory=dict)
    #: the rank a whole file belongs to, from its name: a global rank (rank-3.log) or a local
    #: rank (torchrun's --log-dir layout, attempt_0/<local_rank>/stderr.log)
    rank: int | None = field(init=False)
    local: int | None = field(init=False)
    #: the node a whole file belongs to, from its name (gpu-node-02.log, node3/logs/...)
    host: str | None = field(init=False)
    #: this node's first global rank (torchrun numbers a node's ranks base + local rank):
    #: learned from a line that carries both, e.g. `[default1]:[rank3]:`
    base: int | None = None
    #: hits whose global rank waits for `base` (their line names a local rank only)
    waiting: list[Hit] = field(default_factory=list)
    draining: bool = False
    #: the line where torchrun began stopping the workers ("Sending process N closing signal
    #: SIGTERM", or a worker's "failed (exitcode: 1)"), torch/distributed/elastic/
    #: multiprocessing/api.py
    teardown_line: int = 1 << 62
    pending_timeout: dict[int | None, tuple[TimeoutRecord, int]] = field(default_factory=dict)
    frames: dict[int | None, str] = field(default_factory=dict)
    #: per rank, the innermost frame so far of the program's own code (`_own_code`)
    call_sites: dict[int | None, str] = field(default_factory=dict)
    #: per rank, the torch.distributed function the program's own code last called
    apis: dict[int | None, str] = field(default_factory=dict)
    in_summary: bool = False
    summary_root_seen: bool = False
    current: FailureRecord | None = None
    last_error_line: int = -10
    last_nccl: Fact | None = None
    #: the last NCCL channel/transport line (line number, text): set-up progress
    last_channel: tuple[int, str] | None = None
    #: salient lines normalised so far, by their text with digits masked: the same line of
    #: a thousand ranks (only rank, time and counters differ) is normalised once
    seen_salient: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rank = global_rank_of_file(self.name)
        self.local = rank_of_file(self.name)
        self.host = host_of_file(self.name)
        if self.host is not None:
            self.base = self.bases.get(self.host)

    def learn_base(self, rank: int, local: int) -> bool:
        """A line named both ranks: the node's base; True when it is new."""
        if self.base is not None or rank < local:
            return False
        self.base = rank - local
        if self.host is not None:
            self.bases.setdefault(self.host, self.base)
        return True

    def attribute(self, info: LineInfo) -> LineInfo | None:
        """Who wrote a line, with what the file's name and place tell; None: wait for the
        node's base rank before deciding (a local rank only, on a node not yet placed)."""
        if info.host is None or info.host in LOOPBACK_HOSTS:
            info = replace(info, host=self.host or info.host)
        if info.rank is not None:
            return info
        if self.rank is not None:
            return replace(info, rank=self.rank)
        local = info.local_rank if info.local_rank is not None else self.local
        if local is None:
            return info
        if self.base is not None:
            return replace(info, rank=self.base + local)
        if not self.draining and len(self.waiting) < MAX_WAITING:
            return None
        # never placed: one node (no node in the file's name) numbers its ranks from 0
        return replace(info, rank=local) if self.host is None else info

    def salient_key(self, body: str) -> str:
        masked = body.translate(_DIGITS)
        key = self.seen_salient.get(masked)
        if key is None:
            key = body_key(body)
            if len(self.seen_salient) < 8192:
                self.seen_salient[masked] = key
        return key


class Analyzer:
    """Compiled once per set of cards; `analyze` is then pure over its inputs."""

    def __init__(self, cards: Sequence[Card], cache_dir: Path | None = None) -> None:
        self.cards = list(cards)
        triggers: list[Trigger] = []
        self._extractor_of: dict[int, str] = {}
        self._signature_of: dict[int, tuple[Card, int]] = {}
        for i, ex in enumerate(EXTRACTORS):
            if ex.kind in COUNT_ONLY:
                #: Lines that only feed counters (NCCL's channel lines: tens of thousands per
                #: job) are tallied by the scanner (see `Tally`), never parsed one by one.
                triggers.append(Trigger(i, ex.pattern, ex.ignore_case, tally=True))
            else:
                triggers.append(Trigger(i, ex.trigger or ex.pattern, ex.ignore_case, ex.after))
            self._extractor_of[i] = ex.kind
        next_id = len(EXTRACTORS)
        #: error-ish lines, kept (normalised, bounded) for the nearest-incident comparison
        self._salient_id = next_id
        triggers.append(Trigger(next_id, SALIENT_PATTERN, ignore_case=True))
        next_id += 1
        for card in self.cards:
            for j, sig in enumerate(card.signatures):
                triggers.append(Trigger(next_id, sig.pattern, sig.ignore_case))
                self._signature_of[next_id] = (card, j)
                next_id += 1
        self.patterns = PatternSet(triggers, cache_dir)

    def analyze(self, sources: Iterable[LogSource], limits: Limits | None = None) -> LogReport:
        limits = limits or Limits()  # one budget for all the sources
        report = LogReport(engine=self.patterns.engine)
        bases: dict[str, int] = {}
        for source in sources:
            report.sources.append(source.stats)
            state = _SourceState(source.name, bases)
            count = LineCount()
            for hit in self.patterns.scan(read_chunks(source, limits), count):
                if isinstance(hit, Tally):
                    if self._extractor_of.get(hit.trigger) == "rank_prefix":
                        _on_rank_tally(report, hit)
                    else:
                        _on_tally(report, state, hit)
                else:
                    self._on_hit(report, state, source.name, hit)
            self._replay(report, state, source.name, last=True)
            source.stats.lines = count.lines
            _flush(report, state)
        _finish(report, bases)
        if report.total_bytes == 0:
            why = "; ".join(f"{s.name}: {p}" for s in report.sources for p in s.problems)
            names = ", ".join(s.name for s in report.sources) or "no input"
            raise InputError(
                f"nothing to analyze: {why}" if why else
                f"nothing to analyze: {names} is empty (0 bytes read)",
                hint=ATTACH_HINT,
            )
        return report

    def _replay(self, report: LogReport, st: _SourceState, name: str, last: bool) -> None:
        """Handle the hits that waited for the node's base rank (now known, or never)."""
        waiting, st.waiting = st.waiting, []
        st.draining = last
        for hit in waiting:
            self._on_hit(report, st, name, hit)
        st.draining = False

    def _on_hit(self, report: LogReport, st: _SourceState, name: str, hit: Hit) -> None:
        raw = clean(hit.text)
        parsed = parse_line(raw)
        local = parsed.local_rank if parsed.local_rank is not None else st.local
        if parsed.rank is not None and local is not None and st.learn_base(parsed.rank, local):
            self._replay(report, st, name, last=False)
        info = st.attribute(parsed)
        if info is None:
            st.waiting.append(hit)
            return
        text = raw if len(raw) <= MAX_TEXT else raw[:MAX_TEXT] + " [...]"
        ev = Evidence(name, hit.line, text, info.rank, info.host, info.ts)
        if info.rank is not None:
            rs = report.rank(info.rank)
            rs.lines += 1
            if info.host:
                rs.host = rs.host or info.host
            if info.ts is not None:
                rs.last_ts = info.ts
        if info.host:
            report.hosts.add(info.host)
        if hit.context:
            if st.last_nccl is not None and hit.line - st.last_error_line == 1 and info.body:
                st.last_nccl.fields.setdefault("reason", info.body)
            return
        kinds = []
        for tid in hit.triggers:
            kind = self._extractor_of.get(tid)
            if kind is not None:
                kinds.append(kind)
            elif tid == self._salient_id:
                key = st.salient_key(info.body)
                if key:
                    report.salient.add(key, ev)
            else:
                self._on_signature(report, st, tid, ev, info)
        if SETTINGS_KINDS.intersection(kinds) and SETTINGS_LINE.search(info.body):
            # a signal or exit code named in a settings printout (torchrun's
            # "signals_to_handle : SIGTERM,SIGINT,...") is a setting, not an event
            kinds = [k for k in kinds if k not in SETTINGS_KINDS]
        for kind in sorted(kinds, key=lambda k: _ORDER.get(k, len(_ORDER))):
            ex = BY_KIND[kind]
            fields = ex.parse(info.body)
            if fields is None:
                fields = ex.parse(raw)
            if fields is None:
                continue
            self._on_fact(report, st, Fact(kind, fields, ev), info)

    def _on_signature(self, report: LogReport, st: _SourceState, tid: int, ev: Evidence,
                      info: LineInfo) -> None:
        card, j = self._signature_of[tid]
        sig = card.signatures[j]
        if not (sig.regex.search(info.body) or sig.regex.search(ev.text)):
            return  # the fast engine and Python's re disagree: trust re
        key = (card.id, sig.name)
        # after the launcher began stopping the job (in this file), a line is how the job
        # ended, not why: it counts for less unless it was also seen before
        weight = sig.weight * LATE_WEIGHT if ev.line > st.teardown_line else sig.weight
        hit = report.signatures.get(key)
        if hit is None:
            hit = report.signatures[key] = SignatureHit(card.id, sig.name, weight)
        hit.weight = max(hit.weight, weight)
        hit.count += 1
        if len(hit.evidence) < 8:
            hit.evidence.append(ev)

    def _on_fact(self, report: LogReport, st: _SourceState, fact: Fact, info: LineInfo) -> None:
        kind, f, ev = fact.kind, fact.fields, fact.ev
        rank = info.rank
        handler = _HANDLERS.get(kind)
        if handler is not None and handler(report, st, fact, rank) is False:
            return
        report.add_fact(fact)
        if kind in ("sigterm_sent", "exit_barrier") or (
                kind == "exit_code" and f.get("code") not in (None, 0)):
            st.teardown_line = min(st.teardown_line, ev.line)
        if kind in CRASH_KINDS and rank is not None:
            if kind == "exception" and is_comm_exception(f.get("type", ""), f.get("message", "")):
                return
            rs = report.rank(rank)
            if rs.first_error is None or _earlier(ev, rs.first_error.ev):
                rs.first_error = fact


#: torchrun's --log-dir layout, `<log_dir>/<run_id>/attempt_<n>/<local_rank>/stderr.log`
#: (torch/distributed/elastic/multiprocessing/api.py); the local rank is the rank on one node
_TORCHRUN_FILE = re.compile(r"(?:^|[/:])attempt_\d+/(\d+)/(?:stdout|stderr|error)\.(?:log|json)$")


def rank_of_file(name: str) -> int | None:
    """The local rank whose output a whole file is, where its name says (torchrun's layout:
    on one node the local rank is the rank)."""
    m = _TORCHRUN_FILE.search(name)
    return int(m.group(1)) if m else None


#: one file per rank, named by its global rank as launchers are told to write them (Slurm
#: `srun --output=rank-%t.log`, `mpirun --output-filename`): rank-3.log, rank_3.out, rank3.txt
_RANK_FILE = re.compile(r"(?:^|[/:])rank[-_.]?(\d{1,6})\.(?:log|out|err|txt)$", re.IGNORECASE)


def global_rank_of_file(name: str) -> int | None:
    """The global rank whose output a whole file is, where its name says (rank-3.log)."""
    m = _RANK_FILE.search(name)
    return int(m.group(1)) if m else None


#: Host names that identify no machine: every node calls itself that.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "localhost.localdomain"})
#: a file or folder named after a machine, as per-node logs are: gpu-node-02.log,
#: node3/logs/..., worker-1.out, dgx-a100-017.txt, ip-10-0-0-12.log
_HOST_PART = re.compile(r"^([A-Za-z][A-Za-z0-9_-]{0,62}\d)(?:\.(?:log|out|err|txt))?$")
_HOST_WORD = re.compile(r"(?:^|[-_])(?:node|host|worker|gpu|compute|dgx|hgx|server|machine|ip)"
                        r"(?:[-_]?\d|[-_][A-Za-z])", re.IGNORECASE)
MAX_WAITING = 4096
#: how much a card's signature counts when it fired only after the job was being stopped
LATE_WEIGHT = 0.4


def host_of_file(name: str) -> str | None:
    """The node a whole file (or the folder it is in) is named after, if it is."""
    for part in reversed(re.split(r"[/:\\]", name)):
        m = _HOST_PART.match(part)
        if m and _HOST_WORD.search(m.group(1)) and "rank" not in part.lower():
            return m.group(1)
    return None


def _earlier(a: Evidence, b: Evidence) -> bool:
    if a.ts is not None and b.ts is not None:
        return a.ts < b.ts
    return a.file == b.file and a.line < b.line


#: A per-kind handler: returns False to drop the fact.
Handler = Callable[[LogReport, _SourceState, Fact, int | None], bool | None]

# --- per-kind handlers: return False to drop the fact --------------------------------------------


def _h_watchdog(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> None:
    rec = TimeoutRecord(rank, fact.ev)
    st.pending_timeout[rank] = (rec, fact.ev.line)
    if len(report.timeouts) < 4096:
        report.timeouts.append(rec)
    if rank is not None:
        report.rank(rank).timeout = rec


def _h_gloo_timeout(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> None:
    """gloo's own timeout is that rank's collective timeout (gloo has no watchdog line)."""
    if rank is not None and report.ranks.get(rank) and report.ranks[rank].timeout is not None:
        return
    rec = TimeoutRecord(rank, fact.ev, timeout_ms=fact.fields.get("timeout_ms"))
    if len(report.timeouts) < 4096:
        report.timeouts.append(rec)
    if rank is not None:
        report.rank(rank).timeout = rec


def _pending(st: _SourceState, fact: Fact, rank: int | None) -> TimeoutRecord | None:
    entry = st.pending_timeout.get(rank) or (
        st.pending_timeout.get(None) if rank is not None else None
    )
    if entry is None and rank is None and len(st.pending_timeout) == 1:
        entry = next(iter(st.pending_timeout.values()))
    if entry is None or fact.ev.line - entry[1] > 6:
        return None
    return entry[0]


def _h_work(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> None:
    rec = _pending(st, fact, rank)
    if rec is not None:
        for key in ("seq", "op", "numel_in", "numel_out", "timeout_ms"):
            if key in fact.fields and getattr(rec, key) is None:
                setattr(rec, key, fact.fields[key])


def _h_ran_for(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> None:
    rec = _pending(st, fact, rank)
    if rec is not None:
        rec.ran_for_ms = fact.fields.get("ran_for_ms")


def _h_progress(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> None:
    f = fact.fields
    if rank is None:
        return
    rs = report.rank(rank)
    if rs.timeout is None:
        rs.timeout = TimeoutRecord(rank, fact.ev, seq=f.get("seq"))
        report.timeouts.append(rs.timeout)
    rs.timeout.last_enqueued = f.get("last_enqueued")
    rs.timeout.last_completed = f.get("last_completed")
    if rs.timeout.seq is None:
        rs.timeout.seq = f.get("seq")


def _h_nccl_error(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> None:
    st.last_nccl = fact
    if fact.fields.get("nccl_version"):
        report.versions.setdefault("nccl", fact.fields["nccl_version"])
        report.version_values.setdefault("nccl", set()).add(fact.fields["nccl_version"])


def _h_nccl_warn(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> bool:
    """A warning that an optional component is absent (NCCL falls back) is no failure."""
    return not BENIGN_NCCL_WARN.search(str(fact.fields.get("message", "")))


def _h_last_error(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> None:
    st.last_error_line = fact.ev.line
    if st.last_nccl is not None and fact.fields.get("reason"):
        st.last_nccl.fields.setdefault("reason", fact.fields["reason"])


def _h_version(key: str, field_name: str) -> Handler:
    def handler(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> None:
        value = fact.fields.get(field_name)
        if value:
            report.versions.setdefault(key, value)
            seen = report.version_values.setdefault(key, set())
            if len(seen) < 16:
                seen.add(value)

    return handler


def _h_env(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> None:
    name, value = fact.fields.get("name"), fact.fields.get("value")
    if name and value and len(report.env) < 128:
        report.env.setdefault(name, value.rstrip(".,;"))


def _count_transport(report: LogReport, transport: str, n: int) -> None:
    report.transports[transport.split("/")[0]] += n
    if transport.startswith("NET/IB"):
        # NCCL appends /GDRDMA to a network channel that uses GPUDirect RDMA.
        report.transports["NET/IB+GDRDMA" if "GDRDMA" in transport else "NET/IB-noGDR"] += n


def _on_rank_tally(report: LogReport, tally: Tally) -> None:
    """Lines under a launcher's rank prefix, counted by the scanner: those ranks exist."""
    for value, n in tally.counts.items():
        if value.isdigit() and int(value) < 65536:
            report.rank(int(value)).lines += n


def _on_tally(report: LogReport, st: _SourceState, tally: Tally) -> None:
    """NCCL's channel transport lines, counted by the scanner."""
    for transport, n in tally.counts.items():
        _count_transport(report, transport, n)
    if tally.last_line >= (st.last_channel or (0, ""))[0]:
        st.last_channel = (tally.last_line, tally.last_text)


def _h_code_text(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> bool:
    code = NCCL_CODE_OF_TEXT.get(str(fact.fields.get("message", "")).lower())
    if code:
        report.add_fact(Fact("nccl_code", {"code": code, "from_text": True}, fact.ev))
    return False


def _h_workers(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> bool:
    for host in str(fact.fields.get("hosts", "")).split(",")[:64]:
        if host.strip():
            report.hosts.add(host.strip())
    return False


def _h_tests_rank(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> None:
    f = fact.fields
    if f.get("rank") is not None and f.get("host"):
        rs = report.rank(f["rank"])
        rs.host = rs.host or f["host"]


def _h_comm_init(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> None:
    f = fact.fields
    nranks = f.get("nranks")
    if nranks and (report.world_size is None or nranks > report.world_size):
        report.world_size = nranks
    if f.get("rank") is not None and fact.ev.host:
        rs = report.rank(f["rank"])
        rs.host = rs.host or fact.ev.host


#: where installed packages and the standard library live (site.py's site-packages, Debian's
#: dist-packages, lib/pythonX.Y, CPython's frozen modules): frames there are not the program's
_LIBRARY = re.compile(r"[/\\](?:site|dist)-packages[/\\]|[/\\]lib[/\\]python\d+(?:\.\d+)?[/\\]|^<")


#: the module of torch.distributed's public collectives
_C10D_API = "torch/distributed/distributed_c10d.py"


def _own_code(path: str) -> bool:
    """Whether a traceback frame's file is the program's own (not a package or the stdlib)."""
    return _LIBRARY.search(path) is None


def _h_frame(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> bool:
    f = fact.fields
    st.frames[rank] = f"{f.get('file')}:{f.get('line')} in {f.get('func')}"
    if _own_code(str(f.get("file", ""))):
        # a traceback lists frames outermost first: the last of the program's own is where it
        # called the library
        st.call_sites[rank] = st.frames[rank]
        st.apis.pop(rank, None)
    elif str(f.get("file", "")).replace("\\", "/").endswith(_C10D_API):
        # the public collectives live in torch/distributed/distributed_c10d.py (torch 2.13.0:
        # `def all_gather_object(object_list, obj, group=None):`, which calls `all_gather`):
        # the first frame there after the program's own is the call it made
        st.apis.setdefault(rank, str(f.get("func", "")))
    return False


def _h_traceback(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> None:
    st.call_sites.pop(rank, None)  # a new traceback: the last one's frames are not its
    st.apis.pop(rank, None)


def _h_exception(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> None:
    f = fact.fields
    if len(report.exceptions) < 256:
        report.exceptions.append(
            ExceptionRecord(
                f.get("type", ""), f.get("message", ""), fact.ev, st.frames.pop(rank, None),
                st.call_sites.pop(rank, None), st.apis.pop(rank, None),
            )
        )


def _h_child_failed(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> None:
    marker = fact.fields.get("marker", "")
    if marker.startswith("Root Cause"):
        st.in_summary, st.summary_root_seen = True, True
        st.current = None
    elif marker.startswith("Failures"):
        st.in_summary = True
        st.current = None


def _h_summary(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> bool:
    if not st.in_summary:
        return False
    key, value = fact.fields.get("key"), fact.fields.get("value", "")
    if key == "time" or st.current is None:
        st.current = FailureRecord(root=st.summary_root_seen, ev=fact.ev)
        st.summary_root_seen = False
        report.failures.append(st.current)
    cur = st.current
    if key == "time":
        cur.time = value
    elif key == "host":
        # on a node whose file names it, torchrun's "localhost" means that node
        cur.host = st.host if value in LOOPBACK_HOSTS and st.host else value
        report.hosts.add(cur.host)
    elif key == "rank":
        parts = value.replace("(", " ").replace(")", " ").replace(":", " ").split()
        cur.rank = int(parts[0]) if parts and parts[0].isdigit() else None
        if "local_rank" in parts:
            idx = parts.index("local_rank") + 1
            cur.local_rank = int(parts[idx]) if idx < len(parts) and parts[idx].isdigit() else None
        if cur.rank is not None:
            cur.ev = fact.ev
            if cur.local_rank is not None:
                st.learn_base(cur.rank, cur.local_rank)  # torchrun: "rank : 3 (local_rank: 1)"
    elif key == "exitcode":
        code = value.split()[0] if value.split() else ""
        cur.exitcode = int(code) if code.lstrip("-").isdigit() else None
        pid = re.search(r"\(pid: (\d+)\)", value)
        cur.pid = int(pid.group(1)) if pid else None
    return False


def _h_clients(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> None:
    expected = fact.fields.get("expected")
    if expected and report.world_size is None:
        report.world_size = expected


def _h_mismatch(report: LogReport, st: _SourceState, fact: Fact, rank: int | None) -> bool:
    """A fingerprint quoted by DETAIL's wrapper when its barrier failed ("Monitored Barrier
    encountered error running collective: CollectiveFingerPrint(...)") is no mismatch."""
    return "encountered error running collective" not in fact.ev.text


_HANDLERS = {
    "mismatch": _h_mismatch,
    "watchdog_timeout": _h_watchdog,
    "gloo_timeout": _h_gloo_timeout,
    "work_nccl": _h_work,
    "ran_for": _h_ran_for,
    "work_progress": _h_progress,
    "nccl_error": _h_nccl_error,
    "last_error": _h_last_error,
    "nccl_warn": _h_nccl_warn,
    "nccl_version": _h_version("nccl", "nccl"),
    "torch_version": _h_version("torch", "torch"),
    "driver_version": _h_version("driver", "driver"),
    "cuda_version": _h_version("cuda", "cuda"),
    "nccl_env": _h_env,
    "env_var": _h_env,
    "nccl_code_text": _h_code_text,
    "nccl_tests_rank": _h_tests_rank,
    "launch_hosts": _h_workers,
    "comm_init": _h_comm_init,
    "frame": _h_frame,
    "traceback": _h_traceback,
    "exception": _h_exception,
    "child_failed": _h_child_failed,
    "summary_field": _h_summary,
    "clients_joined": _h_clients,
}

#: Within one line, handle openers before the fields that attach to them.
_ORDER = {ex.kind: i for i, ex in enumerate(EXTRACTORS)}


def _flush(report: LogReport, st: _SourceState) -> None:
    if st.last_channel is not None:  # channel lines are set-up progress: keep the last one
        line, text = st.last_channel
        report.add_fact(Fact("nccl_setup", {}, Evidence(st.name, line, text)))
    for rec in report.failures:
        if rec.rank is not None and rec.host:
            rs = report.rank(rec.rank)
            rs.host = rs.host or rec.host


def _finish(report: LogReport, bases: dict[str, int]) -> None:
    if len(bases) > 1:
        # torchrun numbers each node's ranks in one block from its base: a rank without a
        # line of its own (it left without a word) still belongs to the node whose block holds
        # it, up to the block of the next node
        named = {r for f in report.facts.get("barrier_blame", []) for r in f.fields["ranks"]}
        upper = max([*report.ranks, *named, max(bases.values())])
        # a node that left logs but no base of its own (its workers all succeeded: torchrun
        # printed no summary there) holds a block too: with nodes of one size, a block ends
        # after world / nodes ranks, and a rank past it is on no known node
        nodes = len(report.hosts | set(bases))
        world = max(upper + 1, report.world_size or 0)
        per_node = world // nodes if nodes > len(bases) and world % nodes == 0 else world
        for r in range(upper + 1):
            below = [(b, h) for h, b in bases.items() if b <= r < b + per_node]
            if below:
                rs = report.rank(r)
                rs.host = rs.host or max(below)[1]
    for rs in report.ranks.values():
        if rs.host:
            report.hosts.add(rs.host)
    if len(report.ranks) > 1:
        report.world_size = max(report.world_size or 0, max(report.ranks) + 1)


_ANALYZERS: dict[tuple[object, ...], Analyzer] = {}


def analyzer_for(cards: Sequence[Card], cache_dir: Path | None = None) -> Analyzer:
    """A cached Analyzer for this set of cards (compiling the patterns takes a moment; with
    `cache_dir` the compiled patterns are also kept on disk for the next process)."""
    key = tuple((c.id, tuple((s.pattern, s.ignore_case) for s in c.signatures)) for c in cards)
    analyzer = _ANALYZERS.get(key)
    if analyzer is None:
        if len(_ANALYZERS) > 4:
            _ANALYZERS.clear()
        analyzer = _ANALYZERS[key] = Analyzer(cards, cache_dir)
    return analyzer

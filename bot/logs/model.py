"""The records log analysis produces: evidence lines, facts, per-rank state, the report."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bot.answering.contract import EvidenceLine, InputFile, InputSummary
from bot.logs.flight_recorder import FrFinding
from bot.logs.salient import SalientLines
from bot.logs.sources import SourceStats

MAX_FACTS_PER_KIND = 64
MAX_HITS_PER_SIGNATURE = 8


@dataclass(frozen=True, slots=True)
class Evidence:
    """One log line, where it is and who wrote it."""

    file: str
    line: int
    text: str
    rank: int | None = None
    host: str | None = None
    ts: float | None = None

    def out(self) -> EvidenceLine:
        """The line as an answer quotes it."""
        return EvidenceLine(file=self.file, line=self.line, text=self.text, rank=self.rank,
                            host=self.host or None)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(slots=True)
class Fact:
    kind: str
    fields: dict[str, Any]
    ev: Evidence


@dataclass(slots=True)
class TimeoutRecord:
    """One rank's watchdog timeout: which collective it was stuck in."""

    rank: int | None
    ev: Evidence
    seq: int | None = None
    op: str | None = None
    numel_in: int | None = None
    numel_out: int | None = None
    timeout_ms: int | None = None
    ran_for_ms: int | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None


@dataclass(slots=True)
class RankState:
    rank: int
    host: str | None = None
    lines: int = 0
    first_error: Fact | None = None  # first non-timeout failure (crash, exception, signal)
    timeout: TimeoutRecord | None = None
    last_ts: float | None = None


@dataclass(slots=True)
class FailureRecord:
    """One entry of torchrun's ChildFailedError summary."""

    root: bool
    ev: Evidence
    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    exitcode: int | None = None
    time: str | None = None
    #: the worker's process id ("exitcode  : -15 (pid: 4476)"): torchrun names the same pid
    #: when it sends a worker its closing signal
    pid: int | None = None


@dataclass(slots=True)
class ExceptionRecord:
    type: str
    message: str
    ev: Evidence
    frame: str | None = None  # innermost frame "file:line in func"
    #: the innermost frame of the program's own code (not an installed package's nor the
    #: standard library's), "file:line in func": where the program called into the library
    call_site: str | None = None
    #: the torch.distributed function that code called (the first frame after it in
    #: torch/distributed/distributed_c10d.py): "all_gather_object" where the innermost frame
    #: is the "all_gather" it calls
    api: str | None = None


@dataclass(slots=True)
class SignatureHit:
    card: str
    signature: str
    weight: float
    count: int = 0
    evidence: list[Evidence] = field(default_factory=list)


@dataclass
class LogReport:
    """Everything the analyzer found in a set of logs; input to diagnosis."""

    sources: list[SourceStats] = field(default_factory=list)
    engine: str = "re"
    facts: dict[str, list[Fact]] = field(default_factory=dict)
    last_fact: dict[str, Fact] = field(default_factory=dict)  # the latest of each kind
    counts: Counter[str] = field(default_factory=Counter)
    ranks: dict[int, RankState] = field(default_factory=dict)
    timeouts: list[TimeoutRecord] = field(default_factory=list)
    failures: list[FailureRecord] = field(default_factory=list)
    exceptions: list[ExceptionRecord] = field(default_factory=list)
    signatures: dict[tuple[str, str], SignatureHit] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    version_values: dict[str, set[str]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    transports: Counter[str] = field(default_factory=Counter)
    world_size: int | None = None
    hosts: set[str] = field(default_factory=set)
    #: distinct normalised error-ish lines, for comparing with past incidents
    salient: SalientLines[Evidence] = field(default_factory=SalientLines)
    #: what Flight Recorder dumps given with the logs show (`bot.logs.flight_recorder`)
    flight_recorder: list[FrFinding] = field(default_factory=list)

    def add_fact(self, fact: Fact) -> None:
        self.counts[fact.kind] += 1
        bucket = self.facts.setdefault(fact.kind, [])
        if len(bucket) < MAX_FACTS_PER_KIND:
            bucket.append(fact)
        self.last_fact[fact.kind] = fact

    def first(self, kind: str) -> Fact | None:
        bucket = self.facts.get(kind)
        return bucket[0] if bucket else None

    def has(self, kind: str) -> bool:
        return self.counts[kind] > 0

    def rank(self, rank: int) -> RankState:
        state = self.ranks.get(rank)
        if state is None:
            state = self.ranks[rank] = RankState(rank)
        return state

    @property
    def total_bytes(self) -> int:
        return sum(s.bytes_read for s in self.sources)

    @property
    def total_lines(self) -> int:
        return sum(s.lines for s in self.sources)

    @property
    def shows_failure(self) -> bool:
        """Evidence of a failure: a fact or signature, or a kept line that reports one."""
        return (self.evidence_found or self.salient.reports_failure()
                or bool(self.flight_recorder))

    @property
    def evidence_found(self) -> bool:
        return bool(self.signatures) or any(
            self.counts[k] for k in self.counts if k not in INFO_KINDS
        )

    def summary(self) -> InputSummary:
        """What was read, as an answer's `input` shows it."""
        return InputSummary(
            files=[InputFile(name=s.name, compressed_bytes=s.compressed_bytes,
                             bytes_read=s.bytes_read, lines=s.lines, problems=list(s.problems))
                   for s in self.sources],
            bytes=self.total_bytes,
            lines=self.total_lines,
            engine=self.engine,
            ranks_seen=len(self.ranks),
            world_size=self.world_size,
            hosts=sorted(self.hosts)[:64],
            versions=dict(self.versions),
            env=dict(self.env),
            transports=dict(self.transports.most_common(8)),
            counts=dict(self.counts),
        )


#: Fact kinds that describe a healthy setup rather than a failure.
INFO_KINDS = frozenset(
    {
        "nccl_version",
        "net_ib",
        "net_socket",
        "bootstrap_if",
        "using_network",
        "transport",
        "comm_init",
        "nccl_env",
        "env_var",
        "torch_version",
        "driver_version",
        "cuda_version",
        "frame",
        "traceback",
        "summary_field",
        "nccl_tests",
        "nccl_tests_rank",
        "nccl_tests_row",
        "nccl_tests_avg",
        "gpu_process",
        "topo_matrix",
        "lspci_gpu",
        "long_step",
        "exit_barrier",  # a node whose workers all succeeded (its agent's error there follows)
        "nccl_setup",
        "nvls",
        "p2p_test",
        "ddp_init_rank",
    }
)

"""NCCL RAS: poll a job's RAS port, parse its STATUS answer (text or JSON), compare two polls.

NCCL (2.24+) runs a RAS thread in every process; one of them answers on localhost:28028
(NCCL_RAS_ADDR moves it). The line protocol, from NVIDIA/nccl `src/ras/client.cc` (the
`ncclras` client) and `src/ras/client_support.cc` (the server side, `rasClientEventLoop`):

    -> CLIENT PROTOCOL 2        <- SERVER PROTOCOL 2  (2 in every release, 2.24 to 2.30)
    -> TIMEOUT <secs>           <- OK                 (per-leg gathering timeout)
    -> SET FORMAT json|text     <- OK                 (2.28.7+; older: "ERROR: Unknown command …")
    -> STATUS | VERBOSE STATUS  <- the report, then the server closes the connection

RAS counts the collective operations each rank has *launched*, not completed, so ranks that
all launched the same operation and stalled on the device look healthy (NVIDIA/nccl#1730).
Two polls a few seconds apart tell more: counts frozen with a spread point at the ranks with
the lowest count (desync, or a host stuck before launching); frozen and equal point at a
device/link stall or hosts stuck after launching; missing or dead ranks point at a dead peer.
"""

from __future__ import annotations

import json
import math
import re
import socket
import time
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, Field

PORT = 28028  # NCCL_RAS_CLIENT_PORT, src/ras/ras_internal.h
PROTOCOL = 2  # NCCL_RAS_CLIENT_PROTOCOL, src/ras/ras_internal.h
#: Seconds the `ncclras` client adds to the server's timeout while it waits for the report
#: (TIMEOUT_INCREMENT 1 in client.cc + RAS_COLLECTIVE_EXTRA_TIMEOUT_SEC 5 in ras_internal.h).
EXTRA_WAIT_S = 6.0
MAX_ANSWER_BYTES = 16 * 2**20
#: NCCL's collective types in its own order (`ncclFuncStr`, src/init.cc); text output before
#: 2.26 has one count for all of them, named "all" here.
OPS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
ALL_OPS = "all"
#: init_state / async_error values that are not errors (ncclSuccess, ncclInProgress).
_NOT_ERRORS = (0, 7)

VerdictKind = Literal["progressing", "desync", "stalled_equal", "dead_peer", "unknown"]
Format = Literal["json", "text"]
Version = tuple[int, int, int]


class RasUnavailableError(RuntimeError):
    """RAS could not be queried or gave no usable answer; the message says why."""


class RasRefusedError(RasUnavailableError):
    """The query was not sent: this NCCL version is known to crash when RAS is queried."""


class KnownIssue(BaseModel):
    """A RAS bug in a range of NCCL releases (bounds inclusive; None: open-ended)."""

    first: Version
    last: Version | None
    issue: str
    summary: str
    refuse: bool


KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    KnownIssue(first=(2, 26, 0), last=(2, 27, 2), refuse=True,
               issue="https://github.com/NVIDIA/nccl/issues/1669",
               summary="a status query during communicator initialization can crash the NCCL "
                       "process (reported on 2.26.2 and, as #1718, on 2.26.5; fixed in 2.27.3)"),
    KnownIssue(first=(2, 27, 7), last=(2, 27, 7), refuse=True,
               issue="https://github.com/NVIDIA/nccl/issues/1996",
               summary="segmentation faults in the RAS thread reported on 2.27.7 "
                       "(open; NCCL_RAS_ENABLE=0 avoids them)"),
    KnownIssue(first=(2, 26, 0), last=(2, 29, 1), refuse=False,
               issue="https://github.com/NVIDIA/nccl/issues/1762",
               summary="a report on communicators with missing ranks reads past their data "
                       "(memory corruption seen at 128 GPUs; fixed in 2.29.2)"),
    KnownIssue(first=(2, 27, 3), last=None, refuse=False,
               issue="https://github.com/NVIDIA/nccl/issues/2346",
               summary="a report while communicators are being created can segfault "
                       "(reported on 2.29.7 at 256 GPUs; open)"),
)


class RasProcess(BaseModel):
    """A job process RAS names as missing or dead."""

    host: str
    pid: int
    gpus: str = ""


class RasRank(BaseModel):
    """One rank of a communicator as RAS reports it; text output names only outliers."""

    rank: int
    host: str | None = None
    pid: int | None = None
    gpu: str | None = None
    status: str | None = None  # RUNNING, INIT, FINALIZE, ABORT or NOCOMM
    init_state: int | None = None
    async_error: int | None = None
    counts: dict[str, int] = Field(default_factory=dict)
    unresponsive: bool | None = None  # missing ranks only
    dead: bool | None = None  # missing ranks only


class RasCountGroup(BaseModel):
    """`nranks` ranks launched `count` operations of type `op`; `ranks`: those RAS names."""

    op: str
    count: int
    nranks: int
    ranks: list[int] = Field(default_factory=list)


class RasCommunicator(BaseModel):
    """One communicator: its ranks, missing ranks and launched-operation counts."""

    comm_hash: str  # 16 hex digits, as the text output and NCCL's INFO lines print it
    label: str | None = None  # "#group-index" in the text output
    nranks: int | None = None
    ranks: list[RasRank] = Field(default_factory=list)
    missing_ranks: list[RasRank] = Field(default_factory=list)
    count_groups: list[RasCountGroup] = Field(default_factory=list)
    counts_complete: bool = False  # every rank's count is known (JSON)
    problems: list[str] = Field(default_factory=list)  # text: MISMATCH/INCOMPLETE/ERROR
    error_lines: list[str] = Field(default_factory=list)


class RasGroupRow(BaseModel):
    """A row of the text output's communicator table (communicators grouped by shape)."""

    group: int
    comms: int
    nodes_per_comm: int
    ranks_per_node: str
    ranks_per_comm: int
    ranks_in_group: int
    status: str
    errors: str


class RasStatus(BaseModel):
    """One parsed RAS STATUS answer."""

    fmt: Format
    nccl_version: str | None = None
    communicators: list[RasCommunicator] = Field(default_factory=list)
    groups: list[RasGroupRow] = Field(default_factory=list)
    missing_processes: list[RasProcess] = Field(default_factory=list)
    dead_processes: list[RasProcess] = Field(default_factory=list)
    timeouts: int = 0
    collection_time_s: float | None = None
    complete: bool = True
    warnings: list[str] = Field(default_factory=list)
    source: str = ""
    raw: str = ""


class RasCulprit(BaseModel):
    """A rank (or, for a dead process RAS names without a rank, a process) to look at."""

    comm_hash: str | None = None
    rank: int | None = None
    host: str | None = None
    pid: int | None = None


class RasCommVerdict(BaseModel):
    comm_hash: str
    kind: VerdictKind
    culprits: list[RasCulprit] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)


class RasVerdict(BaseModel):
    """What two polls say: the overall kind, the ranks to look at and why."""

    kind: VerdictKind
    culprits: list[RasCulprit] = Field(default_factory=list)
    culprit_ranks: list[int] = Field(default_factory=list)
    culprit_hosts: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)
    communicators: list[RasCommVerdict] = Field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Versions


def parse_version(text: str | None) -> Version | None:
    """(2, 27, 5) from "2.27.5", "2.27.5+cuda12.9" or "NCCL version 2.27.5 …"; None otherwise."""
    m = re.search(r"(\d+)\.(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def known_issues(version: str | None) -> list[KnownIssue]:
    """The known RAS bugs of this NCCL version."""
    v = parse_version(version)
    if v is None:
        return []
    return [k for k in KNOWN_ISSUES if k.first <= v and (k.last is None or v <= k.last)]


def _issue_line(k: KnownIssue) -> str:
    return f"{k.summary} ({k.issue})"


def refusal(version: str | None) -> str | None:
    """Why this NCCL version must not be queried, or None when it may be."""
    bad = [k for k in known_issues(version) if k.refuse]
    if not bad:
        return None
    return (f"not querying NCCL RAS: NCCL {version}: " + "; ".join(map(_issue_line, bad))
            + ". Upgrade NCCL, or pass force=True to query anyway.")


# ---------------------------------------------------------------------------------------------
# Parsing


def _hash(h: str) -> str:
    return f"{int(h, 16):016x}"


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v: object) -> str | None:
    return v if isinstance(v, str) else None


def _dict(v: object) -> dict[str, object]:
    return v if isinstance(v, dict) else {}


def _bool(v: object) -> bool | None:
    return v if isinstance(v, bool) else None


def _rank_status(st: Mapping[str, object]) -> str | None:
    """A reporting rank's status, derived as rasClientRunComms does."""
    if st.get("abort_flag") is True:
        return "ABORT"
    if st.get("finalize_called") is True or st.get("destroy_flag") is True:
        return "FINALIZE"
    init = _int(st.get("init_state"))
    if init is None:
        return None
    return "RUNNING" if init == 0 else "INIT"


def _groups_from_ranks(ranks: list[RasRank]) -> list[RasCountGroup]:
    out: list[RasCountGroup] = []
    ops = [op for op in OPS if any(op in r.counts for r in ranks)]
    ops += sorted({op for r in ranks for op in r.counts} - set(OPS))
    for op in ops:
        by: dict[int, list[int]] = {}
        for r in ranks:
            if op in r.counts:
                by.setdefault(r.counts[op], []).append(r.rank)
        for count in sorted(by, reverse=True):
            out.append(RasCountGroup(op=op, count=count, nranks=len(by[count]),
                                     ranks=sorted(by[count])))
    return out


#: NCCL 2.28.7 to 2.29.1 omit the comma after a missing rank's "nvml_dev" (fixed in 2.29.2).
_MISSING_COMMA = re.compile(r'("nvml_dev": -?\d+)(\s*\n\s*"status": \{)')


def parse_json(raw: str) -> RasStatus:
    """Parse a `SET FORMAT json` STATUS answer; RasUnavailableError when it is not one."""
    warnings: list[str] = []
    try:
        doc = json.loads(raw)
    except ValueError:
        fixed = _MISSING_COMMA.sub(r"\1,\2", raw)
        try:
            doc = json.loads(fixed)
        except ValueError as e:
            raise RasUnavailableError(
                f"the RAS answer is not complete JSON ({e}; {len(raw)} bytes, starting "
                f"{raw[:60]!r}); the connection may have been cut") from None
        warnings.append("repaired the comma NCCL 2.28.7-2.29.1 leave out after a missing "
                        "rank's nvml_dev")
    if not isinstance(doc, dict) or not isinstance(doc.get("communicators"), list):
        raise RasUnavailableError(f"the RAS answer is JSON but not a RAS report: {raw[:80]!r}")
    comms: list[RasCommunicator] = []
    dead: dict[tuple[str, int], RasProcess] = {}
    for c in doc["communicators"]:
        if not isinstance(c, dict) or not isinstance(c.get("hash"), str):
            warnings.append("skipped a communicator without a hash")
            continue
        try:
            comm_hash = _hash(c["hash"])
        except ValueError:
            warnings.append(f"skipped a communicator with hash {c['hash']!r}")
            continue
        ranks = [_json_rank(r) for r in c.get("ranks") or [] if isinstance(r, dict)]
        missing = [_json_rank(r) for r in c.get("missing_ranks") or [] if isinstance(r, dict)]
        for m in missing:
            if m.dead and m.host and m.pid is not None and m.pid >= 0:
                dead[(m.host, m.pid)] = RasProcess(host=m.host, pid=m.pid, gpus=m.gpu or "")
        comms.append(RasCommunicator(
            comm_hash=comm_hash, nranks=_int(c.get("size")), ranks=ranks, missing_ranks=missing,
            count_groups=_groups_from_ranks(ranks), counts_complete=True))
    ras = _dict(doc.get("ras"))
    secs = ras.get("collection_time_sec")
    return RasStatus(
        fmt="json", nccl_version=_str(doc.get("nccl_version")), communicators=comms,
        dead_processes=list(dead.values()), timeouts=_int(ras.get("timeouts_count")) or 0,
        collection_time_s=float(secs) if isinstance(secs, int | float) else None,
        warnings=warnings, raw=raw)


def _json_rank(r: Mapping[str, object]) -> RasRank:
    st = _dict(r.get("status"))
    counts = _dict(r.get("collective_counts"))
    cuda = _int(r.get("cuda_dev"))
    host = _str(r.get("host"))
    pid = _int(r.get("pid"))
    rank = _int(r.get("rank"))
    return RasRank(
        rank=-1 if rank is None else rank,
        host=None if host in (None, "unknown") else host,
        pid=None if pid is None or pid < 0 else pid,
        gpu=None if cuda is None else str(cuda),
        status=None if "unresponsive" in st else _rank_status(st),
        init_state=_int(st.get("init_state")), async_error=_int(st.get("async_error")),
        counts={k: v for k, v in counts.items() if isinstance(k, str) and _int(v) is not None},
        unresponsive=_bool(st.get("unresponsive")), dead=_bool(st.get("considered_dead")))


# Text lines, from the rasOutAppend formats in src/ras/client_support.cc (2.24.3 to 2.30.7).
_T_VERSION = re.compile(r"^NCCL version (\S+) compiled with CUDA")
_T_COMMS = re.compile(r"^Communicators\.\.\. \((\d+(?:\.\d+)?)s\)")
_T_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+(?:-\d+)?)\s+(\d+)\s+(\d+)\s+"
                    r"(NOCOMM|INIT|RUNNING|FINALIZE|ABORT)\s+([A-Z,]+)$")
_T_COMM = re.compile(r"^#(\d+)-(\d+) \(([0-9a-fA-F]+)\) ([A-Z,]+)$")
_T_PROCESS = re.compile(r"^Process (\d+) on node (\S+) managing GPUs? (.*)$")
_WHO = r"GPU (?P<gpu>.+?) managed by process (?P<pid>\d+) on node (?P<host>\S+)"
_T_RANK = re.compile(r"^Rank (?P<rank>\d+) -- (?:" + _WHO + r"|\[process information not found\])$")
_T_ONE = re.compile(r"^Rank (?P<rank>\d+) (?:has launched up to operation (?P<count>\d+)|"
                    r"has not launched any operations|has status (?P<status>[A-Z]+)|"
                    r"reported (?P<error>.+?)) -- (?:" + _WHO
                    + r"|\[process information not found\])$")
_T_OPS = re.compile(r"^Communicator ranks have different (\S+) operation counts$")
_T_GROUP = re.compile(r"^(\d+) ranks have (?:launched up to operation (\d+)|"
                      r"not launched any operations)$")
_T_STATUS_GROUP = re.compile(r"^(\d+) ranks have status ([A-Z]+)$")
_T_MISSING_OLD = re.compile(r"^The missing ranks?: ([\d,]+)$")
_T_TIMEOUTS = re.compile(r"^Encountered (\d+) communication timeouts? while gathering")


def parse_text(raw: str) -> RasStatus:
    """Parse a text STATUS answer (the default format; `ncclras` prints it as is)."""
    st = RasStatus(fmt="text", raw=raw)
    comms: dict[str, RasCommunicator] = {}
    comm: RasCommunicator | None = None
    section = ""  # "errors" or "warnings"
    block = ""  # INCOMPLETE / DEAD / TIMEOUT / MISMATCH / ERROR
    op: str | None = None
    group: RasCountGroup | None = None
    status_group: str | None = None
    recognised = False
    for raw_line in raw.splitlines():
        line = raw_line.strip()
        if not line or set(line) == {"="} or line == "[...]":
            continue
        if m := _T_VERSION.match(line):
            st.nccl_version, recognised = m.group(1), True
        elif m := _T_COMMS.match(line):
            st.collection_time_s, recognised = float(m.group(1)), True
        elif m := _T_ROW.match(line):
            recognised = True
            st.groups.append(RasGroupRow(
                group=int(m.group(1)), comms=int(m.group(2)), nodes_per_comm=int(m.group(3)),
                ranks_per_node=m.group(4), ranks_per_comm=int(m.group(5)),
                ranks_in_group=int(m.group(6)), status=m.group(7), errors=m.group(8)))
        elif line in ("Errors", "Warnings"):
            section, block, comm, recognised = line.lower(), "", None, True
        elif line in ("INCOMPLETE", "DEAD", "TIMEOUT") and section:
            block, comm = line, None
        elif m := _T_COMM.match(line):
            recognised, block, op, group, status_group = True, m.group(4), None, None, None
            h = _hash(m.group(3))
            comm = comms.get(h)
            if comm is None:
                g = int(m.group(1))
                row = next((r for r in st.groups if r.group == g), None)
                comm = comms[h] = RasCommunicator(
                    comm_hash=h, label=f"#{g}-{m.group(2)}",
                    nranks=row.ranks_per_comm if row else None)
            comm.problems.append(block)
        elif comm is None:
            if (m := _T_PROCESS.match(line)) and block in ("INCOMPLETE", "DEAD"):
                p = RasProcess(pid=int(m.group(1)), host=m.group(2), gpus=m.group(3))
                (st.dead_processes if block == "DEAD" else st.missing_processes).append(p)
            elif m := _T_TIMEOUTS.match(line):
                st.timeouts = int(m.group(1))
        elif block == "INCOMPLETE":
            _text_missing(comm, line)
        elif block == "ERROR":
            comm.error_lines.append(line)
            if (m := _T_ONE.match(line)) and m.group("error"):
                _text_rank(comm.ranks, m)
        elif m := _T_OPS.match(line):
            op = ALL_OPS if m.group(1) == "collective" else m.group(1)
            group, status_group = None, None
        elif (m := _T_GROUP.match(line)) and op is not None:
            group = RasCountGroup(op=op, count=int(m.group(2) or 0), nranks=int(m.group(1)))
            comm.count_groups.append(group)
        elif m := _T_STATUS_GROUP.match(line):
            status_group, op, group = m.group(2), None, None
        elif m := _T_ONE.match(line):
            rank = _text_rank(comm.ranks, m)
            if op is not None and not m.group("status"):
                count = int(m.group("count") or 0)
                rank.counts[op] = count
                comm.count_groups.append(RasCountGroup(op=op, count=count, nranks=1,
                                                       ranks=[rank.rank]))
            elif m.group("status"):
                rank.status = m.group("status")
            group = None
        elif m := _T_RANK.match(line):
            rank = _text_rank(comm.ranks, m)
            if group is not None:
                group.ranks.append(rank.rank)
                rank.counts[group.op] = group.count
            elif status_group is not None:
                rank.status = status_group
    st.communicators = list(comms.values())
    for p in st.dead_processes:  # dead processes' ranks are missing, and dead
        for c in st.communicators:
            for r in c.missing_ranks:
                if (r.host, r.pid) == (p.host, p.pid):
                    r.dead = True
    if not recognised:
        raise RasUnavailableError(f"the RAS answer is not a RAS report: {raw[:80]!r}")
    if "Warnings\n========" not in raw or not raw.endswith("\n"):
        st.complete = False
        st.warnings.append("the text report is cut short (no closing Warnings section)")
    return st


def _text_rank(ranks: list[RasRank], m: re.Match[str]) -> RasRank:
    n = int(m.group("rank"))
    rank = next((r for r in ranks if r.rank == n), None)
    if rank is None:
        rank = RasRank(rank=n)
        ranks.append(rank)
    if m.group("pid"):
        rank.host, rank.pid, rank.gpu = m.group("host"), int(m.group("pid")), m.group("gpu")
    return rank


def _text_missing(comm: RasCommunicator, line: str) -> None:
    if m := _T_MISSING_OLD.match(line):  # 2.24, 2.25: "The missing ranks: 3,5"
        for tok in m.group(1).split(","):
            if tok:
                comm.missing_ranks.append(RasRank(rank=int(tok), unresponsive=True))
    elif m := _T_RANK.match(line):  # 2.26+: one line per missing rank
        rank = _text_rank(comm.missing_ranks, m)
        rank.unresponsive = True


def parse_status(raw: str) -> RasStatus:
    """Parse a STATUS answer in either format (JSON when it starts with '{')."""
    return parse_json(raw) if raw.lstrip().startswith("{") else parse_text(raw)


# ---------------------------------------------------------------------------------------------
# Polling


class _Conn:
    """A RAS client connection: each reply line within `reply_s`, the report by a deadline."""

    def __init__(self, sock: socket.socket, where: str, reply_s: float) -> None:
        self.sock, self.where, self.reply_s = sock, where, reply_s
        self.buf = b""

    def _recv(self, deadline: float) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        self.sock.settimeout(left)
        return self.sock.recv(65536)

    def ask(self, line: str) -> str:
        """Send one command line and read one reply line."""
        self.sock.sendall(line.encode() + b"\n")
        deadline = time.monotonic() + self.reply_s
        while b"\n" not in self.buf:
            chunk = self._recv(deadline)
            if not chunk:
                raise RasUnavailableError(
                    f"NCCL RAS on {self.where} closed the connection after {line!r}")
            self.buf += chunk
            if len(self.buf) > 4096:
                break
        reply, _, self.buf = self.buf.partition(b"\n")
        return reply.decode(errors="replace").strip()

    def read_all(self, wait_s: float) -> tuple[str, bool]:
        """Read until the server closes; (text, cut short at MAX_ANSWER_BYTES)."""
        deadline = time.monotonic() + wait_s
        data = bytearray(self.buf)
        while len(data) <= MAX_ANSWER_BYTES:
            chunk = self._recv(deadline)
            if not chunk:
                return data.decode(errors="replace"), False
            data += chunk
        return data[:MAX_ANSWER_BYTES].decode(errors="replace"), True


def poll(host: str = "localhost", port: int = PORT, timeout_s: float = 5.0,
         fmt: Literal["auto", "json", "text"] = "auto", *, nccl_version: str | None = None,
         verbose: bool = False, force: bool = False) -> RasStatus:
    """Ask one NCCL RAS port for a STATUS report, as `ncclras -t timeout_s [-f json] [-v]` does.

    `timeout_s` bounds the connection and each handshake reply; its ceiling is the gathering
    timeout sent to RAS (`TIMEOUT`), and the report may take 6 s more (as for `ncclras`).
    JSON is used when the server takes `SET FORMAT json` (2.28.7+) unless fmt="text".
    Versions known to crash when queried are refused before connecting when `nccl_version`
    names one; a server older than 2.28.7 does not say its version before the report, so it
    is queried only when `nccl_version` is given (or `force`).
    """
    if not force and (why := refusal(nccl_version)):
        raise RasRefusedError(why)
    where = f"{host}:{port}"
    secs = max(1, math.ceil(timeout_s))
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except ConnectionRefusedError:
        raise RasUnavailableError(
            f"NCCL RAS not listening on {where}; RAS needs NCCL >= 2.24 and NCCL_RAS_ENABLE "
            "not 0, and listens where NCCL_RAS_ADDR says (localhost:28028 by default, on a "
            "node running the job)") from None
    except TimeoutError:
        raise RasUnavailableError(f"connecting to NCCL RAS on {where} timed out") from None
    except OSError as e:
        raise RasUnavailableError(f"cannot connect to NCCL RAS on {where}: {e}") from None
    try:
        with sock:
            return _session(_Conn(sock, where, timeout_s), secs, fmt, nccl_version, verbose,
                            force)
    except TimeoutError:
        raise RasUnavailableError(
            f"NCCL RAS on {where} did not answer in time ({timeout_s:g} s a reply, "
            f"{secs + EXTRA_WAIT_S:g} s the report): a stuck RAS thread, or not RAS") from None
    except OSError as e:
        raise RasUnavailableError(f"talking to NCCL RAS on {where} failed: {e}") from None


def _session(conn: _Conn, secs: int, fmt: str, nccl_version: str | None, verbose: bool,
             force: bool) -> RasStatus:
    warnings: list[str] = []
    reply = conn.ask(f"CLIENT PROTOCOL {PROTOCOL}")
    if not reply.upper().startswith("SERVER PROTOCOL "):
        raise RasUnavailableError(
            f"{conn.where} does not speak the NCCL RAS protocol (answered {reply[:80]!r})")
    if reply.split()[-1] != str(PROTOCOL):
        warnings.append(f"RAS protocol mismatch: server says {reply!r}, client speaks "
                        f"{PROTOCOL}")
    reply = conn.ask(f"TIMEOUT {secs}")
    if reply.upper() != "OK":
        raise RasUnavailableError(f"NCCL RAS on {conn.where} refused TIMEOUT {secs}: {reply!r}")
    want = "text" if fmt == "text" else "json"
    reply = conn.ask(f"SET FORMAT {want}")
    has_format = reply.upper() == "OK"
    if not has_format and not reply.upper().startswith("ERROR: UNKNOWN COMMAND"):
        raise RasUnavailableError(f"NCCL RAS on {conn.where} answered SET FORMAT with {reply!r}")
    if fmt == "json" and not has_format:
        raise RasUnavailableError(
            f"NCCL RAS on {conn.where} has no JSON output (it needs NCCL >= 2.28.7); "
            "poll with fmt='text' or 'auto'")
    if not has_format and nccl_version is None and not force:
        raise RasRefusedError(
            f"not querying NCCL RAS on {conn.where}: it predates NCCL 2.28.7 (no SET FORMAT) "
            "and does not say its version before the report, and some of those releases "
            "crash when queried: " + "; ".join(_issue_line(k) for k in KNOWN_ISSUES
                                               if k.refuse)
            + ". Pass nccl_version (the job's 'NCCL version' log line) or force=True.")
    conn.sock.sendall(b"VERBOSE STATUS\n" if verbose else b"STATUS\n")
    raw, cut = conn.read_all(secs + EXTRA_WAIT_S)
    if not raw.strip():
        raise RasUnavailableError(f"NCCL RAS on {conn.where} closed without a report")
    status = parse_json(raw) if want == "json" and has_format else parse_text(raw)
    status.source = conn.where
    status.warnings[:0] = warnings
    if cut:
        status.complete = False
        status.warnings.append(f"report cut at {MAX_ANSWER_BYTES} bytes")
    reported = parse_version(status.nccl_version)
    claimed = parse_version(nccl_version)
    if reported and claimed and reported != claimed:
        status.warnings.append(f"the caller said NCCL {nccl_version}; RAS reports "
                               f"{status.nccl_version}")
    for k in known_issues(status.nccl_version or nccl_version):
        status.warnings.append(("known crash: " if k.refuse else "known issue: ")
                               + _issue_line(k))
    return status


# ---------------------------------------------------------------------------------------------
# Comparing two polls


def _who(r: RasRank) -> str:
    where = ", ".join(x for x in (r.host, f"pid {r.pid}" if r.pid is not None else None) if x)
    return f"rank {r.rank}" + (f" ({where})" if where else "")


def _rank_info(comm: RasCommunicator, n: int) -> RasRank:
    for r in (*comm.ranks, *comm.missing_ranks):
        if r.rank == n:
            return r
    return RasRank(rank=n)


def _culprit(comm: RasCommunicator, n: int) -> RasCulprit:
    r = _rank_info(comm, n)
    return RasCulprit(comm_hash=comm.comm_hash, rank=n, host=r.host, pid=r.pid)


def _ranks_text(comm: RasCommunicator, ranks: list[int], limit: int = 4) -> str:
    shown = [_who(_rank_info(comm, n)) for n in ranks[:limit]]
    more = f" and {len(ranks) - limit} more" if len(ranks) > limit else ""
    return ", ".join(shown) + more


def _lowest(comm: RasCommunicator, op: str) -> tuple[int, int, list[int] | None] | None:
    """(lowest count, ranks at it, their rank numbers if known) for one op."""
    groups = [g for g in comm.count_groups if g.op == op]
    if not groups:
        return None
    low = min(groups, key=lambda g: g.count)
    nranks = sum(g.nranks for g in groups if g.count == low.count)
    named = sorted({n for g in groups if g.count == low.count for n in g.ranks})
    if len(named) == nranks:
        return low.count, nranks, named
    if comm.nranks is not None:  # RAS names only the outliers; the rest are the unnamed ranks
        others = {n for g in groups if g.count != low.count for n in g.ranks}
        if sum(g.nranks for g in groups if g.count != low.count) == len(others):
            rest = sorted(set(range(comm.nranks)) - others
                          - {r.rank for r in comm.missing_ranks})
            if len(rest) == nranks:
                return low.count, nranks, rest
    return low.count, nranks, None


def _op_name(op: str) -> str:
    return "all collectives" if op == ALL_OPS else op


def _ops(comm: RasCommunicator) -> list[str]:
    return sorted({g.op for g in comm.count_groups}, key=lambda o: (o not in OPS, o))


def compare_comm(a: RasCommunicator | None, b: RasCommunicator, fmt: Format) -> RasCommVerdict:
    """The verdict for one communicator seen in the first poll (a) and the second (b)."""
    h = b.comm_hash
    lost = [r for r in b.missing_ranks if r.unresponsive or r.dead]
    if lost:
        ev = [f"comm {h}: {_who(r)} missing"
              + (", considered dead by RAS" if r.dead else ", unreachable by RAS")
              for r in lost]
        return RasCommVerdict(comm_hash=h, kind="dead_peer", evidence=ev,
                              culprits=[_culprit(b, r.rank) for r in lost])
    ev = [f"comm {h}: {_who(r)} reports {what} error {code}" for r in b.ranks
          for what, code in (("init", r.init_state), ("async", r.async_error))
          if code is not None and code not in _NOT_ERRORS]
    ev += [f"comm {h}: {line}" for line in b.error_lines[:3]]
    if a is None and fmt == "text":  # the text report shows a communicator only with problems
        a = RasCommunicator(comm_hash=h)
    if a is None:
        return RasCommVerdict(comm_hash=h, kind="unknown",
                              evidence=[*ev, f"comm {h}: only in the second poll (just created)"])
    moved: list[str] = []
    stuck: list[tuple[str, int, int, list[int] | None, int]] = []
    for op in _ops(b):
        lo_a, lo_b = _lowest(a, op), _lowest(b, op)
        if lo_b is None:
            continue
        top = max(g.count for g in b.count_groups if g.op == op)
        if lo_a is None:
            if fmt == "text":  # the first poll showed no spread: the counts moved since
                moved.append(f"{_op_name(op)} counts now spread ({lo_b[0]}..{top})")
            continue
        if lo_b[0] != lo_a[0]:
            moved.append(f"{_op_name(op)} lowest count {lo_a[0]} -> {lo_b[0]}")
        elif top > lo_b[0]:
            stuck.append((op, lo_b[0], lo_b[1], lo_b[2], top))
    if fmt == "text":
        for op in _ops(a):
            if op not in _ops(b):
                lo = _lowest(a, op)
                was = lo[0] if lo else "?"
                moved.append(f"{_op_name(op)} counts no longer differ (lowest was {was})")
    if moved:
        return RasCommVerdict(comm_hash=h, kind="progressing",
                              evidence=[*ev, f"comm {h}: " + "; ".join(moved)])
    if stuck:
        op, low, n, ranks, top = min(stuck, key=lambda s: s[2])
        culprits = [_culprit(b, r) for r in ranks] if ranks else []
        who = (_ranks_text(b, ranks) if ranks
               else f"{n} ranks RAS does not name (VERBOSE STATUS names more)")
        ev.append(f"comm {h}: {_op_name(op)}: {who} at {low} in both polls while other ranks "
                  f"reached {top}")
        total = sum(g.nranks for g in b.count_groups if g.op == op)
        if 2 * n > total:
            ev.append(f"comm {h}: {_op_name(op)}: the {total - n} rank(s) ahead may instead "
                      "have launched an operation the others never called")
        ev += [f"comm {h}: {_op_name(s[0])}: {s[2]} rank(s) at {s[1]}, others up to {s[4]}"
               for s in stuck if s[0] != op]
        return RasCommVerdict(comm_hash=h, kind="desync", culprits=culprits, evidence=ev)
    if not b.counts_complete or not a.counts_complete:
        return RasCommVerdict(comm_hash=h, kind="unknown", evidence=[
            *ev, f"comm {h}: no count spread in either poll; the text report prints counts "
            "only when ranks differ, so progress cannot be told from a stall (JSON, NCCL "
            ">= 2.28.7, can)"])
    counts = {op: max(g.count for g in b.count_groups if g.op == op) for op in _ops(b)}
    used = {op: c for op, c in counts.items() if c > 0}
    if not used:
        return RasCommVerdict(comm_hash=h, kind="unknown", evidence=[
            *ev, f"comm {h}: no collective launched yet in either poll"])
    init = [r.rank for r in b.ranks if r.status == "INIT"]
    if init:
        ev.append(f"comm {h}: {len(init)} rank(s) still initializing")
    shown = ", ".join(f"{op} {c}" for op, c in used.items())
    ev.append(f"comm {h}: all {len(b.ranks)} ranks at {shown} in both polls: every rank "
              "launched the same operations and none moved on (device/link stall, or hosts "
              "stuck after launching; RAS counts launches, NVIDIA/nccl#1730)")
    return RasCommVerdict(comm_hash=h, kind="stalled_equal", evidence=ev)


_PRIORITY: tuple[VerdictKind, ...] = ("dead_peer", "desync", "stalled_equal", "progressing",
                                       "unknown")


def compare(first: RasStatus, second: RasStatus) -> RasVerdict:
    """Compare two polls of the same job, a few seconds apart, into one verdict.

    Per communicator: missing/dead ranks -> dead_peer; the lowest launched count of some
    operation unchanged while others are ahead -> desync (culprits: the lowest ranks);
    some lowest count advanced -> progressing; all counts equal and unchanged ->
    stalled_equal; otherwise unknown. Overall, the first of dead_peer, desync,
    stalled_equal, progressing found; stalled_equal only when no communicator progressed.
    """
    before = {c.comm_hash: c for c in first.communicators}
    after = {c.comm_hash: c for c in second.communicators}
    if second.fmt == "text":  # a communicator whose problem cleared is no longer shown
        for h, c in before.items():
            after.setdefault(h, RasCommunicator(comm_hash=h, label=c.label, nranks=c.nranks))
    verdicts = [compare_comm(before.get(h), c, second.fmt) for h, c in after.items()]
    evidence: list[str] = []
    for p in second.dead_processes:
        evidence.append(f"process {p.pid} on {p.host} (GPU {p.gpus}) considered dead by RAS")
    for p in second.missing_processes:
        evidence.append(f"process {p.pid} on {p.host} (GPU {p.gpus}) did not answer RAS")
    gone = [h for h in before if h not in after]
    if gone and second.fmt == "json":
        evidence.append(f"{len(gone)} communicator(s) gone since the first poll: "
                        + ", ".join(gone[:4]))
    for n, s in (("first", first), ("second", second)):
        if not s.complete:
            evidence.append(f"the {n} poll's report is incomplete")
    if second.fmt == "text":
        quiet = [g for g in second.groups if g.errors == "OK"]
        if quiet:
            evidence.append(f"{sum(g.comms for g in quiet)} communicator(s) report OK; text "
                            "output hides their counts")
    kinds = {v.kind for v in verdicts}
    if second.dead_processes or second.missing_processes:
        kinds.add("dead_peer")
    if "progressing" in kinds:
        kinds.discard("stalled_equal")
    kind = next((k for k in _PRIORITY if k in kinds), "unknown")
    chosen = [v for v in verdicts if v.kind == kind]
    culprits = [c for v in chosen for c in v.culprits]
    if kind == "dead_peer":
        seen = {(c.host, c.pid) for c in culprits}
        culprits += [RasCulprit(host=p.host, pid=p.pid)
                     for p in (*second.dead_processes, *second.missing_processes)
                     if (p.host, p.pid) not in seen]
    return RasVerdict(
        kind=kind, culprits=culprits,
        culprit_ranks=sorted({c.rank for c in culprits if c.rank is not None}),
        culprit_hosts=sorted({c.host for c in culprits if c.host}),
        evidence=[e for v in chosen for e in v.evidence] + evidence
        + [e for v in verdicts if v.kind != kind for e in v.evidence[:1]],
        communicators=verdicts)

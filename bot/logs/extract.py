"""Structured evidence from single log lines (pure).

Each `Extractor` is one regular expression: it is both the scanner's trigger
and the parser that pulls typed fields out of the line. Multi-line records
(torchrun's failure summary, tracebacks, NCCL's "Last error:") are stitched
together by `bot.logs.report`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tools.xid.catalog import XID_LINE

Fields = dict[str, Any]


@dataclass(frozen=True)
class Extractor:
    kind: str
    pattern: str
    convert: Callable[[re.Match[str]], Fields] | None = None
    after: int = 0
    ignore_case: bool = False
    trigger: str | None = None  # what the scanner looks for, if not `pattern`
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        flags = re.IGNORECASE if self.ignore_case else 0
        object.__setattr__(self, "regex", re.compile(self.pattern, flags))

    def parse(self, body: str) -> Fields | None:
        m = self.regex.search(body)
        if m is None:
            return None
        return self.convert(m) if self.convert else {}


def _int(s: str | None) -> int | None:
    return int(s) if s is not None and s.lstrip("-").isdigit() else None


def _fp(text: str) -> str:
    """A collective's fingerprint without its sequence number and device options: the op,
    shapes and dtypes (what ranks must agree on)."""
    keep = [p for p in re.split(r", (?=[A-Z]\w*=)", text)
            if p.startswith(("OpType=", "TensorShape=", "TensorDtypes="))]
    return ", ".join(keep) or text[:120]


def _gloo_key_rank(key: str) -> int | None:
    """The rank whose address a gloo store key holds ("/default_pg/0//cpu//0/2" -> 2), for keys
    under torch's CPU (gloo) prefix only: other keys (NCCL's unique id) are counters."""
    head, _, last = key.rstrip(",").rpartition("/")
    return int(last) if "/cpu/" in head + "/" and last.isdigit() else None


def _groups(*names: str, ints: tuple[str, ...] = ()) -> Callable[[re.Match[str]], Fields]:
    def convert(m: re.Match[str]) -> Fields:
        out: Fields = {}
        for i, name in enumerate(names, start=1):
            value = m.group(i)
            if value is None:
                continue
            out[name] = _int(value) if name in ints else value.strip()
        return out

    return convert


#: ncclGetErrorString()'s text -> the ncclResult_t name (torch and nccl-tests print the text).
NCCL_CODE_OF_TEXT = {
    "unhandled cuda error": "ncclUnhandledCudaError",
    "unhandled system error": "ncclSystemError",
    "internal error": "ncclInternalError",
    "invalid argument": "ncclInvalidArgument",
    "invalid usage": "ncclInvalidUsage",
    "remote process exited or there was a network error": "ncclRemoteError",
}

#: NCCL warnings that only say an optional component is absent, and NCCL falls back (a job
#: that runs over sockets prints them and works): `WARN("Failed to open libibverbs.so[.1]");`
#: (NVIDIA/nccl v2.9.6-1 src/misc/ibvwrap.cc:63), `INFO(NCCL_INIT | NCCL_NET, "NET/IB : No
#: device found.");` (master 5067397c src/transport/net_ib/init.cc:470), the net plugin
#: (`libnccl-net.so`, src/plugin/net.cc:256). They are not failure evidence.
BENIGN_NCCL_WARN = re.compile(r"libibverbs|libnccl-net|[Pp]lugin|NET/IB : No device found|"
                              r"libmlx5|Could not find real path|NCCL_IB_DISABLE")

E = Extractor
EXTRACTORS: tuple[Extractor, ...] = (
    # --- ProcessGroupNCCL watchdog, heartbeat, desync ---------------------------------
    E("watchdog_timeout", r"Watchdog caught collective operation timeout"),
    E(
        "work_nccl",
        r"WorkNCCL\((?:SeqNum=(\d+), )?(?:[^()]*?, )?OpType=(\w+)"
        r"(?:, NumelIn=(\d+), NumelOut=(\d+))?"
        r"(?:, Timeout\(ms\)=(\d+))?",
        _groups(
            "seq",
            "op",
            "numel_in",
            "numel_out",
            "timeout_ms",
            ints=("seq", "numel_in", "numel_out", "timeout_ms"),
        ),
        trigger=r"WorkNCCL\(",
    ),
    E(
        "ran_for",
        r"ran for (\d+) milliseconds before timing out",
        _groups("ran_for_ms", ints=("ran_for_ms",)),
    ),
    E(
        "work_progress",
        # PyTorch 2.2-2.3: "... detected by watchdog at work: 4711, last enqueued NCCL work:
        # 4711, last completed NCCL work: 4710"; >= 2.4 (ProcessGroupNCCL.cpp, logPrefix() ends
        # in "] ", hence two spaces): "[PG ID 0 PG GUID 0(default_pg) Rank 1]  failure detected
        # by watchdog at work sequence id: 2635 PG status: last enqueued work: 2635, last
        # completed work: 2634"
        r"(?:Timeout at NCCL work|detected by watchdog at work(?: sequence id)?):? (\d+),? "
        r"(?:PG status: )?last enqueued (?:NCCL )?work: (-?\d+), "
        r"last completed (?:NCCL )?work: (-?\d+)",
        _groups(
            "seq",
            "last_enqueued",
            "last_completed",
            ints=("seq", "last_enqueued", "last_completed"),
        ),
    ),
    # gloo (third_party/gloo/gloo/transport/tcp/unbound_buffer.cc): a rank's collective waited
    # out the process-group timeout, "Timed out waiting 5000ms for recv operation to complete".
    E(
        "gloo_timeout",
        r"Timed out waiting (\d+)ms for (recv|send) operation to complete",
        _groups("timeout_ms", "direction", ints=("timeout_ms",)),
    ),
    E(
        "heartbeat",
        r"(Heartbeat monitor timed out|watchdog got stuck for (\d+) seconds|"
        r"Received a dump signal due to a collective timeout|"
        r"monitoring thread .* (?:detected|timed out))",
        _groups("message", "stuck_s", ints=("stuck_s",)),
    ),
    E(
        "desync",
        r"(Desync debug|[Dd]esync report|TORCH_NCCL_DESYNC_DEBUG|has not joined|"
        r"is not running collective)",
        _groups("message"),
    ),
    E(
        "mismatch",
        # TORCH_DISTRIBUTED_DEBUG=DETAIL prints a fingerprint before every collective of a
        # healthy run, `LOG(INFO) << "[Rank " << getRank() << "] " << "Running collective: "
        # << finger_print;`, and only the failed check names a mismatch: `"Detected mismatch
        # between collectives on ranks. Rank " << ... << " is running collective: " << *this`
        # (pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp at 017943b7).
        # So a fingerprint counts only after "is running collective:", never after "] Running".
        r"(Detected mismatch between collectives on ranks|"
        r"is running collective: CollectiveFingerPrint\(|"
        r"collectives mismatch|Mismatch between collective|"
        r"Detected a disagreement on list length between rank|"
        # gloo in torch 2.13 (tcp/pair.cc): "Received data size doesn't match expected size.
        # Is there a distributed collective mismatch in your code?"
        r"Received data size doesn't match expected size|distributed collective mismatch)",
        _groups("message"),
    ),
    E(
        "flight_recorder",
        r"(Flight Recorder|fr_trace|TORCH_NCCL_TRACE_BUFFER_SIZE|"
        r"dumping debug info|Dumping the flight recorder)",
        _groups("message"),
    ),
    E(
        "nccl_trace",
        r"NCCL INFO ([\w/.-]+\.(?:cc|cu|h)):(\d+) -> (\d+)",
        _groups("src", "line", "code", ints=("line", "code")),
    ),
    E("some_failed", r"Some NCCL operations have failed or timed out"),
    E(
        "long_step",
        r"\b([Ss]aving (?:the )?(?:model|checkpoint)|save_checkpoint|[Ee]valuating|"
        r"[Rr]unning (?:evaluation|validation|predictions)|[Ss]canning '|[Cc]lustering \d|"
        r"[Pp]reprocessing|[Tt]okenizing|[Dd]ownloading|[Bb]uilding (?:the )?index)",
        _groups("activity"),
    ),
    E(
        "watchdog_frame",
        r"ProcessGroupNCCL::(?:WorkNCCL::checkTimeout|ncclCommWatchdog|watchdogHandler)",
    ),
    E(
        "hvd_stall",
        r"(One or more tensors were submitted to be reduced, gathered or broadcasted by subset|"
        r"\[ready ranks: ([\d, ]+)\])",
        lambda m: {"ready": [int(x) for x in (m.group(2) or "").replace(",", " ").split()]},
    ),
    # --- NCCL errors, warnings and init facts -------------------------------------------
    E(
        "nccl_error",
        r"NCCL error in: ([^,]+), ([^(]+?)\s*\((?:run with|[Nn]o additional)[^)]*\)"
        r"(?:, NCCL version ([\w.+-]+))?",
        _groups("where", "reason", "nccl_version"),
    ),
    E(
        "nccl_code",
        r"\b(ncclSystemError|ncclUnhandledCudaError|ncclInternalError|ncclInvalidUsage|"
        r"ncclInvalidArgument|ncclRemoteError|ncclInProgress)\b",
        _groups("code"),
    ),
    E(
        "nccl_code_text",
        r"(?:NCCL error|NCCL failure|nccl\w* failed|NCCL communicator|NCCL_CHECK)[^\n]*?"
        r"\b(unhandled cuda error|unhandled system error|internal error|invalid argument|"
        r"invalid usage|remote process exited or there was a network error)",
        _groups("message"),
        ignore_case=True,
    ),
    E(
        "nccl_tests",
        r"^#? ?(?:nThread \d+ nGpus \d+ minBytes|Using devices$|(?:NCCL )?[Tt]ests compiled with)",
        _groups(),
    ),
    E(
        "nccl_tests_rank",
        r"^#?\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+on\s+(\S+)\s+device|uses device)"
        r"\s+(\d+)",
        _groups("rank", "host", "device", ints=("rank", "device")),
    ),
    E(
        "nccl_tests_row",
        r"^\s*(\d+)\s+(\d+)\s+(?:float|half|bfloat16|double|u?int(?:8|32|64)|fp8\w*|f8\w*)\s+"
        r"(\w+)\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)",
        _groups("bytes", "count", "op", "time_us", "algbw", "busbw", ints=("bytes", "count")),
        trigger=r"\d\s+(?:float|half|bfloat16|double|u?int(?:8|32|64)|fp8|f8)\w*\s+"
        r"(?:sum|prod|max|min|avg|none)\s",
    ),
    E("nccl_tests_avg", r"# Avg bus bandwidth\s*:\s*([\d.]+)", _groups("busbw")),
    E("last_error", r"^Last error:\s*(.*)$", _groups("reason"), after=1, trigger=r"Last error:"),
    # "file.cc:123 NCCL WARN msg"; older NCCL "file.h:344 WARN msg"; NCCL 1 "WARN file.cu:225 msg"
    E("nccl_warn", r"(?:NCCL WARN|^(?:\S+ )?[\w/.-]+\.(?:cc|cu|h):\d+ WARN|"
      r"^WARN [\w/.-]+\.(?:cc|cu|h):\d+) (.+)$", _groups("message"),
      trigger=r"NCCL WARN |\.(?:cc|cu|h):\d+ WARN |^WARN [\w/.-]+\.(?:cc|cu):\d"),
    E(
        "nccl_setup",
        # ring-order lines ("Channel 00/02 :    0   1"); the per-channel transport lines
        # ("Channel 00/0 : 0[0] -> 1[1] via P2P/IPC") are counted by `transport` instead
        r"NCCL INFO (?:Channel \d+/\d+ :\s+\d+ +\d|Trees \[|NVLS |\d+ coll channels|"
        r"Connected all (?:rings|trees)|Setting affinity for GPU)",
        _groups(),
    ),
    E("nvls", r"(NVLS (?:comm|Bind mem|multicast)|nvls channels|NVLS Chunksize)", _groups("what")),
    E(
        "p2p_test",
        r"(P2P \(Peer-to-Peer\) GPU Bandwidth Latency Test|CAN(?:NOT)? Access Peer Device|"
        r"P2P=(?:Enabled|Disabled) (?:Latency|Bandwidth))",
        _groups("what"),
    ),
    E(
        "nccl_version",
        r"NCCL version:? ?(\d+\.\d+\.\d+)(?:\+cuda([\d.]+))?",
        _groups("nccl", "cuda"),
        trigger=r"NCCL version:? ?\d",
    ),
    E("net_ib", r"NET/IB : Using (.+?)(?:; OOB (\S+))?$", _groups("devices", "oob"),
      trigger=r"NET/IB : Using "),
    E("net_socket", r"NET/Socket : Using (.+)$", _groups("interfaces"),
      trigger=r"NET/Socket : Using "),
    E("bootstrap_if", r"Bootstrap ?: Using (\S+)", _groups("interface"),
      trigger=r"Bootstrap ?: Using "),
    E("using_network", r"Using network (\w+)", _groups("network"), trigger=r"Using network "),
    E("transport", r"via (P2P/[\w/]+|SHM/[\w/]+|NET/[\w/]+)", _groups("transport")),
    # every line a rank wrote under a launcher's rank prefix (`srun -l`'s "3: "; torchrun's
    # "[rank3]:"), only counted: a rank that wrote nothing else still exists
    E("rank_prefix", r"^(?:\[rank)?(\d{1,6})(?:\]:|: )\S", _groups("rank", ints=("rank",))),
    E(
        "comm_init",
        r"comm 0x[0-9a-f]+ rank (\d+) nranks (\d+) cudaDev (\d+)(?: nvmlDev \d+)? busId (\w+)",
        _groups("rank", "nranks", "cuda_dev", "bus_id", ints=("rank", "nranks", "cuda_dev")),
        trigger=r" nranks \d+ cudaDev ",
    ),
    E(
        "nccl_env",
        r"\b((?:TORCH_)?NCCL_[A-Z0-9_]+) set by environment to (\S+)",
        _groups("name", "value"),
    ),
    E(
        "env_var",
        r"(?:^|[\s'\"])((?:TORCH_)?NCCL_[A-Z0-9_]+|TORCH_DISTRIBUTED_DEBUG|CUDA_VISIBLE_DEVICES|"
        r"MASTER_ADDR|MASTER_PORT|WORLD_SIZE)=([^\s'\"]+)",
        _groups("name", "value"),
    ),
    # --- CUDA, memory, exceptions, signals ------------------------------------------------
    E(
        "oom",
        r"(CUDA out of memory|OutOfMemoryError|Failed to CUDA calloc|cudaErrorMemoryAllocation|"
        r"out of memory \(|CUBLAS_STATUS_ALLOC_FAILED|[Cc][Uu][Dd][Aa] [Ee]rror: out of memory|"
        r"CUDA_ERROR_OUT_OF_MEMORY|CUresult error:? +(?:result=)?2\b|"
        r"RESOURCE_EXHAUSTED: Out of memory)",
        _groups("message"),
    ),
    E(
        "cuda_error",
        # "Cuda failure '...'" is NCCL's CUDACHECK; "CUDA failure file:line '...'" the nccl-tests
        # and sample-code form; "Cuda error file:line '...'" vLLM's custom all-reduce check
        r"(CUDA error: .+|Cuda failure '[^']+'|(?:CUDA|Cuda) (?:failure|error) \S+:\d+ '[^']+'|"
        r"cudaError\w+|illegal memory access|"
        r"CUBLAS_STATUS_\w+|device-side assert triggered)",
        _groups("message"),
    ),
    E("traceback", r"Traceback \(most recent call last\)"),
    E(
        "frame",
        r'File "([^"]+)", line (\d+), in (\S+)',
        _groups("file", "line", "func", ints=("line",)),
    ),
    E(
        "exception",
        r"(?:^|[\s:\]])((?:[a-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure))"
        r"(?:: (.*)|$)",
        _groups("type", "message"),
    ),
    E(
        "signal",
        r"(?:Signal (\d+) \((SIG[A-Z]+)\)|(SIGSEGV|SIGBUS|SIGKILL|SIGABRT|SIGTERM|SIGILL|SIGFPE)|"
        r"(Segmentation fault|Bus error|Killed process \d+|Out of memory: Killed))",
        lambda m: {"signal": m.group(2) or m.group(3) or m.group(4), "signo": _int(m.group(1))},
    ),
    E(
        "exit_code",
        r"(?:exit(?:ed with)? (?:code|status)[: ]+|returned non-zero exit status |exitcode\s*: |"
        r"exits with return code = )(-?\d+)\)?(?: \(pid: (\d+)\))?(?: local_rank: (\d+))?",
        _groups("code", "pid", "local_rank", ints=("code", "pid", "local_rank")),
    ),
    E(
        "sigterm_sent",
        r"Sending process (\d+) closing signal (SIG\w+)",
        _groups("pid", "signal", ints=("pid",)),
    ),
    # torchrun's agent waits at its exit barrier only once every worker of its node succeeded
    # (torch 2.13.0, torch/distributed/elastic/agent/server/api.py, `_invoke_run`: `if state ==
    # WorkerState.SUCCEEDED: logger.info("[%s] worker group successfully finished." " Waiting
    # %s seconds for other agents to finish.", ...); self._exit_barrier()`; `_exit_barrier`:
    # `logger.info("Local worker group finished (%s). " "Waiting %s seconds for other agents
    # to finish", ...)` and, when the other agents went away, `logger.exception("Error waiting
    # on exit barrier. Elapsed: %s seconds", ...)`): that node's ranks all exited with code 0.
    E(
        "exit_barrier",
        r"(Error waiting on exit barrier|worker group successfully finished|"
        r"Local worker group finished \(SUCCEEDED\))",
        _groups("message"),
    ),
    # An agent's keep-alive heartbeat to a rendezvous it had joined failed (torch 2.13.0,
    # torch/distributed/elastic/rendezvous/dynamic_rendezvous.py: `f"The node
    # '{self._this_node}' has failed to send a keep-alive heartbeat to the " f"rendezvous
    # '{self._settings.run_id}' due to an error of type {type(ex).__name__}."`; heartbeats
    # start only once the rendezvous completed, `self._start_heartbeats()` after the join):
    # the rendezvous had formed, so its store going away is the job ending.
    E(
        "rdzv_keepalive_failed",
        r"The node '([^']+)' has failed to send a keep-alive heartbeat to the rendezvous "
        r"'([^']+)'",
        _groups("node", "run_id"),
    ),
    # --- torchrun's failure summary ----------------------------------------------------------
    E(
        "child_failed",
        r"(ChildFailedError|Root Cause \(first observed failure\)|^Failures:)",
        _groups("marker"),
        trigger=r"ChildFailedError|Root Cause \(first observed failure\)|Failures:$",
    ),
    E(
        "summary_field",
        r"^(time|host|rank|exitcode|error_file|traceback)\s*: (.*)$",
        _groups("key", "value"),
        trigger=r"(?:time|host|rank|exitcode|error_file) +: \S",
    ),
    # --- network, rendezvous, launch ----------------------------------------------------------
    E(
        "clients_joined",
        r"Timed out after (\d+) seconds waiting for clients\. (\d+)/(\d+) clients joined",
        _groups("after_s", "joined", "expected", ints=("after_s", "joined", "expected")),
    ),
    E(
        "socket_timeout",
        r"client socket has timed out after (\d+)ms while trying to connect to \(([^,]+), (\d+)\)",
        _groups("after_ms", "addr", "port", ints=("after_ms", "port")),
    ),
    E(
        "ddp_init_rank",
        r"initializing (?:ddp|distributed): GLOBAL_RANK: (\d+), MEMBER: (\d+)/(\d+)",
        _groups("rank", "member", "world", ints=("rank", "member", "world")),
    ),
    E(
        "peer_died",
        r"(Horovod has been shut down\. This was caused by an exception on one of the ranks|"
        r"mpirun detected that one or more processes exited with non-zero status|"
        r"mpirun noticed that process rank \d+ .* exited on signal)",
        _groups("message"),
    ),
    # TORCH_DISTRIBUTED_DEBUG=DETAIL (and dist.monitored_barrier) on gloo: rank 0 names the ranks
    # that never reached the barrier. torch/csrc/distributed/c10d/ProcessGroupGloo.cpp,
    # monitoredBarrier: `"[Rank 0]: Rank ", work.first, " failed to pass monitoredBarrier in ",
    # monitoredBarrierTimeout.count(), " ms"` and, collecting all, `"Ranks ", ranksStr,
    # " failed to pass monitoredBarrier in ", ...` (torch 2.13 prints "[Rank 0]: Ranks 1 failed
    # to pass monitoredBarrier in 5000 ms"). The other side, `"Rank ", rank, " successfully
    # reached monitoredBarrier, but received errors while waiting for send/recv from rank 0.
    # Please check rank 0 logs for faulty rank."`, only says that rank 0 went away.
    E(
        "barrier_blame",
        r"Ranks? ((?:\d+, )*\d+) failed to pass monitoredBarrier in (\d+) ms",
        lambda m: {"ranks": [int(x) for x in m.group(1).split(", ")],
                   "timeout_ms": int(m.group(2))},
    ),
    # gloo cannot use the interface it was told to (GLOO_SOCKET_IFNAME), or the address its
    # host name resolves to: third_party/gloo/gloo/transport/tcp/device.cc,
    # `GLOO_ENFORCE(ifa != nullptr, "Unable to find address for: ", attr.iface)` and
    # `"Unable to find address for ", attr.hostname, "; bind(2) for ", bind_addr, " failed..."`
    E(
        "gloo_iface",
        r"Unable to find (?:address|interface) for:? (\S+?)(?:;|$|\s)",
        _groups("iface"),
    ),
    # TORCH_DISTRIBUTED_DEBUG=DETAIL: torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp,
    # `ss << "Detected mismatch between collectives on ranks. Rank " << backend->getRank()
    # << " is running collective: " << *this << ", but Rank " << rank << " is running
    # collective: " << rank_fingerprint << ".";` Each such line tells two ranks' collectives.
    E(
        "fingerprint",
        r"Rank (\d+) is running collective: CollectiveFingerPrint\((.*?)\), but Rank (\d+) is "
        r"running collective: CollectiveFingerPrint\((.*?)\)(?:\.|$|, )",
        lambda m: {"a": int(m.group(1)), "fp_a": _fp(m.group(2)), "b": int(m.group(3)),
                   "fp_b": _fp(m.group(4))},
        trigger=r"is running collective: CollectiveFingerPrint\(",
    ),
    E("launch_hosts", r"Running on the following workers: (\S+)", _groups("hosts")),
    E(
        "store_connect",
        r"client socket has failed to connect to (?:any network address of )?"
        r"(?:\(([^,()]+), (\d+)\)|\[([^\]]+)\]:(\d+)|([\w.-]+):(\d+))",
        lambda m: {"addr": m.group(1) or m.group(3) or m.group(5),
                   "port": _int(m.group(2) or m.group(4) or m.group(6))},
    ),
    # gloo's check that a message fits the receiving buffer (pytorch/gloo
    # gloo/transport/tcp/pair.cc, `GLOO_ENFORCE_LE(op.preamble.length, op.nbytes, "Received
    # data size doesn't match expected size. Is there a distributed collective mismatch in your
    # code?")`, printed by torch 2.13 as "[enforce fail at .../pair.cc:456] op.preamble.length
    # <= op.nbytes. 512 vs 256. Received data size ..."): received bytes vs the buffer's.
    E(
        "gloo_size",
        r"op\.preamble\.length <= op\.nbytes\. (\d+) vs (\d+)",
        _groups("received", "expected", ints=("received", "expected")),
    ),
    # A store wait that timed out names the keys it waited for: torch/csrc/distributed/c10d/
    # TCPStore.cpp (torch 2.13), `fmt::format("wait timeout after {}ms, keys: {}",
    # timeout.count(), fmt::join(keys, ", "))`. gloo's full-mesh connect publishes each rank's
    # address under the rank itself and waits for every peer's (pytorch/gloo
    # gloo/transport/tcp/context.cc, `store->set(std::to_string(rank), ...)` and
    # `store_->wait_get(std::to_string(rank), getTimeout())`), under torch's per-device prefix:
    # "keys: /default_pg/0//cpu//0/2" is rank 2's address, which never came.
    E(
        "store_wait",
        r"wait timeout after (\d+)ms, keys: (\S+)",
        lambda m: {"timeout_ms": int(m.group(1)), "key": m.group(2),
                   "key_rank": _gloo_key_rank(m.group(2))},
    ),
    E(
        "store_resolve",
        r"network addresses of \(([^,]+), (\d+)\) cannot be retrieved",
        _groups("addr", "port", ints=("port",)),
    ),
    E(
        "conn_error",
        r"(Connection refused|Connection reset by peer|No route to host|Network is unreachable|"
        r"Connection timed out|Broken pipe|Name or service not known|"
        r"Temporary failure in name resolution)",
        _groups("message"),
    ),
    E("addr_in_use", r"(Address already in use|EADDRINUSE)", _groups("message")),
    E(
        "rendezvous",
        # not a C++ stack frame ("frame #2: c10::DistNetworkError::DistNetworkError(...)")
        r"^(?!frame #\d)(?:.*?)(Rendezvous\w*Error|DistNetworkError|DistStoreError|"
        r"rendezvous .* (?:timed out|failed)|Timed out waiting for .* rendezvous)",
        _groups("message"),
        trigger=r"Rendezvous\w*Error|DistNetworkError|DistStoreError|rendezvous .* (?:timed out|"
        r"failed)|Timed out waiting for .* rendezvous",
    ),
    E(
        "ib_completion",
        # NCCL <= 2.20: "with error 12, opcode 0, len 0, vendor err 129" (older: no "from peer");
        # 2.21-2.28: "with status=12 opcode=0 len=0 vendor err 129";
        # >= 2.29: "with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129"
        # (src/transport/net_ib/p2p.cc, ncclIbLogCompletionWithError)
        r"Got completion (?:from peer (\S+) )?with (?:error |status=)(?:\w+\()?(\d+)\)?,? "
        r"opcode[ =](?:\w+\()?(\d+)\)?,?(?: len[ =](\d+),?)? vendor[ _]err[ =](\d+)",
        _groups(
            "peer",
            "status",
            "opcode",
            "len",
            "vendor_err",
            ints=("status", "opcode", "len", "vendor_err"),
        ),
    ),
    E(
        "duplicate_gpu",
        r"Duplicate GPU detected\s*: rank (\d+) and rank (\d+) both on CUDA device (\w+)",
        _groups("rank_a", "rank_b", "device", ints=("rank_a", "rank_b")),
    ),
    E(
        "shm",
        r"(/dev/shm|shared memory|unable to allocate shared memory|No space left on device)",
        _groups("message"),
    ),
    E(
        "gpu_process",
        r"^\|?\s+(\d+)\s+N/A\s+N/A\s+(\d+)\s+[CG](?:\+G)?\s+(.+?)\s+(\d+)MiB\s*\|",
        _groups("gpu", "pid", "name", "mib", ints=("gpu", "pid", "mib")),
    ),
    E(
        "topo_matrix",
        r"^\s*GPU(\d+)\s+((?:(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)\s+){2,})",
        _groups("gpu", "links", ints=("gpu",)),
    ),
    E("acs_enabled", r"ACSCtl:\s+SrcValid\+", _groups()),
    E(
        "lspci_gpu",
        r"(?:VGA compatible controller|3D controller)(?: \[\w+\])?: NVIDIA",
        _groups(),
    ),
    E(
        "xid",
        XID_LINE,  # the node tool's own (tools.xid.catalog)
        _groups("pci", "xid", "message", ints=("xid",)),
    ),
    # --- versions -----------------------------------------------------------------------------
    E(
        "torch_version",
        r"(?:PyTorch version|torch version|torch==)[: ]*(\d+\.\d+\.\d+[\w.+]*)",
        _groups("torch"),
        ignore_case=True,
    ),
    E(
        "driver_version",
        r"(?:Driver Version|driver version)[: ]+(\d+\.\d+(?:\.\d+)?)",
        _groups("driver"),
    ),
    E(
        "cuda_version",
        r"(?:CUDA Version|CUDA used to build PyTorch|CUDA runtime version)[: ]+(\d+\.\d+)",
        _groups("cuda"),
    ),
)

BY_KIND: dict[str, Extractor] = {e.kind: e for e in EXTRACTORS}

#: Exceptions that report a communication failure rather than cause one.
COMM_EXCEPTIONS = frozenset(
    {
        "DistBackendError",
        "DistNetworkError",
        "DistStoreError",
        "ChildFailedError",
        "RendezvousTimeoutError",
        "RendezvousClosedError",
        "RendezvousConnectionError",
        "NcclError",
        "ProcessGroupNCCL",
        "TimeoutError",
        "SignalException",
    }
)


#: a rank's error that only a process group that formed and ran collectives can raise: gloo's
#: transport losing a connected peer (third_party/gloo/gloo/transport/tcp/pair.cc: "Connection
#: closed by peer", "Read error"; unbound_buffer.cc: "Timed out waiting 5000ms for recv
#: operation to complete") or DETAIL's monitored barrier. A rendezvous or store error after
#: it is the job ending (the store's host left), not why it never started.
RAN_COLLECTIVES = re.compile(r"pair\.cc:\d+\] (?:Connection closed by peer|Read error)|"
                             r"Timed out waiting \d+ms for (?:recv|send) operation|"
                             r"monitoredBarrier")

#: gloo's words for a peer that went away (third_party/gloo/gloo/transport/tcp/pair.cc:
#: `"Connection closed by peer ", peerDescription(), ". This is typically caused by a remote
#: worker crashing."`, `"Read error ", peerDescription(), ": ", strerror(errno)`,
#: `"Socket closed ", peerDescription()`; unbound_buffer.cc: "Timed out waiting ...ms for recv
#: operation to complete"). Other gloo failures (an enforce on this rank's own interface or
#: data) are not a lost peer.
GLOO_PEER_LOST = ("connection closed by peer", "read error [", "socket closed [",
                  "timed out waiting", "connection reset by peer", "connection refused",
                  "broken pipe")


#: gloo gave up waiting for a peer to connect its pair (gloo/transport/tcp/pair.h, Pair::waitUntil,
#: pytorch/gloo 70dc360: `signalAndThrowException(GLOO_ERROR_MSG("Connect timeout ",
#: peer_.str()))`; torch wraps it as "Gloo connectFullMesh failed with [...pair.h:311] Connect
#: timeout [none]"): the rank was waiting for others at set-up, not failing on its own
GLOO_CONNECT_TIMEOUT = "connect timeout"


def is_comm_exception(etype: str, message: str) -> bool:
    """Whether an exception reports a communication failure (a timeout, a lost peer, the
    store) rather than causing one."""
    short = etype.rsplit(".", 1)[-1]
    if short in COMM_EXCEPTIONS:
        return True
    lowered = message.lower()
    return short == "RuntimeError" and (
        "nccl" in lowered or "timed out" in lowered or "watchdog" in lowered
        or any(p in lowered for p in GLOO_PEER_LOST)
        or "disagreement" in lowered or "mismatch between collectives" in lowered
        or "monitoredbarrier" in lowered  # a rank that saw another fail (ProcessGroupGloo.cpp)
        # DETAIL's wrapper could not even run its barrier: "ProcessGroupWrapper: Monitored
        # Barrier encountered error running collective: CollectiveFingerPrint(...). Error: "
        # followed by the peer's loss (torch 2.13, ProcessGroupWrapper.cpp)
        or "monitored barrier encountered error" in lowered
        or GLOO_CONNECT_TIMEOUT in lowered
    )

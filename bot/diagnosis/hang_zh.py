"""The node's own hang notes in Chinese (issue 25, one language; pure).

The node agent's `hang` diagnostic (tools/hang) writes its notes in English: `HangSample.notes`,
a rank's `stack_error` and `fr_note`, the node's `ras_note` and `gpu_note`. That is a wire
format other versions read, so it stays English; a Chinese answer translates it here, at
render time. One pattern per message the node writes (each f-string of tools/hang, quoted
beside its pattern; tests/hang/test_hang_zh.py fails when a new one has none). Numbers, paths
and commands are kept; what the node quotes from elsewhere (an OS error, py-spy's own words, a
RAS server's reply) stays in backticks. A note no pattern knows is shown in backticks, never
dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from bot.logs.crossrank import ZhTable


def _code(text: str) -> str:
    """Words the node quotes from elsewhere, as code (never prose in a Chinese sentence)."""
    text = text.strip().replace("`", "'")
    return f"`{text}`" if text else ""


def _job(name: str) -> str:
    """procs._name: `job ID (MASTER, WORLD_SIZE N)`, `job (no id)`, `no rendezvous`."""
    name = re.sub(r"^job ", "作业 ", name).replace("(no id)", "（无 ID）")
    return name.replace("no rendezvous", "无 rendezvous")


def _why(text: str) -> str:
    """A sub-message: in Chinese when it is one of the node's own, else as code."""
    zh = node_note_zh(text, fallback=False)
    return zh if zh is not None else _code(text)


_DEADLINE = "请求的截止时间先到了"
_Rule = tuple[str, Callable[[re.Match[str]], str]]

#: tools/hang/collect.py (stack_error, fr_note, ras_note, gpu_note, notes)
_COLLECT: tuple[_Rule, ...] = (
    # "not sampled: the request's deadline came first"
    (r"not sampled: the request's deadline came first", lambda m: f"未采样：{_DEADLINE}"),
    # "Flight Recorder not asked: the request's deadline came first"
    (r"Flight Recorder not asked: the request's deadline came first",
     lambda m: f"没有请求 Flight Recorder：{_DEADLINE}"),
    # f"its dump ({size} bytes) was dropped: the sample's {MAX_FR_BYTES // 2**20} MiB budget
    # for Flight Recorder dumps is spent"
    (r"its dump \((.+) bytes\) was dropped: the sample's (.+) MiB budget for Flight Recorder "
     r"dumps is spent",
     lambda m: f"它的 dump（{m[1]} 字节）被丢弃：本次采样给 Flight Recorder dump 的 {m[2]} MiB "
               "预算已用完"),
    # f"{exc} (no GPU sample)"
    (r"(.+) \(no GPU sample\)", lambda m: f"{_why(m[1])}（没有 GPU 采样）"),
    # "RAS not asked for"
    (r"RAS not asked for", lambda m: "没有查询 NCCL RAS（未指定 RAS 端口）"),
    # "NCCL RAS: not asked again, the request's deadline came first"
    (r"NCCL RAS: not asked again, the request's deadline came first",
     lambda m: f"NCCL RAS：没有再次查询，{_DEADLINE}"),
    # "NCCL RAS: no answer within the request's deadline"
    (r"NCCL RAS: no answer within the request's deadline",
     lambda m: "NCCL RAS：在请求的截止时间内没有回答"),
    # f"NCCL RAS: {exc}" (the RasUnavailableError messages below)
    (r"NCCL RAS: (.+)", lambda m: f"NCCL RAS：{_why(m[1])}"),
    # f"failed: {type(exc).__name__}: {str(exc)[:200]}"
    (r"failed: (\S+): (.*)", lambda m: f"失败：{m[1]}：{_code(m[2])}"),
    # f"its dump was dropped to keep the reply under {limit // 2**20} MiB"
    (r"its dump was dropped to keep the reply under (.+) MiB",
     lambda m: f"为使回复小于 {m[1]} MiB，它的 dump 被丢弃"),
    # f"only the main thread of each rank is sent, to keep the reply under {...} MiB"
    (r"only the main thread of each rank is sent, to keep the reply under (.+) MiB",
     lambda m: f"为使回复小于 {m[1]} MiB，每个 rank 只发送主线程的调用栈"),
    # f"not sampled within the request's deadline ({p.deadline_s:g} s); name fewer ranks
    # with --pids, or give a longer deadline"
    (r"not sampled within the request's deadline \((.+) s\); name fewer ranks with --pids, or "
     r"give a longer deadline",
     lambda m: f"在请求的截止时间（{m[1]} 秒）内未采样；用 --pids 指定更少的 rank，或用 "
               "--deadline 给更长的截止时间"),
    # "Flight Recorder not read within the request's deadline"
    (r"Flight Recorder not read within the request's deadline",
     lambda m: "在请求的截止时间内没有读到 Flight Recorder"),
    # "no GPU sample within the request's deadline"
    (r"no GPU sample within the request's deadline",
     lambda m: "在请求的截止时间内没有完成 GPU 采样"),
    # f"{late} of {len(procs)} ranks were not sampled and {late_fr} Flight Recorder dumps not
    # read within the request's deadline ({p.deadline_s:g} s)"
    (r"(.+) of (.+) ranks were not sampled and (.+) Flight Recorder dumps not read within the "
     r"request's deadline \((.+) s\)",
     lambda m: f"在请求的截止时间（{m[4]} 秒）内，{m[2]} 个 rank 中有 {m[1]} 个未采样，"
               f"{m[3]} 个 Flight Recorder dump 没有读到"),
    # "no rank of a distributed job found on this node (looked for processes with RANK and
    # LOCAL_RANK in their environment" + f", matching {p.pattern!r}" + f", of job {p.job}" + ")"
    (r"no rank of a distributed job found on this node \(looked for processes with RANK and "
     r"LOCAL_RANK in their environment(?:, matching (.+?))?(?:, of job (.+?))?\)",
     lambda m: "这个节点上没有找到分布式作业的 rank（查找的是环境变量中有 RANK 和 LOCAL_RANK 的进程"
               + (f"，命令行包含 {_code(m[1])}" if m[1] else "")
               + (f"，属于作业 {m[2]}" if m[2] else "") + "）"),
)

#: tools/hang/procs.py (notes)
_PROCS: tuple[_Rule, ...] = (
    # f"{len(workers)} child process(es) of ranks (data-loader workers) skipped"
    (r"(.+) child process\(es\) of ranks \(data-loader workers\) skipped",
     lambda m: f"跳过了 {m[1]} 个 rank 的子进程（data-loader worker）"),
    # f"pid(s) {...} (uid {one.uid}) claim {_name(one)} but were not started by its launcher
    # (pid {main}); not counted"
    (r"pid\(s\) (.+) \(uid (.+)\) claim (.+) but were not started by its launcher "
     r"\(pid (.+)\); not counted",
     lambda m: f"pid {m[1]}（uid {m[2]}）自称属于{_job(m[3])}，但不是由它的启动器（pid {m[4]}）"
               "启动的：不计入"),
    # f"pid {tp.pid} says RANK={tp.rank}, not below the WORLD_SIZE {size} of {_name(tp)};
    # not counted"
    (r"pid (.+) says RANK=(.+), not below the WORLD_SIZE (.+) of (.+); not counted",
     lambda m: f"pid {m[1]} 自称 RANK={m[2]}，但不小于{_job(m[4])}的 WORLD_SIZE {m[3]}：不计入"),
    # f"pid {tp.pid} says RANK={tp.rank} of {_name(tp)}, like pid {seen[tp.rank].pid}; the
    # second is not counted"
    (r"pid (.+) says RANK=(.+) of (.+), like pid (.+); the second is not counted",
     lambda m: f"pid {m[1]} 自称{_job(m[3])}的 RANK={m[2]}，与 pid {m[4]} 相同：后者不计入"),
    # f"{claimed} processes claim to be ranks of {_name(first)}, more than its WORLD_SIZE
    # {size}: only {len(seen)} counted"
    (r"(.+) processes claim to be ranks of (.+), more than its WORLD_SIZE (.+): only (.+) "
     r"counted",
     lambda m: f"{m[1]} 个进程自称{_job(m[2])}的 rank，多于其 WORLD_SIZE {m[3]}：只计入 {m[4]} 个"),
    # f"pid {pid}: not a rank of a distributed job (no RANK and LOCAL_RANK in its
    # environment), or gone; skipped"
    (r"pid (.+): not a rank of a distributed job \(no RANK and LOCAL_RANK in its environment\), "
     r"or gone; skipped",
     lambda m: f"pid {m[1]}：不是分布式作业的 rank（环境变量中没有 RANK 和 LOCAL_RANK），"
               "或已退出：跳过"),
    # f"stopped at {MAX_PROCESSES} processes"
    (r"stopped at (.+) processes", lambda m: f"达到 {m[1]} 个进程的上限，停止查找"),
)

#: tools/hang/stacks.py (stack_error) and tools/runner.py's reasons a command did not run
_STACKS: tuple[_Rule, ...] = (
    # "py-spy is not installed on this node (pip install py-spy); it reads a process's
    # Python stacks"
    (r"py-spy is not installed on this node \(pip install py-spy\); it reads a process's "
     r"Python stacks",
     lambda m: "这个节点上没有安装 py-spy（`pip install py-spy`）；读取进程的 Python 调用栈需要它"),
    # f"py-spy dump --pid {pid}: unreadable output ({exc})"
    (r"py-spy dump --pid (.+): unreadable output \((.*)\)",
     lambda m: f"`py-spy dump --pid {m[1]}`：输出无法解析（{_code(m[2])}）"),
    # why += " (py-spy needs root or CAP_SYS_PTRACE to read another process; in a container
    # add --cap-add SYS_PTRACE)"
    (r"(.*) \(py-spy needs root or CAP_SYS_PTRACE to read another process; in a container add "
     r"--cap-add SYS_PTRACE\)",
     lambda m: f"{_why(m[1])}（py-spy 需要 root 或 CAP_SYS_PTRACE 才能读取其他进程；容器中请加 "
               "`--cap-add SYS_PTRACE`）"),
    # f"py-spy dump --pid {pid}: {why[:400]}"
    (r"py-spy dump --pid (.+?): (.+)", lambda m: f"`py-spy dump --pid {m[1]}`：{_why(m[2])}"),
    # tools/runner.py: f"timed out after {timeout:g} s", f"command not found: {args[0]}",
    # f"permission denied: {exc}", f"exit code {out.returncode}" (stacks.py)
    (r"timed out after (.+) s", lambda m: f"{m[1]} 秒后超时"),
    (r"command not found: (.+)", lambda m: f"找不到命令 {_code(m[1])}"),
    (r"permission denied: (.+)", lambda m: f"权限不足：{_code(m[1])}"),
    (r"exit code (.+)", lambda m: f"退出码 {m[1]}"),
    # f"could not run {args[0]}: {exc}"
    (r"could not run (.+?): (.*)", lambda m: f"无法运行 {_code(m[1])}：{_code(m[2])}"),
)

#: tools/hang/pipe.py and tools/hang/reader.py (fr_note)
_PIPE: tuple[_Rule, ...] = (
    # "no TORCH_NCCL_DEBUG_INFO_PIPE_FILE in its environment (set it, with
    # TORCH_NCCL_TRACE_BUFFER_SIZE=2000, to ask a live rank for its Flight Recorder)"
    (r"no TORCH_NCCL_DEBUG_INFO_PIPE_FILE in its environment \(set it, with "
     r"TORCH_NCCL_TRACE_BUFFER_SIZE=(.+), to ask a live rank for its Flight Recorder\)",
     lambda m: "它的环境变量中没有 TORCH_NCCL_DEBUG_INFO_PIPE_FILE（设置它，并设置 "
               f"TORCH_NCCL_TRACE_BUFFER_SIZE={m[1]}，才能向运行中的 rank 要 Flight Recorder）"),
    # "its Flight Recorder buffer is off (TORCH_NCCL_TRACE_BUFFER_SIZE is 0 or unset)"
    (r"its Flight Recorder buffer is off \(TORCH_NCCL_TRACE_BUFFER_SIZE is 0 or unset\)",
     lambda m: "它的 Flight Recorder 缓冲区是关闭的（TORCH_NCCL_TRACE_BUFFER_SIZE 为 0 或未设置）"),
    # "its rank is unknown"
    (r"its rank is unknown", lambda m: "它的 rank 未知"),
    # "its pipe or dump path is not an absolute path without '..'; not used"
    (r"its pipe or dump path is not an absolute path without '\.\.'; not used",
     lambda m: "它的管道或 dump 路径不是不含 `..` 的绝对路径：不使用"),
    # "its owner is unknown (no /proc/PID/status); its files are not read"
    (r"its owner is unknown \(no /proc/PID/status\); its files are not read",
     lambda m: "它的属主未知（没有 /proc/PID/status）：不读取它的文件"),
    # "the sample's Flight Recorder byte budget is spent; not asked"
    (r"the sample's Flight Recorder byte budget is spent; not asked",
     lambda m: "本次采样的 Flight Recorder 字节预算已用完：没有请求"),
    # f"cannot enter the rank's root directory: {exc.strerror}"
    (r"cannot enter the rank's root directory: (.*)",
     lambda m: f"无法进入该 rank 的根目录：{_code(m[1])}"),
    # f"cannot start the dump reader: {exc.strerror or exc}"
    (r"cannot start the dump reader: (.*)", lambda m: f"无法启动 dump 读取进程：{_code(m[1])}"),
    # "the dump reader ran out of time; killed"
    (r"the dump reader ran out of time; killed", lambda m: "dump 读取进程超时：已终止"),
    # "the dump reader sent more than its budget; dropped"
    (r"the dump reader sent more than its budget; dropped",
     lambda m: "dump 读取进程发送的数据超出预算：已丢弃"),
    # "the dump reader gave no answer"
    (r"the dump reader gave no answer", lambda m: "dump 读取进程没有回答"),
    # "the dump reader's answer was cut short; dropped"
    (r"the dump reader's answer was cut short; dropped",
     lambda m: "dump 读取进程的回答不完整：已丢弃"),
    # "no dump" (the reader's note when it gave none)
    (r"no dump", lambda m: "没有 dump"),
    # reader.py: f"{name} is (or lies under) a symbolic link; not followed"
    (r"(.+) is \(or lies under\) a symbolic link; not followed",
     lambda m: f"{m[1]} 是（或位于）符号链接：不跟随"),
    # f"{name} resolves outside the rank's root; not used"
    (r"(.+) resolves outside the rank's root; not used",
     lambda m: f"{m[1]} 指向该 rank 的根目录之外：不使用"),
    # f"cannot open {name}: {exc.strerror}"
    (r"cannot open (.+?): (.*)", lambda m: f"无法打开 {m[1]}：{_code(m[2])}"),
    # f"{name} is not a {'named pipe' if kind == 'fifo' else 'regular file'}; not used"
    (r"(.+) is not a (.+); not used",
     lambda m: f"{m[1]} 不是{'命名管道' if m[2] == 'named pipe' else '普通文件'}：不使用"),
    # f"{name} belongs to uid {st.st_uid}, not to the rank's uid {uid}; not used"
    (r"(.+) belongs to uid (.+), not to the rank's uid (.+); not used",
     lambda m: f"{m[1]} 属于 uid {m[2]}，而不是该 rank 的 uid {m[3]}：不使用"),
    # f"{name} does not exist (the rank has not made its debug pipe)"
    (r"(.+) does not exist \(the rank has not made its debug pipe\)",
     lambda m: f"{m[1]} 不存在（该 rank 没有创建它的调试管道）"),
    # f"nobody reads {name} (the rank's process group is gone?)"
    (r"nobody reads (.+) \(the rank's process group is gone\?\)",
     lambda m: f"没有进程在读 {m[1]}（该 rank 的进程组可能已不存在）"),
    # f"{name} was replaced while it was opened; not written to"
    (r"(.+) was replaced while it was opened; not written to",
     lambda m: f"{m[1]} 在打开时被替换：没有写入"),
    # f"{name} is full (the rank does not read its debug pipe); no dump asked"
    (r"(.+) is full \(the rank does not read its debug pipe\); no dump asked",
     lambda m: f"{m[1]} 已满（该 rank 没有读取它的调试管道）：没有请求 dump"),
    # f"no dump at {name} in time after writing to its pipe (the rank's watchdog may be
    # stuck too)"
    (r"no dump at (.+) in time after writing to its pipe \(the rank's watchdog may be stuck "
     r"too\)",
     lambda m: f"写入管道后没有及时在 {m[1]} 得到 dump（该 rank 的 watchdog 可能也卡住了）"),
    # f"{name} has {st.st_size} bytes, over the {max_bytes}-byte budget for one dump; dropped"
    (r"(.+) has (.+) bytes, over the (.+)-byte budget for one dump; dropped",
     lambda m: f"{m[1]} 有 {m[2]} 字节，超过单个 dump 的 {m[3]} 字节预算：已丢弃"),
    # f"{name} grew over the {max_bytes}-byte budget for one dump; dropped"
    (r"(.+) grew over the (.+)-byte budget for one dump; dropped",
     lambda m: f"{m[1]} 增长超过单个 dump 的 {m[2]} 字节预算：已丢弃"),
    # f"reading the dump failed: {exc.strerror or exc}"
    (r"reading the dump failed: (.*)", lambda m: f"读取 dump 失败：{_code(m[1])}"),
)

#: tools/hang/ras.py (RasUnavailableError, RasRefusedError: after "NCCL RAS: ")
_RAS: tuple[_Rule, ...] = (
    # f"NCCL RAS not listening on {where}; RAS needs NCCL >= 2.24 and NCCL_RAS_ENABLE not 0,
    # and listens where NCCL_RAS_ADDR says (localhost:28028 by default, on a node running
    # the job)"
    (r"NCCL RAS not listening on (.+?); RAS needs NCCL >= (.+) and NCCL_RAS_ENABLE not 0, and "
     r"listens where NCCL_RAS_ADDR says \((.+) by default, on a node running the job\)",
     lambda m: f"{m[1]} 上没有 NCCL RAS 在监听；RAS 需要 NCCL >= {m[2]} 且 NCCL_RAS_ENABLE 不为 0，"
               f"并监听 NCCL_RAS_ADDR 指定的地址（默认是运行作业的节点上的 {m[3]}）"),
    # f"connecting to NCCL RAS on {where} timed out"
    (r"connecting to NCCL RAS on (.+) timed out", lambda m: f"连接 {m[1]} 上的 NCCL RAS 超时"),
    # f"cannot connect to NCCL RAS on {where}: {e}"
    (r"cannot connect to NCCL RAS on (.+?): (.*)",
     lambda m: f"无法连接 {m[1]} 上的 NCCL RAS：{_code(m[2])}"),
    # f"NCCL RAS on {where} did not answer in time ({timeout_s:g} s a reply,
    # {secs + EXTRA_WAIT_S:g} s the report): a stuck RAS thread, or not RAS"
    (r"NCCL RAS on (.+) did not answer in time \((.+) s a reply, (.+) s the report\): a stuck "
     r"RAS thread, or not RAS",
     lambda m: f"{m[1]} 上的 NCCL RAS 没有及时回答（每个回复 {m[2]} 秒，报告 {m[3]} 秒）："
               "RAS 线程卡住了，或者那不是 RAS"),
    # f"talking to NCCL RAS on {where} failed: {e}"
    (r"talking to NCCL RAS on (.+?) failed: (.*)",
     lambda m: f"与 {m[1]} 上的 NCCL RAS 通信失败：{_code(m[2])}"),
    # f"NCCL RAS on {self.where} closed the connection after {line!r}"
    (r"NCCL RAS on (.+) closed the connection after (.+)",
     lambda m: f"{m[1]} 上的 NCCL RAS 在 {_code(m[2])} 之后关闭了连接"),
    # f"{conn.where} does not speak the NCCL RAS protocol (answered {reply[:80]!r})"
    (r"(.+) does not speak the NCCL RAS protocol \(answered (.*)\)",
     lambda m: f"{m[1]} 不使用 NCCL RAS 协议（回答 {_code(m[2])}）"),
    # f"NCCL RAS on {conn.where} refused TIMEOUT {secs}: {reply!r}"
    (r"NCCL RAS on (.+) refused TIMEOUT (.+?): (.*)",
     lambda m: f"{m[1]} 上的 NCCL RAS 拒绝了 `TIMEOUT {m[2]}`：{_code(m[3])}"),
    # f"NCCL RAS on {conn.where} answered SET FORMAT with {reply!r}"
    (r"NCCL RAS on (.+) answered SET FORMAT with (.*)",
     lambda m: f"{m[1]} 上的 NCCL RAS 对 `SET FORMAT` 回答了 {_code(m[2])}"),
    # f"NCCL RAS on {conn.where} has no JSON output (it needs NCCL >= 2.28.7); poll with
    # fmt='text' or 'auto'"
    (r"NCCL RAS on (.+) has no JSON output \(it needs NCCL >= (.+)\); poll with fmt='text' or "
     r"'auto'",
     lambda m: f"{m[1]} 上的 NCCL RAS 没有 JSON 输出（需要 NCCL >= {m[2]}）；用 `fmt='text'` 或 "
               "`fmt='auto'` 查询"),
    # f"not querying NCCL RAS on {conn.where}: it predates NCCL 2.28.7 (no SET FORMAT) and
    # does not say its version before the report, and some of those releases crash when
    # queried: " + ... + ". Pass nccl_version (the job's 'NCCL version' log line) or force=True."
    (r"not querying NCCL RAS on (.+?): it predates NCCL (.+?) \(no SET FORMAT\) and does not "
     r"say its version before the report, and some of those releases crash when queried: "
     r"(.*)\. Pass nccl_version \(the job's 'NCCL version' log line\) or force=True\.",
     lambda m: f"不查询 {m[1]} 上的 NCCL RAS：它早于 NCCL {m[2]}（没有 `SET FORMAT`），在报告之前"
               f"不说明自己的版本，而其中一些版本被查询时会崩溃：{_code(m[3])}。请给出 "
               "nccl_version（作业日志中的 `NCCL version` 行）或 `force=True`"),
    # f"NCCL RAS on {conn.where} closed without a report"
    (r"NCCL RAS on (.+) closed without a report",
     lambda m: f"{m[1]} 上的 NCCL RAS 没有给出报告就关闭了连接"),
    # f"the RAS answer is not complete JSON ({e}; {len(raw)} bytes, starting {raw[:60]!r});
    # the connection may have been cut"
    (r"the RAS answer is not complete JSON \((.*); (.+) bytes, starting (.*)\); the connection "
     r"may have been cut",
     lambda m: f"RAS 的回答不是完整的 JSON（{_code(m[1])}；{m[2]} 字节，开头是 {_code(m[3])}）："
               "连接可能被切断了"),
    # f"the RAS answer is JSON but not a RAS report: {raw[:80]!r}"
    (r"the RAS answer is JSON but not a RAS report: (.*)",
     lambda m: f"RAS 的回答是 JSON，但不是 RAS 报告：{_code(m[1])}"),
    # f"the RAS answer is not a RAS report: {raw[:80]!r}"
    (r"the RAS answer is not a RAS report: (.*)",
     lambda m: f"RAS 的回答不是 RAS 报告：{_code(m[1])}"),
    # refusal(): f"not querying NCCL RAS: NCCL {version}: " + "; ".join(...) + ". Upgrade
    # NCCL, or pass force=True to query anyway."
    (r"not querying NCCL RAS: NCCL (.+?): (.*)\. Upgrade NCCL, or pass force=True to query "
     r"anyway\.",
     lambda m: f"不查询 NCCL RAS：NCCL {m[1]}：{_code(m[2])}。请升级 NCCL，或用 `force=True` "
               "强行查询"),
)

#: tools/nvml.py (NvmlUnavailableError, before " (no GPU sample)")
_NVML: tuple[_Rule, ...] = (
    # f"NVML not available: nvidia-ml-py is not installed ({exc})"
    (r"NVML not available: nvidia-ml-py is not installed \((.*)\)",
     lambda m: f"NVML 不可用：没有安装 nvidia-ml-py（{_code(m[1])}）"),
    # f"NVML not available: {exc}"
    (r"NVML not available: (.*)", lambda m: f"NVML 不可用：{_code(m[1])}"),
)

#: bot/logs (flight_recorder.py, fr_sandbox.py, fr_scan.py): why the bot could not use a
#: rank's dump, inside triangulate's "{host} rank {rank}: Flight Recorder dump not used (...)"
_DUMPS: tuple[_Rule, ...] = (
    # fr_scan.py (the name put before it): f"not a readable Flight Recorder dump (truncated or
    # not one: {str(exc)[:120]}); copy the rank's dump again", "... (truncated or not one: the
    # pickle does not end); copy the rank's dump again"
    (r"(.+): not a readable Flight Recorder dump \(truncated or not one: (.+)\); copy the "
     r"rank's dump again",
     lambda m: f"{m[1]}：不是可读的 Flight Recorder dump（被截断或不是 dump：{_code(m[2])}）；"
               "请重新复制该 rank 的 dump"),
    # flight_recorder.py: f"{name}: not a readable Flight Recorder dump (truncated or not one:
    # {type(exc).__name__})"; fr_sandbox.py: f"{name}: not a readable Flight Recorder dump
    # ({type(exc).__name__})"
    (r"(.+): not a readable Flight Recorder dump \((?:truncated or not one: )?(.+)\)",
     lambda m: f"{m[1]}：不是可读的 Flight Recorder dump（被截断或不是 dump：{m[2]}）"),
    # fr_sandbox.py: f"{name}: not read: it needs more memory than a dump may use; a real
    # Flight Recorder dump fits, so this file is crafted or broken"
    (r"(.+): not read: it needs more memory than a dump may use; a real Flight Recorder dump "
     r"fits, so this file is crafted or broken",
     lambda m: f"{m[1]}：没有读取：它需要的内存超过 dump 允许的用量；真正的 Flight Recorder dump "
               "不会这样，所以这个文件是伪造或损坏的"),
    # f"{name}: not a Flight Recorder dump (no 'entries' list)"
    (r"(.+): not a Flight Recorder dump \(no 'entries' list\)",
     lambda m: f"{m[1]}：不是 Flight Recorder dump（没有 `entries` 列表）"),
    # f"{name}: {len(data)} bytes, over the {MAX_DUMP_BYTES} bytes a dump may have"
    (r"(.+): (.+) bytes, over the (.+) bytes a dump may have",
     lambda m: f"{m[1]}：{m[2]} 字节，超过 dump 允许的 {m[3]} 字节"),
    # f"refused: {why} (crafted or damaged, nothing in it was run; get the rank's own dump)";
    # flight_recorder.py: f"refused: the dump references {module}.{name} (crafted or damaged,
    # nothing in it was run; get the rank's own dump)"
    (r"(?:(.+?): )?refused: (.+) \(crafted or damaged, nothing in it was run; get the rank's "
     r"own dump\)",
     lambda m: (f"{m[1]}：" if m[1] else "") + f"拒绝读取：{_code(m[2])}（伪造或损坏的 dump，"
               "其中的内容没有被执行；请取得该 rank 自己的 dump）"),
    # fr_sandbox.py: f"{item.name}: not readable ({exc.strerror or exc})"
    (r"(.+): not readable \((.*)\)", lambda m: f"{m[1]}：无法读取（{_code(m[2])}）"),
    # f"{item.name}: not read (no dump reader took it)", f"{name}: not read (the dump reader
    # could not start: {exc})", f"{name}: not read (the dump reader answered nonsense: ...)",
    # f"{name}: not read: {self._why_dead(wall)}"
    (r"(.+): not read \(no dump reader took it\)",
     lambda m: f"{m[1]}：没有读取（没有 dump 读取进程接手）"),
    (r"(.+): not read(?::| \()(.*?)\)?", lambda m: f"{m[1]}：没有读取（{_code(m[2])}）"),
)

#: every message the node's hang diagnostic writes, whole-string patterns, most specific first
NODE_NOTES: ZhTable = tuple(
    (re.compile(p + r"\Z", re.DOTALL), f)
    for p, f in (*_PIPE, *_COLLECT, *_PROCS, *_STACKS, *_RAS, *_NVML, *_DUMPS))

#: a note the bot prefixed with the node's name: f"{s.host}: {note}" (bot/diagnosis/hang.py)
_HOST = re.compile(r"([^\s:`]+): (.+)\Z", re.DOTALL)


def node_note_zh(note: str, fallback: bool = True) -> str | None:
    """One of the node's notes in Chinese, with or without the `host: ` the bot puts before
    it; one no pattern knows in backticks (`fallback`), or None when not `fallback`."""
    for rx, zh in NODE_NOTES:
        if (m := rx.match(note)) is not None:
            return zh(m)
    if (h := _HOST.match(note)) is not None:
        inner = node_note_zh(h[2], fallback=False)
        if inner is not None:
            return f"{h[1]}：{inner}"
    return _code(note) if fallback else None

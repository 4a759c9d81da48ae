"""The reasons behind a root cause, in Chinese: one table for every reason the diagnosis
writes (pure).

The rules (`rules.py`, `hang.py`), the question's channel (`bot.answering.ask`), answered
deciding questions (`facts.py`) and the engine write their reasons in English, where they
are tested and matched on. Each has one `Wording` here: the English as written, with
`{name}` for what varies, and its Chinese. Numbers, rank ids, env names and code stay as
they are; a placeholder whose name is in `CONVERT` is translated too (a cross-rank reason
the rule quotes, an Xid's name, a deciding question). A reason with no entry stays English;
`tests/answers/test_zh_wording.py` checks that every reason in the rules' source has one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

from bot.logs.crossrank import KILLED_OUTSIDE, reason_in

#: Placeholders whose value may itself hold "; " (the parts the engine joins reasons with
#: are otherwise never inside one value).
SPANS_PARTS = frozenset({"channels"})


@dataclass(frozen=True)
class Wording:
    """One reason: `en` as the code writes it (`{name}` where a value goes), `zh` its
    Chinese with the same names."""

    en: str
    zh: str
    rx: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts = re.split(r"\{(\w+)\}", self.en)
        pattern = "".join(re.escape(p) if i % 2 == 0 else
                          f"(?P<{p}>.+?)" if p in SPANS_PARTS else f"(?P<{p}>(?:(?!; ).)+?)"
                          for i, p in enumerate(parts))
        object.__setattr__(self, "rx", re.compile(f"^{pattern}$", re.DOTALL))

    def render(self, m: re.Match[str]) -> str:
        values = {k: CONVERT.get(k, _same)(v) for k, v in m.groupdict().items()}
        return self.zh.format(**values)


def _same(value: str) -> str:
    return value


def _xid(name: str) -> str:
    """`Xid 79 (GPU has fallen off the bus)` as `Xid 79（GPU_HAS_FALLEN_OFF_THE_BUS）`: the
    catalogue's mnemonic, NVIDIA's identifier, instead of its English name."""
    from tools.xid.catalog import explain

    m = re.match(r"^Xid (\d+)", name)
    info = explain(int(m[1])) if m else None
    return f"Xid {info.code}（{info.mnemonic}）" if info is not None and "(" in name else name


@cache
def _questions() -> dict[str, str]:
    from bot.knowledge.taxonomy import load_questions

    return {q.en: q.zh for q in load_questions()}


def _question(en: str) -> str:
    return _questions().get(en, en)


def _answer(value: str) -> str:
    return {"yes": "是", "no": "否"}.get(value, value)


def _channels(text: str) -> str:
    """Retrieval channels' reasons (`bm25 #1: terms a, b`), their one English word said."""
    return text.replace(": terms ", "：关键词 ")


#: Placeholders whose value is itself English to translate.
def _outside(value: str) -> str:
    """`crossrank.KILLED_OUTSIDE`, the phrase a rule quotes, in Chinese."""
    return "，来自启动器之外（被抢占或被杀死）" if value == KILLED_OUTSIDE else value


CONVERT: dict[str, Callable[[str], str]] = {
    "why": lambda v: reason_in(v, "zh"), "xid": _xid, "question": _question,
    "answer": _answer, "channels": _channels, "outside": _outside,
}

#: Every reason, most specific first (the first match wins).
REASONS: tuple[Wording, ...] = tuple(Wording(en, zh) for en, zh in (
    # the engine (engine.py)
    ("matched signature '{sig}' of card {card}", "匹配了卡片 {card} 的特征“{sig}”"),
    ("seen before by this team: {id} (similarity {score})",
     "本团队以前遇到过：{id}（相似度 {score}）"),
    ("resembles {n} past incident(s), closest {url} (similarity {score})",
     "与 {n} 个过去的事件相似，最接近的是 {url}（相似度 {score}）"),
    ("reads like card {card} (similarity {score})", "读起来像卡片 {card}（相似度 {score}）"),
    # answered deciding questions (facts.py)
    ("you answered '{question}': {answer}", "你对“{question}”的回答：{answer}"),
    # the question's channel (bot/answering/ask.py)
    ("the question matches card {card} ({channels})", "问题与卡片 {card} 相符（{channels}）"),
    ("the question resembles past incidents of this cause (closest {url})",
     "问题与这一原因的过去事件相似（最接近的是 {url}）"),
    ("the question resembles past incidents of this cause", "问题与这一原因的过去事件相似"),
    # crash_rule
    ("out of memory in a colocated rollout engine's memory pool (vLLM sleep/wake_up, SGLang "
     "memory saver)", "共置的 rollout 引擎的显存池显存溢出（vLLM sleep/wake_up、SGLang "
     "memory_saver）"),
    ("a rank ran out of GPU memory", "某个 rank 显存溢出"),
    ("CUDA out of memory on a rank", "某个 rank 显存溢出（“CUDA out of memory”）"),
    ("a rank was killed (SIGKILL / exit -9 or 137: often the host OOM killer)",
     "某个 rank 被杀死（SIGKILL / 退出码 -9 或 137：通常是主机的 OOM killer）"),
    ("a rank crashed with a signal (SIGSEGV and the like)", "某个 rank 因信号崩溃（SIGSEGV 之类）"),
    ("the launcher or Horovod reports that another rank failed first",
     "启动器或 Horovod 报告另一个 rank 先失败了"),
    ("a process died of SIGBUS (bus error): shared memory (/dev/shm) ran out",
     "某个进程死于 SIGBUS（“bus error”）：共享内存（/dev/shm）耗尽"),
    ("a rank died of SIGBUS", "某个 rank 死于 SIGBUS"),
    ("rank {r} was ended by a signal (exitcode {code}) {outside}: torchrun never sent it one, "
     "and the other ranks failed after it",
     "rank {r} 被信号终止（退出码 {code}）{outside}：torchrun 从未向它发送信号，其他 rank 在它"
     "之后才失败"),
    ("every worker on {host} exited with code 0 (its torchrun agent waited at the exit "
     "barrier) while the other ranks lost or waited for them: they left the job early",
     "{host} 上的所有 worker 都以退出码 0 退出（其 torchrun agent 在 exit barrier 处等待），"
     "而其他 rank 失去了它们或在等它们：它们提前离开了作业"),
    ("torchrun's one failure is a rank that lost a peer, and no other worker was left to "
     "stop: the others had exited with code 0, leaving the job early",
     "torchrun 记录的唯一失败是一个失去了对端的 rank，且没有其他 worker 需要停止：其他 rank 已"
     "以退出码 0 退出，提前离开了作业"),
    ("a rank that exits cleanly while the others still run collectives took another code "
     "path (fewer steps)", "一个在其他 rank 仍在做集合通信时正常退出的 rank 走了另一条代码路径"
     "（步数更少）"),
    ("the ranks on {host} may have taken another code path (fewer steps) and finished early",
     "{host} 上的 rank 可能走了另一条代码路径（步数更少），因而提前结束"),
    ("{type} raised while other ranks timed out", "其他 rank 超时的同时抛出了 {type}"),
    ("torchrun recorded rank {rank} on {host} as the first failure (exitcode {code})",
     "torchrun 把 {host} 上的 rank {rank} 记为第一个失败（退出码 {code}）"),
    # vanished_rule
    ("rank(s) {ranks} waited in another collective call than the other ranks: a code path "
     "only some ranks take", "rank {ranks} 等待的集合通信调用与其他 rank 不同：只有部分 rank "
     "会走的代码路径"),
    ("rank {rank} did not reach the collective in time while the others waited for it",
     "rank {rank} 没有及时到达集合通信，其他 rank 一直在等它"),
    ("rank {rank} may have been busy with a long step of its own",
     "rank {rank} 可能在忙自己的一个耗时步骤"),
    ("rank {rank} left the job while a collective of another size was detected",
     "检测到大小不同的集合通信时，rank {rank} 离开了作业"),
    ("rank {rank} left the job without an error of its own (it exited early, even cleanly, or "
     "was killed): the others lost its connection", "rank {rank} 没有报自己的错误就离开了作业"
     "（提前退出，甚至正常退出，或被杀死）：其他 rank 失去了与它的连接"),
    ("rank {rank} left the job without an error of its own",
     "rank {rank} 没有报自己的错误就离开了作业"),
    ("rank {rank} may have taken another code path (fewer steps) and finished early",
     "rank {rank} 可能走了另一条代码路径（步数更少）并提前结束"),
    # mismatch_rule
    ("the framework detected that ranks issued different collectives (or different sizes)",
     "框架检测到各 rank 发起了不同的集合通信（或大小不同）"),
    # timeout_rule
    ("the other ranks timed out but rank 0 did not: it was busy with work of its own (save, "
     "eval, preprocessing)", "其他 rank 超时了而 rank 0 没有：它在忙自己的工作（保存、评估、"
     "预处理）"),
    ("rank 0 fell behind the others", "rank 0 落后于其他 rank"),
    ("rank 0 never reported the timeout: it may have died (look for its traceback)",
     "rank 0 始终没有报告超时：它可能已退出（找它的 Traceback）"),
    ("the log shows a long step (save, eval, preprocessing) around the timeout",
     "日志显示超时前后有一个耗时很长的步骤（保存、评估、预处理）"),
    ("ranks ran different collectives at SeqNum={seq}",
     "各 rank 在 SeqNum={seq} 处执行了不同的集合通信"),
    ("rank(s) {ranks} lag behind the others", "rank {ranks} 落后于其他 rank"),
    ("silent rank(s) {ranks} may have died", "没有报告超时的 rank {ranks} 可能已退出"),
    ("a lagging rank may be in a different code path", "落后的 rank 可能走了另一条代码路径"),
    ("collective timed out waiting for other ranks", "集合通信在等待其他 rank 时超时"),
    ("a long step on some ranks may exceed the timeout",
     "某些 rank 上耗时很长的步骤可能超过了超时时间"),
    ("ranks may have issued different collectives", "各 rank 可能发起了不同的集合通信"),
    ("the process-group timeout is only {s} s", "进程组超时只有 {s} 秒"),
    ("a one-element ALLREDUCE/BARRIER timed out: a barrier or metric sync issued on some ranks "
     "only", "只有一个元素的 ALLREDUCE/BARRIER 超时：只在部分 rank 上调用的 barrier 或"
     "指标同步"),
    ("a one-element ALLREDUCE/BARRIER timed out: ranks waited at a barrier for a rank still "
     "working", "只有一个元素的 ALLREDUCE/BARRIER 超时：各 rank 在 barrier 处等一个仍在"
     "工作的 rank"),
    # launch_rule
    ("gloo found no address for the network interface {iface} (GLOO_SOCKET_IFNAME names an "
     "interface this host does not have)", "gloo 找不到网卡 {iface} 的地址（GLOO_SOCKET_IFNAME "
     "指定了本机没有的网卡）"),
    ("only {joined}/{expected} processes joined the store",
     "只有 {joined}/{expected} 个进程加入了 store"),
    ("could not connect to the store at {where}", "无法连接 {where} 上的 store"),
    ("a rank waited out the store for rank {rank}'s address: the process group never formed "
     "(that rank never joined this store, or the waiting rank expects more ranks than the job "
     "has)", "某个 rank 在 store 中等 rank {rank} 的地址直到超时：进程组始终没有建立（那个 rank "
     "没有加入这个 store，或等待的 rank 以为作业的 rank 比实际多）"),
    ("rank(s) {ranks} were initialised by two processes: the launcher's task count and the "
     "framework's world size disagree", "rank {ranks} 被两个进程初始化：启动器的任务数与框架的 "
     "WORLD_SIZE 不一致"),
    ("two processes claim the same rank", "两个进程声称是同一个 rank"),
    ("{type} raised inside the rendezvous code", "rendezvous 代码中抛出了 {type}"),
    ("could not connect to the rendezvous store at {where}",
     "无法连接 {where} 上的 rendezvous store"),
    ("the rendezvous host name {name} does not resolve", "rendezvous 主机名 {name} 无法解析"),
    ("the rendezvous port is already in use", "rendezvous 端口已被占用"),
    ("torch.distributed rendezvous error", "torch.distributed rendezvous 出错"),
    ("connection refused / name not resolved", "连接被拒绝 / 主机名无法解析"),
    ("a peer closed its connection (it may have died)", "对端关闭了连接（它可能已退出）"),
    ("connection errors between peers", "对端之间的连接错误"),
    # nccl_rule
    ("NCCL's error trace starts in {src}", "NCCL 的错误跟踪始于 {src}"),
    ("ncclRemoteError: a remote peer failed or exited", "ncclRemoteError：远端的对端出错或退出"),
    ("ncclRemoteError can be a network fault", "ncclRemoteError 也可能是网络故障"),
    ("ncclRemoteError across nodes: the peer was unreachable on the interface NCCL chose",
     "跨节点的 ncclRemoteError：在 NCCL 选择的网卡上无法到达对端"),
    ("ncclSystemError: a system call (socket, shm) failed",
     "ncclSystemError：系统调用（socket、shm）失败"),
    ("ncclUnhandledCudaError: a CUDA call inside NCCL failed (most often a CUDA runtime, driver "
     "and NCCL build that do not match)", "ncclUnhandledCudaError：NCCL 内部的 CUDA 调用"
     "失败（最常见的是 CUDA 运行时、驱动和 NCCL 的构建版本不匹配）"),
    ("ncclUnhandledCudaError: a CUDA call inside NCCL failed",
     "ncclUnhandledCudaError：NCCL 内部的 CUDA 调用失败"),
    ("ncclInvalidArgument: the NCCL library rejected its arguments (often a different NCCL than "
     "the caller was built for)", "ncclInvalidArgument：NCCL 库拒绝了传入的参数（常见原因是所用的 "
     "NCCL 与调用方构建时所用的不同）"),
    ("ncclInvalidUsage: the communicator was set up wrongly", "ncclInvalidUsage：通信器的设置有误"),
    ("IB completion error 4 (local protection): the NIC could not access GPU memory "
     "(GPUDirect RDMA path)", "IB 完成错误 4（IBV_WC_LOC_PROT_ERR，本地保护错误）：网卡无法访问 "
     "GPU 显存（GPUDirect RDMA 路径）"),
    ("InfiniBand/RoCE completion error", "InfiniBand/RoCE 完成错误"),
    ("two ranks on one GPU", "两个 rank 在同一块 GPU 上"),
    ("shared-memory errors", "共享内存错误"),
    ("ranks report different NCCL versions: {versions}",
     "各 rank 报告的 NCCL 版本不同：{versions}"),
    # hardware_rule
    ("{xid}: a GPU/NVLink hardware fault", "{xid}：GPU/NVLink 硬件故障"),
    ("{xid}: usually an application fault", "{xid}：通常是应用程序的问题"),
    ("Xid {code} reported by the driver", "驱动报告了 Xid {code}"),
    ("the NCCL watchdog itself got stuck (a CUDA call hung)",
     "NCCL watchdog 本身卡住了（某个 CUDA 调用挂起）"),
    # hang_rule
    ("NCCL set up NVLS (NVSwitch multicast) on one node and then made no progress",
     "NCCL 在单节点上建立了 NVLS（NVSwitch multicast）之后再无进展"),
    ("NCCL initialised on one node and then made no progress (intra-node P2P transport hang: "
     "ACS/IOMMU)", "NCCL 在单节点上完成初始化后再无进展（节点内 P2P 传输挂起：ACS/IOMMU）"),
    ("NCCL initialised on one node and then made no progress",
     "NCCL 在单节点上完成初始化后再无进展"),
    ("NCCL initialised across nodes and then made no progress", "NCCL 跨节点完成初始化后再无进展"),
    # warn_rule
    ("NCCL WARN from the IB transport", "IB 传输层的 NCCL WARN"),
    ("NCCL WARN about sockets/bootstrap", "关于 socket/bootstrap 的 NCCL WARN"),
    ("NCCL WARN about shared memory", "关于共享内存的 NCCL WARN"),
    ("NCCL WARN: a CUDA call failed", "NCCL WARN：某个 CUDA 调用失败"),
    # gdr_rule
    ("{n} IB channel(s) run without GPUDirect RDMA while {m} use it: peer memory is missing on "
     "some nodes", "{n} 条 IB 通道没有使用 GPUDirect RDMA，而 {m} 条在用：部分节点缺少 "
     "peer memory"),
    ("no IB channel uses GPUDirect RDMA (/GDRDMA)",
     "没有一条 IB 通道使用 GPUDirect RDMA（/GDRDMA）"),
    # node_facts_rule
    ("{n} processes hold memory on GPU {gpu}: ranks did not select their own device",
     "GPU {gpu} 上有 {n} 个进程占用显存：各 rank 没有选择自己的设备"),
    ("PCIe ACS is enabled on a bridge (ACSCtl SrcValid+): P2P traffic is routed through the root "
     "complex", "某个 PCIe 桥上启用了 ACS（ACSCtl SrcValid+）：P2P 流量被绕经根复合体"),
    ("CUDA's P2P bandwidth/latency test was run on the GPUs: P2P between them is in question",
     "在这些 GPU 上运行了 CUDA 的 P2P 带宽/延迟测试：它们之间的 P2P 存疑"),
    ("the GPUs' PCIe topology was shared (nvidia-smi topo -m / lspci): P2P between them is in "
     "question", "给出了 GPU 的 PCIe 拓扑（`nvidia-smi topo -m` / `lspci`）：它们之间的 P2P 存疑"),
    # flight_recorder
    ("the Flight Recorder dumps show ranks calling different collectives at the same point",
     "Flight Recorder 记录显示各 rank 在同一位置调用了不同的集合通信"),
    ("a rank wrote no dump and no error while the others waited for it in a collective: it was "
     "busy or stuck elsewhere (Flight Recorder)", "某个 rank 既没有写出记录也没有报错，而其他 rank "
     "在集合通信中等它：它在别处忙碌或卡住（Flight Recorder）"),
    ("a rank scheduled a collective seconds after the others, which waited in it for that "
     "rank (Flight Recorder)", "某个 rank 比其他 rank 晚了若干秒才发起集合通信，其他 rank 一直在"
     "其中等它（Flight Recorder）"),
    ("a rank left no Flight Recorder dump while the others waited for it",
     "某个 rank 没有留下 Flight Recorder 记录，而其他 rank 在等它"),
    ("a rank left no Flight Recorder dump: it may have died",
     "某个 rank 没有留下 Flight Recorder 记录：它可能已退出"),
    ("a rank never called a collective the others entered, and reported no error of its own "
     "(uneven data or a rank-dependent code path; Flight Recorder)",
     "某个 rank 始终没有调用其他 rank 已进入的集合通信，也没有报自己的错误（数据不均，或代码"
     "路径随 rank 而不同；Flight Recorder）"),
    ("a rank fell behind the others (Flight Recorder)",
     "某个 rank 落后于其他 rank（Flight Recorder）"),
    ("a rank never entered a collective the others entered (Flight Recorder)",
     "某个 rank 始终没有进入其他 rank 已进入的集合通信（Flight Recorder）"),
    ("a rank stopped before a collective the others entered (Flight Recorder)",
     "某个 rank 在其他 rank 已进入的集合通信之前就停下了（Flight Recorder）"),
    # hang.py (live stacks, Flight Recorder, NCCL RAS, Xid of a running job)
    ("one rank is stuck in its own code while the others wait for it in a collective (live "
     "stacks)", "一个 rank 卡在自己的代码里，其他 rank 在集合通信中等它（实时调用栈）"),
    ("ranks wait in different collectives (live stacks)",
     "各 rank 在不同的集合通信中等待（实时调用栈）"),
    ("its Flight Recorder shows it never entered the others' collective",
     "它的 Flight Recorder 记录显示它从未进入其他 rank 所在的集合通信"),
    ("the ranks' Flight Recorder dumps disagree", "各 rank 的 Flight Recorder 记录不一致"),
    ("every rank launched {op} and none came back: a stuck kernel or GPU (live stacks)",
     "每个 rank 都发起了 {op}，没有一个返回：kernel 或 GPU 卡住了（实时调用栈）"),
    ("every rank waits in the same collective: a link between nodes may have stalled it",
     "所有 rank 都在同一个集合通信中等待：可能是节点间的链路使其停滞"),
    ("NCCL RAS reports ranks missing or dead", "NCCL RAS 报告有 rank 缺失或已死"),
    ("NCCL RAS: some ranks launched fewer collectives than the others and stopped there",
     "NCCL RAS：部分 rank 发起的集合通信比其他 rank 少，并停在那里"),
    ("NCCL RAS: ranks behind the others", "NCCL RAS：有 rank 落后于其他 rank"),
    ("NCCL RAS: every rank launched the same number of collectives and none moved",
     "NCCL RAS：每个 rank 发起的集合通信数相同，且都不再前进"),
    ("NCCL RAS: a stall on the device or a link between nodes",
     "NCCL RAS：设备上或节点间链路上的停滞"),
    ("Xid errors on {host} while the job hangs", "作业挂起时 {host} 上出现 Xid 错误"),
    # a first failure the crash rule quotes: `rank N` and a cross-rank reason (crossrank.py)
    ("rank {rank} {why}", "rank {rank} {why}"),
))


def _one(reason: str) -> str | None:
    for w in REASONS:
        m = w.rx.match(reason)
        if m is not None:
            return w.render(m)
    return None


def reason_zh(reason: str) -> str:
    """A reason in Chinese: the whole of it when it has an entry, else each of its parts
    joined by "; " (the engine joins two reasons so); a part with no entry as it is."""
    whole = _one(reason)
    if whole is not None:
        return whole
    return "；".join(_one(p) or p for p in reason.split("; "))

"""`ncclbot ask`: a question (and optional logs) -> the answer dict of `bot.answer` (deterministic).

How the question and the log combine:
- retrieval ranks cards for the question (BM25 + dense, plus the log's signatures when given);
- the question's own evidence becomes one `Signal` per candidate category, strength
  `scale x 0.6^i` for the i-th category by question-only fused score, and goes into
  `diagnose()` next to the log's rules and signatures (noisy-OR);
- scale is 0.2 when the log alone is decisive (verdict "diagnosed"), so the log dominates,
  0.8 when the question is specific, 0.45 when it is vague (0.2 was chosen on the real
  cases in ../shared/eval and the (then) held-out fixtures: 0.15-0.2 keep every log-decided
  answer, 0.3 let a question's wording outvote the log, 0.1 loses top-3 answers);
- a question is specific when its best card ranks first in both channels, or in the top two
  of both with a distinctive matched term (one that occurs in at most 3 cards);
- when the answer is unclear, `next_steps` says what would tell the candidates apart,
  built from the candidates' categories and their cards' node probes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.answer import build_answer
from bot.config import Settings
from bot.diagnosis.engine import Diagnosis, diagnose
from bot.diagnosis.rules import Signal
from bot.knowledge.cards import Card
from bot.logs.model import LogReport
from bot.retrieval.fusion import DEFAULT_WEIGHTS, K
from bot.retrieval.tokenize import has_cjk

QUESTION_CHANNELS = ("bm25", "dense")
DECAY = 0.6
SCALE_LOG_DECISIVE, SCALE_SPECIFIC, SCALE_VAGUE = 0.2, 0.8, 0.45
DISTINCTIVE_DF = 3

#: What tells a category apart from the others: (en, zh).
DISCRIMINATORS: dict[str, tuple[str, str]] = {
    "rank_crashed": (
        "Attach the log of the rank that failed first (the earliest Traceback, CUDA OOM or "
        "SIGKILL), and `dmesg -T | grep -iE 'oom|killed'` from its node.",
        "附上最先出错的那个 rank 的日志（最早的 Traceback、CUDA OOM 或 SIGKILL），以及该节点上 "
        "`dmesg -T | grep -iE 'oom|killed'` 的输出。"),
    "straggler_or_imbalance": (
        "Say whether it always fails at the same step and how long steps take per rank; set "
        "TORCH_NCCL_DUMP_ON_TIMEOUT=1 to see which rank lags.",
        "说明是否总在同一步失败、各 rank 每步耗时多少；设置 TORCH_NCCL_DUMP_ON_TIMEOUT=1 查看哪个 rank 落后。"),
    "collective_mismatch": (
        "Attach every rank's watchdog lines (SeqNum, OpType, shapes) or re-run with "
        "TORCH_DISTRIBUTED_DEBUG=DETAIL to see whether ranks issued different collectives.",
        "附上所有 rank 的 watchdog 报错行（SeqNum、OpType、形状），或设置 TORCH_DISTRIBUTED_DEBUG=DETAIL "
        "重跑，确认各 rank 调用的集合通信是否一致。"),
    "timeout_too_short": (
        "Say what the job was doing at the timeout (checkpoint save, evaluation, preprocessing, "
        "first-step compile) and the process-group timeout in effect (Timeout(ms)= in the log).",
        "说明超时发生时任务在做什么（保存检查点、评估、预处理、首步编译），以及实际生效的进程组超时"
        "（日志中的 Timeout(ms)=）。"),
    "rendezvous_failure": (
        "Give MASTER_ADDR, MASTER_PORT and the launch command of every node, and check "
        "`nc -zv $MASTER_ADDR $MASTER_PORT` from a worker.",
        "给出每个节点的 MASTER_ADDR、MASTER_PORT 和启动命令，并在 worker 上执行 "
        "`nc -zv $MASTER_ADDR $MASTER_PORT` 检查连通性。"),
    "network_interface": (
        "Re-run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET and attach the 'Bootstrap : Using' "
        "and 'NET/Socket' lines; run `ncclbot node env` on the node.",
        "设置 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET 重跑，附上 'Bootstrap : Using' 和 'NET/Socket' "
        "行；在节点上运行 `ncclbot node env`。"),
    "infiniband_roce": (
        "Attach `ibstat` / `ibv_devinfo` from both nodes, the NCCL_IB_* settings and the NET/IB "
        "lines of an NCCL_DEBUG=INFO run.",
        "附上两端节点的 `ibstat` / `ibv_devinfo` 输出、NCCL_IB_* 配置，以及 NCCL_DEBUG=INFO 下的 NET/IB 日志行。"),
    "gpudirect_rdma": (
        "Check `lsmod | grep peermem` and `ulimit -l` on the node, and whether NCCL_DEBUG=INFO "
        "says 'GPU Direct RDMA Enabled'.",
        "在节点上检查 `lsmod | grep peermem` 和 `ulimit -l`，并确认 NCCL_DEBUG=INFO 是否显示 "
        "'GPU Direct RDMA Enabled'。"),
    "shm_ipc_container": (
        "Attach `df -h /dev/shm` from inside the container and its run options "
        "(--ipc, --shm-size, the pod's /dev/shm volume).",
        "附上容器内 `df -h /dev/shm` 的输出，以及容器的启动参数（--ipc、--shm-size、pod 的 /dev/shm 卷）。"),
    "p2p_pcie_topology": (
        "Run `ncclbot node topo` (nvidia-smi topo -m) on the node and say whether "
        "NCCL_P2P_DISABLE=1 makes the job work.",
        "在节点上运行 `ncclbot node topo`（nvidia-smi topo -m），并说明设置 NCCL_P2P_DISABLE=1 后是否正常。"),
    "gpu_hardware_fault": (
        "Run `ncclbot node xid` (or `dmesg -T | grep -i xid`) on the node and attach "
        "`nvidia-smi -q -d ECC,ROW_REMAPPER`.",
        "在节点上运行 `ncclbot node xid`（或 `dmesg -T | grep -i xid`），并附上 "
        "`nvidia-smi -q -d ECC,ROW_REMAPPER` 的输出。"),
    "nvswitch_fabric": (
        "Attach `systemctl status nvidia-fabricmanager` and `nvidia-smi -q | grep -iA2 fabric` "
        "from the node.",
        "附上节点上 `systemctl status nvidia-fabricmanager` 和 `nvidia-smi -q | grep -iA2 fabric` 的输出。"),
    "gpu_memory_pressure": (
        "Attach `nvidia-smi` memory use at the failure and say how many process groups the job "
        "creates and NCCL_BUFFSIZE / NCCL_CUMEM_ENABLE.",
        "附上出错时 `nvidia-smi` 的显存占用，并说明任务创建了多少个进程组以及 NCCL_BUFFSIZE / "
        "NCCL_CUMEM_ENABLE 的设置。"),
    "device_assignment": (
        "Give the launch command and each process's CUDA_VISIBLE_DEVICES / LOCAL_RANK; run "
        "`ncclbot node env` on the node.",
        "给出启动命令以及每个进程的 CUDA_VISIBLE_DEVICES / LOCAL_RANK；在节点上运行 `ncclbot node env`。"),
    "version_incompatibility": (
        "Run `ncclbot node env` on every node and compare NCCL, torch, CUDA and driver versions; "
        "say what changed since it last worked.",
        "在每个节点上运行 `ncclbot node env`，比较 NCCL、torch、CUDA 和驱动版本；说明上次正常以来改了什么。"),
    "rl_weight_sync": (
        "Name the RL framework and version, and attach the trainer's and the rollout engine's "
        "(vLLM/SGLang) logs around the weight sync.",
        "说明所用的强化学习框架及版本，并附上权重同步前后训练端和推理引擎（vLLM/SGLang）的日志。"),
    "other": (
        "Re-run with NCCL_DEBUG=INFO and attach the full log of every rank.",
        "设置 NCCL_DEBUG=INFO 重跑，并附上所有 rank 的完整日志。"),
}
ATTACH_LOG = ("Attach the crash log (`--log FILE`), at least of the rank that failed first.",
              "请附上崩溃日志（`--log FILE`），至少包括最先出错的那个 rank。")
PROBE_STEP = ("Run `ncclbot node {p}` on the affected node and attach the output.",
              "在出问题的节点上运行 `ncclbot node {p}`，并附上输出。")


def resolve_lang(question: str, lang: str) -> str:
    """en | zh | both; `auto` is the question's language (Chinese when it has CJK)."""
    if lang == "auto":
        return "zh" if has_cjk(question) else "en"
    if lang not in ("en", "zh", "both"):
        raise ValueError(f"lang must be en, zh, both or auto, not {lang!r}")
    return lang


def question_score(hit: Any) -> float:
    """A hit's fused score from the question's channels only (not the log's signatures)."""
    return sum(DEFAULT_WEIGHTS[c] / (K + int(hit.channels[c]["rank"]))
               for c in QUESTION_CHANNELS if c in hit.channels)


def is_specific(hits: Sequence[Any], distinctive: set[str]) -> bool:
    """Whether the question points at one card (see the module docstring)."""
    ranked = sorted(hits, key=question_score, reverse=True)
    if not ranked:
        return False
    ch = ranked[0].channels
    ranks = [int(ch[c]["rank"]) if c in ch else 99 for c in QUESTION_CHANNELS]
    terms = str(ch.get("bm25", {}).get("reason", "")).removeprefix("terms ").split(", ")
    return max(ranks) == 1 or (max(ranks) <= 2 and bool(distinctive & set(terms)))


def question_signals(hits: Sequence[Any], scale: float) -> list[Signal]:
    """One signal per candidate category from the question's retrieval."""
    best: dict[str, Any] = {}
    for h in sorted(hits, key=question_score, reverse=True):
        if question_score(h) > 0:
            best.setdefault(h.category, h)
    return [Signal(cat, round(scale * DECAY ** i, 3),
                   f"the question matches card {h.card} ({'; '.join(h.why[:2])})")
            for i, (cat, h) in enumerate(best.items())]


def next_steps(categories: Sequence[str], cards: Sequence[Card], has_log: bool,
               langs: Sequence[str]) -> dict[str, list[str]]:
    """What would tell the candidate categories apart, in order of the candidates."""
    steps: list[tuple[str, str]] = [] if has_log else [ATTACH_LOG]
    for cat in dict.fromkeys(categories):
        if cat in DISCRIMINATORS and DISCRIMINATORS[cat] not in steps:
            steps.append(DISCRIMINATORS[cat])
    probes = dict.fromkeys(p for c in cards for p in c.probes)
    mentioned = " ".join(en for en, _ in steps)
    for p in probes:
        if f"ncclbot node {p}" not in mentioned:
            steps.append((PROBE_STEP[0].format(p=p), PROBE_STEP[1].format(p=p)))
    idx = {"en": 0, "zh": 1}
    return {lg: [s[idx[lg]] for s in steps[:6]] for lg in langs}


def compose(question: str, cards: Sequence[Card], hits: Sequence[Any], lang: str = "both",
            report: LogReport | None = None, log_diagnosis: Diagnosis | None = None,
            distinctive: set[str] | None = None) -> dict[str, Any]:
    """Pure: the question, its retrieval hits and the optional log analysis -> answer dict."""
    log_decisive = log_diagnosis is not None and log_diagnosis.verdict == "diagnosed"
    specific = is_specific(hits, distinctive or set())
    scale = SCALE_LOG_DECISIVE if log_decisive else SCALE_SPECIFIC if specific else SCALE_VAGUE
    has_log = report is not None and report.evidence_found
    diagnosis = diagnose(report or LogReport(), cards, extra=question_signals(hits, scale),
                         neighbours=log_diagnosis.neighbours if log_diagnosis else None)
    by_cat = {}
    for h in sorted(hits, key=question_score, reverse=True):
        by_cat.setdefault(h.category, h.card)
    for rc in diagnosis.root_causes:
        if rc.category in by_cat and not diagnosis.card_scores.get(rc.card or ""):
            rc.card = by_cat[rc.category]
    if not has_log:
        diagnosis.verdict = "diagnosed" if specific and diagnosis.root_causes else "unknown"
    elif diagnosis.verdict == "unknown" and specific and diagnosis.root_causes:
        diagnosis.verdict = "diagnosed"
    answer = build_answer(diagnosis, cards, report, lang)
    langs = ("en", "zh") if lang == "both" else (lang,)
    answer["question"] = question
    answer["lang"] = lang
    answer["specific"] = specific
    answer["retrieval"] = [h.to_dict() for h in hits]
    if diagnosis.verdict != "diagnosed":
        cats = [rc.category for rc in diagnosis.root_causes[:4]]
        chosen = [c for c in cards if c.id in {rc.card for rc in diagnosis.root_causes[:3]}]
        answer["next_steps"] = next_steps(cats, chosen, has_log, langs)
    return answer


def answer_question(question: str, log_paths: Sequence[str] = (), lang: str = "both",
                    settings: Settings | None = None,
                    analysis: tuple[LogReport, Diagnosis] | None = None) -> dict[str, Any]:
    """Answer a question, with optional log files (or their `analysis`, already made): the
    JSON contract of `analyze` plus `question`, `lang`, `specific` and `retrieval`
    ([{card, category, score, why, channels}])."""
    from bot.config import load_settings
    from bot.logs.sources import expand_inputs
    from bot.retrieval.search import get_retriever
    from bot.service import add_source_notes, analyze_sources, bundled_cards

    settings = settings or load_settings()
    out_lang = resolve_lang(question, lang)
    cards = list(bundled_cards())
    if analysis is not None:
        report, base = analysis
    elif log_paths:
        report, base = analyze_sources(expand_inputs(log_paths), settings, cards)
    else:
        report, base = None, None
    retriever = get_retriever(settings, cards)
    hits = retriever.search(question, 8, base)
    answer = compose(question, cards, hits, out_lang, report, base,
                     retriever.sparse.distinctive(DISTINCTIVE_DF))
    return add_source_notes(answer, report) if report is not None else answer

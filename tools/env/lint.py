"""Pure lint rules over collected environment facts. Each rule has a stable id.

Rules: nccl_socket_ifname_missing, nccl_p2p_disabled, nccl_ib_disabled,
nccl_debug_verbose, nccl_debug_subsys_set, dev_shm_small, memlock_limited,
nccl_buffsize_large, mtu_mismatch, peermem_missing, fabricmanager_down.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tools.cards import card_for
from tools.result import Finding, Severity
from tools.sysfs import IbDevice, Interface

GIB = 2**30
MIN_SHM_BYTES = GIB
#: NCCL's default NCCL_BUFFSIZE is 4 MiB; far above that wastes GPU memory per channel/peer.
MAX_BUFFSIZE = 16 * 2**20


@dataclass
class EnvFacts:
    """What the lint rules look at. None means "could not tell" and never fires a rule."""

    environ: Mapping[str, str] = field(default_factory=dict)
    interfaces: Sequence[Interface] = ()
    ib_devices: Sequence[IbDevice] = ()
    has_nvlink: bool | None = None
    gpu_count: int | None = None
    shm_total_bytes: int | None = None
    memlock_soft: int | None = None  # bytes; -1 is unlimited
    peermem_loaded: bool | None = None
    nvswitch_present: bool = False
    fabricmanager_active: bool | None = None


def _f(severity: Severity, rule: str, message: str) -> Finding:
    return Finding(severity=severity, rule=rule, message=message, card=card_for(rule))


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _ib_active(facts: EnvFacts) -> bool:
    return any(p.get("state") == "ACTIVE" for d in facts.ib_devices for p in d.get("ports", []))


def parse_ifname_spec(spec: str) -> tuple[bool, bool, list[str]]:
    """NCCL_SOCKET_IFNAME syntax: optional `^` (exclude), optional `=` (exact), comma list."""
    s = spec.strip()
    exclude = s.startswith("^")
    s = s[1:] if exclude else s
    exact = s.startswith("=")
    s = s[1:] if exact else s
    return exclude, exact, [p.strip() for p in s.split(",") if p.strip()]


def ifname_matches(spec: str, names: list[str]) -> list[str]:
    """The interfaces NCCL would consider under `spec` (before its own filtering)."""
    exclude, exact, parts = parse_ifname_spec(spec)

    def hit(name: str) -> bool:
        return any(name == p if exact else name.startswith(p) for p in parts)

    return [n for n in names if hit(n) != exclude]


def rule_socket_ifname(facts: EnvFacts) -> list[Finding]:
    spec = facts.environ.get("NCCL_SOCKET_IFNAME")
    if not spec or not facts.interfaces:
        return []
    names = [i["name"] for i in facts.interfaces]
    chosen = ifname_matches(spec, names)
    exclude = parse_ifname_spec(spec)[0]
    if exclude:
        chosen = [n for n in chosen if n != "lo"]
    if chosen:
        return []
    return [_f("error", "nccl_socket_ifname_missing",
               f"NCCL_SOCKET_IFNAME={spec} selects no interface on this node "
               f"(interfaces: {', '.join(names)}); NCCL will fail to bootstrap or pick none. "
               "Set it to the interface carrying the cluster network")]


def rule_p2p_disabled(facts: EnvFacts) -> list[Finding]:
    if _truthy(facts.environ.get("NCCL_P2P_DISABLE")) and facts.has_nvlink:
        return [_f("warn", "nccl_p2p_disabled",
                   "NCCL_P2P_DISABLE=1 on a node with NVLink: intra-node traffic goes through "
                   "host memory at a fraction of NVLink bandwidth. Remove it unless it works "
                   "around a known P2P hang")]
    return []


def rule_ib_disabled(facts: EnvFacts) -> list[Finding]:
    if _truthy(facts.environ.get("NCCL_IB_DISABLE")) and _ib_active(facts):
        return [_f("warn", "nccl_ib_disabled",
                   "NCCL_IB_DISABLE=1 while InfiniBand/RoCE ports are ACTIVE: inter-node "
                   "traffic falls back to TCP sockets. Remove it unless IB is known broken")]
    return []


def rule_debug(facts: EnvFacts) -> list[Finding]:
    out = []
    level = (facts.environ.get("NCCL_DEBUG") or "").strip().upper()
    if level in ("INFO", "TRACE"):
        out.append(_f("info", "nccl_debug_verbose",
                      f"NCCL_DEBUG={level} is a debugging setting: it floods logs (and TRACE "
                      "slows every call). Use WARN in production"))
    if facts.environ.get("NCCL_DEBUG_SUBSYS"):
        out.append(_f("info", "nccl_debug_subsys_set",
                      f"NCCL_DEBUG_SUBSYS={facts.environ['NCCL_DEBUG_SUBSYS']} is a debugging "
                      "setting; unset it in production"))
    return out


def rule_shm(facts: EnvFacts) -> list[Finding]:
    total = facts.shm_total_bytes
    if total is None or total >= MIN_SHM_BYTES:
        return []
    return [_f("warn", "dev_shm_small",
               f"/dev/shm is {total / 2**20:.0f} MiB (< 1 GiB); NCCL's shared-memory transport "
               "and DataLoader workers can fail with bus errors. Run containers with "
               "--ipc=host or --shm-size=16g")]


def rule_memlock(facts: EnvFacts) -> list[Finding]:
    if not facts.ib_devices or facts.memlock_soft is None or facts.memlock_soft < 0:
        return []
    return [_f("warn", "memlock_limited",
               f"ulimit -l is {facts.memlock_soft // 1024} KiB, not unlimited, on a node with "
               "RDMA devices; registering buffers can fail. Set memlock unlimited "
               "(--ulimit memlock=-1 for containers, limits.conf for hosts)")]


def rule_buffsize(facts: EnvFacts) -> list[Finding]:
    raw = facts.environ.get("NCCL_BUFFSIZE")
    if not raw:
        return []
    try:
        size = int(raw.strip(), 0)
    except ValueError:
        return [_f("warn", "nccl_buffsize_large", f"NCCL_BUFFSIZE={raw} is not an integer")]
    if size <= MAX_BUFFSIZE:
        return []
    return [_f("warn", "nccl_buffsize_large",
               f"NCCL_BUFFSIZE={size} ({size / 2**20:.0f} MiB) is far above the 4 MiB default; "
               "each channel and peer allocates it, which can exhaust GPU memory")]


def rule_mtu(facts: EnvFacts) -> list[Finding]:
    """Interfaces of one fabric (RDMA netdevs by link layer) should share one MTU."""
    by_name = {i["name"]: i for i in facts.interfaces}
    groups: dict[str, dict[str, int]] = {}
    for dev in facts.ib_devices:
        layer = next((p.get("link_layer") for p in dev.get("ports", [])), None) or "unknown"
        for nd in dev.get("netdevs", []):
            iface = by_name.get(nd)
            if iface and (mtu := iface["mtu"]) and iface["state"] in ("up", "unknown"):
                groups.setdefault(layer, {})[nd] = mtu
    out = []
    for layer, mtus in groups.items():
        if len(set(mtus.values())) > 1:
            out.append(_f("warn", "mtu_mismatch",
                          f"{layer} interfaces of the same fabric have different MTUs {mtus}; "
                          "mismatched MTUs cause drops, stalls or RoCE errors. Use one MTU"))
    return out


def rule_peermem(facts: EnvFacts) -> list[Finding]:
    if facts.peermem_loaded is not False or not _ib_active(facts) or not facts.gpu_count:
        return []
    return [_f("warn", "peermem_missing",
               "nvidia_peermem is not loaded on a GPU node with active RDMA ports: NCCL cannot "
               "use GPUDirect RDMA unless DMA-BUF is supported (kernel >= 5.12, open driver). "
               "Run `modprobe nvidia_peermem`")]


def rule_fabricmanager(facts: EnvFacts) -> list[Finding]:
    if facts.nvswitch_present and facts.fabricmanager_active is False:
        return [_f("error", "fabricmanager_down",
                   "NVSwitch system without a running nvidia-fabricmanager: CUDA and NCCL fail "
                   "('system not yet initialized'). `systemctl start nvidia-fabricmanager`; "
                   "its version must match the driver")]
    return []


RULES = (rule_socket_ifname, rule_p2p_disabled, rule_ib_disabled, rule_debug, rule_shm,
         rule_memlock, rule_buffsize, rule_mtu, rule_peermem, rule_fabricmanager)


def lint_env(facts: EnvFacts) -> list[Finding]:
    """Run every rule."""
    return [f for rule in RULES for f in rule(facts)]

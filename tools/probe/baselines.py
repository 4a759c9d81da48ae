"""Expected peak busbw per hardware, with sources, and the finding comparing a probe to it.

Peak busbw needs large messages (>= 256 MiB-1 GiB); smaller sweeps read low.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tools.cards import card_for
from tools.probe.model import ProbeRow
from tools.probe.params import ProbeParams
from tools.result import Finding

LARGE_ENOUGH = 256 * 2**20
#: Below this share of the baseline, the finding is a warning.
WARN_RATIO = 0.8


@dataclass(frozen=True)
class Baseline:
    key: str
    label: str
    collective: str
    busbw_gbps: float
    sources: tuple[str, ...]
    note: str = ""


BASELINES: tuple[Baseline, ...] = (
    Baseline("h100_sxm_8", "8x H100 SXM (NVLink4 + NVSwitch, NVLS)", "all_reduce", 480.0,
             ("https://github.com/NVIDIA/nccl-tests/issues/212",
              "https://github.com/NVIDIA/nccl-tests/issues/290"),
             "NVIDIA: ~480 GB/s peak all_reduce busbw on 8 GPUs with NVLink SHARP; "
             "~370 GB/s for other collectives (450 GB/s line rate minus protocol overhead)"),
    Baseline("h100_sxm_8", "8x H100 SXM (NVLink4 + NVSwitch)", "all_gather", 370.0,
             ("https://github.com/NVIDIA/nccl-tests/issues/212",)),
    Baseline("h100_sxm_8", "8x H100 SXM (NVLink4 + NVSwitch)", "reduce_scatter", 370.0,
             ("https://github.com/NVIDIA/nccl-tests/issues/212",)),
    Baseline("h200_8", "8x H200 (NVLink4 + NVSwitch, NVLS)", "all_reduce", 475.0,
             ("https://github.com/NVIDIA/nccl-tests/issues/272",)),
    Baseline("a100_sxm_8", "8x A100 SXM4 (NVLink3 + NVSwitch)", "all_reduce", 210.0,
             ("https://github.com/NVIDIA/nccl-tests/issues/149",
              "https://github.com/NVIDIA/nccl-tests/issues/178"),
             "~200-210 GB/s peak all_reduce busbw reported on 8x A100-SXM4"),
    Baseline("ib_ndr_400_per_nic", "InfiniBand NDR 400 Gb/s, per NIC (multi-node)",
             "all_reduce", 47.0, ("https://github.com/NVIDIA/nccl-tests/issues/290",),
             "NVIDIA: 46-48 GB/s per NDR NIC (run with NCCL_ALGO=RING on 2 nodes)"),
)


def hardware_key(backend: str, gpu_name: str | None, nproc: int) -> str | None:
    """Which baseline family a single-node run belongs to, or None when unknown."""
    if backend != "nccl" or not gpu_name or nproc != 8:
        return None
    name = gpu_name.upper()
    if "H200" in name:
        return "h200_8"
    if "H100" in name and ("SXM" in name or "HBM3" in name):
        return "h100_sxm_8"
    if "A100" in name and "SXM" in name:
        return "a100_sxm_8"
    return None


def _ndr_ports(rates: list[str]) -> int:
    return sum(1 for r in rates if "NDR" in r.upper() or r.strip().startswith("400"))


def expected_busbw(backend: str, gpu_name: str | None, nproc: int, nnodes: int = 1,
                   ib_port_rates: list[str] | None = None,
                   collective: str = "all_reduce") -> tuple[float, str] | None:
    """(expected peak busbw GB/s, what it is based on) when the hardware is known, else None.

    One node: the table above. Several: ~47 GB/s per active NDR port on each node, capped
    by the single-node figure (the network, not NVLink, bounds a multi-node ring).
    """
    key = hardware_key(backend, gpu_name, nproc)
    node = next((b for b in BASELINES if b.key == key and b.collective == collective), None)
    if node is None:
        return None
    if nnodes <= 1:
        return node.busbw_gbps, f"{node.label}, {node.sources[0]}"
    ports = _ndr_ports(ib_port_rates or [])
    nic = next(b for b in BASELINES if b.key == "ib_ndr_400_per_nic")
    if not ports or collective != nic.collective:
        return None
    value = min(node.busbw_gbps, ports * nic.busbw_gbps)
    return value, f"{ports} x {nic.label} on {node.label}, {nic.sources[0]}"


def group_baseline(p: ProbeParams, gpu_names: Sequence[str | None],
                   ib_port_rates: Sequence[Sequence[str]]) -> tuple[float, str] | None:
    """The expected busbw of a multi-node sweep with `p` on nodes that reported these GPUs
    and InfiniBand ports: only when every node has the same known GPU and the sweep reaches
    sizes where peak busbw is measured."""
    names = set(gpu_names)
    if p.max_bytes < LARGE_ENOUGH or len(names) != 1 or None in names:
        return None
    ports = min((list(r) for r in ib_port_rates), key=len, default=[])
    return expected_busbw(p.backend, names.pop(), p.nproc or 0, len(gpu_names), ports)


def baseline_findings(rows: Sequence[ProbeRow], backend: str, gpu_name: str | None,
                      nproc: int) -> list[Finding]:
    """"X% of the expected busbw" per collective with a baseline, or a no-baseline note."""
    key = hardware_key(backend, gpu_name, nproc)
    rule = "probe_busbw_vs_baseline"
    if key is None:
        what = f"{backend} on {gpu_name or 'CPU'} x{nproc}"
        return [Finding(severity="info", rule="probe_no_baseline", card=card_for(
            "probe_no_baseline"), message=f"no bandwidth baseline for {what}; compare against "
            "another node of the same type")]
    out = []
    for b in (b for b in BASELINES if b.key == key):
        mine = [r for r in rows if r["collective"] == b.collective]
        if not mine:
            continue
        peak = max(mine, key=lambda r: r["busbw_gbps"])
        ratio = peak["busbw_gbps"] / b.busbw_gbps
        small = max(r["bytes"] for r in mine) < LARGE_ENOUGH
        msg = (f"{b.collective} peak busbw {peak['busbw_gbps']:.1f} GB/s at {peak['bytes']} "
               f"bytes is {ratio:.0%} of the expected ~{b.busbw_gbps:.0f} GB/s for {b.label} "
               f"(source: {b.sources[0]})")
        if small:
            msg += "; the sweep stopped below 256 MiB, so the peak is understated"
        out.append(Finding(severity="warn" if ratio < WARN_RATIO and not small else "info",
                           rule=rule, message=msg, card=card_for(rule)))
    return out

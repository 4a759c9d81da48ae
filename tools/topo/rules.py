"""Pure topology findings: NVLink, P2P, NIC placement, ACS, IOMMU, ECC."""

from __future__ import annotations

from collections.abc import Sequence

from tools.cards import card_for
from tools.host import Acs, Iommu
from tools.nvml import GpuInfo
from tools.result import Finding, Severity
from tools.sysfs import IbDevice
from tools.topo.matrix import Topology


def _f(severity: Severity, rule: str, message: str) -> Finding:
    return Finding(severity=severity, rule=rule, message=message, card=card_for(rule))


def nvlink_findings(gpus: Sequence[GpuInfo]) -> list[Finding]:
    """Inactive links on an NVLink system, and links with error counts."""
    out: list[Finding] = []
    has_nvlink = any(lk["active"] for g in gpus for lk in g.get("nvlinks", []))
    for g in gpus:
        links = g.get("nvlinks", [])
        down = [lk["link"] for lk in links if not lk["active"]]
        if has_nvlink and down:
            out.append(_f("error", "nvlink_inactive",
                          f"GPU{g['index']} has {len(down)} of {len(links)} NVLinks inactive "
                          f"(links {down}); check `nvidia-smi nvlink -s` and Xid 74 in dmesg"))
        noisy = {lk["link"]: {k: v for k, v in lk["errors"].items() if v}
                 for lk in links if any(lk["errors"].values())}
        if noisy:
            out.append(_f("warn", "nvlink_errors",
                          f"GPU{g['index']} NVLink error counters are non-zero: {noisy}"))
    return out


def p2p_findings(p2p: dict[str, dict[str, str]]) -> list[Finding]:
    pairs = sorted({(min(a, b), max(a, b), s) for a, row in p2p.items()
                    for b, s in row.items() if s != "OK"})
    if not pairs:
        return []
    shown = ", ".join(f"{a}-{b}:{s}" for a, b, s in pairs[:12])
    more = f" (+{len(pairs) - 12} more)" if len(pairs) > 12 else ""
    return [_f("warn", "p2p_unsupported",
               f"{len(pairs)} GPU pairs cannot use P2P reads ({shown}{more}); NCCL falls back "
               "to copies through host memory (CNS chipset, GNS GPU, TNS topology, DR regkey)")]


def matrix_findings(topo: Topology, ib_active: set[str] | None = None) -> list[Finding]:
    """Partial NVLink meshes, and NICs that share no NUMA node with any GPU."""
    out: list[Finding] = []
    if any(topo.nvlink_count(a, b) for a in topo.gpus for b in topo.gpus if a != b):
        missing = topo.gpu_pairs_without_nvlink()
        if missing:
            shown = ", ".join(f"{a}-{b}:{topo.link(a, b)}" for a, b in missing[:12])
            out.append(_f("info", "gpu_pair_no_nvlink",
                          f"{len(missing)} GPU pairs have no NVLink ({shown}); traffic between "
                          "them crosses PCIe"))
    for nic in topo.nics:
        letters = {topo.link(g, nic) for g in topo.gpus}
        if topo.gpus and letters == {"SYS"}:
            name = topo.nic_names.get(nic, nic)
            fabric = ib_active is not None and name in ib_active
            out.append(_f("warn" if fabric else "info", "nic_numa_mismatch",
                          f"{name} is on a different NUMA node than every GPU (SYS to all); "
                          "if NCCL uses it, traffic crosses the CPU interconnect"))
    return out


def nic_numa_findings(nics: Sequence[IbDevice], gpu_numa: set[int]) -> list[Finding]:
    """Active RDMA NICs (from sysfs) whose NUMA node hosts no GPU."""
    out = []
    for nic in nics:
        node = nic.get("numa_node")
        active = any(p.get("state") == "ACTIVE" for p in nic.get("ports", []))
        if gpu_numa and node is not None and active and node not in gpu_numa:
            out.append(_f("warn", "nic_numa_mismatch",
                          f"{nic['name']} is on NUMA node {node}, GPUs are on "
                          f"{sorted(gpu_numa)}; GPUDirect RDMA through it crosses sockets"))
    return out


def acs_findings(acs: Acs) -> list[Finding]:
    bridges = acs.get("acs_enabled_bridges") or []
    if not bridges:
        return []
    shown = ", ".join(b["bdf"] for b in bridges[:8])
    return [_f("warn", "pcie_acs_enabled",
               f"PCIe ACS is enabled (ACSCtl SrcValid+) on {len(bridges)} bridges ({shown}); "
               "P2P and GPUDirect RDMA are redirected through the root complex, which can hang "
               "or slow NCCL. Disable ACS on bare metal (BIOS or setpci)")]


def iommu_findings(iommu: Iommu) -> list[Finding]:
    if not iommu.get("translating"):
        return []
    return [_f("warn", "iommu_enabled",
               f"IOMMU is on without passthrough ({iommu['params']}); PCIe P2P between GPUs "
               "may hang or be slow. Add iommu=pt to the kernel command line, or disable it")]


def health_findings(gpus: Sequence[GpuInfo]) -> list[Finding]:
    """ECC errors, pending or failed row remapping, retired pages."""
    out: list[Finding] = []
    for g in gpus:
        name = f"GPU{g['index']} ({g.get('pci_bus_id')})"
        ecc = g["ecc_errors"]
        if ecc["volatile_uncorrected"] or ecc["aggregate_uncorrected"]:
            out.append(_f("error", "gpu_ecc_errors",
                          f"{name} has uncorrectable ECC errors (volatile "
                          f"{ecc['volatile_uncorrected']}, aggregate "
                          f"{ecc['aggregate_uncorrected']}); drain the node and check "
                          "Xid 48/94/95"))
        remap = g["remapped_rows"]
        if remap is not None and remap["failure"]:
            out.append(_f("error", "gpu_row_remap_failure",
                          f"{name} row remapping failed; the GPU needs replacement or RMA"))
        elif remap is not None and remap["pending"]:
            out.append(_f("warn", "gpu_row_remap_pending",
                          f"{name} has a row remap pending; reset the GPU (or reboot) to apply it"))
        retired = g.get("retired_pages") or {}
        if g.get("retired_pages_pending") or retired.get("double_bit"):
            out.append(_f("warn", "gpu_retired_pages",
                          f"{name} retired pages {retired} (pending: "
                          f"{bool(g.get('retired_pages_pending'))}); reset the GPU to retire them"))
    return out

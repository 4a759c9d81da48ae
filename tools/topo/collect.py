"""Node topology: GPUs, NVLink, P2P and the topology matrix (NVML), NICs (sysfs),
PCIe ACS (`lspci -vvv`) and IOMMU (/proc/cmdline), with findings.

Without NVML the tool is `unavailable` with NVML's reason, yet still reports the
host facts it could read; when `nvidia-smi` exists its `topo -m` is parsed instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from typing_extensions import TypedDict

from tools.host import Acs, Iommu, parse_iommu_cmdline, parse_lspci_acs
from tools.nvml import GpuInfo, NvmlClient, NvmlUnavailableError, nvml_snapshot
from tools.result import Finding, ToolResult
from tools.runner import CommandRunner, SubprocessRunner
from tools.sysfs import (
    IbDevice,
    Interface,
    NvidiaPci,
    gpu_pci_info,
    pci_relation,
    read_ib_devices,
    read_interfaces,
    read_nvidia_pci,
    read_text,
)
from tools.topo.matrix import SAME_SWITCH, Topology, parse_topo_matrix
from tools.topo.rules import (
    acs_findings,
    health_findings,
    iommu_findings,
    matrix_findings,
    nic_numa_findings,
    nvlink_findings,
    p2p_findings,
)

TOOL = "topo"


def from_topo_text(text: str, invocation: str = "parse nvidia-smi topo -m text") -> ToolResult:
    """Analyse a pasted or captured `nvidia-smi topo -m` output."""
    try:
        topo = parse_topo_matrix(text)
    except ValueError as exc:
        return ToolResult.failed(TOOL, invocation, str(exc))
    return ToolResult(tool=TOOL, status="success", invocation=invocation,
                      data={"source": "nvidia-smi topo -m", "topology": topo.model_dump(),
                            "nic_nearest_gpus": {topo.nic_names.get(n, n): topo.nearest_gpus(n)
                                                 for n in topo.nics}},
                      findings=matrix_findings(topo))


class HostFacts(TypedDict):
    """What the topology diagnostic reads without NVML."""

    interfaces: list[Interface]
    ib_devices: list[IbDevice]
    nvidia_pci: list[NvidiaPci]
    acs: Acs
    iommu: Iommu


class NicAffinity(TypedDict):
    """A NIC's PCIe letter to every GPU, and the GPUs near it."""

    numa_node: int | None
    links: dict[str, str]
    shares_pcie_switch: list[str]
    same_numa: list[str]


def host_facts(root: Path, runner: CommandRunner) -> HostFacts:
    """What can be read without NVML: NICs, IB ports, NVIDIA PCI functions, ACS, IOMMU."""
    lspci = runner(["lspci", "-vvv"], timeout=20)
    acs = parse_lspci_acs(lspci.stdout) if lspci.ok else Acs(
        acs_enabled_bridges=[], readable=False, note=lspci.error or lspci.stderr[:200])
    cmdline = read_text(root / "proc/cmdline") or ""
    return HostFacts({
        "interfaces": read_interfaces(root),
        "ib_devices": read_ib_devices(root),
        "nvidia_pci": read_nvidia_pci(root),
        "acs": acs,
        "iommu": {**parse_iommu_cmdline(cmdline),
                  "sysfs_iommu_groups": sorted(p.name for p in (root / "sys/class/iommu").iterdir())
                  if (root / "sys/class/iommu").is_dir() else []},
    })


def nic_gpu_affinity(nics: Sequence[IbDevice], gpus: Sequence[GpuInfo]
                     ) -> dict[str, NicAffinity]:
    """For each NIC: its PCIe letter to every GPU, and GPUs sharing its switch or NUMA node."""
    out: dict[str, NicAffinity] = {}
    for nic in nics:
        rel = {f"GPU{g['index']}": pci_relation(nic.get("pci_chain", []),
                                                g.get("pci_chain", []),
                                                nic["numa_node"], g["numa_node"])
               for g in gpus}
        out[nic["name"]] = NicAffinity(
            numa_node=nic["numa_node"], links=rel,
            shares_pcie_switch=[g for g, v in rel.items() if v in SAME_SWITCH],
            same_numa=[f"GPU{g['index']}" for g in gpus
                       if g["numa_node"] is not None and g["numa_node"] == nic["numa_node"]])
    return out


def _host_findings(host: HostFacts) -> list[Finding]:
    return acs_findings(host["acs"]) + iommu_findings(host["iommu"])


def collect_topology(
    *,
    nvml_lib: Any | None = None,
    runner: CommandRunner | None = None,
    root: Path | str = "/",
    topo_text: str | None = None,
) -> ToolResult:
    """Run the topology diagnostic. `topo_text` analyses a pasted `nvidia-smi topo -m`."""
    if topo_text is not None:
        return from_topo_text(topo_text)
    root, runner = Path(root), runner or SubprocessRunner()
    invocation = "topo: NVML + sysfs + lspci -vvv + /proc/cmdline"
    host = host_facts(root, runner)
    try:
        with NvmlClient(nvml_lib) as client:
            snap = nvml_snapshot(client)
    except NvmlUnavailableError as exc:
        return _without_nvml(str(exc), host, runner, invocation)
    gpus, topo = snap["gpus"], snap["topology"]
    for g in gpus:
        info = gpu_pci_info(root, g["pci_bus_id"] or "")
        g["pci_chain"] = info.get("pci_chain", [])
        if g.get("numa_node") is None:
            g["numa_node"] = info.get("numa_node")
            if g["numa_node"] is not None:
                topo.numa_affinity[f"GPU{g['index']}"] = str(g["numa_node"])
    rdma = [n for n in host["ib_devices"] if n.get("pci_chain")]
    gpu_numa = {numa for g in gpus if (numa := g["numa_node"]) is not None}
    findings = (nvlink_findings(gpus) + p2p_findings(snap["p2p"]) + matrix_findings(topo)
                + nic_numa_findings(rdma, gpu_numa) + health_findings(gpus)
                + _host_findings(host))
    data = {"source": "nvml", **snap["system"], "gpus": gpus, "p2p": snap["p2p"],
            "topology": topo.model_dump(), "nic_gpu_affinity": nic_gpu_affinity(rdma, gpus),
            **host}
    return ToolResult(tool=TOOL, status="success", data=data, findings=findings,
                      invocation=invocation)


def _without_nvml(reason: str, host: HostFacts, runner: CommandRunner,
                  invocation: str) -> ToolResult:
    smi = runner(["nvidia-smi", "topo", "-m"], timeout=30)
    if smi.ok:
        parsed = from_topo_text(smi.stdout, "nvidia-smi topo -m")
        if parsed.status == "success":
            topo = Topology.model_validate(parsed.data["topology"])
            ib_active = {d["name"] for d in host["ib_devices"]
                         if any(p["state"] == "ACTIVE" for p in d["ports"])}
            return ToolResult(
                tool=TOOL, status="success", invocation=invocation + " (nvidia-smi fallback)",
                data={**parsed.data, "nvml_error": reason, **host},
                findings=matrix_findings(topo, ib_active) + _host_findings(host))
    result = ToolResult.unavailable(TOOL, invocation, reason, **host)
    result.findings = _host_findings(host)
    return result

"""Host facts from sysfs under a root path (tests pass a fake tree).

Network interfaces, InfiniBand/RoCE ports, NVIDIA PCI functions, and the PCIe
relationship between two devices computed from their sysfs paths with
nvidia-smi's letters (PIX, PXB, PHB, NODE, SYS).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from typing_extensions import NotRequired, TypedDict

_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_ROOT = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")
NVIDIA_VENDOR = "0x10de"


def read_text(path: Path) -> str | None:
    """File contents stripped, or None when absent or unreadable (sysfs can EINVAL)."""
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text, 0) if text is not None else None
    except ValueError:
        return None


def pci_chain(device_link: Path) -> list[str]:
    """[root complex, bridges..., device] for a sysfs device path or link; [] if not PCI."""
    try:
        parts = device_link.resolve().parts
    except OSError:
        return []
    return [p for p in parts if _ROOT.match(p) or _BDF.match(p)]


def _numa(device_dir: Path) -> int | None:
    node = _int(read_text(device_dir / "numa_node"))
    return None if node is None or node < 0 else node


def pci_relation(a: list[str], b: list[str], numa_a: int | None, numa_b: int | None) -> str:
    """nvidia-smi's letter for two PCI chains (see `pci_chain`)."""
    if not a or not b:
        return "SYS" if numa_a != numa_b else "NODE"
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    if common == 0:
        return "NODE" if numa_a is not None and numa_a == numa_b else "SYS"
    if common == 1:
        return "PHB"
    return "PIX" if len(a) == common + 1 and len(b) == common + 1 else "PXB"


class Interface(TypedDict):
    """One /sys/class/net interface."""

    name: str
    state: str | None
    mtu: int | None
    mac: str | None
    type: str | None
    speed_mbps: int | None
    virtual: bool
    pci_bus_id: str | None
    numa_node: int | None
    pci_chain: NotRequired[list[str]]


class IbPort(TypedDict):
    port: int | None
    state: str | None
    phys_state: str | None
    rate: str | None
    link_layer: str | None
    gid_table: bool


class IbDevice(TypedDict):
    """One /sys/class/infiniband device and its ports."""

    name: str
    ports: list[IbPort]
    netdevs: list[str]
    pci_bus_id: str | None
    numa_node: int | None
    pci_chain: NotRequired[list[str]]


class NvidiaPci(TypedDict):
    """An NVIDIA PCI function: a GPU or an NVSwitch."""

    pci_bus_id: str
    kind: Literal["gpu", "nvswitch"]
    numa_node: int | None
    pci_chain: list[str]


class PciInfo(TypedDict, total=False):
    numa_node: int | None
    pci_chain: list[str]


def read_interfaces(root: Path) -> list[Interface]:
    """Every /sys/class/net interface: state, MTU, MAC, speed, PCI location."""
    net = root / "sys/class/net"
    out = []
    for d in sorted(net.iterdir()) if net.is_dir() else []:
        dev = d / "device"
        chain = pci_chain(dev) if dev.exists() else []
        speed = _int(read_text(d / "speed"))
        out.append(Interface({
            "name": d.name,
            "state": read_text(d / "operstate"),
            "mtu": _int(read_text(d / "mtu")),
            "mac": read_text(d / "address"),
            "type": {1: "ether", 32: "infiniband", 772: "loopback"}.get(
                _int(read_text(d / "type")) or 0, read_text(d / "type")),
            "speed_mbps": speed if speed is not None and speed > 0 else None,
            "virtual": not chain,
            "pci_bus_id": chain[-1] if chain else None,
            "numa_node": _numa(dev) if chain else None,
            "pci_chain": chain,
        }))
    return out


def _gid_present(port: Path) -> bool:
    gid = read_text(port / "gids/0")
    return gid is not None and gid.replace(":", "").strip("0") != ""


def read_ib_devices(root: Path) -> list[IbDevice]:
    """Every /sys/class/infiniband device with its ports (state, rate, link layer, GIDs)."""
    ib = root / "sys/class/infiniband"
    out = []
    for d in sorted(ib.iterdir()) if ib.is_dir() else []:
        dev = d / "device"
        chain = pci_chain(dev) if dev.exists() else []
        ports = []
        for p in sorted((d / "ports").iterdir()) if (d / "ports").is_dir() else []:
            state = read_text(p / "state") or ""
            ports.append(IbPort({
                "port": _int(p.name),
                "state": state.split(":")[-1].strip() or None,
                "phys_state": (read_text(p / "phys_state") or "").split(":")[-1].strip() or None,
                "rate": read_text(p / "rate"),
                "link_layer": read_text(p / "link_layer"),
                "gid_table": _gid_present(p),
            }))
        netdevs = sorted(n.name for n in (dev / "net").iterdir()) if (dev / "net").is_dir() else []
        out.append(IbDevice({
            "name": d.name,
            "ports": ports,
            "netdevs": netdevs,
            "pci_bus_id": chain[-1] if chain else None,
            "numa_node": _numa(dev) if chain else None,
            "pci_chain": chain,
        }))
    return out


def read_nvidia_pci(root: Path) -> list[NvidiaPci]:
    """NVIDIA PCI functions in sysfs: GPUs (class 0x03xx) and NVSwitches (0x0680)."""
    base = root / "sys/bus/pci/devices"
    out = []
    for d in sorted(base.iterdir()) if base.is_dir() else []:
        if read_text(d / "vendor") != NVIDIA_VENDOR:
            continue
        cls = read_text(d / "class") or ""
        kind: Literal["gpu", "nvswitch"] | None = (
            "gpu" if cls.startswith("0x03") else "nvswitch" if cls.startswith("0x0680") else None)
        if kind:
            out.append(NvidiaPci(pci_bus_id=d.name, kind=kind, numa_node=_numa(d),
                                 pci_chain=pci_chain(d)))
    return out


def gpu_pci_info(root: Path, bus_id: str) -> PciInfo:
    """NUMA node and PCI chain of a GPU known by bus id (from NVML)."""
    d = root / "sys/bus/pci/devices" / bus_id
    return PciInfo(numa_node=_numa(d), pci_chain=pci_chain(d)) if d.exists() else PciInfo()

"""Pure parser for `nvidia-smi topo -m` text, and the Topology record it yields.

The letters are nvidia-smi's: X (self), NV# (# bonded NVLinks), PIX (at most one
PCIe bridge), PXB (several bridges, no host bridge), PHB (through a PCIe host
bridge), NODE (between host bridges of one NUMA node), SYS (across NUMA nodes).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LINK = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|N/A)$")
_TRAILING = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_LEGEND_NIC = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")

#: From nearest to farthest; NVLink is nearer than all of these.
PCIE_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")
#: Links that mean "shares a PCIe switch" (no host bridge on the path).
SAME_SWITCH = frozenset({"PIX", "PXB"})


class Topology(BaseModel):
    """Devices and the link letter between each pair, as nvidia-smi shows them."""

    gpus: list[str] = Field(default_factory=list)
    nics: list[str] = Field(default_factory=list)
    links: dict[str, dict[str, str]] = Field(default_factory=dict)
    cpu_affinity: dict[str, str] = Field(default_factory=dict)
    numa_affinity: dict[str, str] = Field(default_factory=dict)
    nic_names: dict[str, str] = Field(default_factory=dict)
    source: str = "nvidia-smi topo -m"

    def link(self, a: str, b: str) -> str | None:
        """The letter between devices `a` and `b` (either order), or None."""
        return self.links.get(a, {}).get(b) or self.links.get(b, {}).get(a)

    def nvlink_count(self, a: str, b: str) -> int:
        """Number of bonded NVLinks between two GPUs (0 when not NVLink)."""
        letter = self.link(a, b) or ""
        return int(letter[2:]) if letter.startswith("NV") and letter[2:].isdigit() else 0

    def gpu_pairs_without_nvlink(self) -> list[tuple[str, str]]:
        return [
            (a, b)
            for i, a in enumerate(self.gpus)
            for b in self.gpus[i + 1 :]
            if self.nvlink_count(a, b) == 0
        ]

    def nearest_gpus(self, nic: str) -> list[str]:
        """GPUs with the closest PCIe relationship to `nic` (sharing a switch first)."""
        ranked = [
            (PCIE_ORDER.index(v), g) for g in self.gpus if (v := self.link(g, nic)) in PCIE_ORDER
        ]
        if not ranked:
            return []
        best = min(r for r, _ in ranked)
        return [g for r, g in ranked if r == best]


def _header_columns(line: str) -> list[str]:
    """Split the header into device columns, merging the multi-word trailing ones."""
    text = line.strip()
    for name in _TRAILING:
        text = text.replace(name, name.replace(" ", "_"))
    return [t.replace("_", " ") if t.replace("_", " ") in _TRAILING else t for t in text.split()]


def _find_header(lines: list[str]) -> int:
    for i, line in enumerate(lines):
        tokens = line.split()
        if tokens and tokens[0] == "GPU0" and len(tokens) >= 2 and not _LINK.match(tokens[1]):
            return i
    raise ValueError("no `nvidia-smi topo -m` matrix found (expected a header row starting GPU0)")


def parse_topo_matrix(text: str) -> Topology:
    """Parse `nvidia-smi topo -m` output (spaces or tabs, with or without legends).

    Raises ValueError when the text holds no matrix.
    """
    lines = [_ANSI.sub("", ln).rstrip("\n") for ln in text.splitlines()]
    start = _find_header(lines)
    columns = _header_columns(lines[start])
    devices = [c for c in columns if c not in _TRAILING]
    trailing = [c for c in columns if c in _TRAILING]
    topo = Topology()
    for line in lines[start + 1 :]:
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0].rstrip(":") in ("Legend", "NIC"):
            break
        name = tokens[0]
        if name not in devices:
            continue
        values = tokens[1 : 1 + len(devices)]
        if not all(_LINK.match(v) for v in values):
            continue
        topo.links[name] = {d: v for d, v in zip(devices, values, strict=False) if d != name}
        rest = dict(zip(trailing, tokens[1 + len(devices) :], strict=False))
        if rest.get("CPU Affinity") not in (None, "N/A"):
            topo.cpu_affinity[name] = rest["CPU Affinity"]
        if rest.get("NUMA Affinity") not in (None, "N/A"):
            topo.numa_affinity[name] = rest["NUMA Affinity"]
    for line in lines:
        if m := _LEGEND_NIC.match(line):
            topo.nic_names[m.group(1)] = m.group(2)
    topo.gpus = [d for d in devices if re.fullmatch(r"GPU\d+", d)]
    topo.nics = [d for d in devices if d not in topo.gpus]
    if not topo.links:
        raise ValueError("`nvidia-smi topo -m` header found but no matrix rows could be read")
    return topo

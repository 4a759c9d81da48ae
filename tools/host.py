"""Pure parsers for host facts that matter to NCCL: PCIe ACS and the IOMMU."""

from __future__ import annotations

import re

from typing_extensions import NotRequired, TypedDict

_DEV = re.compile(r"^((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(.*)$")


class AcsBridge(TypedDict):
    bdf: str
    device: str
    acsctl: str


class Acs(TypedDict):
    """PCI bridges with ACS redirecting P2P, and whether lspci could tell."""

    acs_enabled_bridges: list[AcsBridge]
    readable: bool
    note: str | None


class Iommu(TypedDict):
    params: dict[str, str]
    enabled: bool
    passthrough: bool
    translating: bool
    sysfs_iommu_groups: NotRequired[list[str]]


def parse_lspci_acs(text: str) -> Acs:
    """Find PCI bridges whose ACS control has SrcValid+ (P2P redirected through the root).

    `text` is `lspci -vvv` output. Without root lspci hides capabilities; then
    `readable` is False and nothing can be said about ACS.
    """
    bridges: list[AcsBridge] = []
    current: tuple[str, str] | None = None
    seen_acs = denied = False
    for line in text.splitlines():
        if m := _DEV.match(line):
            current = (m.group(1), m.group(2))
            continue
        stripped = line.strip()
        if "<access denied>" in stripped:
            denied = True
        if stripped.startswith("ACSCtl:") and current:
            seen_acs = True
            if "SrcValid+" in stripped:
                bridges.append(AcsBridge({"bdf": current[0], "device": current[1],
                                "acsctl": stripped.split(":", 1)[1].strip()}))
    return {
        "acs_enabled_bridges": bridges,
        "readable": seen_acs or not denied,
        "note": None if seen_acs or not denied else
        "lspci hid capabilities (access denied); run as root to read ACS",
    }


def parse_iommu_cmdline(cmdline: str) -> Iommu:
    """IOMMU settings from the kernel command line (/proc/cmdline)."""
    params: dict[str, str] = {}
    for tok in cmdline.split():
        key, _, value = tok.partition("=")
        if key in ("intel_iommu", "amd_iommu", "iommu"):
            params[key] = value
    on = params.get("intel_iommu", "").split(",")[0] == "on" or params.get("amd_iommu") == "on"
    passthrough = params.get("iommu") == "pt" or "pt" in params.get("intel_iommu", "").split(",")
    return Iommu(params=params, enabled=on, passthrough=passthrough,
                 translating=on and not passthrough)

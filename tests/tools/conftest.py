"""Shared test doubles for the node tools: a recorded NVML and a fake sysfs tree."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


class FakeNvmlError(Exception):
    pass


class NotSupportedError(FakeNvmlError):
    pass


class RecordedNvml:
    """Stands in for the `pynvml` module, answering from recorded per-GPU values."""

    NVMLError = FakeNvmlError
    NVML_NVLINK_MAX_LINKS = 18
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_AGGREGATE_ECC = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_P2P_CAPS_INDEX_READ = 0

    def __init__(self, gpus: list[dict[str, Any]], p2p: dict[tuple[int, int], int] | None = None,
                 topo: dict[tuple[int, int], int] | None = None, init_error: str | None = None):
        self.gpus, self.p2p, self.topo, self.init_error = gpus, p2p or {}, topo or {}, init_error
        self.shutdown_called = False

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        if self.init_error:
            raise FakeNvmlError(self.init_error)

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.shutdown_called = True

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion(self) -> int:  # noqa: N802
        return 12040

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:  # noqa: N802
        return i

    def _g(self, h: int, key: str) -> Any:
        value = self.gpus[h].get(key)
        if value is None:
            raise NotSupportedError("Not Supported")
        return value

    def nvmlDeviceGetName(self, h: int) -> str:  # noqa: N802
        return self._g(h, "name")

    def nvmlDeviceGetUUID(self, h: int) -> str:  # noqa: N802
        return self._g(h, "uuid")

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:  # noqa: N802
        return SimpleNamespace(busId=self._g(h, "bus").encode())

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:  # noqa: N802
        return SimpleNamespace(total=81559 * 2**20, used=0)

    def nvmlDeviceGetEccMode(self, h: int) -> tuple[int, int]:  # noqa: N802
        return (1, 1)

    def nvmlDeviceGetTotalEccErrors(self, h: int, kind: int, counter: int) -> int:  # noqa: N802
        return self.gpus[h].get("ecc", {}).get((kind, counter), 0)

    def nvmlDeviceGetRemappedRows(self, h: int) -> tuple[int, int, int, int]:  # noqa: N802
        return self.gpus[h].get("remap", (0, 0, 0, 0))

    def nvmlDeviceGetRetiredPages(self, h: int, cause: int) -> list[int]:  # noqa: N802
        raise NotSupportedError("Not Supported")  # Ampere+ uses row remapping

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:  # noqa: N802
        return 31

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:  # noqa: N802
        return 88000

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:  # noqa: N802
        return 700000

    def nvmlDeviceGetCpuAffinity(self, h: int, size: int) -> list[int]:  # noqa: N802
        return self._g(h, "affinity")

    def nvmlDeviceGetNumaNodeId(self, h: int) -> int:  # noqa: N802
        return self._g(h, "numa")

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:  # noqa: N802
        links = self.gpus[h].get("links", [])
        if link >= len(links):
            raise NotSupportedError("Invalid Argument")
        return links[link][0]

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: int, link: int) -> Any:  # noqa: N802
        return SimpleNamespace(busId=self.gpus[h]["links"][link][1])

    def nvmlDeviceGetNvLinkErrorCounter(self, h: int, link: int, c: int) -> int:  # noqa: N802
        return self.gpus[h].get("link_errors", {}).get((link, c), 0)

    def nvmlDeviceGetP2PStatus(self, a: int, b: int, cap: int) -> int:  # noqa: N802
        return self.p2p.get((min(a, b), max(a, b)), 0)

    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:  # noqa: N802
        return self.topo.get((min(a, b), max(a, b)), 50)


def h100_node(n: int = 4, down: dict[int, list[int]] | None = None) -> RecordedNvml:
    """n H100 SXM GPUs behind NVSwitches (18 links each), values as NVML reports them."""
    down = down or {}
    gpus = []
    for i in range(n):
        bus = f"00000000:{0x18 + 0x12 * i:02X}:00.0"
        links = [(0 if lk in down.get(i, []) else 1, f"00000000:{0x80 + lk // 5:02X}:00.0")
                 for lk in range(18)]
        gpus.append({"name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{i:08d}-0000", "bus": bus,
                     "affinity": [0xFFFFFFFFFF if i < n // 2 else 0xFFFFFFFFFF << 40],
                     "numa": 0 if i < n // 2 else 1, "links": links})
    return RecordedNvml(gpus)


@pytest.fixture
def make_sysfs(tmp_path: Path) -> Any:
    """Build a fake sysfs tree under tmp_path and return its root."""

    def write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")

    def pci_device(chain: list[str], numa: int, attrs: dict[str, str] | None = None) -> Path:
        dev = tmp_path / "sys/devices" / "/".join(chain)
        dev.mkdir(parents=True, exist_ok=True)
        write(dev / "numa_node", str(numa))
        for k, v in (attrs or {}).items():
            write(dev / k, v)
        link = tmp_path / "sys/bus/pci/devices" / chain[-1]
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(dev)
        return dev

    def netdev(name: str, dev: Path | None, mtu: int = 1500, state: str = "up",
               kind: int = 1) -> None:
        d = tmp_path / "sys/class/net" / name
        d.mkdir(parents=True, exist_ok=True)
        write(d / "operstate", state)
        write(d / "mtu", str(mtu))
        write(d / "address", "aa:bb:cc:dd:ee:ff")
        write(d / "type", str(kind))
        if dev is not None:
            (d / "device").symlink_to(dev)
            (dev / "net" / name).mkdir(parents=True, exist_ok=True)

    def ibdev(name: str, dev: Path, layer: str = "InfiniBand", state: str = "4: ACTIVE",
              rate: str = "400 Gb/sec (4X NDR)") -> None:
        d = tmp_path / "sys/class/infiniband" / name
        port = d / "ports/1"
        write(port / "state", state)
        write(port / "phys_state", "5: LinkUp")
        write(port / "rate", rate)
        write(port / "link_layer", layer)
        write(port / "gids/0", "fe80:0000:0000:0000:a088:c203:0000:1234")
        (d / "device").symlink_to(dev)

    return SimpleNamespace(root=tmp_path, write=write, pci_device=pci_device, netdev=netdev,
                           ibdev=ibdev)

"""One injectable NVML wrapper: GPUs, NVLinks, P2P and topology as plain data.

`NvmlClient(lib)` takes the `pynvml` module (from nvidia-ml-py) or any object
with the same functions and constants, so tests feed recorded values through
the same code that runs on a GPU node. Every per-device query that the GPU
does not support (NVMLError) is recorded as None rather than failing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from typing_extensions import NotRequired, TypedDict

from tools.topo.matrix import Topology

#: nvmlDeviceGetTopologyCommonAncestor levels -> nvidia-smi letters.
_TOPO_LETTER = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
#: nvmlDeviceGetP2PStatus values -> nvidia-smi `topo -p2p` letters.
P2P_STATUS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS", 6: "U"}
_NVLINK_ERRORS = {"replay": 0, "recovery": 1, "crc_flit": 2, "crc_data": 3}


class NvmlSystem(TypedDict):
    driver_version: str | None
    cuda_driver_version: str | None
    nvml_version: str | None


class EccMode(TypedDict):
    current: bool
    pending: bool


class EccErrors(TypedDict):
    volatile_corrected: int | None
    volatile_uncorrected: int | None
    aggregate_corrected: int | None
    aggregate_uncorrected: int | None


class RemappedRows(TypedDict):
    correctable: int
    uncorrectable: int
    pending: bool
    failure: bool


class NvLink(TypedDict):
    link: int
    active: bool
    remote_bus_id: str | None
    errors: dict[str, int | None]


class GpuInfo(TypedDict):
    """One GPU as NVML describes it; None for what the GPU does not support."""

    index: int
    name: str | None
    uuid: str | None
    pci_bus_id: str | None
    memory_total_mib: int | None
    memory_used_mib: int | None
    ecc_mode: EccMode | None
    ecc_errors: EccErrors
    retired_pages: dict[str, int | None]
    retired_pages_pending: int | None
    remapped_rows: RemappedRows | None
    temperature_c: int | None
    power_w: float | None
    power_limit_w: float | None
    cpu_affinity: str | None
    numa_node: int | None
    nvlinks: NotRequired[list[NvLink]]
    #: from sysfs, added by the topology diagnostic
    pci_chain: NotRequired[list[str]]


class NvmlSnapshot(TypedDict):
    system: NvmlSystem
    gpus: list[GpuInfo]
    p2p: dict[str, dict[str, str]]
    topology: Topology


class NvmlUnavailableError(RuntimeError):
    """NVML could not be loaded or initialised; the message is the user-facing reason."""


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _bus_id(value: object) -> str:
    """Normalise a PCI bus id to sysfs form: 4-hex-digit domain, lower case."""
    parts = _text(value).strip().lower().split(":")
    if len(parts) == 3:
        return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}"
    return "0000:" + ":".join(parts) if len(parts) == 2 else ":".join(parts)


def cpu_list(mask_words: list[int], word_bits: int = 64) -> str:
    """Render an NVML CPU affinity bitmask as a cpulist ("0-47,96-143")."""
    cpus = [w * word_bits + b for w, word in enumerate(mask_words)
            for b in range(word_bits) if int(word) >> b & 1]
    ranges: list[list[int]] = []
    for c in cpus:
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges)


class NvmlClient:
    """A thin, failure-tolerant view of NVML. Use as a context manager."""

    def __init__(self, lib: Any | None = None) -> None:
        self._lib = lib
        self.lib: Any = None

    def __enter__(self) -> NvmlClient:
        lib: Any = self._lib
        if lib is None:
            try:
                import pynvml
            except ImportError as exc:
                raise NvmlUnavailableError(
                    f"NVML not available: nvidia-ml-py is not installed ({exc})"
                ) from exc
            lib = pynvml
        try:
            lib.nvmlInit()
        except lib.NVMLError as exc:
            raise NvmlUnavailableError(f"NVML not available: {exc}") from exc
        self.lib = lib
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.lib.nvmlShutdown()
        except self.lib.NVMLError:
            pass

    def _q(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except (self.lib.NVMLError, AttributeError, NotImplementedError):
            return None

    def _call(self, name: str, *args: Any) -> Any:
        fn = getattr(self.lib, name, None)
        return None if fn is None else self._q(fn, *args)

    # -- system -----------------------------------------------------------------
    def system(self) -> NvmlSystem:
        cuda = self._call("nvmlSystemGetCudaDriverVersion")
        driver = self._call("nvmlSystemGetDriverVersion")
        return {
            "driver_version": _text(driver) if driver is not None else None,
            "cuda_driver_version": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
            "nvml_version": _text(v) if (v := self._call("nvmlSystemGetNVMLVersion")) else None,
        }

    def count(self) -> int:
        return int(self.lib.nvmlDeviceGetCount())

    def handle(self, index: int) -> Any:
        return self.lib.nvmlDeviceGetHandleByIndex(index)

    # -- one GPU ----------------------------------------------------------------
    def gpu(self, index: int) -> GpuInfo:
        lib, h = self.lib, self.handle(index)
        pci = self._call("nvmlDeviceGetPciInfo", h)
        mem = self._call("nvmlDeviceGetMemoryInfo", h)
        ecc = self._call("nvmlDeviceGetEccMode", h)
        unc = getattr(lib, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
        cor = getattr(lib, "NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
        vol = getattr(lib, "NVML_VOLATILE_ECC", 0)
        agg = getattr(lib, "NVML_AGGREGATE_ECC", 1)
        remap = self._call("nvmlDeviceGetRemappedRows", h)
        retired = {
            cause: len(pages) if (pages := self._call("nvmlDeviceGetRetiredPages", h, code))
            is not None else None
            for cause, code in (("single_bit", 0), ("double_bit", 1))
        }
        power = self._call("nvmlDeviceGetPowerUsage", h)
        limit = self._call("nvmlDeviceGetEnforcedPowerLimit", h)
        affinity = self._call("nvmlDeviceGetCpuAffinity", h, 16)
        return {
            "index": index,
            "name": _text(n) if (n := self._call("nvmlDeviceGetName", h)) is not None else None,
            "uuid": _text(u) if (u := self._call("nvmlDeviceGetUUID", h)) is not None else None,
            "pci_bus_id": _bus_id(pci.busId) if pci is not None else None,
            "memory_total_mib": mem.total // 2**20 if mem is not None else None,
            "memory_used_mib": mem.used // 2**20 if mem is not None else None,
            "ecc_mode": None if ecc is None else {"current": bool(ecc[0]), "pending": bool(ecc[1])},
            "ecc_errors": {
                "volatile_corrected": self._call("nvmlDeviceGetTotalEccErrors", h, cor, vol),
                "volatile_uncorrected": self._call("nvmlDeviceGetTotalEccErrors", h, unc, vol),
                "aggregate_corrected": self._call("nvmlDeviceGetTotalEccErrors", h, cor, agg),
                "aggregate_uncorrected": self._call("nvmlDeviceGetTotalEccErrors", h, unc, agg),
            },
            "retired_pages": retired,
            "retired_pages_pending": self._call("nvmlDeviceGetRetiredPagesPendingStatus", h),
            "remapped_rows": None if remap is None else {
                "correctable": remap[0], "uncorrectable": remap[1],
                "pending": bool(remap[2]), "failure": bool(remap[3]),
            },
            "temperature_c": self._call("nvmlDeviceGetTemperature", h,
                                        getattr(lib, "NVML_TEMPERATURE_GPU", 0)),
            "power_w": power / 1000 if power is not None else None,
            "power_limit_w": limit / 1000 if limit is not None else None,
            "cpu_affinity": cpu_list(list(affinity)) if affinity is not None else None,
            "numa_node": self._call("nvmlDeviceGetNumaNodeId", h),
        }

    def nvlinks(self, index: int) -> list[NvLink]:
        """Every NVLink the GPU reports: state, remote bus id, error counters."""
        h = self.handle(index)
        links: list[NvLink] = []
        for link in range(int(getattr(self.lib, "NVML_NVLINK_MAX_LINKS", 18))):
            state = self._call("nvmlDeviceGetNvLinkState", h, link)
            if state is None:
                continue
            remote = self._call("nvmlDeviceGetNvLinkRemotePciInfo", h, link)
            errors = {k: self._call("nvmlDeviceGetNvLinkErrorCounter", h, link, code)
                      for k, code in _NVLINK_ERRORS.items()}
            links.append({
                "link": link,
                "active": bool(state),
                "remote_bus_id": _bus_id(remote.busId) if remote is not None else None,
                "errors": errors,
            })
        return links

    def activity(self, index: int) -> tuple[int | None, float | None, int | None]:
        """(utilisation %, power W, SM clock MHz) now; None for what NVML does not say."""
        h = self.handle(index)
        util = self._call("nvmlDeviceGetUtilizationRates", h)
        power = self._call("nvmlDeviceGetPowerUsage", h)
        clock = self._call("nvmlDeviceGetClockInfo", h, getattr(self.lib, "NVML_CLOCK_SM", 1))
        return (int(util.gpu) if util is not None else None,
                round(power / 1000, 1) if power is not None else None,
                int(clock) if clock is not None else None)

    def p2p(self, i: int, j: int) -> str:
        code = self._call("nvmlDeviceGetP2PStatus", self.handle(i), self.handle(j),
                          getattr(self.lib, "NVML_P2P_CAPS_INDEX_READ", 0))
        return "U" if code is None else P2P_STATUS.get(int(code), "U")

    def pcie_letter(self, i: int, j: int) -> str | None:
        level = self._call("nvmlDeviceGetTopologyCommonAncestor", self.handle(i), self.handle(j))
        return None if level is None else _TOPO_LETTER.get(int(level))


def nvml_snapshot(client: NvmlClient) -> NvmlSnapshot:
    """Everything topology needs from an initialised client, as plain data."""
    n = client.count()
    gpus = [client.gpu(i) for i in range(n)]
    for g in gpus:
        g["nvlinks"] = client.nvlinks(g["index"])
    names = [f"GPU{i}" for i in range(n)]
    topo = Topology(gpus=names, source="nvml")
    p2p: dict[str, dict[str, str]] = {}
    bus_to_gpu = {g["pci_bus_id"]: f"GPU{g['index']}" for g in gpus if g["pci_bus_id"]}
    switch_links = [sum(1 for lk in g.get("nvlinks", [])
                        if lk["active"] and lk["remote_bus_id"] not in bus_to_gpu) for g in gpus]
    for i, a in enumerate(names):
        topo.links[a] = {}
        p2p[a] = {}
        active = [lk for lk in gpus[i].get("nvlinks", []) if lk["active"]]
        for j, b in enumerate(names):
            if i == j:
                continue
            direct = sum(1 for lk in active if bus_to_gpu.get(lk["remote_bus_id"] or "") == b)
            # Behind NVSwitch a pair gets the links both GPUs still have to the switches.
            nv = direct + min(switch_links[i], switch_links[j])
            topo.links[a][b] = f"NV{nv}" if nv else (client.pcie_letter(i, j) or "N/A")
            p2p[a][b] = client.p2p(i, j)
        if affinity := gpus[i]["cpu_affinity"]:
            topo.cpu_affinity[a] = affinity
        if gpus[i].get("numa_node") is not None:
            topo.numa_affinity[a] = str(gpus[i]["numa_node"])
    return {"system": client.system(), "gpus": gpus, "p2p": p2p, "topology": topo}

"""Which processes hold this node's GPUs, through the tools' NVML wrapper."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

from tools.nvml import NvmlClient, NvmlUnavailableError

_QUERIES = ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses")


class GpuProcess(TypedDict):
    gpu: int
    pid: int
    used_mib: int | None


def gpu_processes(nvml_lib: Any | None = None) -> list[GpuProcess]:
    """[{gpu, pid, used_mib}] for every process on any GPU; [] without NVML (none known)."""
    try:
        with NvmlClient(nvml_lib) as c:
            found: dict[tuple[int, int], GpuProcess] = {}
            for i in range(c.count()):
                h = c.handle(i)
                for q in _QUERIES:
                    fn = getattr(c.lib, q, None)
                    procs = c._q(fn, h) if fn is not None else None
                    for p in procs or []:
                        used = getattr(p, "usedGpuMemory", None)
                        found[(i, int(p.pid))] = GpuProcess(
                            gpu=i, pid=int(p.pid),
                            used_mib=used // 2**20 if isinstance(used, int) else None)
            return list(found.values())
    except NvmlUnavailableError:
        return []

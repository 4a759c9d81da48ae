"""The environment diagnostic: variables, versions, limits, network, RDMA, with lint."""

from __future__ import annotations

import importlib.util
import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from typing_extensions import TypedDict

from tools.env import facts as ec
from tools.env.lint import EnvFacts, lint_env
from tools.nvml import NvmlClient, NvmlUnavailableError
from tools.result import ToolResult
from tools.runner import CommandRunner, SubprocessRunner
from tools.sysfs import Interface, read_ib_devices, read_interfaces, read_nvidia_pci

TOOL = "env"


class NetInterface(Interface):
    """An interface as the env diagnostic reports it: with its addresses, without its PCI
    chain."""

    addresses: list[str]


class NvmlSummary(TypedDict, total=False):
    error: str
    gpu_count: int
    driver_version: str | None
    cuda_driver_version: str | None
    nvml_version: str | None
    nvlink_active: bool


def nvml_summary(nvml_lib: Any | None) -> NvmlSummary:
    """GPU count, driver and whether any NVLink is active; {'error': ...} without NVML."""
    try:
        with NvmlClient(nvml_lib) as c:
            n = c.count()
            links = [lk for i in range(n) for lk in c.nvlinks(i)]
            system = c.system()
            return NvmlSummary(gpu_count=n, driver_version=system["driver_version"],
                               cuda_driver_version=system["cuda_driver_version"],
                               nvml_version=system["nvml_version"],
                               nvlink_active=any(lk["active"] for lk in links))
    except NvmlUnavailableError as exc:
        return NvmlSummary(error=str(exc))


def collect_env(
    *,
    environ: Mapping[str, str] | None = None,
    root: Path | str = "/",
    runner: CommandRunner | None = None,
    nvml_lib: Any | None = None,
    import_torch: bool = True,
    statvfs: Any = os.statvfs,
    getrlimit: Any = None,
) -> ToolResult:
    """Collect and lint the node environment. All inputs are injectable for tests."""
    environ = os.environ if environ is None else environ
    root, runner = Path(root), runner or SubprocessRunner()
    addrs = ec.ip_addresses(runner)
    interfaces = [NetInterface(**iface, addresses=addrs.get(iface["name"], []))
                  for iface in read_interfaces(root)]
    for iface in interfaces:
        iface.pop("pci_chain", None)
    ib = read_ib_devices(root)
    for dev in ib:
        dev.pop("pci_chain", None)
    nvpci = read_nvidia_pci(root)
    nvswitch = any(d["kind"] == "nvswitch" for d in nvpci)
    modules = ec.modules_loaded(root)
    nvml = nvml_summary(nvml_lib)
    torch_info = ({"installed": False} if importlib.util.find_spec("torch") is None
                  else {"installed": True, **(ec.torch_runtime() if import_torch else {})})
    shm = ec.shm_usage(root / "dev/shm", statvfs)
    limits = ec.ulimits(getrlimit)
    peermem = bool(modules & {"nvidia_peermem", "nv_peer_mem"})
    fabricmanager = ec.fabricmanager_active(root, runner) if nvswitch else None
    gpu_count = nvml.get("gpu_count")
    if gpu_count is None:
        gpu_count = sum(1 for d in nvpci if d["kind"] == "gpu") or None
    data: dict[str, object] = {
        "variables": ec.relevant_env(environ),
        "versions": {
            "python": platform.python_version(),
            "packages": ec.package_versions(),
            "torch_runtime": torch_info,
            "driver": nvml.get("driver_version") or ec.driver_version(root),
            "cuda_driver": nvml.get("cuda_driver_version"),
        },
        "kernel": ec.kernel_info(root),
        "container": ec.container_info(root, environ),
        "dev_shm": shm,
        "ulimits": limits,
        "cgroup_memory": ec.cgroup_memory(root),
        "interfaces": interfaces,
        "ib_devices": ib,
        "gpus": {"count": gpu_count, "nvml": nvml},
        "nvidia_peermem_loaded": peermem,
        "nvswitch_present": nvswitch,
        "fabricmanager_active": fabricmanager,
    }
    facts = EnvFacts(
        environ=environ,
        interfaces=interfaces,
        ib_devices=ib,
        has_nvlink=nvml.get("nvlink_active") or nvswitch or None,
        gpu_count=gpu_count,
        shm_total_bytes=shm.get("total_bytes"),
        memlock_soft=limits["memlock_soft"],
        peermem_loaded=peermem if modules else None,
        nvswitch_present=nvswitch,
        fabricmanager_active=fabricmanager,
    )
    return ToolResult(tool=TOOL, status="success", data=data, findings=lint_env(facts),
                      invocation="env: environment, /proc, /sys, ip -j addr, resource limits")

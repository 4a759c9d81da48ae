"""Environment collectors. Each takes its inputs injected (an environ mapping, a
filesystem root, a command runner, lookup functions) so tests feed recorded values.
"""

from __future__ import annotations

import json
import os
import platform
import re
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Protocol

from typing_extensions import TypedDict

from tools.redact import redact_env
from tools.runner import CommandRunner
from tools.sysfs import read_text

ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "TORCHELASTIC_", "CUDA_",
                "NVIDIA_", "GLOO_", "UCX_", "FI_", "PYTORCH_CUDA_ALLOC_CONF")
ENV_NAMES = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
             "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "ROLE_RANK", "OMP_NUM_THREADS")
PACKAGES = ("torch", "deepspeed", "transformers", "accelerate", "trl", "verl", "vllm", "ray",
            "megatron-core", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "nvidia-ml-py")
UNLIMITED = -1


class TorchRuntime(TypedDict, total=False):
    """What torch was built with (or why it could not be read)."""

    error: str
    torch: str
    cuda_runtime: str | None
    nccl: str | None
    cuda_available: bool
    device_count: int
    nccl_error: str


class Container(TypedDict):
    in_container: bool
    kind: str | None
    evidence: list[str]


class ShmUsage(TypedDict, total=False):
    path: str
    error: str
    total_bytes: int
    used_bytes: int
    free_bytes: int


class Ulimits(TypedDict):
    """Soft and hard limits; UNLIMITED (-1) for none."""

    memlock_soft: int
    memlock_hard: int
    nofile_soft: int
    nofile_hard: int


class CgroupMemory(TypedDict, total=False):
    version: int | None
    limit_bytes: int | None
    usage_bytes: int | None


class StatVfs(Protocol):
    """The fields of `os.statvfs` the /dev/shm reading uses."""

    @property
    def f_blocks(self) -> int: ...
    @property
    def f_frsize(self) -> int: ...
    @property
    def f_bavail(self) -> int: ...


def relevant_env(environ: Mapping[str, str]) -> dict[str, str]:
    """NCCL/torch/CUDA/launcher variables, secrets redacted, sorted by name."""
    picked = {k: v for k, v in environ.items() if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}
    return dict(sorted(redact_env(picked).items()))


def package_versions(lookup: Callable[[str], str] = metadata.version) -> dict[str, str | None]:
    """Installed versions (importlib.metadata; nothing is imported)."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = lookup(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def torch_runtime() -> TorchRuntime:
    """CUDA/NCCL versions torch was built with. Imports torch: call only when installed."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - a broken torch install is a fact, not a crash
        return {"error": f"import torch failed: {exc}"}
    out = TorchRuntime(torch=str(torch.__version__), cuda_runtime=torch.version.cuda,
                       nccl=None, cuda_available=False, device_count=0)
    try:
        out["cuda_available"] = bool(torch.cuda.is_available())
        out["device_count"] = torch.cuda.device_count() if out["cuda_available"] else 0
        if torch.version.cuda:
            nccl_version: Callable[[], object] = torch.cuda.nccl.version  # untyped in torch
            v = nccl_version()
            out["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception as exc:  # noqa: BLE001
        out["nccl_error"] = str(exc)
    return out


def driver_version(root: Path) -> str | None:
    text = read_text(root / "proc/driver/nvidia/version") or ""
    m = re.search(r"Kernel Module(?: for \S+)?\s+([0-9][0-9.]+)", text)
    return m.group(1) if m else None


def container_info(root: Path, environ: Mapping[str, str]) -> Container:
    evidence = []
    if (root / ".dockerenv").exists():
        evidence.append("/.dockerenv")
    if (root / "run/.containerenv").exists():
        evidence.append("/run/.containerenv")
    cgroup = read_text(root / "proc/1/cgroup") or ""
    for word in ("kubepods", "docker", "containerd", "libpod", "lxc"):
        if word in cgroup:
            evidence.append(f"/proc/1/cgroup mentions {word}")
    if environ.get("KUBERNETES_SERVICE_HOST"):
        evidence.append("KUBERNETES_SERVICE_HOST set")
    kind = ("kubernetes" if any("kube" in e.lower() for e in evidence) else
            "podman" if any("containerenv" in e or "libpod" in e for e in evidence) else
            "docker" if evidence else None)
    return {"in_container": bool(evidence), "kind": kind, "evidence": evidence}


def shm_usage(path: Path, statvfs: Callable[[Path], StatVfs] = os.statvfs) -> ShmUsage:
    try:
        st = statvfs(path)
    except OSError as exc:
        return {"path": str(path), "error": str(exc)}
    total, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    return {"path": str(path), "total_bytes": total, "used_bytes": total - free,
            "free_bytes": free}


def ulimits(getrlimit: Callable[[int], tuple[int, int]] | None = None) -> Ulimits:
    import resource

    get = getrlimit or resource.getrlimit
    inf = resource.RLIM_INFINITY

    def norm(v: int) -> int:
        return UNLIMITED if v == inf else v

    ml, nf = get(resource.RLIMIT_MEMLOCK), get(resource.RLIMIT_NOFILE)
    return {"memlock_soft": norm(ml[0]), "memlock_hard": norm(ml[1]),
            "nofile_soft": norm(nf[0]), "nofile_hard": norm(nf[1])}


def cgroup_memory(root: Path) -> CgroupMemory:
    """Memory limit of this cgroup (v2 memory.max, else v1 memory.limit_in_bytes)."""
    v2 = read_text(root / "sys/fs/cgroup/memory.max")
    if v2 is not None:
        return {"version": 2, "limit_bytes": None if v2 == "max" else int(v2),
                "usage_bytes": _maybe_int(read_text(root / "sys/fs/cgroup/memory.current"))}
    v1 = read_text(root / "sys/fs/cgroup/memory/memory.limit_in_bytes")
    if v1 is not None:
        limit = int(v1)
        return {"version": 1, "limit_bytes": None if limit >= 2**62 else limit,
                "usage_bytes": _maybe_int(
                    read_text(root / "sys/fs/cgroup/memory/memory.usage_in_bytes"))}
    return {"version": None, "limit_bytes": None}


def _maybe_int(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None


def ip_addresses(runner: CommandRunner) -> dict[str, list[str]]:
    """Interface -> addresses (CIDR), from `ip -j addr show`; {} when unavailable."""
    out = runner(["ip", "-j", "addr", "show"], timeout=5)
    if not out.ok:
        return {}
    try:
        rows = json.loads(out.stdout)
    except ValueError:
        return {}
    return {r.get("ifname", "?"): [f"{a.get('local')}/{a.get('prefixlen')}"
                                   for a in r.get("addr_info", [])] for r in rows}


def modules_loaded(root: Path) -> set[str]:
    text = read_text(root / "proc/modules") or ""
    return {line.split()[0] for line in text.splitlines() if line.strip()}


def fabricmanager_active(root: Path, runner: CommandRunner) -> bool | None:
    """Is nv-fabricmanager running? /proc scan first, then systemctl; None if unknown."""
    proc = root / "proc"
    if proc.is_dir():
        for p in proc.iterdir():
            if p.name.isdigit() and (read_text(p / "comm") or "").startswith("nv-fabricmanage"):
                return True
    out = runner(["systemctl", "is-active", "nvidia-fabricmanager"], timeout=5)
    if out.error:
        return None
    return out.stdout.strip() == "active"


def kernel_info(root: Path) -> dict[str, str | None]:
    return {"release": read_text(root / "proc/sys/kernel/osrelease") or platform.release(),
            "machine": platform.machine()}

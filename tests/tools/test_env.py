"""collect_env on injected inputs: a fake root, environ, runner, limits and statvfs."""

from __future__ import annotations

import json
import resource
from types import SimpleNamespace

from conftest import RecordedNvml, h100_node

from tools.env.collect import collect_env
from tools.env.facts import cgroup_memory, container_info, package_versions, relevant_env
from tools.runner import RecordedRunner

IP_JSON = json.dumps([{"ifname": "lo", "addr_info": [{"local": "127.0.0.1", "prefixlen": 8}]},
                      {"ifname": "ib0", "addr_info": [{"local": "10.0.0.5", "prefixlen": 16}]}])


def small_shm(path: object) -> SimpleNamespace:
    return SimpleNamespace(f_blocks=16384, f_frsize=4096, f_bavail=8192)  # 64 MiB, half used


def limited(which: int) -> tuple[int, int]:
    return (65536, 65536) if which == resource.RLIMIT_MEMLOCK else (1024, 4096)


def test_collect_env_on_a_recorded_node(make_sysfs) -> None:
    fs = make_sysfs
    nic = fs.pci_device(["pci0000:00", "0000:00:02.0", "0000:3b:00.0"], 0)
    fs.netdev("ib0", nic, mtu=4092, kind=32)
    fs.netdev("lo", None, mtu=65536, state="unknown", kind=772)
    fs.ibdev("mlx5_0", nic)
    fs.pci_device(["pci0000:00", "0000:00:05.0"], 0, {"vendor": "0x10de", "class": "0x068000"})
    fs.write(fs.root / "proc/modules", "nvidia_uvm 1 0 - Live\nnvidia 2 1 - Live")
    fs.write(fs.root / "proc/driver/nvidia/version",
             "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 2024")
    fs.write(fs.root / "sys/fs/cgroup/memory.max", "17179869184")
    fs.write(fs.root / ".dockerenv", "")
    runner = RecordedRunner({("ip", "-j", "addr", "show"): IP_JSON,
                             ("systemctl", "is-active", "nvidia-fabricmanager"): "inactive"})
    environ = {"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0", "HF_TOKEN": "hf_x",
               "MASTER_ADDR": "10.0.0.1", "HOME": "/root", "NCCL_IB_DISABLE": "1"}
    result = collect_env(environ=environ, root=fs.root, runner=runner, nvml_lib=h100_node(2),
                         import_torch=False, statvfs=small_shm, getrlimit=limited)
    assert result.status == "success"
    d = result.data
    assert d["variables"] == {"MASTER_ADDR": "10.0.0.1", "NCCL_DEBUG": "INFO",
                              "NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "eth0"}
    assert "HF_TOKEN" not in json.dumps(d)
    assert d["versions"]["driver"] == "550.54.15" and d["versions"]["cuda_driver"] == "12.4"
    assert d["container"] == {"in_container": True, "kind": "docker",
                              "evidence": ["/.dockerenv"]}
    assert d["dev_shm"]["total_bytes"] == 64 * 2**20
    assert d["ulimits"]["memlock_soft"] == 65536 and d["ulimits"]["nofile_hard"] == 4096
    assert d["cgroup_memory"] == {"version": 2, "limit_bytes": 16 * 2**30, "usage_bytes": None}
    ib0 = next(i for i in d["interfaces"] if i["name"] == "ib0")
    assert ib0["addresses"] == ["10.0.0.5/16"] and ib0["mtu"] == 4092
    assert d["gpus"]["count"] == 2 and d["nvswitch_present"] is True
    assert d["fabricmanager_active"] is False and d["nvidia_peermem_loaded"] is False
    assert sorted(f.rule for f in result.findings) == [
        "dev_shm_small", "fabricmanager_down", "memlock_limited", "nccl_debug_verbose",
        "nccl_ib_disabled", "nccl_socket_ifname_missing", "peermem_missing"]


def test_collect_env_quiet_node_without_gpu(make_sysfs) -> None:
    fs = make_sysfs
    fs.netdev("eth0", fs.pci_device(["pci0000:00", "0000:00:03.0"], 0))
    result = collect_env(environ={}, root=fs.root, runner=RecordedRunner({}),
                         nvml_lib=RecordedNvml([], init_error="NVML Shared Library Not Found"),
                         import_torch=False, statvfs=lambda p: SimpleNamespace(
                             f_blocks=2**20, f_frsize=4096, f_bavail=2**20),
                         getrlimit=lambda w: (-1, -1))
    assert result.status == "success" and result.findings == []
    assert result.data["gpus"]["nvml"]["error"].startswith("NVML not available")
    assert result.data["fabricmanager_active"] is None


def test_collectors() -> None:
    env = relevant_env({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "PATH": "/bin",
                        "NCCL_IB_PKEY": "0x1", "WANDB_API_KEY": "k"})
    assert env == {"NCCL_IB_PKEY": "0x1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}
    versions = package_versions(lambda name: "9.9" if name == "vllm" else (_ for _ in ()).throw(
        __import__("importlib.metadata").metadata.PackageNotFoundError(name)))
    assert versions["vllm"] == "9.9" and versions["ray"] is None


def test_cgroup_v1_and_kubernetes(make_sysfs) -> None:
    fs = make_sysfs
    fs.write(fs.root / "sys/fs/cgroup/memory/memory.limit_in_bytes", str(2**63 - 4096))
    assert cgroup_memory(fs.root)["limit_bytes"] is None
    fs.write(fs.root / "proc/1/cgroup", "12:memory:/kubepods/besteffort/pod1/abc")
    assert container_info(fs.root, {})["kind"] == "kubernetes"


def test_real_environment_with_torch_runs() -> None:
    result = collect_env(environ={"NCCL_DEBUG": "WARN"})
    assert result.status == "success"
    torch_info = result.data["versions"]["torch_runtime"]
    assert torch_info["installed"] is False or "torch" in torch_info

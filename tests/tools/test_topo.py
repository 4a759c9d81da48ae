"""The topology tool through the injectable NVML wrapper, a fake sysfs and a recorded runner."""

from __future__ import annotations

from conftest import FIXTURES, RecordedNvml, h100_node

from tools.host import parse_iommu_cmdline, parse_lspci_acs
from tools.nvml import NvmlClient, cpu_list
from tools.runner import CommandOutput, RecordedRunner
from tools.topo.collect import collect_topology

LSPCI_ACS = """0000:00:01.0 PCI bridge: Intel Corporation Sky Lake-E PCI Express Root Port A (rev 04)
\tCapabilities: [148 v1] Access Control Services
\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
0000:17:00.0 PCI bridge: PLX Technology, Inc. PEX 8747 48-Lane PCI Express Gen 3 Switch
\tCapabilities: [148 v1] Access Control Services
\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-
"""


def no_commands() -> RecordedRunner:
    return RecordedRunner({})


def test_unavailable_without_gpu_keeps_host_facts(make_sysfs) -> None:
    fs = make_sysfs
    nic = fs.pci_device(["pci0000:00", "0000:00:02.0", "0000:3b:00.0"], 0)
    fs.netdev("ib0", nic, mtu=4092, kind=32)
    fs.ibdev("mlx5_0", nic)
    fs.write(fs.root / "proc/cmdline", "BOOT_IMAGE=/vmlinuz intel_iommu=on quiet")
    runner = RecordedRunner({("lspci", "-vvv"): LSPCI_ACS})
    nvml = RecordedNvml([], init_error="NVML Shared Library Not Found")
    result = collect_topology(nvml_lib=nvml, runner=runner, root=fs.root)
    assert result.status == "unavailable"
    assert result.error == "NVML not available: NVML Shared Library Not Found"
    assert result.data["ib_devices"][0]["ports"][0]["state"] == "ACTIVE"
    assert result.data["ib_devices"][0]["ports"][0]["gid_table"] is True
    assert result.data["interfaces"][0]["type"] == "infiniband"
    assert sorted(f.rule for f in result.findings) == ["iommu_enabled", "pcie_acs_enabled"]
    assert ("nvidia-smi", "topo", "-m") in runner.calls


def test_real_pynvml_without_library_is_unavailable(make_sysfs) -> None:
    result = collect_topology(runner=no_commands(), root=make_sysfs.root)
    assert result.status == "unavailable"
    assert result.error.startswith("NVML not available")


def test_nvidia_smi_fallback_when_nvml_missing(make_sysfs) -> None:
    text = (FIXTURES / "topo/h100_sxm_8gpu_9nic_excerpt.txt").read_text()
    runner = RecordedRunner({("nvidia-smi", "topo", "-m"): text})
    nvml = RecordedNvml([], init_error="Driver Not Loaded")
    result = collect_topology(nvml_lib=nvml, runner=runner, root=make_sysfs.root)
    assert result.status == "success" and result.data["source"] == "nvidia-smi topo -m"
    assert result.data["nvml_error"] == "NVML not available: Driver Not Loaded"


def test_nvswitch_node_healthy(make_sysfs) -> None:
    nvml = h100_node(4)
    result = collect_topology(nvml_lib=nvml, runner=no_commands(), root=make_sysfs.root)
    assert result.status == "success", result.error
    assert nvml.shutdown_called
    d = result.data
    assert d["driver_version"] == "550.54.15" and d["cuda_driver_version"] == "12.4"
    g0 = d["gpus"][0]
    assert g0["pci_bus_id"] == "0000:18:00.0" and g0["power_w"] == 88.0
    assert g0["retired_pages"] == {"single_bit": None, "double_bit": None}
    assert g0["cpu_affinity"] == "0-39"
    assert d["topology"]["links"]["GPU0"]["GPU3"] == "NV18"
    assert d["p2p"]["GPU1"]["GPU2"] == "OK"
    assert result.findings == []


def test_inactive_nvlink_and_errors_fire(make_sysfs) -> None:
    nvml = h100_node(2, down={1: [3, 7]})
    nvml.gpus[0]["link_errors"] = {(2, 0): 5}
    nvml.gpus[1]["remap"] = (0, 2, 1, 0)
    nvml.gpus[1]["ecc"] = {(1, 0): 3}
    nvml.p2p = {(0, 1): 2}
    result = collect_topology(nvml_lib=nvml, runner=no_commands(), root=make_sysfs.root)
    rules = sorted(f.rule for f in result.findings)
    assert rules == ["gpu_ecc_errors", "gpu_row_remap_pending", "nvlink_errors",
                     "nvlink_inactive", "p2p_unsupported"]
    inactive = next(f for f in result.findings if f.rule == "nvlink_inactive")
    assert "GPU1 has 2 of 18" in inactive.message and inactive.severity == "error"
    assert result.data["topology"]["links"]["GPU0"]["GPU1"] == "NV16"


def test_pcie_gpus_use_common_ancestor_letters(make_sysfs) -> None:
    gpus = [{"name": "NVIDIA L40S", "uuid": f"GPU-{i}", "bus": f"0000:{0x41 + i:02x}:00.0",
             "affinity": [0xFF], "numa": None, "links": []} for i in range(3)]
    nvml = RecordedNvml(gpus, topo={(0, 1): 10, (0, 2): 50, (1, 2): 50})
    result = collect_topology(nvml_lib=nvml, runner=no_commands(), root=make_sysfs.root)
    links = result.data["topology"]["links"]
    assert links["GPU0"]["GPU1"] == "PIX" and links["GPU1"]["GPU2"] == "SYS"
    assert not any(f.rule == "nvlink_inactive" for f in result.findings)


def test_nic_gpu_affinity_from_sysfs(make_sysfs) -> None:
    fs = make_sysfs
    fs.pci_device(["pci0000:17", "0000:17:00.0", "0000:18:00.0"], 0)
    fs.pci_device(["pci0000:17", "0000:17:00.0", "0000:2a:00.0"], 0)
    nic_near = fs.pci_device(["pci0000:17", "0000:17:00.0", "0000:19:00.0"], 0)
    nic_far = fs.pci_device(["pci0000:c0", "0000:c0:01.0", "0000:c1:00.0"], 1)
    fs.ibdev("mlx5_0", nic_near)
    fs.ibdev("mlx5_1", nic_far)
    nvml = h100_node(2)
    for g in nvml.gpus:
        g["numa"] = None  # NVML without NUMA support: sysfs numa_node is used
    result = collect_topology(nvml_lib=nvml, runner=no_commands(), root=fs.root)
    assert result.data["gpus"][1]["numa_node"] == 0
    aff = result.data["nic_gpu_affinity"]
    assert aff["mlx5_0"]["shares_pcie_switch"] == ["GPU0", "GPU1"]
    assert aff["mlx5_0"]["links"]["GPU0"] == "PIX"
    assert aff["mlx5_1"]["links"]["GPU0"] == "SYS" and aff["mlx5_1"]["same_numa"] == []
    numa = [f for f in result.findings if f.rule == "nic_numa_mismatch"]
    assert len(numa) == 1 and "mlx5_1 is on NUMA node 1" in numa[0].message


def test_acs_parser_fires_only_on_srcvalid_plus() -> None:
    acs = parse_lspci_acs(LSPCI_ACS)
    assert [b["bdf"] for b in acs["acs_enabled_bridges"]] == ["0000:00:01.0"]
    clean = parse_lspci_acs(LSPCI_ACS.replace("SrcValid+ TransBlk- ReqRedir+",
                                              "SrcValid- TransBlk- ReqRedir-"))
    assert clean["acs_enabled_bridges"] == [] and clean["readable"]
    denied = parse_lspci_acs("00:01.0 PCI bridge: X\n\tCapabilities: <access denied>\n")
    assert not denied["readable"] and "root" in denied["note"]


def test_iommu_cmdline() -> None:
    assert parse_iommu_cmdline("intel_iommu=on")["translating"]
    assert parse_iommu_cmdline("amd_iommu=on")["translating"]
    assert not parse_iommu_cmdline("intel_iommu=on iommu=pt")["translating"]
    assert not parse_iommu_cmdline("quiet splash")["enabled"]


def test_cpu_list_and_client_context() -> None:
    assert cpu_list([0b1011, 0]) == "0-1,3"
    assert cpu_list([0, 1]) == "64"
    with NvmlClient(h100_node(1)) as c:
        assert c.count() == 1 and c.nvlinks(0)[0]["remote_bus_id"] == "0000:80:00.0"


def test_lspci_missing_is_a_fact_not_a_failure(make_sysfs) -> None:
    runner = RecordedRunner({("lspci", "-vvv"): CommandOutput(("lspci",), 1, stderr="boom")})
    result = collect_topology(nvml_lib=h100_node(1), runner=runner, root=make_sysfs.root)
    assert result.status == "success" and result.data["acs"]["readable"] is False


def test_gpu_activity_says_none_for_what_nvml_does_not_answer() -> None:
    """The hang diagnostic's GPU sample: power from NVML; utilisation and SM clock are not
    in this recording, so they are None rather than a made-up zero."""
    with NvmlClient(h100_node(1)) as c:
        assert c.activity(0) == (None, 88.0, None)

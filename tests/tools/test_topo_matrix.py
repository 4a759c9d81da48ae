"""parse_topo_matrix on real `nvidia-smi topo -m` outputs."""

from __future__ import annotations

import pytest
from conftest import FIXTURES

from tools.topo.collect import from_topo_text
from tools.topo.matrix import parse_topo_matrix
from tools.topo.rules import matrix_findings

TOPO = FIXTURES / "topo"


def test_a100_nvswitch_node_with_18_nics() -> None:
    topo = parse_topo_matrix((TOPO / "a100_sxm4_8gpu_18nic.txt").read_text())
    assert topo.gpus == [f"GPU{i}" for i in range(8)]
    assert len(topo.nics) == 18
    assert topo.nic_names["NIC5"] == "mlx5_5"
    assert topo.link("GPU0", "GPU7") == "NV12" and topo.nvlink_count("GPU3", "GPU4") == 12
    assert topo.gpu_pairs_without_nvlink() == []
    assert topo.link("GPU0", "NIC5") == "PXB" and topo.link("NIC1", "NIC2") == "PIX"
    assert topo.cpu_affinity["GPU4"] == "112-127" and topo.numa_affinity["GPU6"] == "5"
    assert "NIC0" not in topo.cpu_affinity
    assert topo.nearest_gpus("NIC14") == ["GPU4", "GPU5"]
    mismatched = {f.message.split()[0] for f in matrix_findings(topo)
                  if f.rule == "nic_numa_mismatch"}
    assert mismatched == {"mlx5_0", "mlx5_13"}  # the two NICs SYS to every GPU


def test_h100_tab_separated_excerpt() -> None:
    topo = parse_topo_matrix((TOPO / "h100_sxm_8gpu_9nic_excerpt.txt").read_text())
    assert topo.gpus == [f"GPU{i}" for i in range(8)]
    assert topo.nics == [f"NIC{i}" for i in range(9)]
    assert topo.nvlink_count("GPU0", "GPU5") == 18
    assert topo.link("GPU0", "NIC8") == "PIX" and topo.link("NIC4", "GPU4") == "PIX"
    assert topo.nearest_gpus("NIC8") == ["GPU0"]
    assert topo.numa_affinity == {f"GPU{i}": "0" if i < 4 else "1" for i in range(8)}
    rules = [f.rule for f in matrix_findings(topo)]
    assert "gpu_pair_no_nvlink" not in rules
    assert rules.count("nic_numa_mismatch") == 1  # NIC0 is SYS to all GPUs


def test_pcie_workstation_without_nvlink() -> None:
    topo = parse_topo_matrix((TOPO / "pcie_workstation_5gpu.txt").read_text())
    assert topo.gpus == [f"GPU{i}" for i in range(5)] and topo.nics == []
    assert topo.link("GPU1", "GPU2") == "PHB" and topo.link("GPU0", "GPU4") == "SYS"
    assert topo.cpu_affinity["GPU0"] == "8-15,24-31"
    # no NVLink anywhere: not a partial mesh, so no finding
    assert [f.rule for f in matrix_findings(topo)] == []


def test_pcie_server_nic_rows_without_affinity() -> None:
    topo = parse_topo_matrix((TOPO / "pcie_server_8x4090.txt").read_text())
    assert topo.nics == ["NIC0", "NIC1"]
    assert topo.link("NIC0", "NIC1") == "PIX" and topo.nearest_gpus("NIC1") == ["GPU6"]
    assert topo.numa_affinity["GPU7"] == "1"


def test_partial_nvlink_mesh_is_reported() -> None:
    text = """        GPU0    GPU1    GPU2    GPU3    CPU Affinity
GPU0     X      NV2     SYS     SYS     0-7
GPU1    NV2      X      SYS     SYS     0-7
GPU2    SYS     SYS      X      NV2     8-15
GPU3    SYS     SYS     NV2      X      8-15
"""
    findings = matrix_findings(parse_topo_matrix(text))
    assert [f.rule for f in findings] == ["gpu_pair_no_nvlink"]
    assert "4 GPU pairs" in findings[0].message


def test_ansi_colour_codes_are_ignored() -> None:
    text = "\x1b[4m\tGPU0\tGPU1\tCPU Affinity\x1b[0m\nGPU0\t X \tNV4\t0-3\nGPU1\tNV4\t X \t0-3\n"
    assert parse_topo_matrix(text).nvlink_count("GPU0", "GPU1") == 4


@pytest.mark.parametrize("text", ["", "hello world", "GPU0 is fine\n"])
def test_not_a_matrix_raises_and_tool_reports_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_topo_matrix(text)
    result = from_topo_text(text)
    assert result.status == "error" and "nvidia-smi topo -m" in (result.error or "")


def test_pasted_text_through_the_tool() -> None:
    result = from_topo_text((TOPO / "a100_sxm4_8gpu_18nic.txt").read_text())
    assert result.status == "success"
    assert result.data["nic_nearest_gpus"]["mlx5_5"] == ["GPU0", "GPU1"]

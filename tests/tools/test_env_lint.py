"""Each environment lint rule, firing and not firing."""

from __future__ import annotations

from typing import Any

import pytest

from tools.env.lint import EnvFacts, ifname_matches, lint_env

IFACES = [{"name": n, "state": "up", "mtu": 1500, "type": "ether"}
          for n in ("lo", "eth0", "eth1", "ib0", "docker0")]
IB_ACTIVE = [{"name": "mlx5_0", "netdevs": ["ib0"],
              "ports": [{"state": "ACTIVE", "link_layer": "InfiniBand"}]}]


def rules(**kw: Any) -> list[str]:
    kw.setdefault("interfaces", IFACES)
    return [f.rule for f in lint_env(EnvFacts(**kw))]


@pytest.mark.parametrize(("spec", "fires"), [
    ("eth0", False), ("eth", False), ("=eth0", False), ("ens5", True), ("=eth", True),
    ("ens5,ib", False), ("ens5,enp1s0", True), ("^docker0,lo", False), ("^eth,ib,docker,lo", True),
    ("^=eth0,eth1,ib0,docker0", True), ("^=eth0", False),
])
def test_socket_ifname(spec: str, fires: bool) -> None:
    got = rules(environ={"NCCL_SOCKET_IFNAME": spec})
    assert ("nccl_socket_ifname_missing" in got) is fires


def test_socket_ifname_unset_or_no_interface_data() -> None:
    assert rules(environ={}) == []
    assert rules(environ={"NCCL_SOCKET_IFNAME": "x"}, interfaces=[]) == []


def test_ifname_semantics() -> None:
    names = ["eth0", "eth10", "ib0"]
    assert ifname_matches("eth1", names) == ["eth10"]
    assert ifname_matches("=eth1", names) == []
    assert ifname_matches("^eth", names) == ["ib0"]


def test_p2p_disable() -> None:
    assert "nccl_p2p_disabled" in rules(environ={"NCCL_P2P_DISABLE": "1"}, has_nvlink=True)
    assert "nccl_p2p_disabled" not in rules(environ={"NCCL_P2P_DISABLE": "1"}, has_nvlink=False)
    assert "nccl_p2p_disabled" not in rules(environ={"NCCL_P2P_DISABLE": "0"}, has_nvlink=True)


def test_ib_disable() -> None:
    assert "nccl_ib_disabled" in rules(environ={"NCCL_IB_DISABLE": "1"}, ib_devices=IB_ACTIVE)
    assert "nccl_ib_disabled" not in rules(environ={"NCCL_IB_DISABLE": "1"}, ib_devices=[])
    assert "nccl_ib_disabled" not in rules(environ={}, ib_devices=IB_ACTIVE)


def test_debug_settings() -> None:
    assert rules(environ={"NCCL_DEBUG": "INFO"}) == ["nccl_debug_verbose"]
    assert rules(environ={"NCCL_DEBUG": "trace"}) == ["nccl_debug_verbose"]
    assert rules(environ={"NCCL_DEBUG": "WARN"}) == []
    assert rules(environ={"NCCL_DEBUG_SUBSYS": "INIT,NET"}) == ["nccl_debug_subsys_set"]


def test_dev_shm() -> None:
    assert rules(shm_total_bytes=64 * 2**20) == ["dev_shm_small"]
    assert rules(shm_total_bytes=16 * 2**30) == []
    assert rules(shm_total_bytes=None) == []


def test_memlock() -> None:
    assert rules(ib_devices=IB_ACTIVE, memlock_soft=65536) == ["memlock_limited"]
    assert rules(ib_devices=IB_ACTIVE, memlock_soft=-1) == []
    assert rules(ib_devices=[], memlock_soft=65536) == []


def test_buffsize() -> None:
    assert rules(environ={"NCCL_BUFFSIZE": str(64 * 2**20)}) == ["nccl_buffsize_large"]
    assert rules(environ={"NCCL_BUFFSIZE": "not-a-number"}) == ["nccl_buffsize_large"]
    assert rules(environ={"NCCL_BUFFSIZE": "4194304"}) == []
    assert rules(environ={"NCCL_BUFFSIZE": "0x800000"}) == []


def test_mtu_mismatch() -> None:
    roce = [{"name": f"mlx5_{i}", "netdevs": [f"ens{i}"],
             "ports": [{"state": "ACTIVE", "link_layer": "Ethernet"}]} for i in range(2)]
    ifaces = [{"name": "ens0", "state": "up", "mtu": 9000}, {"name": "ens1", "state": "up",
                                                             "mtu": 1500},
              {"name": "eth0", "state": "up", "mtu": 1500}]
    assert rules(interfaces=ifaces, ib_devices=roce, memlock_soft=-1) == ["mtu_mismatch"]
    ifaces[1]["mtu"] = 9000
    assert rules(interfaces=ifaces, ib_devices=roce, memlock_soft=-1) == []  # eth0 is not RDMA


def test_peermem() -> None:
    assert "peermem_missing" in rules(ib_devices=IB_ACTIVE, gpu_count=8, peermem_loaded=False)
    assert "peermem_missing" not in rules(ib_devices=IB_ACTIVE, gpu_count=8, peermem_loaded=True)
    assert "peermem_missing" not in rules(ib_devices=IB_ACTIVE, gpu_count=None,
                                          peermem_loaded=False)
    assert "peermem_missing" not in rules(ib_devices=[], gpu_count=8, peermem_loaded=False)


def test_fabricmanager() -> None:
    assert rules(nvswitch_present=True, fabricmanager_active=False) == ["fabricmanager_down"]
    assert rules(nvswitch_present=True, fabricmanager_active=True) == []
    assert rules(nvswitch_present=False, fabricmanager_active=False) == []
    assert rules(nvswitch_present=True, fabricmanager_active=None) == []


def test_every_finding_has_severity_and_card_field() -> None:
    facts = EnvFacts(environ={"NCCL_DEBUG": "INFO", "NCCL_BUFFSIZE": "999999999"},
                     shm_total_bytes=1)
    for f in lint_env(facts):
        assert f.severity in ("info", "warn", "error") and hasattr(f, "card")

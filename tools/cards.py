"""Which knowledge card each diagnostic rule points to (None: no card fits yet).

Card ids are the file names in `knowledge/cards/`; keep this one table so a
renamed card is fixed in one place (a test checks every id exists).
"""

from __future__ import annotations

RULE_CARDS: dict[str, str | None] = {
    # topology
    "nvlink_inactive": "nvlink-error-xid-74",
    "nvlink_errors": "nvlink-error-xid-74",
    "p2p_unsupported": "consumer-gpu-p2p-hang",
    "gpu_pair_no_nvlink": None,
    "nic_numa_mismatch": None,
    "pcie_acs_enabled": "pcie-acs-blocks-gpu-p2p",
    "iommu_enabled": "iommu-or-vm-passthrough-breaks-p2p",
    "gpu_ecc_errors": "uncorrectable-ecc-xid-48-94-95",
    "gpu_row_remap_pending": "row-remap-xid-63-64",
    "gpu_row_remap_failure": "row-remap-xid-63-64",
    "gpu_retired_pages": "row-remap-xid-63-64",
    # environment
    "nccl_socket_ifname_missing": "nccl-socket-ifname-matches-no-interface",
    "nccl_p2p_disabled": None,
    "nccl_ib_disabled": "ib-no-device-found-falls-back-to-socket",
    "nccl_debug_verbose": None,
    "nccl_debug_subsys_set": None,
    "dev_shm_small": "dev-shm-too-small-in-container",
    "memlock_limited": "memlock-ulimit-ibv-create-cq-enomem",
    "nccl_buffsize_large": "nccl-cuda-calloc-out-of-memory",
    "mtu_mismatch": None,
    "peermem_missing": "gpudirect-rdma-disabled-peermem-not-loaded",
    "fabricmanager_down": "fabric-manager-not-running-error-802",
    # probe
    "probe_hang": None,
    "probe_rank_failed": None,
    "probe_incorrect_result": None,
    "probe_busbw_vs_baseline": None,
    "probe_no_baseline": None,
    # xid
    "xid_gpu_fell_off_bus": "xid-79-gpu-fallen-off-bus",
    "xid_ecc": "uncorrectable-ecc-xid-48-94-95",
    "xid_row_remap": "row-remap-xid-63-64",
    "xid_nvlink": "nvlink-error-xid-74",
    "xid_gpu_firmware": "gsp-rpc-timeout-xid-119-120",
    "xid_app_fault": None,
    "xid_other": None,
}


def card_for(rule: str) -> str | None:
    """The card id a rule's findings cite."""
    return RULE_CARDS.get(rule)

"""The probe's typed shapes: a multi-node request built from the command's options, and a
result's data read back through the model its ToolSpec declares."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tools.probe.baselines import group_baseline
from tools.probe.model import ProbeData
from tools.probe.remote import ProbeRequest, group_request
from tools.registry import TOOLS


def test_group_request_needs_ranks_per_node_for_nccl() -> None:
    with pytest.raises(ValueError, match="--nproc"):
        group_request({"backend": "nccl"})
    gloo = group_request({"backend": "gloo", "max_bytes": 4096, "min_bytes": 1024})
    assert gloo.nproc == 1 and gloo.rendezvous is None
    with pytest.raises(ValueError, match="min_bytes must be <= max_bytes"):
        group_request({"backend": "gloo", "min_bytes": 8192, "max_bytes": 1024})


def test_a_member_joins_the_rendezvous_and_the_agent_accepts_its_body() -> None:
    base = group_request({"backend": "gloo", "max_bytes": 4096, "force": True})
    member = base.joining("10.0.0.1", 29500, 1, 3, "abcd")
    body = member.body()
    assert body["rendezvous"] == {"master_addr": "10.0.0.1", "master_port": 29500,
                                  "node_rank": 1, "nnodes": 3, "group_id": "abcd"}
    assert body["force"] is True and "plot" not in body  # unset optional fields left out
    # what the agent's strict request model accepts, as JSON
    again = ProbeRequest.model_validate_json(member.model_dump_json(exclude_none=True))
    assert again == member
    with pytest.raises(ValidationError, match="node_rank must be < nnodes"):
        base.joining("10.0.0.1", 29500, 3, 3, "abcd")


def test_probe_data_is_read_back_and_bad_data_is_refused() -> None:
    assert TOOLS["probe"].result is ProbeData
    rows = [{"collective": "all_gather", "bytes": 1024, "time_us": 5.0, "algbw_gbps": 1.0,
             "busbw_gbps": 2.0, "correct": True},
            {"collective": "all_gather", "bytes": 4096, "time_us": 9.0, "algbw_gbps": 3.0,
             "busbw_gbps": 4.0, "correct": True},
            {"collective": "broadcast", "bytes": 4096, "time_us": 9.0, "algbw_gbps": 6.0,
             "busbw_gbps": 6.0, "correct": True}]
    data = ProbeData.model_validate({"backend": "gloo", "results": rows, "extra": 1})
    assert data.largest_busbw() == 5.0  # no all_reduce: the collectives' mean at the top
    with_ar = ProbeData.model_validate({"results": [*rows, {**rows[0], "collective":
                                                            "all_reduce", "busbw_gbps": 7.5}]})
    assert with_ar.largest_busbw() == 7.5
    assert ProbeData().largest_busbw() is None
    hung = ProbeData.model_validate({"hang": {"ranks_not_finished": [1], "collective": "x"}})
    assert hung.hang is not None and hung.hang.ranks_not_finished == [1]
    with pytest.raises(ValidationError):
        ProbeData.model_validate({"results": [{"collective": "all_reduce"}]})


def test_group_baseline_needs_one_known_gpu_and_large_sizes() -> None:
    p = group_request({"backend": "nccl", "nproc": 8, "max_bytes": 2**30})
    ndr = ["400 Gb/sec (4X NDR)"] * 8
    h100 = "NVIDIA H100 80GB HBM3"
    got = group_baseline(p, [h100, h100], [ndr, ndr])
    assert got is not None and got[0] == 8 * 47.0
    assert group_baseline(p, [h100, None], [ndr, ndr]) is None
    small = group_request({"backend": "nccl", "nproc": 8, "max_bytes": 2**20})
    assert group_baseline(small, [h100, h100], [ndr, ndr]) is None

"""Host-like names the model made up, whatever their shape, leave the explanation: IP
literals, IP placeholders, other node-name shapes and FQDNs that are neither in the
inventory nor in anything the model was sent."""

from __future__ import annotations

from bot.agent.validate import UNVERIFIED_NODE, NodeNames
from tests.agent_llm.conftest import OOM_CARD
from tests.agent_llm.test_validate import _check


def test_unknown_ips_and_hosts_of_other_shapes_are_replaced() -> None:
    nodes = NodeNames(known={"HOST_1"}, naming=["gpu-node07"],
                      seen="rank 2 on HOST_1 at IP_1; store 10.1.2.3:29500; dgx01 is fine; "
                           "see https://docs.nvidia.com/deeplearning/nccl/")
    raw = {"explanation": (
        "Rank 2 on HOST_1 (IP_1) lost 10.1.2.3 and 10.9.9.9; IP_4 and fe80::1:2:3%ib0 timed "
        "out; dgx01 is fine but dgx07 and ip-10-0-0-7 and trainer.corp.example.com hung. "
        "See https://docs.nvidia.com/deeplearning/nccl/ and NCCL 2.21.5."),
        "citations": [OOM_CARD]}
    out = _check(raw, node_names=nodes)
    text = out.answer.explanation
    for made_up in ("10.9.9.9", "IP_4", "fe80::1:2:3%ib0", "dgx07", "ip-10-0-0-7",
                    "trainer.corp.example.com"):
        assert made_up not in text
    for kept in ("HOST_1", "IP_1", "10.1.2.3", "dgx01", "https://docs.nvidia.com/deeplearning",
                 "NCCL 2.21.5"):
        assert kept in text
    assert text.count(UNVERIFIED_NODE) == 6
    assert {d.node for d in out.dropped} == {"10.9.9.9", "IP_4", "fe80::1:2:3%ib0", "dgx07",
                                                 "ip-10-0-0-7", "trainer.corp.example.com"}
    assert len(out.notes) == 6


def test_inventory_names_of_any_shape_stay() -> None:
    nodes = NodeNames(known={"trainer.corp.example.com"}, naming=["10.0.0.5"], seen="")
    raw = {"explanation": "trainer.corp.example.com at 10.0.0.5 is slow.",
           "citations": [OOM_CARD]}
    assert _check(raw, node_names=nodes).answer.explanation == raw["explanation"]

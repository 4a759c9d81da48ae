"""The pure part of scripts/verify_quotes.py: when a quote stands in a source text."""

from __future__ import annotations

from scripts.verify_quotes import BLOB, quote_stands


def test_quote_stands_ignores_whitespace_markup_and_joins_ellipsis_parts() -> None:
    rst = "Set ``NCCL_SOCKET_IFNAME``\n   to the interface\nthat *all* nodes share."
    assert quote_stands(rst, "Set NCCL_SOCKET_IFNAME to the interface that all nodes share.")
    assert quote_stands(rst, "Set NCCL_SOCKET_IFNAME ... nodes share.")
    assert not quote_stands(rst, "nodes share ... Set NCCL_SOCKET_IFNAME")  # order matters
    assert not quote_stands(rst, "Set NCCL_SOCKET_IFNAME to any interface")


def test_quote_stands_in_a_man_page_and_in_library_strings() -> None:
    man = ".TP\n\\fBDRAIN\\fR\nIndicates that no new jobs may be started on this node."
    assert quote_stands(man, "DRAIN Indicates that no new jobs may be started", troff=True)
    assert not quote_stands(man, "DRAIN Indicates that no new jobs may be started")
    strings = "junk\nTimed out after {} seconds waiting for clients. {}/{} clients joined.\n"
    code = 'fmt::format("Timed out after {} seconds waiting for clients. {}/{} clients joined.",'
    assert quote_stands(strings, code, literal_only=True)
    assert not quote_stands(strings, 'throw("No such message in the library");', literal_only=True)


def test_blob_links_are_parsed_with_ref_path_and_anchor() -> None:
    m = BLOB.fullmatch("https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/bootstrap.cc#L126")
    assert m is not None and (m["owner"], m["repo"], m["ref"], m["path"]) == (
        "NVIDIA", "nccl", "v2.30.7-1", "src/bootstrap.cc")
    assert BLOB.fullmatch("https://github.com/NVIDIA/nccl/issues/1837") is None

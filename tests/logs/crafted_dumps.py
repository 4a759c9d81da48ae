"""A corpus of crafted Flight Recorder "dumps": every way a hostile or broken file has been
seen to hurt a pickle/JSON reader (memory, CPU, recursion, code), and every field of the
right name with the wrong type. Built here, opcode by opcode, so each file says what it is.

`crafted()` returns (file name, bytes, what it tries). Every name ends in a rank, so the
analysis takes each file for a rank's dump; none is a usable dump *and* harmless to print
naively, and the reader must turn each into a note (or a dump of what is usable in it).
Run as a script to write the corpus: `python -m tests.logs.crafted_dumps DIR`.
"""

from __future__ import annotations

import json
import pickle
import struct
import sys
from pathlib import Path
from typing import Any

P2 = b"\x80\x02"  # PROTO 2: what torch's pickler writes
STOP = b"."
MARK, EMPTY_DICT, EMPTY_LIST, APPEND, APPENDS = b"(", b"}", b"]", b"a", b"e"
SETITEM, SETITEMS, BUILD, NONE, TUPLE = b"s", b"u", b"b", b"N", b"t"


def u(text: str) -> bytes:
    """BINUNICODE: a length (4 bytes, little-endian) and the UTF-8."""
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def i4(n: int) -> bytes:
    return b"J" + struct.pack("<i", n)


def binput(n: int) -> bytes:
    return b"q" + bytes([n])


def binget(n: int) -> bytes:
    return b"h" + bytes([n])


def long_binput(n: int) -> bytes:
    return b"r" + struct.pack("<I", n)


def long4(n: int) -> bytes:
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8b" + struct.pack("<i", len(raw)) + raw


def dump_with(value_ops: bytes, field: str = "input_sizes") -> bytes:
    """A dump of one entry whose `field` is the value the given opcodes push; the other
    fields as torch writes them."""
    entry = (EMPTY_DICT + MARK + u("collective_seq_id") + i4(1) + u("profiling_name")
             + u("nccl:all_reduce") + u("state") + u("scheduled") + u(field) + value_ops
             + SETITEMS)
    return (P2 + EMPTY_DICT + MARK + u("version") + u("2.10") + u("entries") + EMPTY_LIST
            + MARK + entry + APPENDS + SETITEMS + STOP)


def laughs(levels: int = 11, refs: int = 10) -> bytes:
    """Level 0 is a list of `refs` strings; level k a list of `refs` references to level
    k-1 (one memo entry each): a few hundred bytes that print as refs**levels items."""
    out = EMPTY_LIST + MARK + u("lol") * refs + APPENDS + binput(0)
    for k in range(1, levels):
        out += EMPTY_LIST + MARK + binget(k - 1) * refs + APPENDS + binput(k)
    return out


def laughs_filled_late(levels: int = 11, refs: int = 10) -> bytes:
    """The same, but every list is referenced before it is filled (aliasing)."""
    out = b"".join(EMPTY_LIST + binput(k) + b"0" for k in range(levels))  # 0 = POP
    for k in range(levels):
        inner = u("lol") * refs if k == 0 else binget(k - 1) * refs
        out += binget(k) + MARK + inner + APPENDS + b"0"
    return out + binget(levels - 1)


def nested_lists(depth: int) -> bytes:
    """[[[...]]] `depth` deep, built with EMPTY_LIST/APPEND only (no MARK)."""
    return EMPTY_LIST * depth + APPEND * (depth - 1)


def plain(obj: Any) -> bytes:
    """A plain-data pickle as torch's protocol would have it (our own, trusted objects)."""
    return pickle.dumps(obj, protocol=2)


def entry(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "collective_seq_id": 1, "profiling_name": "nccl:all_reduce", "state": "scheduled",
        "input_sizes": [[8]], "process_group": ("0", "default_pg"), "is_p2p": False,
        "frames": [{"filename": "train.py", "line": 10, "name": "step"}]}
    base.update(fields)
    return base


def fr(entries: Any, **top: Any) -> dict[str, Any]:
    return {"version": "2.10", "entries": entries,
            "pg_config": {"0": {"ranks": "[0, 1]"}}, **top}


def crafted() -> list[tuple[str, bytes, str]]:
    """(name, bytes, what it tries), 60-odd files."""
    c: list[tuple[str, bytes, str]] = []

    def add(name: str, data: bytes, what: str) -> None:
        c.append((f"c{len(c):02d}_{name}_fr_trace_{len(c) % 4}", data, what))

    # memory: the memo, declared lengths
    add("memo_8_bytes", P2 + EMPTY_DICT + long_binput(0x0800_0000),
        "LONG_BINPUT 2**27: the C unpickler zero-fills a 1 GB memo (8 bytes, no STOP)")
    add("memo_2gb", P2 + EMPTY_DICT + long_binput(0x1000_0000) + STOP, "LONG_BINPUT 2**28: 2 GB")
    add("memo_max", P2 + EMPTY_DICT + long_binput(0xFFFF_FFFF) + STOP, "LONG_BINPUT 2**32-1")
    add("memo_text_put", P2 + EMPTY_DICT + b"p99999999999\n" + STOP, "protocol-0 PUT, huge")
    add("memo_get_unset", P2 + binget(5) + STOP, "BINGET of an entry never stored")
    add("binunicode_4gb", P2 + b"X" + struct.pack("<I", 0xFFFF_FFFF) + b"abc" + STOP,
        "BINUNICODE declaring 4 GB in a 12-byte file")
    add("binbytes8_huge", P2 + b"\x8e" + struct.pack("<Q", 2**62) + b"ab" + STOP,
        "BINBYTES8 declaring 2**62 bytes")
    add("binunicode8_huge", P2 + b"\x8d" + struct.pack("<Q", 2**40) + b"ab" + STOP,
        "BINUNICODE8 declaring a TB")
    add("long4_declared_huge", P2 + b"\x8b" + struct.pack("<i", 2**31 - 1) + b"\x01" + STOP,
        "LONG4 declaring 2 GB of digits")
    add("binstring_huge", P2 + b"T" + struct.pack("<i", 2**31 - 1) + b"a" + STOP,
        "BINSTRING declaring 2 GB")
    add("frame_huge", b"\x80\x04\x95" + struct.pack("<Q", 2**50) + NONE + STOP,
        "protocol-4 FRAME declaring a petabyte")
    # CPU and recursion: expansion, nesting, huge integers
    add("laughs_11x10", dump_with(laughs()),
        "11 levels of 10 memo references in input_sizes, which was printed with str()")
    add("laughs_in_frames", dump_with(laughs(), "frames"), "the same in frames")
    add("laughs_in_name", dump_with(laughs(), "profiling_name"), "the same in profiling_name")
    add("laughs_filled_late", dump_with(laughs_filled_late()),
        "the laughs with every list referenced before it is filled")
    add("laughs_in_pg_config", P2 + EMPTY_DICT + MARK + u("version") + u("2.10")
        + u("entries") + EMPTY_LIST + u("pg_config") + EMPTY_DICT + MARK + u("0")
        + EMPTY_DICT + MARK + u("ranks") + laughs(9) + SETITEMS + SETITEMS + SETITEMS + STOP,
        "laughs as a process group's ranks")
    add("self_reference", dump_with(EMPTY_LIST + binput(0) + binget(0) + APPEND),
        "a list that holds itself")
    add("build_on_dict", P2 + EMPTY_DICT + EMPTY_DICT + BUILD + STOP,
        "BUILD on a dict (AttributeError)")
    add("build_in_entry", dump_with(EMPTY_DICT + EMPTY_DICT + MARK + u("a") + NONE + SETITEMS
                                    + BUILD), "BUILD inside a field")
    add("deep_lists", dump_with(nested_lists(100_000)),
        "100,000 nested lists (RecursionError when printed)")
    add("deep_marks", P2 + MARK * 100_000 + STOP, "100,000 open MARKs")
    add("deep_dicts", dump_with(_dict_chain(5_000)), "5,000 nested dicts")
    add("deep_tuples", dump_with(NONE + b"\x85" * 50_000), "50,000 nested 1-tuples")
    add("int_5000_digits_seq", dump_with(long4(10**5000), "collective_seq_id"),
        "a 5,000-digit collective_seq_id (str() raises ValueError)")
    add("int_5000_digits_sizes", dump_with(long4(10**5000)), "a 5,000-digit size")
    add("int_text_5000_digits", P2 + b"L" + b"9" * 5000 + b"L\n" + STOP,
        "a protocol-0 LONG of 5,000 digits")
    add("int_600_digits_long1", dump_with(b"\x8a\xff" + b"\x7f" * 255, "line"),
        "LONG1 of 255 bytes")
    add("int_70_bits_seq", plain(fr([entry(collective_seq_id=2**70)])),
        "a sequence id beyond 63 bits")
    # code: globals and objects
    add("global_os_system", P2 + b"cos\nsystem\n" + u("touch /tmp/x") + b"\x85R" + STOP,
        "GLOBAL os.system + REDUCE")
    add("stack_global", b"\x80\x04" + b"\x8c\x02os\x8c\x06system\x93" + STOP,
        "STACK_GLOBAL os.system")
    add("reduce_no_global", P2 + EMPTY_LIST + b")R" + STOP, "REDUCE on a list")
    add("newobj", P2 + EMPTY_LIST + b")\x81" + STOP, "NEWOBJ")
    add("inst", P2 + MARK + b"ios\nsystem\n" + STOP, "INST")
    add("obj", P2 + MARK + EMPTY_LIST + b"o" + STOP, "OBJ")
    add("persid", P2 + b"Pfoo\n" + STOP, "PERSID")
    add("ext1", P2 + b"\x82\x01" + STOP, "EXT1 (the copyreg registry)")
    add("bytearray8", b"\x80\x05\x96" + struct.pack("<Q", 3) + b"abc" + STOP, "BYTEARRAY8")
    add("next_buffer", b"\x80\x05\x97" + STOP, "NEXT_BUFFER (out-of-band)")
    # broken
    add("truncated_half", plain(fr([entry(collective_seq_id=i) for i in range(50)]))[:700],
        "half a dump")
    add("proto_only", P2, "PROTO and nothing else")
    add("proto_stop", P2 + STOP, "an empty program")
    add("stack_left_over", P2 + NONE + NONE + STOP, "two values at STOP")
    add("garbage_after_proto", P2 + b"\xff\xfe\xfd\xfc" * 10, "unknown opcodes")
    # wrong types in every field
    add("not_a_dict", plain([1, 2, 3]), "a list, not a dump")
    add("no_entries", plain({"version": "2.10"}), "no entries")
    add("entries_dict", plain(fr({"a": 1})), "entries a dict")
    add("entries_str", plain(fr("x" * 10_000)), "entries a string")
    add("entries_not_dicts", plain(fr([1, "two", None, [3], 4.5])), "entries not mappings")
    add("seq_str", plain(fr([entry(collective_seq_id="abc")])), "seq id a string")
    add("seq_float", plain(fr([entry(collective_seq_id=3.5)])), "seq id a float")
    add("seq_negative", plain(fr([entry(collective_seq_id=-4)])), "seq id negative")
    add("seq_bool", plain(fr([entry(collective_seq_id=True)])), "seq id a bool")
    add("seq_list", plain(fr([entry(collective_seq_id=[1, 2])])), "seq id a list")
    add("frames_str", plain(fr([entry(frames="x" * 100_000)])), "frames a string")
    add("frames_weird", plain(fr([entry(frames=[1, "f", None, {"filename": ["a"] * 1000,
                                                                "line": 2**200, "name": None}])])),
        "frames of odd types, a 61-digit line")
    add("pg_weird", plain(fr([entry(process_group={"a": [1] * 1000})])), "process_group a dict")
    add("sizes_long", plain(fr([entry(input_sizes=list(range(100_000)))])),
        "100,000 input sizes")
    add("name_1mb", plain(fr([entry(profiling_name="n" * 2**20, state={"s": 1})])),
        "a 1 MB profiling_name, state a dict")
    add("pg_config_weird", plain(fr([entry()], pg_config={"0": {"ranks": "9" * 100_000},
                                                          "1": {"ranks": ["a", None]},
                                                          "2": [1, 2], "3": None})),
        "ranks as 100,000 digits, strings, None")
    add("pg_config_list", plain(fr([entry()], pg_config=[1, 2, 3])), "pg_config a list")
    add("version_dict", plain({"version": {"a": [1] * 100}, "entries": [entry()]}),
        "version a dict")
    add("keys_not_str", plain({"version": "2.10", "entries": [{1: 2, (3, 4): 5, None: 6}]}),
        "entry keys not text")
    add("sets_and_bytes", plain(fr([entry(input_sizes={1, 2}, state=b"\xff" * 10,
                                          profiling_name=frozenset({"a"}))])),
        "sets, frozensets, bytes")
    add("many_entries", plain(fr([entry(collective_seq_id=i) for i in range(30_000)])),
        "30,000 entries (over the 20,000 kept)")
    add("lone_surrogates", dump_with(b"X\x03\x00\x00\x00\xed\xa0\x80", "profiling_name"),
        "a lone surrogate in profiling_name (pickle takes it; JSON and Slack do not)")
    # JSON dumps
    head = b'{"version": "2.10", "pg_config": {}, "entries": '
    add("json_deep", head + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "100,000 nested arrays (json.loads: RecursionError)")
    add("json_deep_in_field", head + b'[{"collective_seq_id": 1, "input_sizes": '
        + b"[" * 40 + b"]" * 40 + b"}]}", "40 nested arrays in a field")
    add("json_int_5000_digits", head + b'[{"collective_seq_id": ' + b"9" * 5000 + b"}]}",
        "a 5,000-digit number (int(): ValueError)")
    add("json_float_huge", head + b'[{"collective_seq_id": 1e999, "line": -1e999}]}',
        "infinite floats")
    add("json_nan", head + b'[{"collective_seq_id": NaN}]}', "NaN")
    add("json_entries_obj", head + b'{"a": 1}}', "entries an object")
    add("json_truncated", head + b'[{"collective_seq_id": 1, "profiling_na', "truncated")
    add("json_bad_utf8", head + b'[{"profiling_name": "\xff\xfe"}]}', "not UTF-8")
    add("json_wrong_types", head + json.dumps([
        {"collective_seq_id": "1", "frames": 5, "input_sizes": {"a": 1},
         "process_group": 7, "profiling_name": None}, "x", 3]).encode() + b"}",
        "every field of the wrong type")
    add("json_string_escapes", head + b'[{"profiling_name": "\\"[[[[[[[[[\\\\"}]}',
        "brackets and escapes inside strings (not nesting)")
    return c


def _dict_chain(depth: int) -> bytes:
    """{'k': {'k': ... None}} `depth` deep, built inside out."""
    out = NONE
    for _ in range(depth):
        out = EMPTY_DICT + u("k") + out + SETITEM
    return out


def write(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, data, _ in crafted():
        (folder / name).write_bytes(data)
        out.append(folder / name)
    return out


if __name__ == "__main__":
    for p in write(Path(sys.argv[1])):
        print(p)

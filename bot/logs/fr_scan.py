"""Checks on an untrusted Flight Recorder dump *before* it is unpickled or parsed (pure).

A pickle is a program for a small stack machine, and Python's unpickler trusts it: a
`LONG_BINPUT` with a huge memo index makes the C unpickler allocate (zero-fill) a memo array
that large (8 bytes of input, gigabytes of memory); memo references (`GET`) nested a few
levels deep build a structure that is small in memory but expands exponentially when walked
or printed (the "billion laughs"); `BUILD` calls `__setstate__`/sets attributes on what is
below it. `scan_pickle` runs that program on a model of the stack, without building any
value, and refuses what a Flight Recorder dump never holds:

- any opcode outside plain data (globals, `REDUCE`, `BUILD`, out-of-band buffers, ...);
- a memo index not given in order. PyTorch's pickler numbers its memo entries one after the
  other (pytorch/pytorch torch/csrc/jit/serialization/pickler.cpp, `Pickler::pushMemoization`:
  "push<OpCode>(OpCode::LONG_BINPUT); push<uint32_t>(memo_id); ... ++memo_id;"), and so
  does Python's, so an index far above the number of entries stored so far is a crafted file;
- a declared length beyond the end of the file, an integer of more than `MAX_INT_BITS` bits;
- containers nested deeper than `MAX_DEPTH`, a container that holds itself, and a value whose
  full expansion (every reference followed) has more than a few times as many items as the
  file has opcodes.

`scan_json` does the same for the JSON form: nesting depth and number lengths, before
`json.loads` (whose recursion a deep file exhausts).
"""

from __future__ import annotations

import pickletools
import re

#: containers nested deeper than this are refused (a real dump nests 6 deep:
#: dump -> entries -> entry -> frames -> frame, and input_sizes' lists of lists)
MAX_DEPTH = 32
#: a memo index may run ahead of the entries stored so far by at most this much
MEMO_SLACK = 1024
#: integers wider than this are refused (a dump's largest is a time in ns: 61 bits)
MAX_INT_BITS = 128
#: every reference followed, a dump may expand to this many times its opcodes (plus a base).
#: torch shares a stack's frames between entries: a real dump of 20,000 entries with
#: 77-frame stacks (2.95 M opcodes) expands to 12.2 M items, 4.1 times; a "billion laughs"
#: of 11 levels of 10 references expands to 10**11 from a few hundred opcodes.
EXPANSION = 32
EXPANSION_BASE = 1_000_000

_LEAVES = frozenset({
    "NONE", "NEWTRUE", "NEWFALSE", "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1",
    "LONG4", "FLOAT", "BINFLOAT", "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE",
    "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8", "BINBYTES", "SHORT_BINBYTES",
    "BINBYTES8"})
_EMPTY = frozenset({"EMPTY_LIST", "EMPTY_DICT", "EMPTY_TUPLE", "EMPTY_SET"})
_FROM_MARK = frozenset({"LIST", "TUPLE", "DICT", "FROZENSET"})
_TUPLE_N = {"TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}
_INTO_FROM_MARK = frozenset({"APPENDS", "SETITEMS", "ADDITEMS"})
_PUT = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_GET = frozenset({"GET", "BINGET", "LONG_BINGET"})
_OBJECTS = frozenset({"GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "REDUCE", "NEWOBJ",
                      "NEWOBJ_EX", "PERSID", "BINPERSID", "EXT1", "EXT2", "EXT4"})

_MARK = -2
_LEAF = -1


class DumpError(ValueError):
    """A dump that cannot be read; the message says why and what to do."""


def _refuse(why: str) -> DumpError:
    return DumpError(f"refused: {why} (crafted or damaged, nothing in it was run; get the "
                     "rank's own dump)")


def scan_pickle(data: bytes) -> None:
    """Raise `DumpError` (why) unless `data` is a pickle of bounded plain data."""
    size = len(data)
    stack: list[int] = []  # _MARK, _LEAF or a container's number
    marks: list[int] = []  # where each open MARK is on the stack
    kids: list[list[int]] = []  # container -> the containers it holds (in order)
    leaves: list[int] = []  # container -> how many scalars it holds
    memo: dict[int, int] = {}
    ops = 0
    stopped = False

    def pop() -> int:
        if not stack or stack[-1] == _MARK:
            raise DumpError(f"malformed pickle (stack underflow at opcode {ops})")
        return stack.pop()

    def pop_mark() -> list[int]:
        if not marks:
            raise DumpError(f"malformed pickle (no MARK at opcode {ops})")
        at = marks.pop()
        items = stack[at + 1:]
        del stack[at:]
        return items

    def new(items: list[int]) -> int:
        kids.append([i for i in items if i >= 0])
        leaves.append(items.count(_LEAF))
        return len(kids) - 1

    def add(target: int, items: list[int]) -> None:
        if target < 0:
            raise DumpError(f"malformed pickle (adds items to a scalar at opcode {ops})")
        kids[target] += [i for i in items if i >= 0]
        leaves[target] += items.count(_LEAF)

    try:  # genops stops at STOP, as the unpickler does
        for op, arg, pos in pickletools.genops(data):
            ops += 1
            name = op.name
            if name in _GET:  # most of a real dump: torch memoizes its strings and frames
                index = int(arg)  # type: ignore[arg-type]
                if index not in memo:
                    raise DumpError(f"malformed pickle (memo entry {index} read before it "
                                    f"was stored, byte {pos})")
                stack.append(memo[index])
            elif name in _LEAVES:
                if name in ("LONG", "LONG1", "LONG4") and isinstance(arg, int) \
                        and arg.bit_length() > MAX_INT_BITS:
                    raise _refuse(f"an integer of {arg.bit_length()} bits at byte {pos}")
                stack.append(_LEAF)
            elif name in _EMPTY:
                stack.append(new([]))
            elif name == "MARK":
                if len(marks) >= MAX_DEPTH:
                    raise _refuse(f"containers nested more than {MAX_DEPTH} deep")
                marks.append(len(stack))
                stack.append(_MARK)
            elif name in _FROM_MARK:
                stack.append(new(pop_mark()))
            elif name in _TUPLE_N:
                stack.append(new([pop() for _ in range(_TUPLE_N[name])][::-1]))
            elif name == "APPEND":
                item = pop()
                add(stack[-1] if stack else _LEAF, [item])
            elif name == "SETITEM":
                value, key = pop(), pop()
                add(stack[-1] if stack else _LEAF, [key, value])
            elif name in _INTO_FROM_MARK:
                items = pop_mark()
                add(stack[-1] if stack else _LEAF, items)
            elif name == "POP":
                pop()
            elif name == "POP_MARK":
                pop_mark()
            elif name == "DUP":
                stack.append(pop())
                stack.append(stack[-1])
            elif name in _PUT or name == "MEMOIZE":
                index = len(memo) if name == "MEMOIZE" else int(arg)  # type: ignore[arg-type]
                if index > len(memo) + MEMO_SLACK:
                    raise _refuse(f"memo index {index} at byte {pos}, {len(memo)} stored")
                if not stack or stack[-1] == _MARK:
                    raise DumpError(f"malformed pickle (memoizes nothing at byte {pos})")
                memo[index] = stack[-1]
            elif name == "FRAME":
                if int(arg) > size - (pos or 0):  # type: ignore[arg-type]
                    raise _refuse(f"a frame of {arg} bytes at byte {pos} in a file of {size}")
            elif name == "PROTO":
                pass
            elif name == "STOP":
                stopped = True
            elif name in _OBJECTS:
                what = f" {str(arg).replace(' ', '.')[:100]}" if arg else ""
                raise _refuse(f"the dump references a Python object ({name}{what})")
            else:  # BUILD, buffers, anything new
                raise _refuse(f"opcode {name} at byte {pos}")
    except DumpError:
        raise
    except (ValueError, TypeError, KeyError) as exc:  # what genops says of a bad stream
        raise DumpError(f"not a readable Flight Recorder dump (truncated or not one: "
                        f"{str(exc)[:120]}); copy the rank's dump again") from None
    if not stopped or len(stack) != 1:
        raise DumpError("not a readable Flight Recorder dump (truncated or not one: the "
                        "pickle does not end); copy the rank's dump again")
    if stack[0] >= 0:
        _expansion(stack[0], kids, leaves, EXPANSION * ops + EXPANSION_BASE)


def _expansion(root: int, kids: list[list[int]], leaves: list[int], cap: int) -> int:
    """Refuse a structure that expands beyond `cap` items, nests beyond `MAX_DEPTH` or holds
    itself, when every reference is followed (what printing or walking it would do)."""
    total: dict[int, int] = {}
    on_path: set[int] = set()
    todo: list[tuple[int, int]] = [(root, 0)]  # (container, next child to visit)
    on_path.add(root)
    while todo:
        node, i = todo[-1]
        children = kids[node]
        if i < len(children):
            todo[-1] = (node, i + 1)
            child = children[i]
            if child in total:
                continue
            if child in on_path:
                raise _refuse("a container that holds itself")
            if len(todo) >= MAX_DEPTH:
                raise _refuse(f"containers nested more than {MAX_DEPTH} deep")
            on_path.add(child)
            todo.append((child, 0))
            continue
        todo.pop()
        on_path.discard(node)
        n = 1 + leaves[node] + sum(total[c] for c in children)
        if n > cap:
            raise _refuse(f"memo references expand to over {cap} items from "
                          f"{sum(len(k) for k in kids) + sum(leaves)}, a 'billion laughs'")
        total[node] = n
    return total[root]


# A JSON string (escapes included), and what is left of the text without strings.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_LONG_NUMBER = re.compile(rb"[0-9]{40,}")
_BRACKETS = re.compile(rb"[\[\]{}]")


def scan_json(data: bytes) -> None:
    """Raise `DumpError` (why) for JSON nested deeper than `MAX_DEPTH` or with a number of 40
    digits or more, before `json.loads` spends its recursion or its time on it."""
    bare = _JSON_STRING.sub(b'""', data)
    if m := _LONG_NUMBER.search(bare):
        digits = len(re.match(rb"[0-9]*", bare[m.start():]).group(0))  # type: ignore[union-attr]
        raise _refuse(f"a number of {digits} digits")
    depth = 0
    for b in _BRACKETS.findall(bare):
        depth += 1 if b in (b"[", b"{") else -1
        if depth > MAX_DEPTH:
            raise _refuse(f"JSON nested more than {MAX_DEPTH} deep")

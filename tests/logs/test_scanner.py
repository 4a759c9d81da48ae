"""The scanner finds every matching line with the right line number, whatever the chunking."""

import random
import re
from pathlib import Path

import pytest

import bot.logs.scanner as scanner
from bot.logs.scanner import PatternSet, Trigger, _hs

TRIGGERS = [Trigger(0, r"NCCL WARN"), Trigger(1, r"Watchdog caught"), Trigger(2, r"Last error:", after=1),
            Trigger(3, r"out of memory", ignore_case=True)]


def _log(seed: int) -> bytes:
    rng = random.Random(seed)
    lines = []
    for i in range(3000):
        kind = rng.random()
        if kind < 0.01:
            lines.append(f"[rank{i % 8}]: NCCL WARN something {i}")
        elif kind < 0.02:
            lines.append(f"[Rank {i % 8}] Watchdog caught collective operation timeout {i}")
        elif kind < 0.025:
            lines.append("Last error:")
        elif kind < 0.03:
            lines.append(f"CUDA Out Of Memory {i}")
        elif kind < 0.031:
            lines.append("x" * 5000)
        else:
            lines.append(f"[rank{i % 8}]: step {i} loss 1.0 \u4e2d\u6587")
    return ("\r\n" if seed % 2 else "\n").join(lines).encode() + (b"" if seed % 3 else b"\n")


def _reference(data: bytes) -> list[tuple[int, bool]]:
    out = []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    after = 0
    for n, line in enumerate(lines, start=1):
        text = line.decode("utf-8", "replace")
        hit = any(re.search(t.pattern, text, re.I if t.ignore_case else 0) for t in TRIGGERS)
        if hit:
            out.append((n, False))
            after = 1 if "Last error:" in text else 0
        elif after:
            out.append((n, True))
            after = 0
    return out


def _chunks(data: bytes, rng: random.Random):
    i = 0
    while i < len(data):
        n = rng.choice([1, 7, 64, 4096, 70000])
        yield data[i : i + n]
        i += n


@pytest.mark.parametrize("engine", ["hyperscan", "re"])
@pytest.mark.parametrize("seed", range(6))
def test_hits_match_a_line_by_line_reference(seed, engine, monkeypatch):
    if engine == "re":
        monkeypatch.setattr(scanner, "_hs", None)
    elif scanner._hs is None:
        pytest.skip("hyperscan not installed on this platform")
    data = _log(seed)
    ps = PatternSet(TRIGGERS)
    count = scanner.LineCount()
    hits = list(ps.scan(_chunks(data, random.Random(seed)), count))
    assert [(h.line, h.context) for h in hits] == _reference(data)
    assert count.lines == len(data.rstrip(b"\n").split(b"\n"))


def test_concurrent_scans_from_many_threads():
    """Slack answers several logs at once: each thread needs its own scratch space."""
    from concurrent.futures import ThreadPoolExecutor

    ps = PatternSet(TRIGGERS)
    data = _log(1)
    expected = _reference(data)

    def run(_: int) -> list[tuple[int, bool]]:
        return [(h.line, h.context) for h in ps.scan(_chunks(data, random.Random(3)))]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(run, range(16)))
    assert all(r == expected for r in results)


@pytest.mark.skipif(_hs is None, reason="Hyperscan is not installed on this platform")
def test_compiled_patterns_are_cached_on_disk(tmp_path: Path) -> None:
    triggers = [Trigger(0, r"NCCL WARN (.+)$"), Trigger(1, r"Xid \(PCI:[0-9a-f:.]+\): (\d+)")]
    text = b"a\nx NCCL WARN boom\nNVRM: Xid (PCI:0000:02:00): 79, fallen off\n"
    first = PatternSet(triggers, tmp_path)
    (db,) = tmp_path.glob("hyperscan-*.db")
    db.write_bytes(b"garbage")  # an unreadable cache is compiled again, not trusted
    again = PatternSet(triggers, tmp_path)
    assert db.read_bytes() != b"garbage"
    loaded = PatternSet(triggers, tmp_path)
    hits = [[(h.line, sorted(h.triggers)) for h in p.scan([text])] for p in (first, again, loaded)]
    assert hits[0] == hits[1] == hits[2] == [(2, [0]), (3, [1])]
    changed = [Trigger(0, r"NCCL WARN (.+)$")]
    PatternSet(changed, tmp_path)  # other triggers: another cache file
    assert len(list(tmp_path.glob("hyperscan-*.db"))) == 2


@pytest.mark.parametrize("engine", ["hyperscan", "re"])
@pytest.mark.parametrize("seed", range(4))
def test_tally_counts_every_line_once_whatever_the_chunking(seed, engine, monkeypatch):
    """Tally triggers (NCCL channel lines) are counted per block, never handed on one by one;
    the totals and the last line match a line-by-line count, and other hits are unchanged."""
    if engine == "re":
        monkeypatch.setattr(scanner, "_hs", None)
    elif scanner._hs is None:
        pytest.skip("hyperscan not installed on this platform")
    rng = random.Random(seed)
    lines = _log(seed).decode().splitlines()
    for _ in range(400):
        t = rng.choice(["P2P/IPC/read", "SHM/direct/direct", "NET/IB/0/GDRDMA", "NET/Socket/1"])
        lines.insert(rng.randrange(len(lines)),
                     f"[rank{rng.randrange(8)}]: h:1:2 [0] NCCL INFO Channel 03/0 : 2[2] -> "
                     f"3[3] via {t}")
    data = "\n".join(lines).encode()
    tally = Trigger(9, r"via (P2P/[\w/]+|SHM/[\w/]+|NET/[\w/]+)", tally=True)
    out = list(PatternSet([*TRIGGERS, tally]).scan(_chunks(data, random.Random(seed))))
    hits = [h for h in out if isinstance(h, scanner.Hit)]
    tallies = [h for h in out if isinstance(h, scanner.Tally)]
    assert [(h.line, h.context) for h in hits] == _reference(data)
    assert all(9 not in h.triggers for h in hits)
    total: dict[str, int] = {}
    for t in tallies:
        for k, n in t.counts.items():
            total[k] = total.get(k, 0) + n
    want: dict[str, int] = {}
    last = 0
    for n, line in enumerate(data.decode().split("\n"), start=1):
        if m := re.search(tally.pattern, line):
            want[m.group(1)] = want.get(m.group(1), 0) + 1
            last = n
    assert total == want and sum(want.values()) == 400
    final = max(tallies, key=lambda t: t.last_line)
    assert final.last_line == last and "NCCL INFO Channel" in final.last_text


def test_tally_last_line_when_the_block_starts_after_a_long_carried_line():
    """A block that begins after a carried-over line longer than MAX_TEXT: the last tally
    line is its first line, and its text must still come back."""
    tally = Trigger(0, r"via (P2P/[\w/]+)", tally=True)
    chunks = [b"y" * 10, b"x" * 5000 + b"\nrank0 Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"]
    out = [h for h in PatternSet([tally]).scan(chunks) if isinstance(h, scanner.Tally)]
    assert [(t.last_line, t.last_text) for t in out] == [
        (2, "rank0 Channel 00/0 : 0[0] -> 1[1] via P2P/IPC")]
    assert out[0].counts == {"P2P/IPC": 1}

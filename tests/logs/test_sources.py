"""Reading inputs: plain, gz, zip, stdin; bad input gets a clear InputError."""

import gzip
import io
import zipfile

import pytest

from bot.errors import InputError
from bot.logs.sources import Limits, SourceStats, expand_inputs, looks_binary, read_chunks


def _read(src, limits=None):
    return b"".join(read_chunks(src, limits))


def test_plain_gz_zip_and_stdin(tmp_path):
    (tmp_path / "a.log").write_bytes(b"line a\n")
    with gzip.open(tmp_path / "b.log.gz", "wb") as fh:
        fh.write(b"line b\n")
    with zipfile.ZipFile(tmp_path / "c.zip", "w") as zf:
        zf.writestr("rank0.log", "line c0\n")
        zf.writestr("logs/rank1.log", "line c1\n")
    sources = expand_inputs([str(tmp_path / n) for n in ("a.log", "b.log.gz", "c.zip")] + ["-"],
                            stdin=io.BytesIO(b"line stdin\n"))
    names = [s.name for s in sources]
    assert names == ["a.log", "b.log.gz", "c.zip:rank0.log", "c.zip:logs/rank1.log", "<stdin>"]
    assert [_read(s) for s in sources] == [b"line a\n", b"line b\n", b"line c0\n", b"line c1\n",
                                            b"line stdin\n"]


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        expand_inputs([str(tmp_path / "nope.log")])
    with pytest.raises(InputError, match="directory"):
        expand_inputs([str(tmp_path)])


def test_binary_file_is_refused_with_a_hint(tmp_path):
    from bot.answering.knowledge import bundled_cards
    from bot.logs.analyze import analyzer_for

    path = tmp_path / "core.bin"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 10)
    (src,) = expand_inputs([str(path)])
    assert _read(src) == b"" and "binary" in src.stats.problems[0]
    (src,) = expand_inputs([str(path)])
    with pytest.raises(InputError, match="binary") as err:
        analyzer_for(list(bundled_cards())).analyze([src])
    assert "NCCL_DEBUG=INFO" in (err.value.hint or "")


def test_one_bad_file_or_member_is_skipped_and_the_rest_analysed(tmp_path):
    """A binary member beside a good log, and a log behind a binary start: the good text
    is analysed, what was skipped is a note (not a failed analysis)."""
    from bot.answering.analysis import analyze_sources

    watchdog = ("[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective "
                "operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                "Timeout(ms)=600000) ran for 600043 milliseconds before timing out.\n")
    with zipfile.ZipFile(tmp_path / "job.zip", "w") as zf:
        zf.writestr("rank1.log", watchdog)
        zf.writestr("core.0", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 40)
    (tmp_path / "prefixed.log").write_bytes(b"\x00\x01\x02\xff" * 1024 + b"\n" + watchdog.encode())
    report, diagnosis = analyze_sources(expand_inputs([str(tmp_path / "job.zip"),
                                                       str(tmp_path / "prefixed.log")]))
    problems = {s.name: s.problems for s in report.sources}
    assert any("binary" in p for p in problems["job.zip:core.0"])
    assert any("skipped 4097 bytes of binary data" in p for p in problems["prefixed.log"])
    assert report.counts["watchdog_timeout"] >= 2  # from the member and after the prefix
    assert diagnosis.root_causes


def test_many_modest_members_are_stopped_by_the_archive_budget(tmp_path):
    """Each member under the per-member expansion check, together a bomb: stopped."""
    with zipfile.ZipFile(tmp_path / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(40):
            zf.writestr(f"m{i}.log", b"a" * (4 * 2**20))
    limits = Limits(max_bytes=2**40, max_ratio=50)
    sources = expand_inputs([str(tmp_path / "bomb.zip")])
    read = sum(len(_read(s, limits)) for s in sources)
    assert read < 40 * 4 * 2**20
    assert any("zip bomb" in p for s in sources for p in s.stats.problems)
    # once stopped, the members after it are not even opened (not one chunk each)
    stopped = next(i for i, s in enumerate(sources) if s.stats.problems)
    assert stopped < 39
    for later in sources[stopped + 1:]:
        assert later.stats.bytes_read == 0
        assert later.stats.problems == ["not read: the compressed input before it expands "
                                        "more than 50x (possible zip bomb)"]


def test_utf8_chinese_text_is_not_binary():
    assert not looks_binary("训练在第 100 步卡住了，NCCL 超时。\n".encode() * 50)


def test_corrupt_zip(tmp_path):
    path = tmp_path / "bad.zip"
    path.write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(InputError, match="zip"):
        expand_inputs([str(path)])


def test_zip_bomb_stops_at_ratio(tmp_path):
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("x.log", b"a" * (80 * 2**20))
    (src,) = expand_inputs([str(path)])
    data = _read(src, Limits(max_ratio=10))
    assert len(data) < 80 * 2**20
    assert any("zip bomb" in p for p in src.stats.problems)


def test_size_limit(tmp_path):
    path = tmp_path / "big.log"
    path.write_bytes(b"x\n" * (3 * 2**20))
    (src,) = expand_inputs([str(path)])
    _read(src, Limits(max_bytes=2**20))
    assert any("size limit" in p for p in src.stats.problems)


def test_the_members_not_read_after_a_bomb_are_one_note(tmp_path):
    from bot.answering.analysis import source_notes
    from bot.logs.model import LogReport

    sources = [SourceStats(f"a.zip:m{i}.log") for i in range(6)]
    sources[0].problems.append("stopped: possible zip bomb")
    for s in sources[1:]:
        s.problems.append("not read: possible zip bomb")
    report = LogReport()
    report.sources.extend(sources)
    notes = source_notes(report)
    assert notes == ["a.zip:m0.log: stopped: possible zip bomb",
                     "5 inputs (a.zip:m1.log … a.zip:m5.log): not read: possible zip bomb"]

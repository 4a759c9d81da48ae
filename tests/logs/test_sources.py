"""Reading inputs: plain, gz, zip, stdin; bad input gets a clear InputError."""

import gzip
import io
import zipfile

import pytest

from bot.errors import InputError
from bot.logs.sources import Limits, expand_inputs, looks_binary, read_chunks


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
    path = tmp_path / "core.bin"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 10)
    (src,) = expand_inputs([str(path)])
    with pytest.raises(InputError, match="binary") as err:
        _read(src)
    assert "NCCL_DEBUG=INFO" in (err.value.hint or "")


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

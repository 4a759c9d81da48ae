"""Opening a file a person named, safely: regular files only.

`/dev/zero` never ends and a FIFO blocks the reader until someone writes, so a
diagnostic given either would hang. The file is opened non-blocking and checked
with fstat on the same descriptor (no window between the check and the open).
"""

from __future__ import annotations

import errno
import io
import os
import stat
from typing import TextIO


def open_regular(path: str | os.PathLike[str], max_bytes: int | None = None) -> TextIO:
    """A text handle (undecodable bytes replaced) on `path`; OSError when it is not a
    regular file or is larger than `max_bytes`. The message is in `strerror`."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{os.fspath(path)} is not a regular file "
                          f"({_kind(st.st_mode)}); pass a saved file instead")
        if max_bytes is not None and st.st_size > max_bytes:
            raise OSError(errno.EFBIG, f"{os.fspath(path)} is larger than "
                          f"{max_bytes >> 20} MiB")
        os.set_blocking(fd, True)
        return io.open(fd, encoding="utf-8", errors="replace")  # noqa: UP020 - from an fd
    except BaseException:
        os.close(fd)
        raise


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a plain file"

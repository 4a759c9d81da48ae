"""The child that asks one rank for its Flight Recorder dump, with the rank's own rights.

Run by `tools.hang.pipe` as `python -I -S -c <this file> <json>` with the rank's root
directory (an fd of `/proc/PID/root`) inherited, an empty environment and `/` as its working
directory. Standard library only; everything it needs is imported before it changes root.
When started as root it enters the rank's root (chroot), takes the rank's groups, gid and uid
and marks itself not dumpable, so the rank's user can neither read its memory nor reach the
agent's files through it. Paths are resolved inside that root without following any symbolic
link (`openat2` with RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS, or one O_NOFOLLOW component at a
time on kernels without it); the pipe must be a FIFO and the dump a regular file, both owned
by the rank's uid, and the dump no larger than the byte budget it is given.

It writes one JSON line ({"ok": true, "size": N} or {"ok": false, "note": why}) and then the
N bytes of the dump to stdout, and exits.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import stat
import sys
import time
from typing import Any

#: linux/openat2.h
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_IN_ROOT = 0x10
#: openat2 is 437 in the generic syscall table and on x86_64
SYS_OPENAT2 = 437
PR_SET_DUMPABLE = 4


class RefusedError(Exception):
    """A one-line reason why no dump is returned."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)


class Root:
    """Opens paths beneath one directory fd, never following a symbolic link."""

    def __init__(self, fd: int, use_openat2: bool = True) -> None:
        self.fd, self.openat2 = fd, use_openat2

    def open(self, path: str, flags: int) -> int:
        parts = [p for p in path.split("/") if p]
        if not parts or any(p in (".", "..") for p in parts):
            raise OSError(errno.EINVAL, "not a plain path")
        if self.openat2:
            how = _OpenHow(flags | os.O_CLOEXEC | os.O_NOFOLLOW, 0,
                           RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
            fd = _libc.syscall(ctypes.c_long(SYS_OPENAT2), ctypes.c_int(self.fd),
                               ctypes.c_char_p("/".join(parts).encode()), ctypes.byref(how),
                               ctypes.c_size_t(ctypes.sizeof(how)))
            if fd < 0:
                err = ctypes.get_errno()
                if err not in (errno.ENOSYS, errno.EPERM):  # EPERM: a seccomp filter said no
                    raise OSError(err, os.strerror(err))
                self.openat2 = False
        if not self.openat2:
            fd = self._walk(parts, flags)
        if stat.S_ISLNK(os.fstat(fd).st_mode):  # O_PATH | O_NOFOLLOW opens the link itself
            os.close(fd)
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
        return int(fd)

    def _walk(self, parts: list[str], flags: int) -> int:
        cur = os.dup(self.fd)
        try:
            for name in parts[:-1]:
                nxt = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                              dir_fd=cur)
                os.close(cur)
                cur = nxt
            return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=cur)
        finally:
            os.close(cur)


def _why(exc: OSError, name: str) -> str:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return f"{name} is (or lies under) a symbolic link; not followed"
    if exc.errno == errno.EXDEV:
        return f"{name} resolves outside the rank's root; not used"
    return f"cannot open {name}: {exc.strerror}"


def _stat_of(root: Root, path: str, name: str) -> os.stat_result | None:
    """The file's status without opening it for reading; None when it does not exist."""
    try:
        fd = root.open(path, os.O_PATH)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RefusedError(_why(exc, name)) from exc
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


def _own(st: os.stat_result, uid: int, name: str, kind: str) -> None:
    ok = stat.S_ISFIFO(st.st_mode) if kind == "fifo" else stat.S_ISREG(st.st_mode)
    if not ok:
        raise RefusedError(f"{name} is not a {'named pipe' if kind == 'fifo' else 'regular file'}"
                      "; not used")
    if st.st_uid != uid:
        raise RefusedError(f"{name} belongs to uid {st.st_uid}, not to the rank's uid {uid}; "
                      "not used")


def poke(root: Root, fifo: str, uid: int) -> None:
    """Write one byte to the rank's debug pipe (it then dumps its Flight Recorder)."""
    name = fifo.rsplit("/", 1)[-1]
    st = _stat_of(root, fifo, name)
    if st is None:
        raise RefusedError(f"{name} does not exist (the rank has not made its debug pipe)")
    _own(st, uid, name, "fifo")
    try:
        fd = root.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise RefusedError(f"nobody reads {name} (the rank's process group is gone?)") from exc
        raise RefusedError(_why(exc, name)) from exc
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise RefusedError(f"{name} was replaced while it was opened; not written to")
        _own(now, uid, name, "fifo")
        try:
            os.write(fd, b"1")
        except BlockingIOError as exc:
            raise RefusedError(f"{name} is full (the rank does not read its debug pipe); no dump "
                          "asked") from exc
    finally:
        os.close(fd)


def wait_dump(root: Root, dump: str, uid: int, before: int | None, deadline: float,
              max_bytes: int) -> bytes:
    """The fresh dump once its size has settled, read through a checked descriptor."""
    name = dump.rsplit("/", 1)[-1]
    last = -1
    while time.monotonic() < deadline:
        st = _stat_of(root, dump, name)
        if st is not None:
            _own(st, uid, name, "file")
            if st.st_mtime_ns != before and st.st_size > 0:
                if st.st_size == last:
                    return _read(root, dump, name, uid, max_bytes)
                last = st.st_size
        time.sleep(0.1)
    raise RefusedError(f"no dump at {name} in time after writing to its pipe (the rank's "
                  "watchdog may be stuck too)")


def _read(root: Root, dump: str, name: str, uid: int, max_bytes: int) -> bytes:
    try:
        fd = root.open(dump, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise RefusedError(_why(exc, name)) from exc
    try:
        st = os.fstat(fd)
        _own(st, uid, name, "file")
        if st.st_size > max_bytes:
            raise RefusedError(f"{name} has {st.st_size} bytes, over the {max_bytes}-byte budget "
                          "for one dump; dropped")
        chunks, got = [], 0
        while got <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > max_bytes:
            raise RefusedError(f"{name} grew over the {max_bytes}-byte budget for one dump; "
                               "dropped")
        return b"".join(chunks)
    finally:
        os.close(fd)


def become(root_fd: int, uid: int, gid: int, groups: list[int]) -> bool:
    """As root: enter the rank's root and take its credentials (then nothing of the agent's
    is reachable from here); True when done. A root without CAP_SYS_CHROOT / CAP_SETUID /
    CAP_SETGID (a container that drops them) stays root: paths still resolve only inside the
    rank's root and only files the rank's uid owns are used. Not root: stay as we are (the
    kernel already limits us to our own user's files)."""
    became = False
    if os.geteuid() == 0:
        try:
            os.fchdir(root_fd)
            os.chroot(".")
            os.chdir("/")
        except PermissionError:
            pass
        try:
            os.setgroups(groups)
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            became = True
        except PermissionError:
            pass
    # not dumpable: the rank's user may not ptrace us or open /proc/<us>/root, cwd or fds
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    return became


def main(args: dict[str, Any]) -> tuple[bytes | None, str | None]:
    root_fd, uid = int(args["root_fd"]), int(args["uid"])
    deadline = float(args["deadline"])  # the caller's time.monotonic() clock
    try:
        become(root_fd, uid, int(args["gid"]), [int(g) for g in args["groups"]])
        root = Root(root_fd, bool(args.get("openat2", True)))
        dump, name = str(args["dump"]), str(args["dump"]).rsplit("/", 1)[-1]
        before = _stat_of(root, dump, name)
        if before is not None:
            _own(before, uid, name, "file")
        poke(root, str(args["fifo"]), uid)
        return wait_dump(root, dump, uid, before.st_mtime_ns if before else None, deadline,
                         int(args["max_bytes"])), None
    except RefusedError as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"reading the dump failed: {exc.strerror or exc}"


if __name__ == "__main__":
    data, note = main(json.loads(sys.argv[1]))
    head = {"ok": True, "size": len(data)} if data is not None else {"ok": False, "note": note}
    sys.stdout.buffer.write(json.dumps(head).encode() + b"\n" + (data or b""))
    sys.stdout.buffer.flush()

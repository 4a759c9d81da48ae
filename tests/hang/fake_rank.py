"""A fake rank for the hang tests: a cheap process with a rank's variables that serves (or
abuses) a debug pipe the way ProcessGroupNCCL's `DumpPipe` does (a FIFO `<stem><rank>.pipe`
read without blocking; anything written to it asks for a dump at
`<TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank>`).

FAKE_MODE says what it does when its pipe is written:
- `honest`: notes that it was asked (`<dump>.asked`), after FAKE_DELAY_S seconds writes its
  dump: FAKE_PAYLOAD and how many times it was asked so far (`payload:N`), then
  FAKE_DUMP_BYTES zero bytes;
- `mute`: reads its pipe and never dumps (a rank whose watchdog is stuck too);
- `symlink`: replaces its dump (a file of its own) with a symbolic link to FAKE_TARGET (a
  file it may not read), to make a root agent read that file for it;
- `full`: fills its own pipe and never reads it;
- `sleep`: has no pipe at all (a rank without a Flight Recorder).
It leaves when its parent does, or after FAKE_LIFE_S seconds.
"""

import os
import time

mode = os.environ.get("FAKE_MODE", "sleep")
rank = os.environ["RANK"]
parent, deadline = os.getppid(), time.monotonic() + float(os.environ.get("FAKE_LIFE_S", "300"))
fd = -1
if mode != "sleep":
    stem = os.environ["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"]
    out = f"{os.environ['TORCH_NCCL_DEBUG_INFO_TEMP_FILE']}{rank}"
    pipe = f"{stem}{rank}.pipe"
    os.mkfifo(pipe, 0o600)
    fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    if mode == "full":
        writer = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
        for chunk in (b"x" * 4096, b"x"):  # to the last byte
            try:
                while True:
                    os.write(writer, chunk)
            except BlockingIOError:
                pass
    if mode == "symlink":
        with open(out, "wb") as fh:  # an old dump of its own, at first
            fh.write(b"old")
asked = 0
print("ready", flush=True)
while os.getppid() == parent and time.monotonic() < deadline:
    if fd >= 0 and mode in ("honest", "symlink", "mute"):
        try:
            data = os.read(fd, 128)
        except BlockingIOError:
            data = b""
        if data and mode == "honest":
            asked += 1
            with open(f"{out}.asked", "w") as fh:
                fh.write(str(asked))
            time.sleep(float(os.environ.get("FAKE_DELAY_S", "0")))
            with open(out, "wb") as fh:
                fh.write(f"{os.environ.get('FAKE_PAYLOAD', 'dump')}:{asked}".encode())
                fh.write(b"\0" * int(os.environ.get("FAKE_DUMP_BYTES", "0")))
        elif data and mode == "symlink":
            os.unlink(out)
            os.symlink(os.environ["FAKE_TARGET"], out)
    time.sleep(0.05)

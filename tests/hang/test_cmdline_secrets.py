"""A rank's command line is redacted argument by argument when it is read, before anything
shortens it: a flag's value goes whole (even with spaces), nothing of it reaches the sample."""

from __future__ import annotations

import subprocess
import sys
import time

from tools.hang.procs import read_process

SECRETS = ("correct horse battery staple", "hunter2-0f9e8d7c", "dapi0123456789abcdef0123456789abcdef")


def test_secret_flags_in_a_ranks_command_line_are_redacted() -> None:
    argv = [sys.executable, "-c", "import time; time.sleep(60)",
            "--wandb-key", SECRETS[0], f"--password={SECRETS[1]}", "--lr", "3e-4",
            "--note", SECRETS[2]]
    env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(argv, env=env)
    try:
        tp = None
        for _ in range(100):  # until the child's command line is its own (after exec)
            tp = read_process(proc.pid)
            if tp is not None and "--wandb-key" in tp.cmdline:
                break
            time.sleep(0.05)
        assert tp is not None and "--wandb-key" in tp.cmdline, tp
        for secret in SECRETS:
            assert secret not in tp.cmdline
            assert secret.split()[0] not in tp.cmdline
        assert "--lr 3e-4" in tp.cmdline  # ordinary arguments stay readable
    finally:
        proc.kill()
        proc.wait()

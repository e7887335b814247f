"""The lock a run holds on its output directory: `<out>.lock` beside it, an exclusive flock
with the holder's pid written in it, so a second run into the same place fails at once."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from kreplica.conformance.errors import KreplicaError


class OutputInUse(KreplicaError):
    """Another run holds the lock of this output directory."""


def lock_output(path: Path, out: Path, command: str = "conform") -> int:
    """An open file descriptor holding an exclusive flock on `path`, with this pid written in
    it; OutputInUse (naming the holder's pid) if another process holds it. Closing the
    descriptor, or the process's end, gives the lock up."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise OutputInUse(f"{out} is in use by another kreplica {command} (pid {holder})") from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _holder(fd: int) -> str:
    """The pid the lock's holder wrote (it writes it just after locking: wait a moment)."""
    for _ in range(20):
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        if text.isdigit():
            return text
        time.sleep(0.01)
    return "unknown"

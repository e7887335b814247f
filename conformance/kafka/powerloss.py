"""A FUSE filesystem that loses every write not yet fsynced, on command: power loss, for real.

kill -9 keeps the page cache, so a killed broker's unflushed appends are still read back after a
restart. A broker's log directory on this filesystem can lose them instead (KIP-279, S2 in
docs/kafka-rules.md). Jepsen's LazyFS is the model: a passthrough over a backing directory that
keeps each file's writes in memory until fsync and drops them on "lose". docs/power-loss.md says
what it models and what it does not, and what it costs.

Contract: `mount(backing, mountpoint)` starts the filesystem in a process of its own and returns
once the mount is up, as a `PowerLossFS`: `lose_unsynced()` (power loss: every file is as its
last fsync left it), `sync_all()` (every file as if fsynced), `pending()`, `unmount(sync=False)`.
`mount` raises `FuseMissing` (exit 4) when fusermount3, libfuse3 or /dev/fuse is missing and
`PowerLossError` (exit 4) when the mount fails otherwise; after either, nothing is mounted and no
process is left. Nothing outlives the handle: `unmount` ends the process (SIGKILL after
`STOP_TIMEOUT_S`) and lazily unmounts a mount it left behind; the process, in a session of its own
(Ctrl-C reaches the harness, which syncs and unmounts), unmounts and exits when its parent dies
(stdin reaches EOF, and PR_SET_PDEATHSIG sends SIGTERM) or on SIGTERM/SIGINT/SIGHUP. Nothing
outlives the harness either, even when the process is killed with it (reaper.py): the mountpoint
is registered with the harness's reaper before the process starts and the process as soon as it
has, so a harness killed with -9 leaves neither a mount (a dead one included) nor the process.

The filesystem itself lives in `powerloss_daemon`, with what it models and the line protocol
`mount` speaks to it (over the process's stdin and stdout); this side never loads libfuse3.

Tested by tests/test_powerloss.py, on a real FUSE mount.
"""

from __future__ import annotations

import ctypes
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO

from kreplica.conformance.kafka.install import EnvironmentProblem
from kreplica.conformance.kafka.reaper import Reaper, detach_mount, fuse_mounts, reaper
from kreplica.conformance.tla.tlc import interrupts_deferred

FUSERMOUNT_ENV = "KREPLICA_FUSERMOUNT"
"""Overrides the fusermount3 binary (the harness unmounts with it)."""

FUSE_DEVICE = Path("/dev/fuse")
FUSE_HINT = "install Debian's fuse3 ('make kafka' does, as root; or 'apt-get install -y fuse3')"
MOUNT_TIMEOUT_S = 10.0
"""How long `mount` waits for the mount to come up."""
STOP_TIMEOUT_S = 5.0
"""How long `unmount` waits for the process to exit before it kills it."""
REPLY_TIMEOUT_S = 30.0
"""How long a command (`lose`, `sync`) may take to answer."""

_SERVE = "from kreplica.conformance.kafka.powerloss_daemon import serve; serve()"


class PowerLossError(EnvironmentProblem):
    """The power-loss filesystem could not mount, answer or unmount (exit 4)."""


class FuseMissing(PowerLossError):
    """fusermount3, libfuse3 or /dev/fuse is missing (exit 4)."""


@dataclass(frozen=True)
class Pending:
    """Writes not yet fsynced: the files that hold some, and the bytes of their held pages."""

    files: int
    bytes: int


def find_fusermount(fusermount: Path | str | None = None) -> Path:
    """fusermount3: the argument, else $KREPLICA_FUSERMOUNT, else the PATH's; FuseMissing if
    it is not an executable file, or /dev/fuse is missing."""
    chosen = fusermount or os.environ.get(FUSERMOUNT_ENV) or shutil.which("fusermount3")
    if not chosen or not os.access(chosen, os.X_OK) or not Path(chosen).is_file():
        shown = chosen or "fusermount3"
        raise FuseMissing(f"FUSE is missing: {shown} not found; {FUSE_HINT}")
    if not FUSE_DEVICE.exists():
        raise FuseMissing(f"FUSE is missing: no {FUSE_DEVICE}; {FUSE_HINT}")
    return Path(chosen)


def is_mounted(mountpoint: Path) -> bool:
    """Whether a FUSE filesystem is mounted at `mountpoint` (from /proc/self/mountinfo)."""
    return str(Path(mountpoint).resolve()) in fuse_mounts()


def mount(
    backing: Path,
    mountpoint: Path,
    *,
    fusermount: Path | str | None = None,
    log: Path | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float = MOUNT_TIMEOUT_S,
) -> PowerLossFS:
    """Mount the power-loss filesystem over `backing` at `mountpoint` (both existing
    directories; the mountpoint empty) and return once it answers.

    `log`: where the process's stderr goes (default: /dev/null); `env`: its environment
    (default: this one's). Raises FuseMissing or PowerLossError (ReaperError, exit 4, if the
    harness's reaper cannot be started); then nothing is mounted and no process is left."""
    tool = find_fusermount(fusermount)
    backing, mountpoint = Path(backing).resolve(), Path(mountpoint).resolve()
    for where in (backing, mountpoint):
        if not where.is_dir():
            raise PowerLossError(f"cannot mount the power-loss filesystem: {where} is no directory")
    if is_mounted(mountpoint):
        raise PowerLossError(f"cannot mount the power-loss filesystem: {mountpoint} is mounted")
    guard = reaper()
    guard.guard_mount(mountpoint, tool)
    try:
        process = _start_daemon(backing, mountpoint, tool, log, env)
    except BaseException:
        guard.forget("mount", mountpoint)
        raise
    handle = PowerLossFS(backing, mountpoint, tool, process, log, guard)
    try:
        guard.guard_process(process.pid)
        line = handle._read_line(timeout_s)
    except BaseException:
        handle.unmount()
        raise
    if line != "ready":
        handle.unmount()
        if line.startswith("missing: "):
            raise FuseMissing(f"FUSE is missing: {line.removeprefix('missing: ')}; {FUSE_HINT}")
        said = [line.removeprefix("error: "), handle._last_log_line()]
        reason = ": ".join(x for x in said if x) or "no reason given"
        raise PowerLossError(f"cannot mount the power-loss filesystem at {mountpoint}: {reason}")
    return handle


def _start_daemon(
    backing: Path, mountpoint: Path, tool: Path, log: Path | None, env: dict[str, str] | None
) -> subprocess.Popen[bytes]:
    """The filesystem's process, in a session of its own, talking over its stdin and stdout."""
    stderr: IO[bytes] | int = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    try:
        with interrupts_deferred():  # a preexec_fn forks with Python's at-fork handlers
            return subprocess.Popen(
                [sys.executable, "-c", _SERVE, str(backing), str(mountpoint), str(tool)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                start_new_session=True,
                preexec_fn=_term_with_parent(),
            )
    finally:
        if not isinstance(stderr, int):
            stderr.close()


@dataclass
class PowerLossFS:
    """A mounted power-loss filesystem, served by its own process (`process.pid`)."""

    backing: Path
    mountpoint: Path
    fusermount: Path
    process: subprocess.Popen[bytes]
    log: Path | None = None
    reaper: Reaper | None = None
    """The harness's reaper, which holds the mountpoint and the process until `unmount`."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def lose_unsynced(self) -> Pending:
        """Power loss: drop every write not yet fsynced; what was dropped."""
        return self._command("lose")

    def sync_all(self) -> Pending:
        """Apply every pending write to the backing directory, as an fsync of every file."""
        return self._command("sync")

    def pending(self) -> Pending:
        """What a loss would drop now."""
        return self._command("pending")

    def serves(self) -> bool:
        """Whether the filesystem is mounted at the mountpoint and its process runs."""
        return self.process.poll() is None and is_mounted(self.mountpoint)

    def unmount(self, sync: bool = False) -> None:
        """Unmount and end the process (`sync`: apply pending writes first, else they are lost);
        afterwards nothing is mounted at the mountpoint and the process is reaped, and the
        reaper lets both be. Idempotent."""
        with self._lock:
            if self.process.poll() is None:
                try:
                    if sync:
                        self._ask("sync")
                    self._send("exit")
                    self.process.wait(STOP_TIMEOUT_S)
                except (PowerLossError, OSError, subprocess.TimeoutExpired):
                    self.process.kill()
                    self.process.wait()
            for pipe in (self.process.stdin, self.process.stdout):
                if pipe is not None:
                    pipe.close()
            gone = detach_mount(self.fusermount, self.mountpoint)  # a killed process's dead one
            if self.reaper is not None:
                self.reaper.forget("process", self.process.pid)
                if gone:
                    self.reaper.forget("mount", self.mountpoint)

    def __enter__(self) -> PowerLossFS:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.unmount()

    def _command(self, word: str) -> Pending:
        with self._lock:
            return self._ask(word)

    def _ask(self, word: str) -> Pending:
        self._send(word)
        line = self._read_line(REPLY_TIMEOUT_S)
        parts = line.split()
        if len(parts) != 3 or parts[0] != "ok":
            raise PowerLossError(f"the power-loss filesystem at {self.mountpoint}: {line}")
        return Pending(int(parts[1]), int(parts[2]))

    def _send(self, word: str) -> None:
        if self.process.poll() is not None or self.process.stdin is None:
            raise PowerLossError(f"the power-loss filesystem at {self.mountpoint} is not running")
        try:
            self.process.stdin.write(f"{word}\n".encode())
            self.process.stdin.flush()
        except OSError:
            raise PowerLossError(
                f"the power-loss filesystem at {self.mountpoint} is not running"
            ) from None

    def _read_line(self, timeout_s: float) -> str:
        """The process's next line; "" if it exited first; PowerLossError on a time-out."""
        out = self.process.stdout
        assert out is not None
        ready, _, _ = select.select([out], [], [], timeout_s)
        if not ready:
            raise PowerLossError(
                f"the power-loss filesystem at {self.mountpoint} did not answer in {timeout_s:g}s"
            )
        return out.readline().decode("utf-8", "replace").strip()

    def _last_log_line(self) -> str:
        if self.log is None:
            return ""
        try:
            lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return next((x.strip() for x in reversed(lines) if x.strip()), "")


def _term_with_parent() -> Callable[[], None] | None:
    """For the child, between fork and exec: SIGTERM when the parent dies (Linux prctl)."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def term_with_parent() -> None:
        prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)

    return term_with_parent

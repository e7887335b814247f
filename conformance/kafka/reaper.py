"""The reaper: no iptables rule, mount or filesystem process of a harness outlives it, even kill -9.

A run's context managers remove what it adds to the machine as it ends: nemesis.Network its
iptables chain and the jump to it, powerloss.mount each FUSE mount and the daemon serving it (the
JVMs die besides, through PR_SET_PDEATHSIG: cluster.py). A harness killed with -9 runs none of
them: a chain has no process to die with (and cut the next run's brokers off), and a filesystem
daemon killed along with the harness leaves a dead mount.

Theory of operation. `reaper()` starts this process's reaper the first time the harness is about
to add a chain or a mount: `python -c` running `serve`, in a session of its own (a kill of the
harness's process group, or Ctrl-C at its terminal, does not reach it), with `/` as its working
directory and its stdin one end of a socket pair (SOCK_SEQPACKET: one record per message, file
descriptors may travel with one) whose other end only the harness holds (close-on-exec, and
closed in a child forked without exec). The harness registers each resource before it adds it
and waits for the answer; once it has removed it, it tells the reaper to forget it. The reaper
does nothing else but wait on its socket. However the harness ends, the kernel closes its end:
the reaper reads EOF, removes what is still registered, and exits:
- each process is killed (SIGKILL through a pidfd the harness sent while the process was its
  unreaped child, so a recycled pid is never hit), and awaited last;
- each mountpoint where a FUSE filesystem is still mounted (a dead one too) is lazily unmounted
  (fusermount3 -u -z), which needs no live daemon and no closed file;
- each chain is flushed, every jump to it from OUTPUT deleted, and the chain deleted.
What fails there is one line on the reaper's stderr (the harness's own), and exit 1. A harness
that ends normally has nothing registered any more: atexit closes its end and awaits the reaper.

Runs on one port base share a chain name, one after another, so a chain is created or removed
only under its lock: an abstract unix socket named after it, bound (EADDRINUSE for anyone else)
and let go by the kernel when its holder exits. A reaper holds it from the chain's registration
(before its harness creates the chain) until the chain is forgotten or removed; a cluster about
to start (`clear_stale_chain`) takes it before any JVM starts, waiting up to LOCK_TIMEOUT_S for a
killed run's reaper to finish, and removes a chain that nobody guards (a run killed together with
its reaper left it). So a reaper never deletes the next run's chain, and a left-over partition
never cuts the next run's brokers off at start-up.

Why a process: PR_SET_PDEATHSIG kills a child with its parent, but removing a chain needs
someone alive after the parent; nftables' owner tables vanish with the netlink socket that made
them, but the harness would have to speak netlink itself (the iptables and nft commands exit at
once). Why a socket pair and not a pipe: the pidfds travel over it, and its answers make each
registration take effect before the resource exists.

Messages: one JSON object each, {"n": SEQ, "guard"|"forget": "chain"|"mount"|"process", "key":
KEY, ...}: a chain's key is its name (with "iptables": PATH), a mount's its mountpoint (with
"fusermount": PATH), a process's its pid (its pidfd attached to "guard"). The answer is `SEQ ok`,
`SEQ busy: MESSAGE` (the chain's lock is another's) or `SEQ error: MESSAGE`; the harness skips
answers to a question an interrupt made it give up.

Tested by tests/test_kafka_real.py (a harness killed with -9 during a partition, without Kafka
and on a real cluster, with and without its filesystems killed too; a chain no reaper guards)
and tests/test_powerloss.py (a mounting harness killed with -9).
"""

from __future__ import annotations

import atexit
import errno
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kreplica.conformance.kafka.install import EnvironmentProblem

LOCK_TIMEOUT_S = 30.0
"""How long a chain's lock is waited for (a killed run's reaper takes well under a second)."""
REPLY_TIMEOUT_S = LOCK_TIMEOUT_S + 15.0
"""How long the harness waits for the reaper's answer."""
EXIT_TIMEOUT_S = 30.0
"""How long the harness, at its exit, waits for its reaper to finish."""
KILL_WAIT_S = 5.0
"""How long the reaper waits for a process it killed to be gone."""
MESSAGE_MAX = 8192
IPTABLES_WAIT = ("-w", "5")
"""iptables waits up to 5 s for the xtables lock (another run's iptables)."""

_SERVE = "from kreplica.conformance.kafka.reaper import serve; serve()"


class ReaperError(EnvironmentProblem):
    """The reaper could not be started, stopped answering, or refused a registration (exit 4)."""


class ChainBusy(ReaperError):
    """Another live run's reaper holds the chain's lock: its port base is in use."""


def chain_name(port_base: int) -> str:
    """The iptables chain of the runs on `port_base`."""
    return f"KREPLICA-{port_base}"


# ---------------------------------------------------------------------------------------------
# What both sides use: chains, their locks, FUSE mounts.


def fuse_mounts() -> list[str]:
    """The mount points of every FUSE filesystem (fuse, fuse.*) this machine has mounted."""
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8") as table:
        for line in table:
            before, _, after = line.partition(" - ")
            if after.split(" ", 1)[0].split(".")[0] == "fuse":
                points.append(before.split(" ")[4].replace("\\040", " "))
    return points


def detach_mount(fusermount: Path | str, mountpoint: Path | str) -> bool:
    """Lazily unmount the FUSE filesystem at `mountpoint`, if one is mounted there (a dead one
    too); whether none is mounted there afterwards."""
    if str(mountpoint) not in fuse_mounts():
        return True
    subprocess.run([str(fusermount), "-u", "-z", str(mountpoint)], capture_output=True, check=False)
    return str(mountpoint) not in fuse_mounts()


def _iptables(iptables: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(iptables), *IPTABLES_WAIT, *args], capture_output=True, text=True, check=False
    )


def chain_exists(iptables: Path | str, chain: str) -> bool:
    """Whether the chain exists in the filter table."""
    return _iptables(iptables, "-S", chain).returncode == 0


def remove_chain(iptables: Path | str, chain: str) -> list[str]:
    """Flush the chain, delete every jump to it from OUTPUT, delete it: the failures, as lines
    (none: the chain is gone, or never was)."""
    if not chain_exists(iptables, chain):
        return []
    _iptables(iptables, "-F", chain)
    while _iptables(iptables, "-D", "OUTPUT", "-j", chain).returncode == 0:
        pass
    done = _iptables(iptables, "-X", chain)
    if done.returncode == 0:
        return []
    reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
    return [f"iptables -X {chain}: {reason}"]


def take_lock(chain: str, timeout_s: float = LOCK_TIMEOUT_S) -> socket.socket:
    """The chain's lock (an abstract unix socket, bound: close it to let go), waited for up to
    `timeout_s`; ChainBusy if someone still holds it then."""
    holder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            holder.bind(b"\0kreplica-lock-" + chain.encode())
            return holder
        except OSError as err:
            if err.errno != errno.EADDRINUSE or time.monotonic() >= deadline:
                holder.close()
                if err.errno != errno.EADDRINUSE:
                    raise
                raise ChainBusy(
                    f"iptables chain {chain} belongs to another run still going on "
                    "(its reaper holds it): stop that run or choose another --port-base"
                ) from None
        time.sleep(0.1)


def clear_stale_chain(iptables: Path | str, chain: str, timeout_s: float = LOCK_TIMEOUT_S) -> bool:
    """Once no reaper guards the chain (waiting up to `timeout_s` for one still at work),
    remove it if it exists: a run killed together with its reaper left it. Whether there was
    one; ChainBusy if a reaper keeps guarding it (a live run), ReaperError if it stays."""
    lock = take_lock(chain, timeout_s)
    try:
        if not chain_exists(iptables, chain):
            return False
        failures = remove_chain(iptables, chain)
    finally:
        lock.close()
    if failures:
        raise ReaperError(f"a killed run's chain cannot be removed: {failures[0]}")
    return True


# ---------------------------------------------------------------------------------------------
# The harness's side.


@dataclass
class Reaper:
    """The harness's side of its reaper: each registration is answered before it returns."""

    process: subprocess.Popen[bytes]
    channel: socket.socket
    owner: int = field(default_factory=os.getpid)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _sent: int = 0

    def guard_chain(self, chain: str, iptables: Path | str) -> None:
        """From now on the chain's lock is the reaper's, and the chain and its jumps are removed
        if the harness dies; ChainBusy if another run's reaper keeps the lock."""
        self._ask({"guard": "chain", "key": chain, "iptables": str(iptables)})

    def guard_mount(self, mountpoint: Path, fusermount: Path | str) -> None:
        """From now on a FUSE mount at `mountpoint` is lazily unmounted if the harness dies."""
        self._ask({"guard": "mount", "key": str(mountpoint), "fusermount": str(fusermount)})

    def guard_process(self, pid: int) -> None:
        """From now on the process (a child of this one, not yet reaped) is killed with SIGKILL
        if the harness dies (one already gone needs nothing)."""
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            return
        try:
            self._ask({"guard": "process", "key": str(pid)}, [pidfd])
        finally:
            os.close(pidfd)

    def forget(self, kind: str, key: object) -> None:
        """The resource ("chain", "mount", "process") is gone: the reaper lets it be (and a
        chain's lock go). Never raises: a reaper that is gone has nothing left to remove."""
        with suppress(ReaperError):
            self._ask({"forget": kind, "key": str(key)})

    def close(self, timeout_s: float = EXIT_TIMEOUT_S) -> None:
        """Close the harness's end (the reaper removes what is still registered) and await the
        reaper (killed after `timeout_s`). Only the process that started it does this."""
        if os.getpid() != self.owner:
            return
        with self._lock:
            self.channel.close()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _ask(self, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
        with self._lock:
            self._sent += 1
            number = self._sent
            try:
                data = json.dumps({"n": number, **message}).encode()
                socket.send_fds(self.channel, [data], list(fds))
                reply = self._reply(number)
            except OSError as err:
                raise ReaperError(
                    f"the reaper (pid {self.process.pid}) did not answer: {err}"
                ) from None
        if reply == "ok":
            return
        kind, _, text = reply.partition(": ")
        raise (ChainBusy if kind == "busy" else ReaperError)(text or reply)

    def _reply(self, number: int) -> str:
        """The answer to question `number` (earlier ones an interrupt abandoned are skipped)."""
        while True:
            raw = self.channel.recv(MESSAGE_MAX).decode("utf-8", "replace")
            if not raw:
                return f"error: the reaper (pid {self.process.pid}) has exited"
            seq, _, reply = raw.partition(" ")
            if seq == str(number):
                return reply


_current: Reaper | None = None
_starting = threading.Lock()


def reaper() -> Reaper:
    """This process's reaper, started on first use (and again if it has died)."""
    global _current
    with _starting:
        if _current is None or _current.process.poll() is not None:
            _current = start()
        return _current


def start() -> Reaper:
    """Start a reaper in a session of its own (ReaperError if it cannot be); it is closed and
    awaited when this process exits."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", _SERVE],
            stdin=theirs.fileno(),
            stdout=subprocess.DEVNULL,
            cwd="/",
            start_new_session=True,
        )
    except OSError as err:
        ours.close()
        raise ReaperError(f"cannot start the reaper: {err}") from None
    finally:
        theirs.close()
    ours.settimeout(REPLY_TIMEOUT_S)
    started = Reaper(process, ours)
    atexit.register(started.close)
    return started


def _forget_in_child() -> None:
    """In a child forked without exec: let go of the parent's end, which would keep its reaper
    waiting (a child that execs loses it anyway: close-on-exec)."""
    global _current
    if _current is not None:
        fd = _current.channel.detach()
        if fd >= 0:
            os.close(fd)
        _current = None


os.register_at_fork(after_in_child=_forget_in_child)


# ---------------------------------------------------------------------------------------------
# The reaper's side.


@dataclass
class _Guarded:
    """What the reaper removes when its harness is gone."""

    chains: dict[str, tuple[str, socket.socket]] = field(default_factory=dict)
    """Per chain: the iptables binary, and the chain's lock."""
    mounts: dict[str, str] = field(default_factory=dict)
    """Per mountpoint: the fusermount3 binary."""
    processes: dict[str, int] = field(default_factory=dict)
    """Per pid: a pidfd of the process."""

    def handle(self, message: dict[str, Any], fds: list[int]) -> str:
        """Register or forget one resource; the answer (without its number)."""
        try:
            if "forget" in message:
                self.forget(message["forget"], message["key"])
            else:
                self.guard(message, fds)
            return "ok"
        except ChainBusy as err:
            return f"busy: {err}"
        except (OSError, KeyError, ValueError, ReaperError) as err:
            return f"error: {err}"
        finally:
            for fd in fds:
                os.close(fd)

    def guard(self, message: dict[str, Any], fds: list[int]) -> None:
        """Register a resource (a pidfd is kept: duplicated out of `fds`)."""
        kind, key = message["guard"], message["key"]
        if kind == "chain":
            if key not in self.chains:
                self.chains[key] = (message["iptables"], take_lock(key))
        elif kind == "mount":
            self.mounts[key] = message["fusermount"]
        elif kind == "process" and len(fds) == 1:
            self.forget("process", key)
            self.processes[key] = os.dup(fds[0])
        else:
            raise ValueError(f"cannot guard {kind!r} with {len(fds)} descriptors")

    def forget(self, kind: str, key: str) -> None:
        """Let a resource be: a chain's lock goes, a pidfd is closed."""
        if kind == "chain" and key in self.chains:
            self.chains.pop(key)[1].close()
        elif kind == "mount":
            self.mounts.pop(key, None)
        elif kind == "process" and key in self.processes:
            os.close(self.processes.pop(key))

    def reap(self) -> list[str]:
        """Kill every process, unmount every mountpoint (neither waits for the other), remove
        every chain (and let its lock go), await the processes; what failed, as lines."""
        failures = []
        for pidfd in self.processes.values():
            with suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        for mountpoint, fusermount in self.mounts.items():
            if not detach_mount(fusermount, mountpoint):
                failures.append(f"{fusermount} -u -z {mountpoint} left it mounted")
        for chain, (iptables, lock) in self.chains.items():
            failures += remove_chain(iptables, chain)
            lock.close()
        for pid, pidfd in self.processes.items():
            if not select.select([pidfd], [], [], KILL_WAIT_S)[0]:
                failures.append(f"process {pid} was killed but did not exit in {KILL_WAIT_S:g}s")
        return failures


def serve() -> None:
    """The reaper (stdin: its end of the socket pair): answer registrations until the harness's
    end closes, then remove what is still registered and exit (1, with one line each on stderr,
    if something could not be removed)."""
    channel = socket.socket(fileno=0)
    guarded = _Guarded()
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(channel, MESSAGE_MAX, 4)
        except OSError:
            break
        if not data:
            for fd in fds:
                os.close(fd)
            break
        message = json.loads(data)
        reply = guarded.handle(message, fds)
        try:
            channel.send(f"{message.get('n', 0)} {reply}".encode())
        except OSError:
            break
    failures = guarded.reap()
    for line in failures:
        sys.stderr.write(f"kreplica: reaper: {line}\n")
    sys.exit(1 if failures else 0)

"""The power-loss filesystem itself: the daemon `powerloss.mount` starts, serving one FUSE mount.

Rules: this is the daemon's side only, run in a process of its own, the only one that loads
libfuse3 (mfusepy); the harness's side (`powerloss`: mount, command, unmount, reap) never
imports it, it names it in the command line it starts.

What is modelled (the filesystem's state is the backing directory plus, per inode, the writes
since its last fsync, held in memory as 4 KiB pages):
- write, and truncate (ftruncate, O_TRUNC, setLength), are held until the file's fsync or
  fdatasync, which applies them to the backing file and fsyncs it; reads see them meanwhile.
- namespace operations (create, mkdir, rename, link, unlink, rmdir, symlink, chmod, chown,
  utimens) reach the backing directory at once, so they survive a loss: a file created since its
  last fsync survives empty (or as synced), a rename survives with its data as last synced. This
  is LazyFS's default and a journaling filesystem's behaviour once its journal commits; a crash
  that also loses an un-fsynced directory entry is not modelled, and a directory fsync only
  fsyncs the backing directory.
- a loss is all or nothing per file: no torn writes, no reordering of one file's writes.
- an unlinked inode's pending writes are dropped with it; an open file once unlinked cannot be
  read or written (hard_remove, no .fuse_hidden files).
The kernel caches no attributes or names (timeouts 0) and drops a file's cached pages when it is
opened again, so after a loss a fresh open reads what survived; a process that keeps a file open
across a loss (or a mapping) may still see its pages: the harness loses only after the broker
is killed, and remounts.

The daemon's side (`serve`) is the `python -c` program `mount` starts; it talks over its stdin
and stdout, one line each way: `lose`, `sync`, `pending`, `exit`, answered `ok FILES BYTES`
(FILES files whose pending writes covered BYTES bytes of pages) or `error: MESSAGE`.

Tested by tests/test_powerloss.py, on a real FUSE mount, through `powerloss.mount`.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

PAGE = 4096
"""The unit in which pending writes are held (bytes)."""


@dataclass
class PendingFile:
    """One inode's writes since its last fsync, over its backing file.

    Invariants: `floor <= size`; the logical content is the backing file's first `floor` bytes,
    zeros up to `size`, with `pages` (whole 4 KiB pages of logical content, zero past `size`)
    laid over them."""

    size: int
    floor: int
    pages: dict[int, bytearray] = field(default_factory=dict)

    def _base(self, fd: int, index: int) -> bytearray:
        start = index * PAGE
        page = bytearray(PAGE)
        valid = min(PAGE, self.floor - start)
        if valid > 0:
            data = os.pread(fd, valid, start)
            page[: len(data)] = data
        return page

    def read(self, fd: int, offset: int, length: int) -> bytes:
        """`length` bytes of logical content from `offset` (fewer at the end of the file)."""
        end = min(offset + length, self.size)
        out = bytearray()
        position = offset
        while position < end:
            index, within = divmod(position, PAGE)
            take = min(PAGE - within, end - position)
            page = self.pages.get(index)
            if page is not None:
                out += page[within : within + take]
            else:
                valid = max(0, min(take, self.floor - position))
                data = os.pread(fd, valid, position) if valid else b""
                out += data + bytes(take - len(data))
            position += take
        return bytes(out)

    def write(self, fd: int, offset: int, data: bytes) -> None:
        """Hold `data` at `offset` (the backing file is not touched)."""
        position, done = offset, 0
        while done < len(data):
            index, within = divmod(position, PAGE)
            take = min(PAGE - within, len(data) - done)
            page = self.pages.get(index)
            if page is None:
                page = self.pages[index] = self._base(fd, index)
            page[within : within + take] = data[done : done + take]
            position += take
            done += take
        self.size = max(self.size, offset + len(data))

    def truncate(self, length: int) -> None:
        """Hold a truncation (or extension) to `length` bytes."""
        if length < self.size:
            for index in [i for i in self.pages if i * PAGE >= length]:
                del self.pages[index]
            index, within = divmod(length, PAGE)
            if within and index in self.pages:
                self.pages[index][within:] = bytes(PAGE - within)
            self.floor = min(self.floor, length)
        self.size = length

    def commit(self, fd: int) -> None:
        """Apply the held writes to the backing file and fsync it."""
        if os.fstat(fd).st_size > self.floor:
            os.ftruncate(fd, self.floor)
        for index, page in sorted(self.pages.items()):
            start = index * PAGE
            if start < self.size:
                os.pwrite(fd, bytes(page[: min(PAGE, self.size - start)]), start)
        os.ftruncate(fd, self.size)
        os.fsync(fd)


class _Daemon:
    """The filesystem's state, shared by the FUSE operations and the command thread."""

    def __init__(self, backing: str) -> None:
        self.backing = backing
        self.lock = threading.RLock()
        self.pending: dict[int, PendingFile] = {}
        """Per backing inode number: its writes since its last fsync."""
        self.handles: dict[int, tuple[int, bool]] = {}
        """Per open handle (the backing fd): (inode, opened with O_APPEND)."""

    def real(self, path: str) -> str:
        return self.backing + path if path != "/" else self.backing

    def pending_file(self, fd: int, ino: int) -> PendingFile:
        held = self.pending.get(ino)
        if held is None:
            size = os.fstat(fd).st_size
            held = self.pending[ino] = PendingFile(size, size)
        return held

    def totals(self) -> tuple[int, int]:
        return len(self.pending), sum(len(p.pages) * PAGE for p in self.pending.values())

    def lose(self) -> tuple[int, int]:
        with self.lock:
            done = self.totals()
            self.pending.clear()
            return done

    def sync(self) -> tuple[int, int]:
        with self.lock:
            done = self.totals()
            by_ino = {ino: fd for fd, (ino, _) in self.handles.items()}
            for ino, held in list(self.pending.items()):
                fd = by_ino.get(ino)
                if fd is None:  # no handle open: find the file by walking the backing directory
                    path = self.find(ino)
                    if path is None:
                        continue
                    fd = os.open(path, os.O_RDWR)
                    try:
                        held.commit(fd)
                    finally:
                        os.close(fd)
                else:
                    held.commit(fd)
            self.pending.clear()
            return done

    def find(self, ino: int) -> str | None:
        for folder, _, files in os.walk(self.backing):
            for name in files:
                path = os.path.join(folder, name)
                if os.lstat(path).st_ino == ino:
                    return path
        return None

    def forget_if_last_link(self, real: str) -> None:
        """Before `real` is unlinked or replaced: drop its inode's writes if this is its last
        name (an inode number may be reused by a new file)."""
        try:
            st = os.lstat(real)
        except FileNotFoundError:
            return
        if stat.S_ISREG(st.st_mode) and st.st_nlink <= 1:
            self.pending.pop(st.st_ino, None)


def _operations(daemon: _Daemon) -> Any:
    """The mfusepy Operations over the daemon's state (imported here: only the daemon needs
    libfuse3)."""
    import mfusepy

    def oserror(err: OSError) -> mfusepy.FuseOSError:
        return mfusepy.FuseOSError(err.errno or errno.EIO)

    def caller() -> tuple[int, int]:
        uid, gid, _ = mfusepy.fuse_get_context()
        return uid, gid

    def owned(real: str) -> None:
        if os.geteuid() == 0:
            uid, gid = caller()
            os.lchown(real, uid, gid)

    class Operations(mfusepy.Operations):  # type: ignore[misc]
        use_ns = True

        def init_with_config(self, conn: Any, config: Any) -> None:
            if config is not None:
                config.entry_timeout = 0.0
                config.negative_timeout = 0.0
                config.attr_timeout = 0.0
                config.hard_remove = 1
                config.kernel_cache = 0
            sys.stdout.write("ready\n")
            sys.stdout.flush()

        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            with daemon.lock:
                try:
                    st = os.fstat(fh) if fh is not None else os.lstat(daemon.real(path))
                except OSError as err:
                    raise oserror(err) from None
                attrs = {
                    key: getattr(st, key)
                    for key in (
                        "st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size",
                        "st_atime_ns", "st_mtime_ns", "st_ctime_ns", "st_blocks",
                    )
                }  # fmt: skip
                attrs["st_atime"] = attrs.pop("st_atime_ns")
                attrs["st_mtime"] = attrs.pop("st_mtime_ns")
                attrs["st_ctime"] = attrs.pop("st_ctime_ns")
                held = daemon.pending.get(st.st_ino) if stat.S_ISREG(st.st_mode) else None
                if held is not None:
                    attrs["st_size"] = held.size
                    attrs["st_blocks"] = (held.size + 511) // 512
                return attrs

        def readdir(self, path: str, fh: int) -> list[str]:
            try:
                return [".", "..", *os.listdir(daemon.real(path))]
            except OSError as err:
                raise oserror(err) from None

        def readlink(self, path: str) -> str:
            try:
                return os.readlink(daemon.real(path))
            except OSError as err:
                raise oserror(err) from None

        def statfs(self, path: str) -> dict[str, int]:
            sv = os.statvfs(daemon.real(path))
            keys = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files")
            return {k: getattr(sv, k) for k in (*keys, "f_ffree", "f_favail", "f_namemax")}

        def mkdir(self, path: str, mode: int) -> int:
            with daemon.lock:
                try:
                    os.mkdir(daemon.real(path), mode)
                    owned(daemon.real(path))
                except OSError as err:
                    raise oserror(err) from None
            return 0

        def rmdir(self, path: str) -> int:
            with daemon.lock:
                try:
                    os.rmdir(daemon.real(path))
                except OSError as err:
                    raise oserror(err) from None
            return 0

        def unlink(self, path: str) -> int:
            with daemon.lock:
                real = daemon.real(path)
                daemon.forget_if_last_link(real)
                try:
                    os.unlink(real)
                except OSError as err:
                    raise oserror(err) from None
            return 0

        def rename(self, old: str, new: str) -> int:
            with daemon.lock:
                if os.path.lexists(daemon.real(new)) and not os.path.samefile(
                    daemon.real(old), daemon.real(new)
                ):
                    daemon.forget_if_last_link(daemon.real(new))
                try:
                    os.rename(daemon.real(old), daemon.real(new))
                except OSError as err:
                    raise oserror(err) from None
            return 0

        def link(self, target: str, source: str) -> int:
            with daemon.lock:
                try:
                    os.link(daemon.real(source), daemon.real(target))
                except OSError as err:
                    raise oserror(err) from None
            return 0

        def symlink(self, target: str, source: str) -> int:
            with daemon.lock:
                try:
                    os.symlink(source, daemon.real(target))
                    owned(daemon.real(target))
                except OSError as err:
                    raise oserror(err) from None
            return 0

        def chmod(self, path: str, mode: int) -> int:
            try:
                os.chmod(daemon.real(path), mode)
            except OSError as err:
                raise oserror(err) from None
            return 0

        def chown(self, path: str, uid: int, gid: int) -> int:
            try:
                os.lchown(daemon.real(path), uid, gid)
            except OSError as err:
                raise oserror(err) from None
            return 0

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
            try:
                if times is None:
                    os.utime(daemon.real(path), follow_symlinks=False)
                else:
                    os.utime(daemon.real(path), ns=times, follow_symlinks=False)
            except OSError as err:
                raise oserror(err) from None
            return 0

        def _open(self, real: str, flags: int, mode: int | None) -> int:
            creating = mode is not None
            sans = flags & os.O_NOFOLLOW  # O_DIRECT, O_SYNC and the like do not reach the backing
            try:
                if mode is not None:
                    exclusive = flags & os.O_EXCL
                    fd = os.open(real, os.O_RDWR | os.O_CREAT | exclusive | sans, mode)
                    owned(real)
                else:
                    fd = os.open(real, os.O_RDWR | sans)
            except OSError as err:
                if err.errno not in (errno.EACCES, errno.EISDIR, errno.EROFS) or creating:
                    raise oserror(err) from None
                try:  # a file the daemon cannot write either: read only
                    fd = os.open(real, os.O_RDONLY | sans)
                except OSError as again:
                    raise oserror(again) from None
            ino = os.fstat(fd).st_ino
            daemon.handles[fd] = (ino, bool(flags & os.O_APPEND))
            if flags & os.O_TRUNC:
                daemon.pending_file(fd, ino).truncate(0)
            return fd

        def open(self, path: str, flags: int) -> int:
            with daemon.lock:
                return self._open(daemon.real(path), flags, None)

        def create(self, path: str, mode: int, flags: int) -> int:
            with daemon.lock:
                return self._open(daemon.real(path), flags | os.O_CREAT, mode)

        def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
            with daemon.lock:
                ino, _ = daemon.handles[fh]
                held = daemon.pending.get(ino)
                try:
                    if held is not None:
                        return held.read(fh, offset, size)
                    return os.pread(fh, size, offset)
                except OSError as err:
                    raise oserror(err) from None

        def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
            with daemon.lock:
                ino, append = daemon.handles[fh]
                held = daemon.pending_file(fh, ino)
                held.write(fh, held.size if append else offset, data)
                return len(data)

        def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
            with daemon.lock:
                if fh is not None:
                    fd, close = fh, False
                else:
                    assert path is not None
                    try:
                        fd, close = os.open(daemon.real(path), os.O_RDONLY), True
                    except OSError as err:
                        raise oserror(err) from None
                try:
                    daemon.pending_file(fd, os.fstat(fd).st_ino).truncate(length)
                finally:
                    if close:
                        os.close(fd)
            return 0

        def fsync(self, path: str | None, datasync: int, fh: int) -> int:
            with daemon.lock:
                ino, _ = daemon.handles[fh]
                held = daemon.pending.get(ino)
                try:
                    if held is not None:
                        held.commit(fh)
                    else:
                        os.fsync(fh)
                except OSError as err:  # the writes stay pending
                    raise oserror(err) from None
                daemon.pending.pop(ino, None)
            return 0

        def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
            fd = os.open(daemon.real(path), os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            return 0

        def flush(self, path: str | None, fh: int) -> int:
            return 0

        def release(self, path: str | None, fh: int) -> int:
            with daemon.lock:
                daemon.handles.pop(fh, None)
                os.close(fh)
            return 0

    return Operations()


def serve() -> None:
    """The daemon (argv: backing, mountpoint, fusermount3): mount, announce `ready` on stdout,
    answer commands from stdin, unmount at `exit`, EOF or SIGTERM/SIGINT/SIGHUP, and exit."""
    backing, mountpoint, fusermount = sys.argv[1:4]
    stops = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)  # every thread inherits it; one waits
    try:
        import mfusepy
    except (OSError, ImportError) as err:
        sys.stdout.write(f"missing: libfuse3 cannot be loaded ({err})\n")
        sys.stdout.flush()
        sys.exit(4)
    daemon = _Daemon(backing)
    stopping = threading.Event()

    def stop() -> None:
        if not stopping.is_set():
            stopping.set()
            subprocess.run([fusermount, "-u", "-z", mountpoint], capture_output=True, check=False)

    def commands() -> None:
        for raw in sys.stdin:
            word = raw.strip()
            if word == "exit":
                break
            try:
                actions = {"lose": daemon.lose, "sync": daemon.sync, "pending": daemon.totals}
                if word not in actions:
                    raise ValueError(f"unknown command {word!r}")
                with daemon.lock:
                    files, size = actions[word]()
                reply = f"ok {files} {size}"
            except (OSError, ValueError) as err:
                reply = f"error: {err}"
            sys.stdout.write(reply + "\n")
            sys.stdout.flush()
        stop()

    def signals() -> None:
        signal.sigwait(stops)
        stop()

    threading.Thread(target=commands, daemon=True).start()
    threading.Thread(target=signals, daemon=True).start()
    try:
        mfusepy.FUSE(
            _operations(daemon),
            mountpoint,
            foreground=True,
            allow_other=os.geteuid() == 0,  # the brokers run under uids of their own
            default_permissions=True,
            fsname="kreplica-powerloss",
        )
    except RuntimeError as err:
        if not stopping.is_set():
            sys.stdout.write(f"error: libfuse did not mount (fuse_main returned {err})\n")
            sys.stdout.flush()
            sys.exit(4)

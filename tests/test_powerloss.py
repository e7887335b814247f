"""The power-loss filesystem (conformance/kafka/powerloss.py) on a real FUSE mount: what a loss
keeps (what was fsynced, and every namespace change), what it drops (every write and truncation
since the file's last fsync), and that nothing outlives it: no mount, no process, whether it is
unmounted, killed, or its parent is killed with -9. Without FUSE, one line and exit 4.

Each case mounts over a fresh temporary directory (about 0.1 s to mount); `no_leftovers` checks
after each that no FUSE mount and no daemon names the case's directory.
"""

from __future__ import annotations

import mmap
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kreplica.conformance.kafka.cluster import Layout
from kreplica.conformance.kafka.install import (
    CHECKOUT,
    EXIT_ENVIRONMENT,
    EnvironmentProblem,
    find_installation,
)
from kreplica.conformance.kafka.nemesis import PowerDisks
from kreplica.conformance.kafka.powerloss import (
    FuseMissing,
    Pending,
    PowerLossError,
    PowerLossFS,
    find_fusermount,
    mount,
)
from kreplica.conformance.kafka.predict import predict_set
from kreplica.conformance.kafka.reaper import fuse_mounts
from kreplica.conformance.kafka.schedule import ScheduleError, load_schedule, parse_step
from kreplica.conformance.kafka.simulate import simulate
from kreplica.conformance.kafka.timing import harness_timing
from kreplica.impl.variants import Variant

DEADLINE_S = 10.0
SCHEDULE = CHECKOUT / "schedules" / "power-loss" / "power-loss-follower-leads.json"
"""Follower 2 loses its unflushed tail and leads (docs/power-loss.md, run on real Kafka)."""


def daemons_naming(folder: Path) -> list[int]:
    """Pids of processes whose command line names `folder` (the daemon names its mountpoint)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                words = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(str(folder).encode() in w for w in words[1:]):
                pids.append(int(entry.name))
    return pids


def mounts_under(folder: Path) -> list[str]:
    return [m for m in fuse_mounts() if m.startswith(str(folder))]


def wait_until_gone(folder: Path) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while mounts_under(folder) or daemons_naming(folder):
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)


@pytest.fixture
def where(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(backing, mountpoint), and after the case: nothing mounted there, no daemon running."""
    backing, mountpoint = tmp_path / "backing", tmp_path / "mnt"
    backing.mkdir()
    mountpoint.mkdir()
    yield backing, mountpoint
    wait_until_gone(tmp_path)
    assert mounts_under(tmp_path) == [], "a FUSE mount outlived the case"
    assert daemons_naming(tmp_path) == [], "a daemon outlived the case"


@pytest.fixture
def fs(where: tuple[Path, Path]) -> Iterator[PowerLossFS]:
    backing, mountpoint = where
    handle = mount(backing, mountpoint, log=backing.parent / "fs.log")
    yield handle
    handle.unmount()


def write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


def test_a_loss_keeps_the_fsynced_prefix_and_drops_the_unsynced_tail(fs: PowerLossFS) -> None:
    """A log segment's life: append, fsync, append more; the power fails; the first part is
    read back, the tail is gone (and the file is as long as the synced part)."""
    segment = fs.mountpoint / "00000000000000000000.log"
    with open(segment, "wb") as out:
        out.write(b"acked-and-flushed|")
        out.flush()
        os.fsync(out.fileno())
        out.write(b"appended-not-flushed")
    assert segment.read_bytes() == b"acked-and-flushed|appended-not-flushed"
    assert (fs.backing / segment.name).read_bytes() == b"acked-and-flushed|"
    assert fs.pending() == Pending(files=1, bytes=4096)

    assert fs.lose_unsynced() == Pending(files=1, bytes=4096)

    assert segment.read_bytes() == b"acked-and-flushed|"
    assert segment.stat().st_size == len(b"acked-and-flushed|")
    assert fs.pending() == Pending(0, 0)


def test_namespace_changes_survive_a_loss_with_their_data_as_last_synced(fs: PowerLossFS) -> None:
    """Create, rename and replace reach the backing directory at once (LazyFS's model): a new
    file never synced survives empty, a renamed file keeps what it had synced, a checkpoint
    written to a temporary file, fsynced and renamed over the old one survives whole."""
    root = fs.mountpoint
    with open(root / "new.log", "wb") as out:
        out.write(b"never synced")
    write_synced(root / "old.index", b"synced")
    with open(root / "old.index", "ab") as out:
        out.write(b"+tail")
    (root / "old.index").rename(root / "renamed.index")
    write_synced(root / "checkpoint", b"0\n1 5\n")
    write_synced(root / "checkpoint.tmp", b"0\n2 9\n")
    (root / "checkpoint.tmp").replace(root / "checkpoint")

    fs.lose_unsynced()

    assert sorted(p.name for p in root.iterdir()) == ["checkpoint", "new.log", "renamed.index"]
    assert (root / "new.log").read_bytes() == b""
    assert (root / "renamed.index").read_bytes() == b"synced"
    assert (root / "checkpoint").read_bytes() == b"0\n2 9\n"


def test_an_unsynced_truncation_is_undone_and_a_synced_one_kept(fs: PowerLossFS) -> None:
    """A follower truncating its log (R6) and losing power before an fsync gets the old tail
    back; once the truncation is fsynced, it stays. O_TRUNC counts as a truncation."""
    undone, kept, rewritten = (fs.mountpoint / n for n in ("undone", "kept", "rewritten"))
    for path in (undone, kept, rewritten):
        write_synced(path, b"0123456789")
    os.truncate(undone, 4)
    with open(kept, "r+b") as out:
        out.truncate(4)
        os.fsync(out.fileno())
    with open(rewritten, "wb") as out:  # O_TRUNC, then a write, neither synced
        out.write(b"xy")
    assert (undone.read_bytes(), kept.read_bytes(), rewritten.read_bytes()) == (
        b"0123",
        b"0123",
        b"xy",
    )

    fs.lose_unsynced()

    assert undone.read_bytes() == b"0123456789"
    assert kept.read_bytes() == b"0123"
    assert rewritten.read_bytes() == b"0123456789"


def test_mapped_writes_are_held_until_fsync_as_a_kafka_index_is(fs: PowerLossFS) -> None:
    """Kafka's offset index is a file extended with setLength and written through a shared
    mapping: what was forced (msync, which Linux makes an fsync) survives; a later store, which
    the kernel writes back when the file is closed, is held and lost."""
    index = fs.mountpoint / "00000000000000000000.index"
    fd = os.open(index, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, 3 * 4096)
        with mmap.mmap(fd, 3 * 4096) as mapped:
            mapped[0:8] = b"entry-01"
            mapped.flush()  # MappedByteBuffer.force()
            mapped[8:16] = b"entry-02"  # not forced
    finally:
        os.close(fd)  # FUSE writes the dirty page back on close
    assert fs.pending() == Pending(1, 4096)
    assert index.read_bytes()[:16] == b"entry-01entry-02"

    fs.lose_unsynced()

    assert index.stat().st_size == 3 * 4096
    assert index.read_bytes()[:16] == b"entry-01" + bytes(8)


def test_sync_all_makes_every_pending_write_durable(fs: PowerLossFS) -> None:
    """`sync_all` (what a clean unmount may do) applies what is pending: a loss then drops
    nothing, and the backing directory holds it."""
    with open(fs.mountpoint / "a", "wb") as out:
        out.write(b"pending")
    assert fs.sync_all() == Pending(1, 4096)
    assert fs.lose_unsynced() == Pending(0, 0)
    assert (fs.mountpoint / "a").read_bytes() == b"pending"
    assert (fs.backing / "a").read_bytes() == b"pending"


def test_a_killed_daemon_leaves_no_mount_once_unmounted(where: tuple[Path, Path]) -> None:
    """The harness may kill the daemon by its pid (SIGKILL leaves a dead mount behind):
    `unmount` then removes the mount and reaps the process."""
    backing, mountpoint = where
    handle = mount(backing, mountpoint)
    os.kill(handle.process.pid, signal.SIGKILL)
    handle.process.wait(DEADLINE_S)
    assert str(mountpoint) in fuse_mounts()  # the dead mount, before the clean-up
    handle.unmount()
    assert str(mountpoint) not in fuse_mounts()


def test_the_daemon_unmounts_and_exits_when_its_parent_is_killed(where: tuple[Path, Path]) -> None:
    """A harness killed with -9 cannot unmount: its daemon sees its stdin close (and gets
    SIGTERM from PR_SET_PDEATHSIG), unmounts and exits by itself."""
    backing, mountpoint = where
    harness = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import time
                from pathlib import Path
                from kreplica.conformance.kafka.powerloss import mount
                mount(Path({str(backing)!r}), Path({str(mountpoint)!r}))
                print("mounted", flush=True)
                time.sleep(60)
            """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert harness.stdout is not None and harness.stdout.readline() == "mounted\n"
        assert str(mountpoint) in fuse_mounts()
        harness.kill()
        harness.wait()
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
    wait_until_gone(mountpoint.parent)
    assert str(mountpoint) not in fuse_mounts()


def test_missing_fusermount3_is_one_line_with_exit_4_and_mounts_nothing(
    where: tuple[Path, Path],
) -> None:
    """FUSE missing (a fusermount3 that is not there): FuseMissing, one line naming it and
    how to install fuse3, exit code 4; no daemon was started and nothing is mounted."""
    backing, mountpoint = where
    with pytest.raises(FuseMissing) as caught:
        mount(backing, mountpoint, fusermount=backing.parent / "no" / "fusermount3")
    message = str(caught.value)
    assert "\n" not in message
    assert "no/fusermount3 not found" in message and "fuse3" in message
    assert caught.value.exit_code == EXIT_ENVIRONMENT == 4


def test_a_daemon_without_libfuse3_is_one_line_with_exit_4_and_leaves_nothing(
    where: tuple[Path, Path],
) -> None:
    """FUSE missing in the daemon (libfuse3 cannot be loaded: FUSE_LIBRARY_PATH names no
    file): the daemon says so, `mount` raises FuseMissing (exit 4), and the daemon is reaped."""
    backing, mountpoint = where
    env = {**os.environ, "FUSE_LIBRARY_PATH": str(backing.parent / "no" / "libfuse3.so.3")}
    with pytest.raises(FuseMissing) as caught:
        mount(backing, mountpoint, env=env)
    message = str(caught.value)
    assert "\n" not in message
    assert "libfuse3 cannot be loaded" in message and "fuse3" in message
    assert caught.value.exit_code == 4


def test_a_power_loss_off_the_filesystem_is_one_line_with_exit_4_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    """The brokers' log directories on the filesystem (no Kafka), broker 2's taken off it behind
    the harness's back (lazily unmounted): its power loss is refused, one line naming the
    directory, PowerLossError (exit 4), nothing dropped; leaving the context unmounts the
    others, and no mount and no daemon is left."""
    layout = Layout(tmp_path / "run", uid_base=None)
    layout.run_dir.mkdir()
    with pytest.raises(PowerLossError) as caught, PowerDisks(layout) as disks:
        assert len(mounts_under(tmp_path)) == 3
        subprocess.run([str(find_fusermount()), "-u", "-z", str(layout.data_dir(2))], check=True)
        disks.power_loss(2)
    assert str(caught.value) == (
        f"power loss of broker 2: its log directory {layout.data_dir(2)} is not on the "
        "power-loss filesystem (not mounted there, or its process has exited)"
    )
    assert caught.value.exit_code == 4
    wait_until_gone(tmp_path)
    assert mounts_under(tmp_path) == [] and daemons_naming(tmp_path) == []


def test_power_loss_is_a_schedule_op_that_names_a_broker() -> None:
    assert parse_step("s", {"op": "power-loss", "broker": 2}).to_json() == {
        "op": "power-loss",
        "broker": 2,
    }
    with pytest.raises(ScheduleError, match="power-loss needs 'broker'"):
        parse_step("s", {"op": "power-loss"})


def test_the_model_predicts_no_divergence_after_a_leading_follower_lost_its_tail() -> None:
    """The schedule run on real Kafka (docs/power-loss.md): follower 2 loses 5-9 to a power loss
    and leads; under KIP-279 the returning replicas truncate them (lost, not diverged), while
    truncating to the HW (pre-KIP-101) keeps them beside 2's new records: S2's divergence."""
    schedule = load_schedule(SCHEDULE)
    kip279 = simulate(schedule, Variant(), harness_timing())
    assert kip279.lost[-1] == (5, 6, 7, 8, 9) and not kip279.diverged
    assert (kip279.leader, kip279.leader_epoch, kip279.isr) == (2, 3, (1, 2, 3))
    # The real run (docs/power-loss.md): 5-9 lost, no divergence, HW 11, epoch 4 (its
    # controller, on broker 1, failed over after the kill): in the predicted set, and no
    # outcome of the set diverges.
    allowed = predict_set(schedule, runs=40)
    assert (True, False, 11, (1, 2, 3), 4) in allowed.outcomes
    assert not any(diverged for _, diverged, *_ in allowed.outcomes)
    assert simulate(schedule, Variant(truncation="hw"), harness_timing()).diverged


def _kafka_missing() -> str | None:
    try:
        find_installation()
    except EnvironmentProblem as err:
        return str(err)
    return None


@pytest.mark.skipif(_kafka_missing() is not None, reason="make kafka has not run")
def test_kafka_run_of_a_power_loss_schedule_without_fuse_is_one_line_and_exit_4(
    tmp_path: Path,
) -> None:
    """`kreplica kafka run` of a schedule with power-loss, FUSE missing: one line, exit 4,
    before any JVM starts; nothing mounted, nothing running under the run directory."""
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "kreplica"), "kafka", "run", str(SCHEDULE),
         "--workdir", str(run_dir), "--port-base", "19960"],
        env={**os.environ, "KREPLICA_FUSERMOUNT": str(tmp_path / "no" / "fusermount3")},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 4, done.stderr
    assert lines == [
        f"kreplica: error: FUSE is missing: {tmp_path}/no/fusermount3 not found; install "
        "Debian's fuse3 ('make kafka' does, as root; or 'apt-get install -y fuse3')"
    ]
    assert mounts_under(tmp_path) == [] and daemons_naming(tmp_path) == []

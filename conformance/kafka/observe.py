"""What the harness reads off the real brokers' disks: each replica's log, HW, LEO and epoch.

A replica's records come from Kafka's own DumpLogSegments tool (`kafka.tools.DumpLogSegments
--print-data-log`, run on the Java 11 with Kafka's classpath; one JVM for every replica's
segments); its HW from the broker's `replication-offset-checkpoint` (written every 200 ms by a
live broker, so up to that much behind); its newest leader epoch from the partition's
`leader-epoch-checkpoint`; its LEO is the offset after the last record DumpLogSegments prints.
A crashed or paused broker's files are read as they are on disk (the page cache included).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kreplica.conformance.kafka.cluster import PARTITION, TOPIC, Layout, NodeFailed
from kreplica.conformance.kafka.install import Installation
from kreplica.conformance.kafka.outcome import ReplicaState
from kreplica.conformance.kafka.schedule import BROKERS

DUMP_TIMEOUT_S = 60.0
_DUMPING = re.compile(r"^Dumping (?P<path>\S+)")
_RECORD = re.compile(r"^\| offset: (?P<offset>\d+) .*?payload: (?P<payload>.*)$")


@dataclass(frozen=True)
class DumpedRecord:
    """One record DumpLogSegments printed: its offset and value (the producer's sequence)."""

    offset: int
    value: int


def partition_dir(layout: Layout, broker: int) -> Path:
    """The broker's directory of the partition's segments and leader-epoch checkpoint."""
    return layout.data_dir(broker) / f"{TOPIC}-{PARTITION}"


def segment_files(layout: Layout, broker: int) -> list[Path]:
    """The broker's .log segment files of the partition, oldest first."""
    folder = partition_dir(layout, broker)
    return sorted(folder.glob("*.log")) if folder.is_dir() else []


def dump_logs(
    install: Installation, files: list[Path], tmp: Path
) -> dict[Path, list[DumpedRecord]]:
    """Each segment file's records, as Kafka's DumpLogSegments prints them."""
    if not files:
        return {}
    command = [
        str(install.java), "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
        f"-Djava.io.tmpdir={tmp}", "-Dlog4j.configuration=file:/dev/null",
        "-cp", install.classpath, "kafka.tools.DumpLogSegments",
        "--files", ",".join(str(f) for f in files), "--print-data-log", "--deep-iteration",
    ]  # fmt: skip
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=DUMP_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise NodeFailed(f"DumpLogSegments took longer than {DUMP_TIMEOUT_S:g}s") from None
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise NodeFailed(f"DumpLogSegments failed (exit {done.returncode}): {reason}")
    return parse_dump(done.stdout)


def parse_dump(text: str) -> dict[Path, list[DumpedRecord]]:
    """DumpLogSegments' output, by file: `Dumping PATH` lines, then `| offset: N ... payload: V`."""
    out: dict[Path, list[DumpedRecord]] = {}
    current: list[DumpedRecord] | None = None
    for line in text.splitlines():
        head = _DUMPING.match(line)
        if head:
            current = out.setdefault(Path(head["path"]), [])
            continue
        record = _RECORD.match(line)
        if record and current is not None:
            current.append(DumpedRecord(int(record["offset"]), _as_value(record["payload"])))
    return out


def _as_value(payload: str) -> int:
    text = payload.strip()
    return int(text) if text.isdigit() else -1


def read_checkpoint(path: Path) -> list[list[str]]:
    """A Kafka checkpoint file's entries (after its version and count lines); [] if absent."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return [line.split() for line in lines[2:] if line.strip()]


def checkpointed_hw(layout: Layout, broker: int) -> int:
    """The partition's HW in the broker's replication-offset-checkpoint (0 if none yet)."""
    for entry in read_checkpoint(layout.data_dir(broker) / "replication-offset-checkpoint"):
        if len(entry) == 3 and entry[0] == TOPIC and entry[1] == str(PARTITION):
            return int(entry[2])
    return 0


def newest_epoch(layout: Layout, broker: int) -> int:
    """The newest epoch in the replica's leader-epoch checkpoint (-1 if it holds none)."""
    entries = read_checkpoint(partition_dir(layout, broker) / "leader-epoch-checkpoint")
    return max((int(e[0]) for e in entries if len(e) == 2), default=-1)


def replica_states(install: Installation, layout: Layout) -> tuple[ReplicaState, ...]:
    """Every broker's replica as it is on disk now: records, HW, LEO, newest epoch."""
    files = {b: segment_files(layout, b) for b in BROKERS}
    dumped = dump_logs(install, [f for fs in files.values() for f in fs], layout.run_dir)
    states = []
    for broker in BROKERS:
        records = sorted(
            (r for f in files[broker] for r in dumped.get(f, [])), key=lambda r: r.offset
        )
        states.append(
            ReplicaState(
                broker=broker,
                records=tuple(r.value for r in records),
                high_watermark=checkpointed_hw(layout, broker),
                log_end_offset=records[-1].offset + 1 if records else 0,
                leader_epoch=newest_epoch(layout, broker),
            )
        )
    return tuple(states)


def diverged(replicas: tuple[ReplicaState, ...]) -> bool:
    """Two replicas hold different records at an offset below both their LEOs."""
    for i, a in enumerate(replicas):
        for b in replicas[i + 1 :]:
            common = min(len(a.records), len(b.records))
            if a.records[:common] != b.records[:common]:
                return True
    return False

"""The real brokers' own replication steps, as the kreplica agent recorded them.

Theory of operation. `make kafka` builds a Java agent (conformance/kafka/agent/) that hooks the
methods of Kafka 2.6.3 where replication happens (Partition.makeLeader, appendRecordsToLeader,
updateFollowerFetchState, ReplicaFetcherThread.processPartitionData, truncate, the
controller's LeaderAndIsr decisions, ...). Each broker JVM appends one JSON line per step to
`broker-N/events.jsonl` in the run directory: a header when the JVM starts, then events, each
stamped with `System.nanoTime()` inside the hooked (locked) section and a per-JVM sequence
number. Every JVM on one Linux machine reads the same CLOCK_MONOTONIC through `nanoTime`, and
so does the harness through `time.monotonic_ns()`: it appends its own faults (crash, restart,
...) to `harness-events.jsonl`. This module reads those files, refuses what is not a whole,
well-formed recording of Kafka 2.6.3 (one line, `EventsError`, exit 2), and merges them into
one order. Where two brokers' events carry the same stamp the order between them is not
known: `merge` keeps them in broker order and says so (`Recording.ties`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from kreplica.conformance.errors import KreplicaError

KAFKA_VERSION = "2.6.3"
"""The Kafka release whose methods the agent hooks (and the spec models)."""

EVENT_FORMAT = 1
"""The agent's event format (its header's `format`)."""

EVENTS_FILE = "events.jsonl"
"""Each broker's event file, in its directory of the run (broker-N/)."""

HARNESS_EVENTS_FILE = "harness-events.jsonl"
"""The harness's faults, in the run directory."""

BROKERS = (1, 2, 3)
"""The brokers of the harness's cluster."""

REORDER_WINDOW = 256
"""How far below the highest sequence number seen a line may come (threads write late)."""


class EventsError(KreplicaError):
    """A run's event files are missing, truncated, out of order, of another Kafka, or not
    the agent's."""


@dataclass(frozen=True)
class Event:
    """One recorded step: on a broker (`broker` > 0) or of the harness (`broker` 0)."""

    broker: int
    life: int
    """Which start of the broker's JVM recorded it (1 for the first; 0 for the harness)."""
    seq: int
    nano: int
    name: str
    args: Mapping[str, Any] = field(default_factory=dict)
    state: Mapping[str, Any] | None = None
    thread: str = ""
    request: Mapping[str, Any] | None = None
    controller: Mapping[str, Any] | None = None
    """The controller's view with a controller's event: its live brokers, the partition's
    leader, leader epoch and ISR."""
    where: str = ""
    """`FILE:LINE`, for messages."""


@dataclass(frozen=True)
class Recording:
    """Every event of one run, merged into one order, and what the order cannot tell."""

    events: tuple[Event, ...]
    headers: Mapping[int, tuple[Mapping[str, Any], ...]]
    """Each broker's headers, one per JVM start."""
    ties: int = 0
    """Pairs of consecutive events of different brokers with the same stamp."""
    agent_errors: tuple[str, ...] = ()
    """What the agent said went wrong inside a hook (it never reaches Kafka)."""


def read_run(run_dir: Path, brokers: Iterable[int] = BROKERS) -> Recording:
    """Read and merge a run's event files; raise EventsError on anything malformed."""
    events: list[Event] = []
    headers: dict[int, tuple[Mapping[str, Any], ...]] = {}
    errors: list[str] = []
    for broker in brokers:
        path = run_dir / f"broker-{broker}" / EVENTS_FILE
        own, heads, errs = read_broker_file(path, broker)
        events.extend(own)
        headers[broker] = heads
        errors.extend(errs)
    harness = run_dir / HARNESS_EVENTS_FILE
    if harness.exists():
        events.extend(read_harness_file(harness))
    merged, ties = merge(events)
    return Recording(tuple(merged), headers, ties, tuple(errors))


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each line of a JSON-lines file, decoded; a truncated or malformed line is an error."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise EventsError(f"{path}: no event file (was the broker run with the agent?)") from None
    except OSError as err:
        raise EventsError(f"cannot read {path}: {err.strerror or err}") from None
    if data and not data.endswith(b"\n"):
        last = data.count(b"\n") + 1
        raise EventsError(f"{path}:{last}: the file is truncated (its last line is not whole)")
    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise EventsError(f"{path}:{number}: not a JSON event ({err})") from None
        if not isinstance(obj, dict):
            raise EventsError(f"{path}:{number}: not a JSON object")
        yield number, obj


def read_broker_file(
    path: Path, broker: int
) -> tuple[list[Event], tuple[Mapping[str, Any], ...], list[str]]:
    """One broker's events, its headers and the agent's own errors."""
    events: list[Event] = []
    headers: list[Mapping[str, Any]] = []
    errors: list[str] = []
    seen: set[int] = set()
    highest = -1
    for number, obj in _lines(path):
        where = f"{path}:{number}"
        kind = obj.get("kind")
        if kind == "header":
            _check_header(obj, broker, where)
            headers.append(obj)
            seen, highest = set(), -1
            continue
        if not headers:
            raise EventsError(
                f"{where}: not an event file of the kreplica agent (its first line is no header)"
            )
        if kind == "agent-error":
            errors.append(f"{where}: {obj.get('message', obj)}")
            continue
        if kind != "event":
            continue  # other agent notes (transformed, hooks-installed) carry no step
        event = _event(obj, broker, len(headers), where)
        # Threads take their sequence numbers in their hooks and write their lines after, so
        # a file's lines may be a few numbers out of order; never more than the threads of
        # one JVM can hold back, never the same number twice.
        if event.seq in seen or event.seq < highest - REORDER_WINDOW:
            raise EventsError(
                f"{where}: events out of order (sequence {event.seq} after {highest})"
            )
        seen.add(event.seq)
        highest = max(highest, event.seq)
        events.append(event)
    if not headers:
        raise EventsError(f"{path}: no header line (not an event file of the kreplica agent)")
    return events, tuple(headers), errors


def _check_header(obj: Mapping[str, Any], broker: int, where: str) -> None:
    """A header names the agent, its format, Kafka 2.6.3 and this broker."""
    if obj.get("agent") != "kreplica-agent":
        raise EventsError(f"{where}: not a header of the kreplica agent")
    if obj.get("format") != EVENT_FORMAT:
        raise EventsError(
            f"{where}: event format {obj.get('format')!r}; this kreplica reads format "
            f"{EVENT_FORMAT}"
        )
    if obj.get("kafka") != KAFKA_VERSION:
        raise EventsError(
            f"{where}: recorded on Kafka {obj.get('kafka')!r}; the agent's hooks and the spec "
            f"are Kafka {KAFKA_VERSION}'s"
        )
    if obj.get("broker") != broker:
        raise EventsError(f"{where}: recorded by broker {obj.get('broker')!r}, not {broker}")


def _int(obj: Mapping[str, Any], key: str, where: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise EventsError(f"{where}: field {key!r} is {value!r}, not an integer")
    return value


def _event(obj: Mapping[str, Any], broker: int, life: int, where: str) -> Event:
    """Decode one event line."""
    name = obj.get("event")
    if not isinstance(name, str):
        raise EventsError(f"{where}: an event without a name")
    if obj.get("broker", broker) != broker:
        raise EventsError(
            f"{where}: an event of broker {obj.get('broker')!r} in broker {broker}'s file"
        )
    args = obj.get("args") or {}
    state = obj.get("state")
    if not isinstance(args, dict) or (state is not None and not isinstance(state, dict)):
        raise EventsError(f"{where}: 'args' and 'state' must be JSON objects")
    request = obj.get("request") or obj.get("response_to")
    return Event(
        broker=broker,
        life=life,
        seq=_int(obj, "seq", where),
        nano=_int(obj, "nano", where),
        name=name,
        args=args,
        state=state,
        thread=str(obj.get("thread", "")),
        request=request if isinstance(request, dict) else None,
        controller=obj.get("controller") if isinstance(obj.get("controller"), dict) else None,
        where=where,
    )


def read_harness_file(path: Path) -> list[Event]:
    """The harness's faults: {"nano", "op", "broker"} per line."""
    events: list[Event] = []
    for number, obj in _lines(path):
        where = f"{path}:{number}"
        op = obj.get("op")
        if not isinstance(op, str):
            raise EventsError(f"{where}: a harness event without an op")
        target = obj.get("broker", 0)
        events.append(
            Event(
                broker=0,
                life=0,
                seq=number,
                nano=_int(obj, "nano", where),
                name=op,
                args={k: v for k, v in obj.items() if k not in ("nano", "op")},
                where=where,
                thread=f"harness:{target}",
            )
        )
    return events


def merge(events: Iterable[Event]) -> tuple[list[Event], int]:
    """All events in stamp order (ties: broker, then sequence); and how many neighbours of
    different brokers share a stamp, whose real order is not known."""
    ordered = sorted(events, key=lambda e: (e.nano, e.broker, e.life, e.seq))
    ties = sum(1 for a, b in pairwise(ordered) if a.nano == b.nano and a.broker != b.broker)
    return ordered, ties


class HarnessLog:
    """Appends the harness's faults to harness-events.jsonl, stamped with CLOCK_MONOTONIC."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def note(self, op: str, broker: int | None = None, **extra: Any) -> None:
        """Record one fault now (one write per line: a kill -9 of the harness loses none)."""
        line: dict[str, Any] = {"nano": time.monotonic_ns(), "op": op}
        if broker is not None:
            line["broker"] = broker
        line.update(extra)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line, sort_keys=True) + "\n")

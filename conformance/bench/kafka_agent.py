"""Benchmark of kreplica's Java agent: what recording every replication step costs a broker.

On one machine, in one invocation, starts the real Kafka 2.6.3 cluster of the harness (ZooKeeper
and three brokers, the topic kreplica with one partition on [1, 2, 3], min.insync.replicas 2)
WITHOUT the agent, then the same cluster WITH it (build/kafka/agent/kreplica-agent.jar), and so on
alternately for `--runs` pairs, so that drift on the machine hits both. On each cluster, after
`--warmup` records sent one at a time and `--prefill` records sent all at once (the log the timed
phases start from; neither timed), it times `--records` acks=-1 produces of small records (the
values 0, 1, 2, ... in ASCII, as the harness writes) with a kafka-python producer, per phase:

- "1 in flight": the harness's own producer (workload.py's settings: linger 0, one request in
  flight, no idempotence), each send waited for before the next; latency = send to ack.
- "pipelined" (unless --no-pipelined): the same producer with up to 5 requests in flight,
  linger 0, every send issued at once (the producer batches what queues up, batch.size 16 KB);
  latency = send to ack of each record, throughput = records over first send to last ack.

Per phase it reports records/s, p50 and p99 latency (ms), the brokers' CPU (ms per record, all
three JVMs, from /proc), and what the agent wrote: events.jsonl bytes and lines per record (all
brokers; idle traffic of the phase included: follower fetches, HW checkpoints); then the medians
of each side and the ratio with/without. Each event line carries the partition's state with its
log (up to 2000 records), so the bytes per event grow with the log (`--prefill 2000` measures
at that cap). Run directories: WORKDIR/without and WORKDIR/with (build/kafka-runs/bench-agent),
each emptied when its next cluster starts; every JVM is stopped when its cluster's run ends.
`measure`, `rows` and `to_json` are the engine of

    kreplica bench kafka-agent [--runs N] [--records N] [--warmup N] [--prefill N]
        [--no-pipelined] [--markdown] [--json OUT] [--port-base N]
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kreplica.conformance.errors import KreplicaError
from kreplica.conformance.kafka.cluster import (
    DEFAULT_UID_BASE,
    PARTITION,
    TOPIC,
    Cluster,
    Layout,
    fresh_run_dir,
)
from kreplica.conformance.kafka.install import CHECKOUT, Installation, find_installation
from kreplica.conformance.kafka.real import create_topic, settings_for
from kreplica.conformance.kafka.schedule import BROKERS, parse_schedule
from kreplica.conformance.kafka.workload import (
    DELIVERY_TIMEOUT_MS,
    REQUEST_TIMEOUT_MS,
    RETRY_BACKOFF_MS,
)

AGENT_JAR = CHECKOUT / "build" / "kafka" / "agent" / "kreplica-agent.jar"
WORKDIR = CHECKOUT / "build" / "kafka-runs" / "bench-agent"
"""Where the run directories go by default: WORKDIR/without and WORKDIR/with."""
EVENTS = "events.jsonl"
TOPIC_SETTINGS = parse_schedule(
    {
        "name": "bench-agent",
        "acks": -1,
        "min_insync_replicas": 2,
        "unclean": False,
        "steps": [{"op": "produce", "count": 1}],
    }
)
"""The topic's settings (acks=-1, min ISR 2, clean elections), as a schedule gives them (its
one step is not run: the benchmark produces on its own)."""

ONE_IN_FLIGHT = "1 in flight"
PIPELINED = "pipelined"
PIPELINED_IN_FLIGHT = 5


@dataclass(frozen=True)
class Phase:
    """One timed batch of produces on one cluster."""

    name: str
    log_start: int
    """Records sent before the phase: the log it starts from."""
    records: int
    acknowledged: int
    seconds: float
    p50_ms: float
    p99_ms: float
    broker_cpu_s: float
    event_bytes: int
    event_lines: int

    @property
    def per_second(self) -> float:
        """Acknowledged records per second."""
        return self.acknowledged / self.seconds if self.seconds > 0 else 0.0

    def per_record(self, total: float) -> float:
        """`total` over the records sent."""
        return total / self.records if self.records else 0.0


@dataclass(frozen=True)
class Counts:
    """How many records each part of a cluster's run sends."""

    warmup: int
    """Sent one at a time first, not timed (connections, the JITs)."""
    prefill: int
    """Then sent all at once, not timed: the log the timed phases start from."""
    records: int
    """Timed, per phase."""
    pipelined: bool
    """Whether the pipelined phase runs (after the one-in-flight phase)."""


@dataclass(frozen=True)
class Measured:
    """One cluster's run: with or without the agent, its phases."""

    run: int
    agent: bool
    start_seconds: float
    phases: tuple[Phase, ...] = field(default_factory=tuple)


# -- producing -------------------------------------------------------------------------------


def producer(layout: Layout, in_flight: int) -> Any:
    """A kafka-python producer with the harness's settings (workload.py), `in_flight` requests
    in flight at most."""
    from kafka import KafkaProducer

    return KafkaProducer(
        bootstrap_servers=layout.bootstrap(),
        acks=-1,
        enable_idempotence=False,
        retries=1_000_000,
        retry_backoff_ms=RETRY_BACKOFF_MS,
        linger_ms=0,
        max_in_flight_requests_per_connection=in_flight,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
        max_block_ms=5000,
        metadata_max_age_ms=2000,
        reconnect_backoff_max_ms=1000,
    )


Produce = Callable[[Any, int, int], tuple[list[float], float]]
"""(producer, first value, count) -> (the acknowledged records' latencies in s, elapsed s)."""


def one_at_a_time(client: Any, first: int, count: int) -> tuple[list[float], float]:
    """Send each record and wait for its ack before the next."""
    from kafka.errors import KafkaError

    latencies = []
    began = time.perf_counter()
    for value in range(first, first + count):
        sent = time.perf_counter()
        try:
            client.send(TOPIC, str(value).encode(), partition=PARTITION).get(
                timeout=DELIVERY_TIMEOUT_MS / 1000 + 5
            )
        except KafkaError:
            continue
        latencies.append(time.perf_counter() - sent)
    return latencies, time.perf_counter() - began


def all_at_once(client: Any, first: int, count: int) -> tuple[list[float], float]:
    """Issue every send at once; each record's latency runs from its send to its ack."""
    sent: list[float] = [0.0] * count
    acked: list[float | None] = [None] * count

    def on_ack(index: int) -> Callable[[Any], None]:
        def done(_metadata: Any) -> None:
            acked[index] = time.perf_counter()

        return done

    began = time.perf_counter()
    for index in range(count):
        sent[index] = time.perf_counter()
        future = client.send(TOPIC, str(first + index).encode(), partition=PARTITION)
        future.add_callback(on_ack(index))
    client.flush(timeout=DELIVERY_TIMEOUT_MS / 1000 + 30)
    times = [(a - s) for s, a in zip(sent, acked, strict=True) if a is not None]
    last = max((a for a in acked if a is not None), default=began)
    return times, last - began


# -- what the brokers spent ------------------------------------------------------------------


def jvm_cpu_seconds(cluster: Cluster) -> float:
    """User + system CPU seconds of the running brokers' JVMs so far (/proc/PID/stat)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for broker in BROKERS:
        process = cluster.processes.get(broker)
        if process is None or process.poll() is not None:
            continue
        fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total / ticks


def event_sizes(layout: Layout) -> dict[int, int]:
    """Each broker's events.jsonl size in bytes (0 when it has none)."""
    sizes = {}
    for broker in BROKERS:
        path = layout.directory(broker) / EVENTS
        sizes[broker] = path.stat().st_size if path.exists() else 0
    return sizes


def lines_between(path: Path, start: int, end: int) -> int:
    """The newlines of `path` between byte offsets `start` and `end`."""
    if end <= start:
        return 0
    count = 0
    with path.open("rb") as handle:
        handle.seek(start)
        left = end - start
        while left > 0:
            chunk = handle.read(min(left, 1 << 22))
            if not chunk:
                break
            count += chunk.count(b"\n")
            left -= len(chunk)
    return count


def timed_phase(
    name: str, cluster: Cluster, client: Any, produce: Produce, first: int, count: int
) -> Phase:
    """Produce `count` records and measure the phase: latencies, CPU, events written."""
    layout = cluster.layout
    before = event_sizes(layout)
    cpu = jvm_cpu_seconds(cluster)
    latencies, seconds = produce(client, first, count)
    cpu = jvm_cpu_seconds(cluster) - cpu
    after = event_sizes(layout)
    lines = sum(lines_between(layout.directory(b) / EVENTS, before[b], after[b]) for b in BROKERS)
    ms = sorted(1000 * s for s in latencies)
    return Phase(
        name=name,
        log_start=first,
        records=count,
        acknowledged=len(ms),
        seconds=seconds,
        p50_ms=percentile(ms, 50),
        p99_ms=percentile(ms, 99),
        broker_cpu_s=cpu,
        event_bytes=sum(after.values()) - sum(before.values()),
        event_lines=lines,
    )


def percentile(ordered: list[float], pct: float) -> float:
    """The nearest-rank percentile of an ascending list (0 for an empty one)."""
    if not ordered:
        return 0.0
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


# -- one cluster -----------------------------------------------------------------------------


def measure_once(
    run: int,
    agent: Path | None,
    install: Installation,
    run_dir: Path,
    port_base: int,
    counts: Counts,
) -> Measured:
    """Start a fresh cluster (with the agent or without), warm up, fill the log, time the
    phases, stop it."""
    uid_base = DEFAULT_UID_BASE if os.geteuid() == 0 else None
    layout = Layout(fresh_run_dir(run_dir), port_base, uid_base)
    settings = settings_for(TOPIC_SETTINGS, start_timeout_s=90.0, agent=agent)
    phases = []
    with Cluster(install, layout, settings) as cluster:
        began = time.monotonic()
        cluster.start()
        create_topic(cluster, TOPIC_SETTINGS)
        started = time.monotonic() - began
        if agent is not None and not (layout.directory(1) / EVENTS).exists():
            raise KreplicaError(f"the agent wrote no {EVENTS} in {layout.directory(1)}")
        sequential = producer(layout, 1)
        batched = producer(layout, PIPELINED_IN_FLIGHT)
        try:
            one_at_a_time(sequential, 0, counts.warmup)
            all_at_once(batched, counts.warmup, counts.prefill)
            value = counts.warmup + counts.prefill
            phases.append(timed_phase(ONE_IN_FLIGHT, cluster, sequential, one_at_a_time,
                                      value, counts.records))  # fmt: skip
            value += counts.records
            if counts.pipelined:
                phases.append(timed_phase(PIPELINED, cluster, batched, all_at_once,
                                          value, counts.records))  # fmt: skip
        finally:
            sequential.close(timeout=1)
            batched.close(timeout=1)
    return Measured(run, agent is not None, started, tuple(phases))


def measure(
    runs: int, counts: Counts, agent_jar: Path, workdir: Path, port_base: int
) -> list[Measured]:
    """`runs` pairs of clusters, each pair without the agent and then with `agent_jar`, in
    WORKDIR/without and WORKDIR/with; KreplicaError before any cluster if Kafka is missing."""
    install = find_installation()
    results = []
    for run in range(1, runs + 1):
        for agent in (None, agent_jar):
            run_dir = workdir.resolve() / ("with" if agent else "without")
            results.append(measure_once(run, agent, install, run_dir, port_base, counts))
    return results


# -- the report ------------------------------------------------------------------------------

COLUMNS = ("run", "agent", "phase", "log", "records/s", "p50 ms", "p99 ms", "CPU ms/rec",
           "lines/rec", "KB/rec")  # fmt: skip
"""log: the records in the partition when the phase starts; CPU: the three brokers' JVMs;
lines, KB: what the agent wrote into the brokers' events.jsonl during the phase."""


def phase_values(p: Phase) -> list[float]:
    """The figures of one phase: records/s, p50, p99, CPU ms, event lines and KB per record."""
    return [p.per_second, p.p50_ms, p.p99_ms, 1000 * p.per_record(p.broker_cpu_s),
            p.per_record(p.event_lines), p.per_record(p.event_bytes) / 1024]  # fmt: skip


def formatted(values: list[float]) -> list[str]:
    """phase_values as the table prints them."""
    rate, p50, p99, cpu, lines, kb = values
    return [f"{rate:.0f}", f"{p50:.2f}", f"{p99:.2f}", f"{cpu:.2f}", f"{lines:.1f}", f"{kb:.1f}"]


def medians(results: list[Measured], agent: bool, phase: str) -> list[float]:
    """The median of each figure over the runs of one side and phase."""
    found = [phase_values(p) for m in results if m.agent == agent for p in m.phases
             if p.name == phase]  # fmt: skip
    return [statistics.median(col) for col in zip(*found, strict=True)] if found else []


def rows(results: list[Measured]) -> list[list[str]]:
    """Every run's phases, then per phase the medians of each side and their ratio."""
    out = []
    for m in results:
        for p in m.phases:
            side = "with" if m.agent else "without"
            out.append([str(m.run), side, p.name, str(p.log_start), *formatted(phase_values(p))])
    for name in dict.fromkeys(p.name for m in results for p in m.phases):
        log = str(next(p.log_start for m in results for p in m.phases if p.name == name))
        without, with_ = medians(results, False, name), medians(results, True, name)
        for side, values in (("without", without), ("with", with_)):
            if values:
                out.append(["median", side, name, log, *formatted(values)])
        if without and with_:
            ratio = [w / o if o else float("nan") for w, o in zip(with_, without, strict=True)]
            out.append(["ratio", "with/without", name, log,
                        *(f"{r:.2f}" for r in ratio[:4]), "", ""])  # fmt: skip
    return out


def to_json(results: list[Measured], settings: dict[str, Any]) -> Any:
    """Plain JSON: the settings and load averages, every run's phases."""
    return {
        "benchmark": "kafka_agent",
        **settings,
        "runs": [
            {
                "run": m.run,
                "agent": m.agent,
                "start_seconds": round(m.start_seconds, 3),
                "phases": [{**asdict(p), "per_second": round(p.per_second, 1)} for p in m.phases],
            }
            for m in results
        ],
    }

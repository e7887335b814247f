"""kreplica's Java agent (conformance/kafka/agent) on real Kafka 2.6.3 brokers.

The agent (a Byte Buddy -javaagent, built by `make kafka` into build/kafka/agent/kreplica-agent.jar)
records each broker's replication steps for kreplica-0 into events.jsonl in the broker's
directory. Pinned here: a live run writes one such file per broker, each starting with a header
that names Kafka 2.6.3, holding the leader's and the followers' steps with the partition's state;
a restarted broker appends; and an agent whose hooks do not match the Kafka on the classpath
refuses to run (one line on stderr, exit 3) before Kafka starts. And the agent agrees with
Kafka's own logs (the replication loggers at DEBUG/TRACE) wherever both speak: every leader epoch
a broker takes, every ISR change its leader makes, every truncation of its log, every HW advance
it makes as leader, every OffsetsForLeaderEpoch answer its fetcher gets. As in
test_kafka_real.py, no JVM, bound port or iptables chain of a run may be left behind. Skipped,
saying so, only when `make kafka` has not run (the cross-check also when not root: it partitions).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from test_kafka_real import assert_nothing_left, jvms_of

from kreplica.conformance.kafka.cluster import DEFAULT_UID_BASE, Layout, fresh_run_dir
from kreplica.conformance.kafka.install import (
    CHECKOUT,
    EnvironmentProblem,
    Installation,
    find_installation,
    find_iptables,
)
from kreplica.conformance.kafka.nemesis import Network
from kreplica.conformance.kafka.real import StepResult, run_schedule
from kreplica.conformance.kafka.schedule import parse_schedule

AGENT_JAR = CHECKOUT / "build" / "kafka" / "agent" / "kreplica-agent.jar"
RUNS = CHECKOUT / "build" / "kafka-runs"
PORT_BASE = 19390
"""Ports of their own (test_kafka_real.py uses 19290, runs by hand 19090)."""
CROSS_CHECK_PORT_BASE = 19790
"""The cross-check's cluster's ports (`kreplica bench kafka-agent`'s default is 19690)."""
EXIT_HOOKS_MISMATCH = 3


def _missing() -> str | None:
    try:
        find_installation()
    except EnvironmentProblem as err:
        return str(err)
    if not AGENT_JAR.is_file():
        return f"no agent jar at {AGENT_JAR}"
    return None


_MISSING = _missing()
needs_agent = pytest.mark.skipif(_MISSING is not None, reason=f"make kafka has not run: {_MISSING}")


def _checked_run_dir(request: pytest.FixtureRequest, port_base: int) -> Iterator[Path]:
    path = RUNS / f"pytest-{request.node.name}"
    shutil.rmtree(path, ignore_errors=True)
    yield path
    assert_nothing_left(path, port_base)


@pytest.fixture
def run_dir(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A run directory under build/kafka-runs (reachable by the brokers' uids), checked after."""
    yield from _checked_run_dir(request, PORT_BASE)


@pytest.fixture
def cross_check_dir(request: pytest.FixtureRequest) -> Iterator[Path]:
    """As run_dir, for the cluster on CROSS_CHECK_PORT_BASE."""
    yield from _checked_run_dir(request, CROSS_CHECK_PORT_BASE)


def read_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of an events file, each one JSON object."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


FOLLOWER_RESTART = {
    "name": "agent-follower-restart",
    "acks": 1,
    "min_insync_replicas": 1,
    "steps": [
        {"op": "produce", "count": 3, "acks": -1},
        {"op": "crash", "broker": 3},
        {"op": "produce", "count": 2},
        {"op": "restart", "broker": 3},
        {"op": "wait", "until": "isr-full", "timeout_s": 30},
        {"op": "produce", "count": 1},
    ],
}
"""Broker 1 leads; follower 3, which holds the first three records (acks=-1), is killed and
restarted: it asks the leader for its epoch's end offset (OffsetsForLeaderEpoch), truncates there,
and fetches what it missed."""


@needs_agent
@pytest.mark.kafka
def test_a_live_run_with_the_agent_records_every_broker(run_dir: Path) -> None:
    """Each broker's events.jsonl starts with a header naming Kafka 2.6.3; together they hold
    the leader's and the followers' steps; the restarted broker appended a second header; the
    leader's appends carry the produced values, and its state's log holds them."""
    schedule = parse_schedule(FOLLOWER_RESTART)
    uid_base = DEFAULT_UID_BASE if os.geteuid() == 0 else None
    layout = Layout(fresh_run_dir(run_dir), PORT_BASE, uid_base)
    run = run_schedule(schedule, find_installation(), layout, agent=AGENT_JAR)
    assert sorted(run.outcome.isr) == [1, 2, 3]

    events: list[dict[str, Any]] = []
    for broker in (1, 2, 3):
        lines = read_lines(layout.directory(broker) / "events.jsonl")
        headers = [ln for ln in lines if ln["kind"] == "header"]
        assert lines[0]["kind"] == "header"
        assert len(headers) == (2 if broker == 3 else 1)  # the restart appended
        for header in headers:
            assert header["agent"] == "kreplica-agent" and header["format"] == 1
            assert header["kafka"] == "2.6.3" and header["broker"] == broker
            assert {h["name"] for h in header["hooks"]} >= {"makeLeader", "processPartitionData"}
        assert [ln for ln in lines if ln["kind"] == "agent-error"] == []
        mine = [ln for ln in lines if ln["kind"] == "event"]
        assert all(ev["broker"] == broker for ev in mine)
        events += mine

    names = {ev["event"] for ev in events}
    assert names >= {
        "makeLeader",
        "makeFollower",
        "appendRecordsToLeader",
        "updateFollowerFetchState",
        "processPartitionData",
    }
    assert names & {"fetchEpochEndOffsets", "truncate"}
    appends = [ev for ev in events if ev["event"] == "appendRecordsToLeader"]
    values = [v for ev in appends for v in ev["args"]["values"]]
    assert values == [str(i) for i in range(6)]
    for ev in appends:
        state = ev["state"]
        assert ev["broker"] == 1 and state["leader"] == 1 and state["hosted"]
        logged = {(offset, value) for offset, _, value in state["log"]}
        assert {(o, v) for o, _, v in ev["args"]["records"]} <= logged
        assert state["leo"] == ev["args"]["lastOffset"] + 1
    restarted = [ev for ev in events if ev["broker"] == 3 and ev["event"] == "fetchEpochEndOffsets"]
    assert restarted and restarted[-1]["args"]["error"] == "NONE"


def _stub_partition(folder: Path) -> Path:
    """A class kafka.cluster.Partition with no methods, compiled into `folder`."""
    source = folder / "src" / "kafka" / "cluster" / "Partition.java"
    source.parent.mkdir(parents=True)
    source.write_text("package kafka.cluster;\npublic class Partition {}\n", encoding="utf-8")
    classes = folder / "classes"
    subprocess.run(
        ["javac", "--release", "11", "-d", str(classes), str(source)], check=True, timeout=120
    )
    return classes


def _run_with_agent(
    install: Installation, classpath: str, events: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    agent = f"-javaagent:{AGENT_JAR}=events={events},broker=1"
    command = [str(install.java), agent, "-cp", classpath, "kafka.Kafka", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


@needs_agent
@pytest.mark.skipif(shutil.which("javac") is None, reason="javac is needed to build the stub")
def test_an_agent_whose_hooks_do_not_match_refuses_to_run(tmp_path: Path) -> None:
    """A kafka.cluster.Partition without makeLeader's locked section ahead of Kafka's jar: the
    agent says so in one line, exits 3 before Kafka starts, writes no events, leaves no JVM."""
    install = find_installation()
    stub = _stub_partition(tmp_path)
    events = tmp_path / "events.jsonl"
    done = _run_with_agent(install, f"{stub}{os.pathsep}{install.classpath}", events)
    assert done.returncode == EXIT_HOOKS_MISMATCH
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert lines == [
        "kreplica-agent: hook makeLeader (kafka.cluster.Partition.$anonfun$makeLeader$1) "
        "matches no method in this Kafka (2.6.3); refusing to run"
    ], done.stderr
    assert done.stdout == ""  # kafka.Kafka never ran (it prints its usage when it does)
    assert not events.exists()
    assert jvms_of(events) == []


@needs_agent
def test_the_agent_writes_its_header_and_appends_across_starts(tmp_path: Path) -> None:
    """On Kafka's own classpath the hooks match: each JVM start appends one header line (Kafka
    2.6.3, the broker, every hook with its class and method) before Kafka runs."""
    install = find_installation()
    events = tmp_path / "events.jsonl"
    for _ in range(2):
        done = _run_with_agent(install, install.classpath, events, "--version")
        assert done.returncode == 0, done.stderr
        assert "2.6.3" in done.stdout
    headers = read_lines(events)
    assert [h["kind"] for h in headers] == ["header", "header"]
    assert headers[0]["pid"] != headers[1]["pid"]
    for header in headers:
        assert header["kafka"] == "2.6.3" and header["broker"] == 1
        assert header["topic"] == "kreplica" and header["partition"] == 0
        hooks = {h["name"]: h for h in header["hooks"]}
        assert hooks["makeLeader"]["class"] == "kafka.cluster.Partition"
        assert hooks["makeLeader"]["method"].startswith("$anonfun$makeLeader$1(")
        assert {"sendRequest", "fetchEpochEndOffsets", "addLeaderAndIsrRequest"} <= set(hooks)
    assert jvms_of(events) == []


# -- the agent against Kafka's own logs ------------------------------------------------------

CROSS_CHECK = {
    "name": "agent-log-cross-check",
    "acks": -1,
    "min_insync_replicas": 2,
    "steps": [
        {"op": "produce", "count": 3},
        {"op": "produce", "count": 1, "acks": 1},
        {"op": "wait", "until": "isr-shrunk", "timeout_s": 20},
        {"op": "produce", "count": 1},
        {"op": "wait", "until": "isr-full", "timeout_s": 20},
        {"op": "partition", "groups": [[1], [2, 3, "zk"]]},
        {"op": "produce", "count": 3, "acks": 1},
        {"op": "crash", "broker": 1},
        {"op": "heal"},
        {"op": "restart", "broker": 1},
        {"op": "wait", "until": "isr-full", "timeout_s": 30},
        {"op": "produce", "count": 2},
    ],
}
"""Leader 1 loses follower 3 (FollowerCut, from after step 0 to after step 2), which falls a
record behind and out of the ISR: the leader shrinks the ISR itself, then takes 3 back (expands);
then, cut from everyone, it acknowledges three acks=1 records no follower gets and is killed; 2
or 3 leads at a new epoch (the controller may first write an epoch with no leader, -1, which no
broker takes: neither source shows it), and broker 1, restarted, asks the new leader for epoch
0's end offset and truncates its log there (a truncation that removes records)."""
CUT_AFTER, HEAL_AFTER = 0, 2


class FollowerCut(Network):
    """Broker 3 cut from brokers 1 and 2 (both ways) while all keep ZooKeeper: a cut no schedule
    can say (a schedule's partition puts ZooKeeper in one group), so the leader, not the
    controller, takes 3 out of the ISR (with ZooKeeper cut too, 3's session would expire as the
    leader's lag check comes, and the controller might be first). Its rules live in a chain of
    their own, KREPLICA-<port base>-CUT, which leaving the context removes."""

    @property
    def chain(self) -> str:
        """Beside the harness's own chain, KREPLICA-<port base>."""
        return f"KREPLICA-{self.layout.port_base}-CUT"

    def cut_follower(self) -> None:
        """Drop what 3 sends to 1 and 2, and what they send to 3."""
        for a, b in ((3, 1), (1, 3), (3, 2), (2, 3)):
            rule = self._rule(a, b)
            self._run("-A", self.chain, *rule)
            self.rules.append(rule)


LOG_LINE = re.compile(r"^\[[^\]]+\] (?P<level>[A-Z]+) (?P<msg>.*) \((?P<logger>[^()]+)\)$")
RECEIVED_STATE = re.compile(
    r"Received LeaderAndIsr request LeaderAndIsrPartitionState\(topicName='kreplica', "
    r"partitionIndex=0, controllerEpoch=(?P<ce>\d+), leader=(?P<leader>-?\d+), "
    r"leaderEpoch=(?P<epoch>\d+), isr=\[(?P<isr>[\d, ]*)\], zkVersion=(?P<zk>\d+), "
)
STARTS = re.compile(
    r"(?P<role>Leader|Follower) kreplica-0 starts at leader epoch (?P<epoch>\d+) from offset "
    r"(?P<offset>\d+) with high watermark \d+.* Previous leader epoch was (?P<previous>-?\d+)\.$"
)
ISR_CHANGE = re.compile(
    r"^\[Partition kreplica-0 broker=\d+\] (?P<kind>Expanding|Shrinking) ISR from [\d,]* "
    r"to (?P<new>[\d,]*)"
)
ISR_UPDATED = re.compile(
    r"^\[Partition kreplica-0 broker=\d+\] ISR updated to \[(?P<isr>[\d,]*)\] and zkVersion "
    r"updated to \[(?P<zk>\d+)\]$"
)
ISR_SKIPPED = re.compile(
    r"^\[Partition kreplica-0 broker=\d+\] Cached zkVersion (?P<zk>\d+) not equal to that in "
    r"zookeeper, skip updating ISR$"
)
TRUNCATING = re.compile(
    r"^\[Log partition=kreplica-0, dir=[^\]]+\] Truncating to "
    r"(?:offset (?P<done>\d+)$|(?P<noop>\d+) has no effect )"
)
HW_UPDATED = re.compile(
    r"^\[Partition kreplica-0 broker=\d+\] High watermark updated from \(offset=(?P<old>\d+) "
    r"[^)]*\) to \(offset=(?P<new>\d+) "
)
FETCHER = re.compile(r"^\[ReplicaFetcher replicaId=\d+, leaderId=(?P<leader>\d+), fetcherId=\d+\] ")
EPOCH_REQUEST = re.compile(
    r"Sending offset for leader epoch request OffsetsForLeaderEpochRequest\(epochsByPartition="
    r"\{kreplica-0=\(currentLeaderEpoch=Optional\[(?P<current>-?\d+)\], "
    r"leaderEpoch=(?P<requested>-?\d+)\)\}\)$"
)
EPOCH_ANSWER = re.compile(
    r"Received leaderEpoch response .*kreplica-0=EpochEndOffset\{error=(?P<error>\w+), "
    r"leaderEpoch=(?P<epoch>-?\d+), endOffset=(?P<end>-?\d+)\}"
)
EPOCH_FAILED = "Error when sending leader epoch request for "


@dataclass
class Facts:
    """What one broker did to kreplica-0, as one source (agent or log) tells it, in order.

    epochs: (role, epoch, leader, isr as the request lists it, zkVersion, controller epoch, the
    previous epoch, the leader's start offset or None), one per makeLeader / makeFollower that
    ran (the agent's previous epoch is that of the JVM's last one, -1 at its start; a follower's
    start offset is left out: the old leader's fetcher may still append meanwhile).
    isr: (kind, new ISR sorted, whether it was applied, the zkVersion after), one per ISR change
    its leader made. truncations: (target, whether records went), one per Log.truncateTo.
    hw: (JVM start, leader epoch, old HW, new HW), one per HW advance as leader, sorted (two
    request threads may advance and log in either order). epoch_answers: (leader, current epoch,
    requested epoch, answered without error, epoch, end offset), one per OffsetsForLeaderEpoch the
    fetcher sent. starts: how many times the JVM started."""

    epochs: list[tuple[Any, ...]] = field(default_factory=list)
    isr: list[tuple[Any, ...]] = field(default_factory=list)
    truncations: list[tuple[int, bool]] = field(default_factory=list)
    hw: list[tuple[int, int, int, int]] = field(default_factory=list)
    epoch_answers: list[tuple[Any, ...]] = field(default_factory=list)
    starts: int = 0


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.split(r"[, ]+", text.strip()) if x)


def agent_facts(path: Path) -> Facts:
    """The facts of one broker's events.jsonl: each JVM start's events in seq order."""
    facts = Facts()
    starts: list[list[dict[str, Any]]] = []
    for line in read_lines(path):
        if line["kind"] == "header":
            starts.append([])
        elif line["kind"] == "event":
            starts[-1].append(line)
    facts.starts = len(starts)
    for start, events in enumerate(starts, 1):
        previous = -1
        last_hw: dict[str, dict[str, Any]] = {}  # per thread: its last updateHighWatermark
        for ev in sorted(events, key=lambda e: e["seq"]):
            name, args, state = ev["event"], ev["args"], ev["state"]
            if name in ("makeLeader", "makeFollower"):
                leader = name == "makeLeader"
                facts.epochs.append((
                    "leader" if leader else "follower", args["epoch"], args["leader"],
                    tuple(args["isr"]), args["zkVersion"], args["controllerEpoch"], previous,
                    state["leo"] if leader else None,
                ))  # fmt: skip
                previous = args["epoch"]
            elif name in ("expandIsr", "shrinkIsr"):
                kind = "expand" if name == "expandIsr" else "shrink"
                facts.isr.append((kind, tuple(args["newIsr"]), args["applied"], args["zkVersion"]))
            elif name == "logTruncateTo":
                facts.truncations.append((args["target"], args["truncated"]))
            elif name == "updateHighWatermark":
                last_hw[ev["thread"]] = args
            elif name == "maybeIncrementLeaderHW" and args["incremented"]:
                moved = last_hw[ev["thread"]]
                facts.hw.append((start, state["leaderEpoch"], moved["old"], moved["hw"]))
            elif name == "fetchEpochEndOffsets":
                facts.epoch_answers.append((
                    args["leader"], args["currentLeaderEpoch"], args["requested"],
                    args["error"] == "NONE", args["leaderEpoch"], args["endOffset"],
                ))  # fmt: skip
    facts.hw.sort()
    return facts


def log_facts(path: Path) -> Facts:
    """The same facts from one broker's server.log (Kafka's messages, 2.6.3's wording)."""
    facts = Facts()
    received: re.Match[str] | None = None  # the last LeaderAndIsr state for kreplica-0
    epoch = -1
    pending_isr: list[tuple[Any, ...]] = []
    asked: dict[str, tuple[int, ...]] = {}  # per fetcher (leader): its open request
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = LOG_LINE.match(raw)
        if line is None:
            continue
        msg = line["msg"]
        if msg == "starting" and line["logger"] == "kafka.server.KafkaServer":
            facts.starts += 1
            epoch = -1
        elif m := RECEIVED_STATE.search(msg):
            received = m
        elif m := STARTS.search(msg):
            assert received is not None and received["epoch"] == m["epoch"], raw
            leader = m["role"] == "Leader"
            epoch = int(m["epoch"])
            facts.epochs.append((
                m["role"].lower(), epoch, int(received["leader"]), _ints(received["isr"]),
                int(received["zk"]), int(received["ce"]), int(m["previous"]),
                int(m["offset"]) if leader else None,
            ))  # fmt: skip
        elif m := ISR_CHANGE.match(msg):
            pending_isr.append(("expand" if m["kind"] == "Expanding" else "shrink",
                                tuple(sorted(_ints(m["new"])))))  # fmt: skip
        elif m := ISR_UPDATED.match(msg):
            kind, new = pending_isr.pop(0)
            facts.isr.append((kind, new, tuple(sorted(_ints(m["isr"]))) == new, int(m["zk"])))
        elif m := ISR_SKIPPED.match(msg):
            kind, new = pending_isr.pop(0)
            facts.isr.append((kind, new, False, int(m["zk"])))
        elif m := TRUNCATING.match(msg):
            facts.truncations.append((int(m["done"] or m["noop"]), m["done"] is not None))
        elif m := HW_UPDATED.match(msg):
            facts.hw.append((facts.starts, epoch, int(m["old"]), int(m["new"])))
        elif fetcher := FETCHER.match(msg):
            rest, who = msg[fetcher.end() :], fetcher["leader"]
            if m := EPOCH_REQUEST.match(rest):
                asked[who] = (int(who), int(m["current"]), int(m["requested"]))
            elif m := EPOCH_ANSWER.match(rest):
                answer = (m["error"] == "NONE", int(m["epoch"]), int(m["end"]))
                facts.epoch_answers.append((*asked.pop(who), *answer))
            elif rest.startswith(EPOCH_FAILED):
                facts.epoch_answers.append((*asked.pop(who), False, -1, -1))
    assert pending_isr == [], f"{path}: ISR changes with no outcome logged: {pending_isr}"
    facts.hw.sort()
    return facts


@needs_agent
@pytest.mark.skipif(os.geteuid() != 0, reason="partitions need root (iptables)")
@pytest.mark.kafka
def test_the_agent_agrees_with_kafkas_own_logs(cross_check_dir: Path) -> None:
    """A run with the agent and the replication loggers: per broker, the leader epochs it took
    (with the leader, ISR, zkVersion and the previous epoch), the ISR changes it made as leader
    (and whether ZooKeeper took them), its log truncations, its HW advances as leader and the
    OffsetsForLeaderEpoch answers it got are the same lists in its events.jsonl and in its
    server.log; and the run had each kind: a shrink and an expand, a truncation that removed
    records, a restart."""
    schedule = parse_schedule(CROSS_CHECK)
    layout = Layout(fresh_run_dir(cross_check_dir), CROSS_CHECK_PORT_BASE, DEFAULT_UID_BASE)
    cut = FollowerCut(layout, find_iptables())
    with cut:

        def on_step(done: StepResult) -> None:
            if done.index == CUT_AFTER:
                cut.cut_follower()
            elif done.index == HEAL_AFTER:
                cut.heal()

        run = run_schedule(schedule, find_installation(), layout, on_step=on_step,
                           agent=AGENT_JAR, debug_loggers=True)  # fmt: skip
    assert run.outcome.notes == (), run.outcome.notes

    seen = Facts()
    for broker in (1, 2, 3):
        events = layout.directory(broker) / "events.jsonl"
        assert [ln for ln in read_lines(events) if ln["kind"] == "agent-error"] == []
        agent, log = agent_facts(events), log_facts(layout.log_file(broker))
        for kind in ("starts", "epochs", "isr", "truncations", "hw", "epoch_answers"):
            assert getattr(agent, kind) == getattr(log, kind), (
                f"broker {broker}, {kind}: the agent says {getattr(agent, kind)}, "
                f"the log says {getattr(log, kind)}"
            )
        seen.epochs += agent.epochs
        seen.isr += agent.isr
        seen.truncations += agent.truncations
        seen.hw += agent.hw
        seen.epoch_answers += agent.epoch_answers
        seen.starts += agent.starts

    assert seen.starts == 4  # broker 1 twice
    assert len({epoch for _, epoch, *_ in seen.epochs}) >= 2  # a new leader's epoch
    assert {("shrink", (1, 2), True), ("expand", (1, 2, 3), True)} <= {i[:3] for i in seen.isr}
    assert any(removed for _, removed in seen.truncations)  # broker 1's acks=1 records go
    assert any(answered for *_, answered, _, _ in seen.epoch_answers)
    assert len(seen.hw) >= 5

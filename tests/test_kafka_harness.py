"""The real-cluster harness's pure parts, without a cluster: which links a partition cuts, what
DumpLogSegments' output and Kafka's checkpoint files say, and how an outcome follows from what
was acknowledged, read and observed."""

from __future__ import annotations

from pathlib import Path

from kreplica.conformance.kafka.cluster import (
    ClusterSettings,
    Layout,
    PartitionState,
    broker_properties,
)
from kreplica.conformance.kafka.nemesis import cut_links, full_groups
from kreplica.conformance.kafka.observe import DumpedRecord, diverged, parse_dump, read_checkpoint
from kreplica.conformance.kafka.outcome import ReplicaState
from kreplica.conformance.kafka.real import HARNESS_TIMING, build_outcome
from kreplica.conformance.kafka.workload import FinalRead


def test_a_node_in_no_group_stays_with_zookeeper() -> None:
    assert full_groups(((1,), (2, "zk"))) == [{1}, {2, 3, "zk"}]
    assert full_groups(((1,), (2,))) == [{1}, {2}, {3, "zk"}]


def test_a_leader_cut_off_alone_loses_every_link_but_zookeeper_opens_none() -> None:
    """Broker 1 alone: 1 cannot reach 2, 3 or ZooKeeper, and 2 and 3 cannot reach 1; no rule is
    written for ZooKeeper's side, since it opens no connections."""
    links = cut_links(((1,), (2, 3, "zk")))
    assert sorted(links, key=str) == sorted([(1, 2), (1, 3), (1, "zk"), (2, 1), (3, 1)], key=str)


DUMP = """\
Dumping /run/broker-1/data/kreplica-0/00000000000000000000.log
Starting offset: 0
baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 \
producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false position: 0 \
CreateTime: 1 size: 69 magic: 2 compresscodec: NONE crc: 1 isvalid: true
| offset: 0 CreateTime: 1 keysize: -1 valuesize: 1 sequence: -1 headerKeys: [] payload: 0
| offset: 1 CreateTime: 1 keysize: -1 valuesize: 2 sequence: -1 headerKeys: [] payload: 17
Dumping /run/broker-2/data/kreplica-0/00000000000000000000.log
Starting offset: 0
"""


def test_dump_log_segments_output_parses_to_records_per_file() -> None:
    parsed = parse_dump(DUMP)
    assert parsed == {
        Path("/run/broker-1/data/kreplica-0/00000000000000000000.log"): [
            DumpedRecord(0, 0),
            DumpedRecord(1, 17),
        ],
        Path("/run/broker-2/data/kreplica-0/00000000000000000000.log"): [],
    }


def test_a_checkpoint_file_is_its_entries_after_version_and_count(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text("0\n2\nkreplica 0 5\nother 3 9\n")
    assert read_checkpoint(path) == [["kreplica", "0", "5"], ["other", "3", "9"]]
    assert read_checkpoint(tmp_path / "absent") == []


def _replica(broker: int, records: tuple[int, ...], hw: int) -> ReplicaState:
    return ReplicaState(broker, records, hw, len(records), 1)


def test_replicas_diverge_only_on_a_different_record_at_a_common_offset() -> None:
    assert not diverged((_replica(1, (0, 1, 2), 3), _replica(2, (0, 1), 2)))
    assert diverged((_replica(1, (0, 1, 2), 3), _replica(2, (0, 5), 2)))


def test_lost_is_what_was_acknowledged_and_the_final_read_does_not_hold() -> None:
    state = PartitionState(leader=2, leader_epoch=3, isr=(3, 2), controller_epoch=1)
    replicas = (_replica(1, (0, 1, 2), 3), _replica(2, (0, 1, 3), 3), _replica(3, (0, 1, 3), 3))
    outcome = build_outcome({1: [0, 1, 2], -1: [3]}, state, FinalRead(3, (0, 1, 3)), replicas, [])
    assert outcome.lost == {-1: (), 1: (2,)}
    assert outcome.acked_lost and outcome.diverged
    assert (outcome.leader, outcome.leader_epoch, outcome.isr) == (2, 3, (2, 3))
    assert outcome.high_watermark == 3


def test_with_no_leader_nothing_is_readable_and_every_ack_counts_as_lost() -> None:
    state = PartitionState(leader=-1, leader_epoch=4, isr=(1,), controller_epoch=1)
    outcome = build_outcome({-1: [0, 1]}, state, None, (_replica(1, (0, 1), 2),), [])
    assert outcome.leader is None and outcome.high_watermark == -1
    assert outcome.lost == {-1: (0, 1)}
    assert "no leader at the end" in outcome.notes[-1]


def test_the_harness_timing_is_what_the_brokers_are_given() -> None:
    """simulate.harness_timing() models this harness: every field of HARNESS_TIMING is one of
    Timing's, and the fetcher settings are those broker_properties writes."""
    from kreplica.conformance.kafka.timing import harness_timing

    timing = harness_timing()
    props = broker_properties(Layout(Path("/run")), 1, ClusterSettings())
    assert timing.session_timeout_ms == int(props["zookeeper.session.timeout.ms"])
    assert timing.replica_lag_time_max_ms == int(props["replica.lag.time.max.ms"])
    assert timing.replica_fetch_wait_max_ms == int(props["replica.fetch.wait.max.ms"])
    assert timing.replica_socket_timeout_ms == int(props["replica.socket.timeout.ms"])
    assert {f: getattr(timing, f) for f in HARNESS_TIMING} == HARNESS_TIMING

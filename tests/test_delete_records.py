"""DeleteRecords: a log start offset that moves, in the projection, the recorder, the spec's
invariants, the client's answers and the fuzzer's choices (R4, R9, S14)."""

from __future__ import annotations

from typing import Any

from recorder_helpers import replicated

from kreplica.conformance.bridge.projection import DELETED, log_start_of
from kreplica.conformance.fuzz.campaign import run_fuzz
from kreplica.conformance.fuzz.choices import CHOICES, kind_of
from kreplica.conformance.fuzz.setup import FuzzSetup
from kreplica.conformance.judges.invariants import logs_agree, violations
from kreplica.conformance.tla.tlavalue import Record
from kreplica.impl.messages import TopicPartition
from kreplica.impl.steps import DeleteRecords, Deliver, DoWork

TP = TopicPartition("t", 0)


def entry(epoch: int, record: int) -> Record:
    return Record({"epoch": epoch, "record": record})


def test_delete_records_is_recorded_with_the_new_log_start() -> None:
    """The leader's log shows Deleted below its new log start offset; the action logs it."""
    _, rec = replicated(2)
    rec.apply(DeleteRecords(TP, 1))
    assert (rec.events[-1].action, rec.events[-1].args) == (
        "DeleteRecords",
        {"replica": 1, "offset": 1},
    )
    assert rec.state["log"][0] == (DELETED, entry(0, 2))
    assert log_start_of(rec.state, 1) == 1
    assert rec.state["epochCache"][0] == (Record({"epoch": 0, "startOffset": 1}),)


def test_a_delete_below_the_log_start_is_no_action() -> None:
    """Deleting below the log start again changes nothing: the spec sees no action."""
    _, rec = replicated(2)
    rec.apply(DeleteRecords(TP, 1))
    count = len(rec.events)
    rec.apply(DeleteRecords(TP, 1))
    assert len(rec.events) == count


def test_a_follower_takes_its_leaders_log_start_from_a_fetch_answer() -> None:
    """The FETCH answer carries the leader's log start offset; the follower raises its own
    (R8), and its log then agrees with the leader's."""
    _, rec = replicated(2)
    rec.apply(DeleteRecords(TP, 2))
    rec.apply(DoWork(2, 1))
    rec.apply(Deliver(2, 1))
    answers = [m for m in rec.state["msgs"] if m["type"] == "FetchResponse"]
    assert [m["logStart"] for m in answers] == [2]
    rec.apply(Deliver(1, 2))
    assert rec.state["log"][1] == (DELETED, DELETED)
    assert logs_agree(rec.state["log"][0], rec.state["log"][1])
    assert violations(rec.state) == []


def cache_of(log: list[Record]) -> tuple[Record, ...]:
    """The epoch cache that describes `log` (EpochCacheMatchesLog): an entry where each epoch
    begins among the records still held."""
    cache: list[Record] = []
    for offset, held in enumerate(log):
        if held != DELETED and (not cache or cache[-1]["epoch"] != held["epoch"]):
            cache.append(Record({"epoch": held["epoch"], "startOffset": offset}))
    return tuple(cache)


def state(logs: list[list[Record]], committed: set[tuple[int, int]]) -> dict[str, Any]:
    """A two-replica state with these logs, both in the controller's ISR, replica 1 in office."""
    return {
        "log": tuple(tuple(log) for log in logs),
        "hw": tuple(len(log) for log in logs),
        "epochCache": tuple(cache_of(log) for log in logs),
        "leader": (1, 1),
        "leaderEpoch": (0, 0),
        "alive": frozenset({1, 2}),
        "ctrlLeader": 1,
        "ctrlEpoch": 0,
        "ctrlIsr": frozenset({1, 2}),
        "fetchState": ("Idle", "Fetching"),
        "acked": frozenset(record for _, record in committed),
        "committed": frozenset(committed),
    }


def test_deleted_records_are_exempt_but_an_offset_read_twice_is_not() -> None:
    """A record a client deleted need not be on the ISR or the leader (DeletedOffset); an
    offset read as two records still breaks ConsistentReads (S14)."""
    deleted = state([[DELETED, entry(0, 2)], [DELETED, entry(0, 2)]], {(0, 1), (1, 2)})
    assert violations(deleted) == []
    reread = state([[entry(0, 3), entry(0, 2)], [DELETED, entry(0, 2)]], {(0, 1), (0, 3)})
    assert [name for name, _ in violations(reread)] == ["ConsistentReads"]
    lost = state([[entry(0, 1)], [entry(0, 1)]], {(0, 1), (1, 2)})
    assert {name for name, _ in violations(lost)} == {
        "AckedRecordsNeverLost",
        "CommittedRecordsOnIsr",
        "ConsistentReads",
    }


def test_the_fuzzer_deletes_on_the_controllers_leader_up_to_its_hw() -> None:
    c, rec = replicated(3)
    rec.apply(DeleteRecords(TP, 1))
    offered = CHOICES["delete_records"](c, rec.state)
    assert offered == [DeleteRecords(TP, 2), DeleteRecords(TP, 3)]
    assert {kind_of(step) for step in offered} == {"delete_records"}


def test_deletion_is_on_by_default_and_off_with_its_switch() -> None:
    """`kreplica fuzz` deletes records in some runs; `--no-delete-records` in none."""
    on = run_fuzz(FuzzSetup(), examples=30, max_steps=40, seed_value=0, shrink=False)
    off = run_fuzz(FuzzSetup(deletes=False), examples=30, max_steps=40, seed_value=0, shrink=False)
    assert on.failure is None and off.failure is None
    assert on.stats.actions["DeleteRecords"] > 0
    assert off.stats.actions["DeleteRecords"] == 0
    assert FuzzSetup(deletes=False).name(0).endswith("-nodel-s0")

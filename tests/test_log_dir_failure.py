"""A failed log dir (Kafka 2.6.3, one log dir per broker): the broker answers every request for
its Partition with KAFKA_STORAGE_ERROR, its fetcher marks the Partition failed where it would
have appended or truncated, and then it halts (LogManager.handleLogDirFailure: no live log
dir is left). In the simulator, the projection, the recorder, the client's answers, the
fuzzer and the spec (real TLC)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from recorder_helpers import replicated

from kreplica.conformance.bridge.recorder import Event, SpecRecorder
from kreplica.conformance.cli.main import main
from kreplica.conformance.fuzz.choices import CHOICES
from kreplica.conformance.judges.arrivals import Arrivals
from kreplica.conformance.judges.checked_steps import client_violations
from kreplica.impl.errors import KafkaStorageError
from kreplica.impl.fetch_state import OffsetTruncationState
from kreplica.impl.messages import (
    Errors,
    FetchPartitionResponse,
    FetchResponse,
    ProduceResponse,
    TopicPartition,
)
from kreplica.impl.steps import (
    DeleteRecords,
    Deliver,
    DoWork,
    FailLogDir,
    Flush,
    HaltOnLogDirFailure,
    Restart,
    ShrinkIsr,
    Step,
    Tick,
    UncleanShutdown,
)

TP = TopicPartition("t", 0)


def test_a_failed_log_dir_is_recorded_and_counts_as_a_crash() -> None:
    _, rec = replicated(1, SpecRecorder)
    [event] = rec.apply(FailLogDir(2, TP))
    assert (event.action, event.args) == ("FailLogDir", {"replica": 2})
    assert rec.state["logDirOffline"] == frozenset({2}) and rec.state["crashes"] == 1
    assert rec.state["alive"] == frozenset({1, 2}), "the broker runs until it halts"
    assert rec.apply(FailLogDir(2, TP)) == [], "a dir that failed already: nothing happens"
    assert rec.state["crashes"] == 1


def test_a_leader_whose_log_dir_failed_answers_kafka_storage_error() -> None:
    """A follower's FETCH and a producer's PRODUCE get KAFKA_STORAGE_ERROR (the produce with
    base offset and log start -1, UnknownLogAppendInfo); the leader appends nothing, shrinks
    no ISR, deletes and flushes nothing; the client's answer is judged right."""
    c, rec = replicated(1, SpecRecorder)
    ledger = Arrivals()  # the client's requests from here on, for client_violations

    def apply(step: Step) -> list[Event]:
        arrival = ledger.before(c, TP, rec.state, step)
        events = rec.apply(step)
        ledger.after(arrival, rec.sent)
        return events

    apply(c.next_record(TP))
    apply(Deliver(-1, 1))  # a record follower 2 lacks: it would fall out of the ISR
    apply(FailLogDir(1, TP))
    apply(DoWork(2, 1))
    apply(Deliver(2, 1))
    [answer] = [e.payload for e in rec.sent]
    assert isinstance(answer, FetchResponse)
    assert [p.error for p in answer.partitions] == [Errors.KAFKA_STORAGE_ERROR]
    apply(c.next_record(TP))
    [event] = apply(Deliver(-1, 1))
    assert event.action == "Produce"
    [produced] = [e.payload for e in rec.sent]
    assert isinstance(produced, ProduceResponse)
    part = produced.partitions[0]
    assert (part.error, part.base_offset, part.log_start_offset) == (
        Errors.KAFKA_STORAGE_ERROR, -1, -1,
    )  # fmt: skip
    assert client_violations(rec, ledger) == []
    assert len(rec.state["log"][0]) == 2, "nothing was appended"
    before = rec.state
    rec.apply(Tick(c.config.replica_lag_time_max_ms + 1))
    for step in (ShrinkIsr(1), DeleteRecords(TP, 1), Flush(1)):
        assert rec.apply(step) == [], step
    assert rec.state["isr"][0] == frozenset({1, 2}), "follower 2 lags, but stays"
    assert rec.state["log"] == before["log"]
    assert rec.state["recoveryPoint"] == before["recoveryPoint"]


def test_a_follower_whose_log_dir_failed_marks_its_partition_failed() -> None:
    """The dir fails while a FETCH is out: the append of its answer fails, and
    AbstractFetcherThread marks the Partition failed (KafkaStorageException); its log keeps
    what it had, and sends nothing more."""
    c, rec = replicated(1, SpecRecorder)
    rec.apply(c.next_record(TP))
    rec.apply(Deliver(-1, 1))
    rec.apply(DoWork(2, 1))
    rec.apply(FailLogDir(2, TP))
    rec.apply(Deliver(2, 1))
    [event] = rec.apply(Deliver(1, 2))
    assert event.action == "FollowerHandleFetchResponse"
    assert rec.state["fetchState"] == ("Idle", "Failed")
    assert len(rec.state["log"][1]) == 1
    rec.apply(Tick(c.config.replica_fetch_backoff_ms))
    assert rec.apply(DoWork(2, 1)) == [] and not rec.sent


def test_an_empty_answer_fails_too() -> None:
    """Kafka's fetcher appends an answer without records too (processPartitionData), and the
    append on a failed dir raises KafkaStorageException: a caught-up follower is marked failed
    by its next answer, and its HW stays."""
    _, rec = replicated(1, SpecRecorder)
    rec.apply(DoWork(2, 1))
    rec.apply(FailLogDir(2, TP))
    rec.apply(Deliver(2, 1))
    [answer] = [e.payload for e in rec.sent]
    assert isinstance(answer, FetchResponse) and answer.partitions[0].records == ()
    rec.apply(Deliver(1, 2))
    assert rec.state["fetchState"] == ("Idle", "Failed") and rec.state["hw"] == (1, 1)


def test_the_append_itself_raises_the_storage_error() -> None:
    """As in Kafka 2.6.3 (Log.appendAsFollower), the follower's append on a failed dir raises
    KafkaStorageError, an empty one too; so does its truncation."""
    c, rec = replicated(1, SpecRecorder)
    rec.apply(FailLogDir(2, TP))
    fetcher = c.brokers[2].replica_manager.replica_fetcher_manager.fetcher_for(1)
    assert fetcher is not None
    empty = FetchPartitionResponse(TP, Errors.NONE, 1, 1, 0, ())
    with pytest.raises(KafkaStorageError):
        fetcher.process_partition_data(TP, 1, empty)
    with pytest.raises(KafkaStorageError):
        fetcher.truncate(TP, OffsetTruncationState(0, True))


def test_the_broker_halts_and_comes_back_with_its_log() -> None:
    """Halting is a crash of a broker whose log dir failed, and only of one; it restarts with
    the dir back and its log intact, and catches up."""
    c, rec = replicated(2, SpecRecorder)
    assert rec.apply(HaltOnLogDirFailure(2)) == [], "a healthy broker does not halt"
    assert CHOICES["halt_on_log_dir_failure"](c, rec.state) == []
    rec.apply(FailLogDir(2, TP))
    assert CHOICES["halt_on_log_dir_failure"](c, rec.state) == [HaltOnLogDirFailure(2)]
    assert CHOICES["fail_log_dir"](c, rec.state) == [], "the last broker that serves keeps its dir"
    [event] = rec.apply(HaltOnLogDirFailure(2))
    assert event.action == "HaltOnLogDirFailure"
    assert rec.state["alive"] == frozenset({1}) and rec.state["logDirOffline"] == {2}
    rec.apply(Restart(2))
    assert rec.state["logDirOffline"] == frozenset() and rec.state["alive"] == {1, 2}
    assert len(rec.state["log"][1]) == 2
    c.run_until_quiescent()
    follower, leader = c.log(2, TP), c.log(1, TP)
    assert follower is not None and leader is not None and not follower.offline
    assert follower.record_ids() == leader.record_ids() == [1, 2]


def test_a_power_loss_does_not_repair_a_failed_log_dir() -> None:
    """The log loses what was not flushed, and its dir stays failed until the restart."""
    _, rec = replicated(1, SpecRecorder)
    rec.apply(FailLogDir(2, TP))
    [event] = rec.apply(UncleanShutdown(2))
    assert event.action == "UncleanShutdown" and rec.state["logDirOffline"] == {2}
    rec.apply(Restart(2))
    assert rec.state["logDirOffline"] == frozenset()


@pytest.mark.tlc
def test_a_campaign_with_failed_log_dirs_conforms(tmp_path: Path) -> None:
    """Runs whose only fault is a failed log dir, every one of them recorded: the spec allows
    each trace (real TLC), and the fault and the halt were taken."""
    corpus = tmp_path / "corpus.jsonl"
    args = ["fuzz", "--stages", "correct", "--examples", "40", "--steps", "40", "--seed", "0"]
    args += ["--fault", "fail-log-dir"]
    fuzzed = CliRunner().invoke(main, [*args, "--corpus", str(corpus), "--out", str(tmp_path)])
    assert fuzzed.exit_code == 0, fuzzed.output
    assert "FailLogDir" in fuzzed.output and "HaltOnLogDirFailure" in fuzzed.output
    assert "never taken: " in fuzzed.output
    taken = fuzzed.output.split("never taken: ")[1].splitlines()[0]
    assert "FailLogDir" not in taken and "HaltOnLogDirFailure" not in taken
    checked = CliRunner().invoke(
        main, ["conform", str(corpus), "--no-spark", "--workers", "1", "--out", str(tmp_path / "c")]
    )
    assert checked.exit_code == 0, checked.output

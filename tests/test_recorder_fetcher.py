"""The recorder and the projection around a follower's fetcher: timeouts, late answers, and
requests and answers that share a correlation id. Found by trace validation (see the
"divergences found by trace validation" in docs/vocabulary.md)."""

from __future__ import annotations

from kreplica.conformance.bridge.recorder import Recorder
from kreplica.conformance.tla.tlavalue import Record
from kreplica.impl.cluster import Cluster
from kreplica.impl.config import BrokerConfig
from kreplica.impl.messages import TopicPartition
from kreplica.impl.steps import Crash, Deliver, DoWork, Elect, Restart, Tick

TP = TopicPartition("t", 0)
TIMEOUT = BrokerConfig().replica_socket_timeout_ms
BACKOFF = BrokerConfig().replica_fetch_backoff_ms


def recorder(n: int = 2) -> tuple[Cluster, Recorder]:
    config = BrokerConfig(replica_fetch_wait_max_ms=0)
    c = Cluster(tuple(range(1, n + 1)), {"t": 1}, config=config)
    return c, Recorder(c, TP, {})


def fetch(src: int, dst: int, inc: int, offset: int = 0, epoch: int = 0) -> Record:
    return Record(
        {"type": "FetchRequest", "src": src, "dst": dst, "inc": inc, "epoch": epoch,
         "offset": offset}
    )  # fmt: skip


def names(events: list) -> list[str]:  # type: ignore[type-arg]
    return [e.action for e in events]


def time_out(c: Cluster, rec: Recorder, follower: int, leader: int) -> None:
    """Let the fetcher's request time out; the iteration that notices it changes no spec
    variable (the spec folds giving up into the next send)."""
    assert rec.apply(Tick(TIMEOUT + 1)) == []
    assert rec.apply(DoWork(follower, leader)) == []
    fetcher = c.brokers[follower].replica_manager.replica_fetcher_manager.fetchers[leader]
    assert fetcher.in_flight is None


def test_the_answer_to_a_timed_out_fetch_is_lost() -> None:
    c, rec = recorder()
    assert names(rec.apply(DoWork(2, 1))) == ["FollowerTruncateToHighWatermark"]
    time_out(c, rec, 2, 1)
    assert names(rec.apply(Deliver(2, 1))) == ["LeaderHandleFetch"]
    before = rec.state
    # the fetcher no longer awaits it: for the spec the answer is lost on the way
    [lost] = rec.apply(Deliver(1, 2))
    assert (lost.action, lost.args) == ("LoseMessage", {"from": 1, "to": 2})
    assert {k: v for k, v in lost.state.items() if k != "msgs"} == {
        k: v for k, v in before.items() if k != "msgs"
    }
    rec.apply(Tick(BACKOFF))
    assert names(rec.apply(DoWork(2, 1))) == ["FollowerSendFetch"]


def test_a_fetch_given_up_on_is_shown_with_incarnation_0_and_its_answer_is_not() -> None:
    c, rec = recorder()
    rec.apply(DoWork(2, 1))
    time_out(c, rec, 2, 1)
    rec.apply(Tick(BACKOFF))
    assert names(rec.apply(DoWork(2, 1))) == ["FollowerSendFetch"]
    # the first request is still on its way, but its answer will be dropped
    assert rec.state["msgs"] == frozenset({fetch(2, 1, inc=0), fetch(2, 1, inc=1)})
    assert names(rec.apply(Deliver(2, 1))) == ["LeaderHandleFetch"]
    assert rec.state["msgs"] == frozenset({fetch(2, 1, inc=1)})
    assert rec.apply(Deliver(1, 2)) == []  # its answer: not in the spec's msgs
    assert names(rec.apply(Deliver(2, 1))) == ["LeaderHandleFetch"]
    assert names(rec.apply(Deliver(1, 2))) == ["FollowerHandleFetchResponse"]


def test_an_answer_is_not_taken_for_a_request_with_the_same_correlation_id() -> None:
    """Each broker numbers its own requests: broker 1's OffsetsForLeaderEpoch and broker
    2's earlier fetch from broker 1 can both be number 1, so broker 2's answer to broker 1
    travels on the link (2, 1) with the number of broker 2's fetch."""
    c, rec = recorder()
    rec.apply(DoWork(2, 1))  # broker 2's request number 1, to broker 1, and its answer
    [fetch_request] = [e.payload for e in c.in_flight() if e.link == (2, 1)]
    rec.apply(Deliver(2, 1))
    rec.apply(Deliver(1, 2))
    rec.apply(Elect(TP, 2))
    rec.apply(Deliver(0, 1))
    rec.apply(Deliver(0, 2))
    assert names(rec.apply(DoWork(1, 2))) == ["FollowerSendOffsetsForLeaderEpoch"]
    assert names(rec.apply(Deliver(1, 2))) == ["LeaderHandleOffsetsForLeaderEpoch"]
    [answer] = [e.payload for e in c.in_flight() if e.link == (2, 1)]
    assert answer.correlation_id == fetch_request.correlation_id
    answers = [m for m in rec.state["msgs"] if m["src"] == 2 and m["dst"] == 1]
    assert [m["type"] for m in answers] == ["OffsetsForLeaderEpochResponse"]


def test_a_restart_forgets_a_leader_epoch_without_records() -> None:
    """Loading the log truncates the epoch cache at the LEO (the Log constructor)."""
    _, rec = recorder()
    assert rec.state["epochCache"][0] == (Record({"epoch": 0, "startOffset": 0}),)
    rec.apply(Crash(1))
    assert names(rec.apply(Restart(1))) == ["Restart"]
    assert rec.state["epochCache"][0] == ()


def test_a_request_whose_leader_died_fails_unseen_by_the_spec() -> None:
    """Leader 1 dies with follower 2's FETCH unanswered: the iteration that fails it at once
    changes no spec variable (recorded as hidden before the next action: in the spec the
    request left msgs with the leader, and the follower awaits nothing); after the back-off,
    its FETCH to the dead leader is a FollowerSendFetch that never enters msgs."""
    _, rec = recorder()
    assert names(rec.apply(DoWork(2, 1))) == ["FollowerTruncateToHighWatermark"]
    assert names(rec.apply(Crash(1))) == ["Crash"]
    assert rec.state["msgs"] == frozenset()
    before = rec.state
    assert rec.apply(DoWork(2, 1)) == []  # the request fails, and the partition backs off
    assert rec.state == before and rec.hidden == [DoWork(2, 1)]
    assert rec.apply(DoWork(2, 1)) == []  # backing off: nothing to do
    rec.apply(Tick(BACKOFF))
    [send] = rec.apply(DoWork(2, 1))
    assert send.action == "FollowerSendFetch" and send.state["msgs"] == frozenset()
    assert send.hidden == (DoWork(2, 1), DoWork(2, 1), Tick(BACKOFF))

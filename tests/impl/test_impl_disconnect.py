"""R8, a broken connection: when the broker a follower fetches from dies, Kafka 2.6.3's network
client sees the close at once (or the connect is refused while it is down), `sendAndReceive`
throws as on a timeout, and `processFetchRequest` backs the partitions off for
replica.fetch.backoff.ms (1 s) instead of waiting replica.socket.timeout.ms (30 s). What the
leader sent before it died still arrives; a request parked in its purgatory dies with it.

Times are START_TIME_MS + t; the follower is broker 2, its leader broker 1."""

from __future__ import annotations

from kreplica.impl.cluster import START_TIME_MS as T0
from kreplica.impl.cluster import Cluster
from kreplica.impl.config import BrokerConfig
from kreplica.impl.fetch_state import FETCHING, TRUNCATING
from kreplica.impl.fetcher import AbstractFetcherThread
from kreplica.impl.messages import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    OffsetsForLeaderEpochRequest,
    TopicPartition,
)
from kreplica.impl.network import Envelope
from kreplica.impl.steps import (
    Crash,
    DeleteRecords,
    Deliver,
    DoWork,
    Drop,
    Elect,
    FailLogDir,
    HaltOnLogDirFailure,
    Heal,
    Isolate,
    Produce,
    Restart,
    ShrinkIsr,
    Step,
    Tick,
    UncleanShutdown,
)

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
BACKOFF = BrokerConfig().replica_fetch_backoff_ms
TIMEOUT = BrokerConfig().replica_socket_timeout_ms
CLIENT, CONTROLLER = -1, 0


def cluster(wait_ms: int = 0) -> Cluster:
    """Broker 1 leads t-0, broker 2 follows it; a follower FETCH waits `wait_ms` at most."""
    return Cluster((1, 2), {"t": 1}, config=BrokerConfig(replica_fetch_wait_max_ms=wait_ms))


def fetcher(c: Cluster, broker: int = 2, source: int = 1) -> AbstractFetcherThread:
    found = c.brokers[broker].replica_manager.replica_fetcher_manager.fetcher_for(source)
    assert found is not None
    return found


def run(c: Cluster, *steps: Step) -> list[Envelope]:
    """Apply the steps; what the last one sent."""
    sent: list[Envelope] = []
    for step in steps:
        sent = c.apply(step)
    return sent


def kinds(sent: list[Envelope]) -> list[tuple[str, int]]:
    return [(type(e.payload).__name__, e.dst) for e in sent]


def delayed_until(c: Cluster, tp: TopicPartition = TP) -> int | None:
    state = fetcher(c).fetch_state(tp)
    assert state is not None
    return state.delay_until_ms


def now(c: Cluster) -> int:
    return c.clock.now_ms - T0


def fetch_in_flight(c: Cluster) -> None:
    """Follower 2 truncates to its HW (0) and sends FETCH(0) at t=0: deadline t=30000."""
    assert kinds(run(c, DoWork(2, 1))) == [("FetchRequest", 1)]
    flight = fetcher(c).in_flight
    assert flight is not None and flight.deadline_ms == T0 + TIMEOUT


def test_a_fetch_whose_leader_dies_fails_at_once_and_backs_off() -> None:
    """The FETCH sent at t=0 is unanswered when leader 1 dies at t=100: the next iteration,
    at t=100, fails it and delays the partition until t=1100, when the next FETCH goes out
    (not at t=30000, the request's timeout)."""
    c = cluster()
    fetch_in_flight(c)
    run(c, Tick(100), Crash(1))
    assert c.brokers[2].workable_fetchers() == [1]
    assert c.brokers[2].next_timer_ms() == T0 + 100  # due now: the fuzzer need not tick
    assert run(c, DoWork(2, 1)) == []
    assert fetcher(c).in_flight is None and delayed_until(c) == T0 + 1_100
    assert c.brokers[2].next_timer_ms() == T0 + 1_100
    run(c, Tick(BACKOFF - 1))
    assert c.brokers[2].workable_fetchers() == []  # t=1099: still delayed
    sent = run(c, Tick(1), DoWork(2, 1))
    assert now(c) == 1_100 and kinds(sent) == [("FetchRequest", 1)]
    assert isinstance(sent[0].payload, FetchRequest)
    assert sent[0].payload.partitions[0].fetch_offset == 0


def test_a_request_sent_to_a_dead_broker_fails_at_once() -> None:
    """AbstractFetcherThread keeps fetching from a dead leader until a LeaderAndIsr moves it:
    each connect is refused, so each FETCH fails at once (t=1100, then t=2100, ...)."""
    c = cluster()
    fetch_in_flight(c)
    run(c, Tick(100), Crash(1), DoWork(2, 1), Tick(BACKOFF))
    assert kinds(run(c, DoWork(2, 1))) == [("FetchRequest", 1)]  # t=1100, to the dead leader
    flight = fetcher(c).in_flight
    assert flight is not None and flight.deadline_ms == T0 + 1_100 + TIMEOUT
    assert c.brokers[2].workable_fetchers() == [1]
    assert run(c, DoWork(2, 1)) == []
    assert fetcher(c).in_flight is None and delayed_until(c) == T0 + 2_100


def test_the_answer_a_leader_sent_before_it_died_still_arrives() -> None:
    """Leader 1 answers FETCH(0) with record 7 and dies at t=100 before the answer lands: the
    follower waits for it (no work until its deadline t=30000 has passed), appends record 7 at
    t=100, and its next FETCH(1), to the dead leader, fails at once: delayed until t=1100."""
    c = cluster()
    run(c, Produce(TP, (7,), acks=1, broker=1), Deliver(CLIENT, 1))
    fetch_in_flight(c)
    assert kinds(run(c, Deliver(2, 1))) == [("FetchResponse", 2)]
    run(c, Tick(100), Crash(1))
    assert c.brokers[2].workable_fetchers() == []
    assert c.brokers[2].next_timer_ms() == T0 + TIMEOUT + 1
    run(c, Deliver(1, 2))
    log = c.log(2, TP)
    assert log is not None and log.record_ids() == [7]
    sent = run(c, DoWork(2, 1))
    assert isinstance(sent[0].payload, FetchRequest)
    assert sent[0].payload.partitions[0].fetch_offset == 1
    assert run(c, DoWork(2, 1)) == []
    assert delayed_until(c) == T0 + 1_100


def test_a_fetch_parked_in_the_dead_leaders_purgatory_fails_at_once() -> None:
    """FETCH(0) waits up to 500 ms in leader 1's DelayedFetch purgatory; the leader dies at
    t=200 and the parked fetch with it: the follower backs off until t=1200."""
    c = cluster(wait_ms=500)
    fetch_in_flight(c)
    assert run(c, Deliver(2, 1)) == []  # parked: nothing to read yet
    run(c, Tick(200), Crash(1))
    assert c.brokers[2].workable_fetchers() == [1]
    assert run(c, DoWork(2, 1)) == []
    assert delayed_until(c) == T0 + 1_200


def test_an_offsets_for_leader_epoch_request_fails_at_once() -> None:
    """Follower 2 holds record 7 of epoch 0; leader 1 is re-elected (epoch 1) and 2 asks it
    for the end of epoch 0 at t=0. Leader 1 dies at t=100: the partition, still Truncating,
    waits until t=1100; leader 1 is back at t=600, and at t=1100 the next request goes to its
    new incarnation, whose answer the follower awaits (deadline t=31100)."""
    c = cluster()
    run(c, DoWork(2, 1), Deliver(2, 1), Deliver(1, 2))  # Fetching at 0
    run(c, Produce(TP, (7,), acks=1, broker=1), Deliver(CLIENT, 1))
    run(c, DoWork(2, 1), Deliver(2, 1), Deliver(1, 2))  # record 7 replicated
    run(c, Elect(TP, 1), Deliver(CONTROLLER, 2))
    assert kinds(run(c, DoWork(2, 1))) == [("OffsetsForLeaderEpochRequest", 1)]
    run(c, Tick(100), Crash(1))
    assert run(c, DoWork(2, 1)) == []
    state = fetcher(c).fetch_state(TP)
    assert state is not None and (state.state, state.delay_until_ms) == (TRUNCATING, T0 + 1_100)
    run(c, Tick(500), Restart(1), Tick(499))
    assert c.brokers[2].workable_fetchers() == []
    sent = run(c, Tick(1), DoWork(2, 1))
    assert isinstance(sent[0].payload, OffsetsForLeaderEpochRequest)
    assert (sent[0].dst, sent[0].dst_incarnation) == (1, 2)
    assert c.brokers[2].workable_fetchers() == []
    assert c.brokers[2].next_timer_ms() == T0 + 1_100 + TIMEOUT + 1


def test_a_leader_halted_on_a_failed_log_dir_is_seen_to_die() -> None:
    """LogManager.handleLogDirFailure halts the broker (Exit.halt): its process ends and its
    host closes its connections, as for a crash."""
    c = cluster()
    fetch_in_flight(c)
    run(c, FailLogDir(1, TP), Tick(100), HaltOnLogDirFailure(1))
    assert not c.is_alive(1) and c.brokers[2].workable_fetchers() == [1]
    run(c, DoWork(2, 1))
    assert delayed_until(c) == T0 + 1_100


def test_a_leader_that_loses_power_is_not_heard_to_die() -> None:
    """A host that loses power (UncleanShutdown) sends no close: the FETCH sent at t=0 fails
    once its deadline, t=30000, has passed (at t=30001, not at t=30000: Kafka's NetworkClient
    expires a request more than its time-out after the send), and the partition waits until
    t=31001. The FETCH then sent is not refused either (the connect would time out): its
    deadline is t=61001, and a restart of leader 1 at t=31501 does not close the connection to
    its earlier life."""
    c = cluster()
    fetch_in_flight(c)
    run(c, Tick(100), UncleanShutdown(1))
    assert c.brokers[2].workable_fetchers() == []
    assert c.brokers[2].next_timer_ms() == T0 + TIMEOUT + 1
    run(c, Tick(TIMEOUT - 100))  # at the deadline: not yet
    assert c.brokers[2].workable_fetchers() == []
    run(c, Tick(1), DoWork(2, 1))
    assert delayed_until(c) == T0 + TIMEOUT + 1 + BACKOFF
    assert kinds(run(c, Tick(BACKOFF), DoWork(2, 1))) == [("FetchRequest", 1)]
    assert c.brokers[2].workable_fetchers() == []
    assert c.brokers[2].next_timer_ms() == T0 + 2 * TIMEOUT + BACKOFF + 2
    run(c, Tick(500), Restart(1))
    assert c.brokers[2].workable_fetchers() == []


def out_of_range(c: Cluster) -> None:
    """Leader 1 drops follower 2 from the ISR at t=30001 and deletes its records below
    offset 2; the follower's FETCH(0) is answered OFFSET_OUT_OF_RANGE."""
    run(c, DoWork(2, 1), Deliver(2, 1), Deliver(1, 2))  # Fetching at 0
    for record in (1, 2):
        run(c, Produce(TP, (record,), acks=1, broker=1), Deliver(CLIENT, 1))
    run(c, Tick(TIMEOUT + 1), ShrinkIsr(1), DeleteRecords(TP, 2), DoWork(2, 1), Deliver(2, 1))
    answer = c.network.peek((1, 2))
    assert answer is not None and isinstance(answer.payload, FetchResponse)
    assert answer.payload.partitions[0].error.name == "OFFSET_OUT_OF_RANGE"


def test_a_reset_whose_list_offsets_request_is_lost_ends_and_backs_off() -> None:
    """R9: the answer sends LIST_OFFSETS at t=30001; leader 1 dies at t=30101: the reset ends
    and the partition, Fetching at 0, waits until t=31101."""
    c = cluster()
    out_of_range(c)
    assert kinds(run(c, Deliver(1, 2))) == [("ListOffsetsRequest", 1)]
    run(c, Tick(100), Crash(1))
    assert run(c, DoWork(2, 1)) == []
    assert fetcher(c).pending_resets == {}
    state = fetcher(c).fetch_state(TP)
    assert state is not None and (state.state, state.fetch_offset) == (FETCHING, 0)
    assert state.delay_until_ms == T0 + TIMEOUT + 1 + 100 + BACKOFF


def test_a_reset_that_starts_after_the_leader_died_fails_at_once() -> None:
    """The OFFSET_OUT_OF_RANGE answer lands after leader 1 died: the LIST_OFFSETS it sends
    at t=30001 is refused, and the partition waits until t=31001."""
    c = cluster()
    out_of_range(c)
    run(c, Crash(1))
    sent = run(c, Deliver(1, 2))
    assert kinds(sent) == [("ListOffsetsRequest", 1)]
    assert isinstance(sent[0].payload, ListOffsetsRequest)
    assert c.brokers[2].workable_fetchers() == [1]
    run(c, DoWork(2, 1))
    assert fetcher(c).pending_resets == {} and delayed_until(c) == T0 + TIMEOUT + 1 + BACKOFF


def test_across_a_network_partition_the_death_is_not_seen() -> None:
    """Follower 2 is cut off from leader 1 when it dies at t=100: no close reaches it, so
    its FETCH waits for its deadline; the partition heals at t=5000, and the close of the
    dead leader's connection is seen then: delayed until t=6000."""
    c = cluster()
    fetch_in_flight(c)
    run(c, Isolate(1, 2), Tick(100), Crash(1))
    assert c.brokers[2].workable_fetchers() == []
    assert c.brokers[2].next_timer_ms() == T0 + TIMEOUT + 1
    run(c, Tick(4_900), Heal(1, 2))
    assert c.brokers[2].workable_fetchers() == [1]
    run(c, DoWork(2, 1))
    assert delayed_until(c) == T0 + 6_000


def test_an_answer_lost_on_its_way_from_a_dead_leader_is_seen_at_once() -> None:
    """The answer leader 1 sent before it died is lost at t=100: the connection is closed
    and nothing more comes on it, so the follower fails its FETCH at once."""
    c = cluster()
    fetch_in_flight(c)
    run(c, Deliver(2, 1), Tick(100), Crash(1))
    assert c.brokers[2].workable_fetchers() == []
    run(c, Drop(1, 2, 0))
    assert c.brokers[2].workable_fetchers() == [1]
    run(c, DoWork(2, 1))
    assert delayed_until(c) == T0 + 1_100


def test_only_the_fetcher_towards_the_dead_broker_sees_it() -> None:
    """Broker 2 follows 1 for t-0 and 3 for t-1, with a FETCH in flight to each; broker 1
    dies: only the fetcher towards 1 has work."""
    c = Cluster(
        (1, 2, 3),
        assignment={TP: (1, 2), TP1: (3, 2)},
        config=BrokerConfig(replica_fetch_wait_max_ms=0),
    )
    run(c, DoWork(2, 1), DoWork(2, 3), Tick(100), Crash(1))
    assert c.brokers[2].workable_fetchers() == [1]
    assert fetcher(c, 2, 3).in_flight is not None
    assert c.brokers[2].next_timer_ms() == T0 + 100


def test_a_disconnection_spares_a_request_whose_answer_is_on_its_way() -> None:
    """AbstractFetcherThread.process_disconnection: the request in flight fails at the next
    iteration unless its correlation id is among the answers on their way."""
    c = cluster()
    fetch_in_flight(c)
    f = fetcher(c)
    flight = f.in_flight
    assert flight is not None
    f.process_disconnection({flight.correlation_id})
    assert not f.has_work() and f.next_wakeup_ms() == T0 + TIMEOUT + 1
    f.process_disconnection({flight.correlation_id + 1})
    assert f.has_work() and f.next_wakeup_ms() == T0
    assert f.do_work() == [] and f.in_flight is None


def test_an_answer_to_an_earlier_incarnation_is_not_on_its_way() -> None:
    """Follower 2 crashes with FETCH 1 on its way to leader 1, which answers that dead
    incarnation; restarted, 2 numbers its requests from 1 again. When leader 1 dies, the
    answer on the link carries the number of 2's new FETCH, but not its incarnation: the new
    FETCH fails at once."""
    c = cluster()
    fetch_in_flight(c)
    run(c, Crash(2), Deliver(2, 1), Restart(2), Deliver(CONTROLLER, 2))
    stale = c.network.peek((1, 2))
    assert stale is not None and (stale.payload.correlation_id, stale.dst_incarnation) == (1, 1)
    sent = run(c, DoWork(2, 1))
    assert [(e.payload.correlation_id, e.src_incarnation) for e in sent] == [(1, 2)]
    run(c, Tick(100), Crash(1))
    assert c.brokers[2].workable_fetchers() == [1]
    run(c, DoWork(2, 1))
    assert delayed_until(c) == T0 + 1_100


def test_a_request_of_the_dead_broker_is_no_answer() -> None:
    """Brokers 1 and 2 follow each other (t-0 led by 1, t-1 by 2), and each has sent its
    FETCH number 1; broker 1 dies with its own FETCH 1 still on the link to 2: that is no
    answer to 2's FETCH 1, which fails at once."""
    c = Cluster(
        (1, 2),
        assignment={TP: (1, 2), TP1: (2, 1)},
        config=BrokerConfig(replica_fetch_wait_max_ms=0),
    )
    run(c, DoWork(2, 1), DoWork(1, 2), Tick(100), Crash(1))
    [request] = c.network.queue((1, 2))
    assert isinstance(request.payload, FetchRequest) and request.payload.correlation_id == 1
    assert c.brokers[2].workable_fetchers() == [1]

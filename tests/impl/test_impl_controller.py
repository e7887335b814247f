"""Controller: clean/unclean elections, broker failure and start-up, ISR changes from leaders."""

from __future__ import annotations

from kreplica.impl.controller import Controller
from kreplica.impl.messages import (
    NO_LEADER,
    AlterPartitionItem,
    AlterPartitionRequest,
    Errors,
    LeaderAndIsrRequest,
    TopicPartition,
)
from kreplica.impl.variants import Variant

TP = TopicPartition("t", 0)


def controller(election: str = "clean", replicas: tuple[int, ...] = (1, 2, 3)) -> Controller:
    c = Controller(Variant(election=election), replicas)
    c.create_partition(TP, replicas)
    return c


def registration(c: Controller) -> tuple[int, int, tuple[int, ...], int]:
    reg = c.partitions[TP]
    return reg.leader, reg.leader_epoch, reg.isr, reg.zk_version


def test_create_partition_sends_leader_and_isr_to_every_replica() -> None:
    c = Controller(Variant(), (1, 2, 3))
    out = c.create_partition(TP, (2, 3, 1))
    assert sorted(o.dst for o in out) == [1, 2, 3]
    state = out[0].payload
    assert isinstance(state, LeaderAndIsrRequest)
    assert (state.partition_states[0].leader, state.partition_states[0].leader_epoch) == (2, 0)
    assert registration(c) == (2, 0, (1, 2, 3), 0)


def test_leader_failure_elects_first_live_isr_replica_and_bumps_epoch() -> None:
    c = controller()
    out = c.on_broker_failure(1)
    assert registration(c) == (2, 1, (2, 3), 1)
    assert sorted(o.dst for o in out) == [2, 3]


def test_follower_failure_leaves_isr_with_an_epoch_bump() -> None:
    c = controller()
    out = c.on_broker_failure(3)
    assert registration(c) == (1, 1, (1, 2), 1)
    assert sorted(o.dst for o in out) == [1, 2]


def test_clean_election_fails_without_live_isr_member() -> None:
    c = controller()
    c.handle_alter_partition(AlterPartitionRequest(1, 1, (AlterPartitionItem(TP, 0, (1,), 0),)))
    c.on_broker_failure(1)
    leader, epoch, isr, _ = registration(c)
    assert (leader, isr) == (NO_LEADER, (1,))  # the last ISR member stays in the ISR
    assert c.leader_of(TP) is None
    # the last ISR member comes back: it is elected
    c.on_broker_startup(1)
    assert registration(c)[:3] == (1, epoch + 1, (1,))


def test_unclean_election_picks_first_live_replica() -> None:
    c = controller(election="unclean")
    c.handle_alter_partition(AlterPartitionRequest(1, 1, (AlterPartitionItem(TP, 0, (1,), 0),)))
    c.on_broker_failure(1)
    assert registration(c)[:3] == (2, 1, (2,))


def test_explicit_election_clean_requires_live_isr_member() -> None:
    c = controller()
    error, out = c.elect_leader(TP, 3)
    assert error is Errors.NONE and registration(c)[:3] == (3, 1, (1, 2, 3))
    assert sorted(o.dst for o in out) == [1, 2, 3]
    error, _ = c.elect_leader(TP, 3)  # same leader again: a new epoch
    assert error is Errors.NONE and registration(c)[1] == 2
    c.on_broker_failure(2)
    error, _ = c.elect_leader(TP, 2)
    assert error is Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
    c.on_broker_startup(2)
    error, _ = c.elect_leader(TP, 2)  # alive but out of the ISR
    assert error is Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE


def test_explicit_unclean_election_is_not_needed_while_the_leader_is_live() -> None:
    """Kafka 2.6.3's ElectLeaders(UNCLEAN) leaves a partition with a live leader alone: a live
    replica outside the ISR is refused, ELECTION_NOT_NEEDED, and nothing changes."""
    c = controller(election="unclean")
    c.on_broker_failure(2)
    c.on_broker_startup(2)
    before = registration(c)
    error, out = c.elect_leader(TP, 2)
    assert (error, out) == (Errors.ELECTION_NOT_NEEDED, [])
    assert registration(c) == before


def isr_of_one_then_leader_lost(c: Controller) -> None:
    """Broker 1 leads alone in the ISR, then dies while no other broker is live: offline."""
    c.handle_alter_partition(AlterPartitionRequest(1, 1, (AlterPartitionItem(TP, 0, (1,), 0),)))
    c.on_broker_failure(3)
    c.on_broker_failure(2)
    c.on_broker_failure(1)
    assert registration(c)[0] == NO_LEADER


def test_explicit_unclean_election_elects_the_first_live_replica_of_an_offline_partition() -> None:
    """The leader is not live and no ISR member is: the offline election with unclean
    allowed picks the first live replica in assignment order, alone in the ISR; any other
    candidate is refused, ELIGIBLE_LEADERS_NOT_AVAILABLE."""
    c = controller(election="unclean")
    isr_of_one_then_leader_lost(c)
    c.live_brokers |= {2, 3}  # registered without the start-up's own offline election
    before = registration(c)
    error, _ = c.elect_leader(TP, 3)
    assert error is Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE and registration(c) == before
    error, out = c.elect_leader(TP, 2)
    assert error is Errors.NONE and registration(c)[:3] == (2, before[1] + 1, (2,))
    assert sorted(o.dst for o in out) == [2, 3]


def test_explicit_unclean_election_prefers_a_live_isr_member() -> None:
    """With an ISR member live, an unclean candidate outside the ISR is refused even when
    the leader is not live: the offline election would pick the ISR member."""
    c = controller(election="unclean")
    isr_of_one_then_leader_lost(c)
    c.live_brokers |= {1, 2}
    before = registration(c)
    error, _ = c.elect_leader(TP, 2)
    assert error is Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE and registration(c) == before
    error, _ = c.elect_leader(TP, 1)
    assert error is Errors.NONE and registration(c)[:3] == (1, before[1] + 1, (1,))


def test_explicit_clean_election_never_elects_outside_the_isr() -> None:
    c = controller()
    isr_of_one_then_leader_lost(c)
    c.live_brokers |= {2, 3}
    error, _ = c.elect_leader(TP, 2)
    assert error is Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE


def test_startup_sends_current_state_to_the_broker_and_bounce_is_failure_then_start() -> None:
    c = controller()
    out = c.on_broker_startup(3)  # c thinks 3 is alive: a bounce
    assert registration(c) == (1, 1, (1, 2), 1)
    to_three = [o for o in out if o.dst == 3]
    assert len(to_three) == 1
    request = to_three[0].payload
    assert isinstance(request, LeaderAndIsrRequest)
    assert request.partition_states[0].leader_epoch == 1


def test_bounce_sends_the_failures_leader_and_isr_before_the_startups() -> None:
    """A bounced sole-ISR leader: offline in epoch 1 (told to the others), then told its
    offline partition (the OnlineReplica transition, R23), then re-elected in 2."""
    c = controller(replicas=(1, 2))
    c.partitions[TP].isr = (1,)
    out = c.on_broker_startup(1)
    sent = [
        (o.dst, s.leader_epoch, s.leader)
        for o in out
        if isinstance(o.payload, LeaderAndIsrRequest)
        for s in o.payload.partition_states
    ]
    assert sent == [(2, 1, -1), (1, 1, -1), (1, 2, 1), (2, 2, 1)]
    assert registration(c)[:2] == (1, 2)


def test_a_broker_that_starts_while_its_partition_is_offline_is_told_so() -> None:
    """Kafka 2.6.3's onBrokerStartup sends a starting broker the state of every partition it
    hosts, an offline one's too (leader -1), so that it hosts the partition and its HW stays
    in its checkpoint file (R23); the offline election, which it cannot win here, sends
    nothing more."""
    c = controller()
    isr_of_one_then_leader_lost(c)  # ISR (1,), no leader, every broker down
    before = registration(c)
    out = c.on_broker_startup(2)
    assert registration(c) == before
    assert [(o.dst, [(s.leader, s.leader_epoch) for s in o.payload.partition_states])
            for o in out if isinstance(o.payload, LeaderAndIsrRequest)] == [
        (2, [(-1, before[1])])
    ]  # fmt: skip


def test_alter_partition_is_fenced_by_epoch_version_and_leadership() -> None:
    c = controller()

    def alter(broker: int, epoch: int, isr: tuple[int, ...], version: int) -> Errors:
        request = AlterPartitionRequest(1, broker, (AlterPartitionItem(TP, epoch, isr, version),))
        return c.handle_alter_partition(request).partitions[0].error

    assert alter(1, 1, (1, 2), 0) is Errors.FENCED_LEADER_EPOCH
    assert alter(1, 0, (1, 2), 5) is Errors.INVALID_UPDATE_VERSION
    assert alter(2, 0, (1, 2), 0) is Errors.NOT_LEADER_OR_FOLLOWER
    assert alter(1, 0, (2, 3), 0) is Errors.INVALID_REQUEST
    assert alter(1, 0, (1, 4), 0) is Errors.INVALID_REQUEST
    assert registration(c) == (1, 0, (1, 2, 3), 0)
    assert alter(1, 0, (1, 2), 0) is Errors.NONE
    assert registration(c) == (1, 0, (1, 2), 1)  # no epoch bump for a leader's ISR change
    c.on_broker_failure(1)
    assert alter(1, 1, (1, 2), 2) is Errors.STALE_BROKER_EPOCH

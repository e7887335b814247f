"""Time where the spec abstracts it: Kafka's caught-up times, kept from a run's events, and
the ISR shrink they allow (R10, R12).

The spec lets a leader drop any ISR follower whose LEO differs from its own, at any moment:
"too long behind" is abstracted away, so a model-checked state space stays small (every clock
reading would be a new state). Kafka 2.6.3 decides it by the clock: `Replica.updateFetchState`
moves a follower's `lastCaughtUpTimeMs` on each fetch, `Partition.makeLeader` resets it, and
`Partition.getOutOfSyncReplicas` drops exactly the ISR followers whose LEO differs from the
leader's and whose last caught-up time is more than `replica.lag.time.max.ms` ago.

`LagTimes` keeps those times for every (leader, follower) from the recorded actions alone
(`BecomeLeaderOrFollower`, `LeaderHandleFetch`) and the simulated clock of each step, written
from Kafka's rules, not from the implementation's `Replica`. `shrink_violations` then judges
each shrink by the clock: the followers a `LeaderShrinkIsr` drops must be exactly the lagging
ones, and a leader whose isr-expiration task runs (a `ShrinkIsr` step) while a follower lags
must drop it, unless its ISR write cannot succeed (the spec's guard). Reported as
`IsrShrinksOnLagTime`, like an invariant.
"""

from __future__ import annotations

from dataclasses import dataclass

from kreplica.conformance.bridge.projection import State
from kreplica.impl.messages import Errors, FetchResponse
from kreplica.impl.network import Envelope

NAME = "IsrShrinksOnLagTime"
"""The name a shrink at the wrong time is reported under."""

HW_NAME = "HighWatermarkOnTime"
"""The name a HW that ignores (or invents) a catching-up follower is reported under."""

UNKNOWN_OFFSET = -1
"""Kafka's Log.UnknownOffset: what a new leader knows of a follower's LEO."""


@dataclass(slots=True)
class FollowerTimes:
    """What a leader's Replica object holds about one follower's fetches (Kafka's names)."""

    last_caught_up_time_ms: int
    last_fetch_leader_log_end_offset: int
    last_fetch_time_ms: int


class LagTimes:
    """Each leader's FollowerTimes for each follower, as the run's actions imply them."""

    def __init__(self, replicas: tuple[int, ...], lag_time_max_ms: int) -> None:
        self.replicas = replicas
        self.lag_time_max_ms = lag_time_max_ms
        self.times: dict[tuple[int, int], FollowerTimes] = {}
        """(leader, follower) -> the times, while the leader leads."""

    def start(self, s: State, now_ms: int) -> None:
        """The partition's first leader, made leader when the cluster started (at `now_ms`):
        makeLeader of a new leader."""
        for r in self.replicas:
            if r in s["alive"] and s["leader"][r - 1] == r:
                self._make_leader(r, s["isr"][r - 1], len(s["log"][r - 1]), now_ms, True)

    def observe(
        self,
        action: str,
        args: dict[str, object],
        before: State,
        after: State,
        now_ms: int,
        sent: list[Envelope],
    ) -> None:
        """Follow one recorded action taken at `now_ms` (`sent`: what its step sent)."""
        if action == "BecomeLeaderOrFollower":
            self._leader_and_isr(int(str(args["replica"])), before, after, now_ms)
        elif action == "LeaderHandleFetch":
            leader, follower = int(str(args["replica"])), int(str(args["follower"]))
            if read_ok(sent, leader, follower):
                offset = int(str(args["offset"]))
                self._fetch(leader, follower, offset, len(before["log"][leader - 1]), now_ms)

    def _leader_and_isr(self, r: int, before: State, after: State, now_ms: int) -> None:
        """Partition.makeLeader (R10): reset every follower's times; a new leader also forgets
        their fetches (updateFetchState with unknown offsets at time 0)."""
        i = r - 1
        leads = after["leader"][i] == r
        new_epoch = before["leader"][i] != r or before["leaderEpoch"][i] != after["leaderEpoch"][i]
        if not leads or not new_epoch:
            return
        is_new_leader = before["leader"][i] != r
        self._make_leader(r, after["isr"][i], len(after["log"][i]), now_ms, is_new_leader)

    def _make_leader(
        self, r: int, isr: frozenset[int], epoch_start: int, now_ms: int, is_new_leader: bool
    ) -> None:
        """resetLastCaughtUpTime of every follower of r: caught up now if in the ISR, else at
        0; a new leader also forgets their fetches (updateFetchState with unknown offsets at
        time 0)."""
        for f in self.replicas:
            if f != r:
                caught_up = now_ms if f in isr else 0
                last_fetch = (UNKNOWN_OFFSET, 0) if is_new_leader else (epoch_start, now_ms)
                self.times[(r, f)] = FollowerTimes(caught_up, *last_fetch)

    def _fetch(self, leader: int, follower: int, offset: int, leader_leo: int, now: int) -> None:
        """Replica.updateFetchState (R10): caught up now if the fetch reached the leader's LEO,
        or at the previous fetch if it reached the LEO the leader had then."""
        times = self.times.get((leader, follower))
        if times is None:
            return
        if offset >= leader_leo:
            times.last_caught_up_time_ms = max(times.last_caught_up_time_ms, now)
        elif offset >= times.last_fetch_leader_log_end_offset:
            times.last_caught_up_time_ms = max(
                times.last_caught_up_time_ms, times.last_fetch_time_ms
            )
        times.last_fetch_leader_log_end_offset = leader_leo
        times.last_fetch_time_ms = now

    def out_of_sync(self, s: State, leader: int, now_ms: int) -> frozenset[int]:
        """Partition.getOutOfSyncReplicas (R12): the ISR followers of `leader` in state s whose
        LEO differs from its own and who have not caught up for replica.lag.time.max.ms (none
        while its log dir has failed: the isr-expiration task skips an offline Partition)."""
        i = leader - 1
        if leader not in s["alive"] or s["leader"][i] != leader or leader in s["logDirOffline"]:
            return frozenset()
        leo = len(s["log"][i])
        out = set()
        for f in s["isr"][i]:
            times = self.times.get((leader, f))
            if f == leader or times is None or s["remoteLeo"][i][f - 1] == leo:
                continue
            if now_ms - times.last_caught_up_time_ms > self.lag_time_max_ms:
                out.add(f)
        return frozenset(out)

    def hw_holders(self, s: State, leader: int, now_ms: int) -> frozenset[int]:
        """The followers whose LEO bounds `leader`'s HW in state s (maybeIncrementLeaderHW,
        R13): its ISR followers, and those that caught up within replica.lag.time.max.ms."""
        i = leader - 1
        holders = set(s["isr"][i]) - {leader}
        for f in self.replicas:
            times = self.times.get((leader, f))
            recent = times is not None and (
                now_ms - times.last_caught_up_time_ms <= self.lag_time_max_ms
            )
            if f != leader and recent:
                holders.add(f)
        return frozenset(holders)


HW_RECOMPUTES = {
    "LeaderHandleFetch": "a fetch",
    "Produce": "an append",
    "LeaderShrinkIsr": "an ISR shrink",
    "BecomeLeaderOrFollower": "a LeaderAndIsr",
}
"""The actions at which Kafka 2.6.3's leader recomputes its HW (maybeIncrementLeaderHW, R13):
updateFollowerFetchState after a fetch that moved the follower's LEO, appendRecordsToLeader
after an append, maybeShrinkIsr after a shrink, makeLeader. Each is judged by the clock."""


def hw_violations(
    lag: LagTimes,
    leader: int,
    before: State,
    after: State,
    now_ms: int,
    proposed: frozenset[int] = frozenset(),
    cause: str = "a fetch",
) -> list[tuple[str, str]]:
    """Judge the HW `leader` computes at one of `HW_RECOMPUTES` (`cause` names it): the least
    LEO of the leader and the `hw_holders`, if that is above the HW it had, else the HW it
    had. The spec lets any follower the leader has heard from hold the HW back
    (`CatchingUp`); Kafka decides by the clock. Under isr=alter-partition the followers of an
    ISR change in flight (`proposed`, KIP-497's maximal ISR) hold it back too."""
    i = leader - 1
    holders = lag.hw_holders(after, leader, now_ms) | (proposed - {leader})
    bound = min([len(after["log"][i]), *(after["remoteLeo"][i][f - 1] for f in holders)])
    expected = max(before["hw"][i], bound)
    if after["hw"][i] == expected:
        return []
    return [
        (
            HW_NAME,
            f"leader {leader}'s HW is {after['hw'][i]} after {cause} at {now_ms} ms, expected "
            f"{expected}: min of its LEO and of followers {sorted(holders)} (its ISR and those "
            f"caught up within {lag.lag_time_max_ms} ms)",
        )
    ]


def read_ok(sent: list[Envelope], leader: int, follower: int) -> bool:
    """The leader answered the follower's FETCH without an error: only such a read records
    the follower's fetch (ReplicaManager.updateFollowerFetchState)."""
    for envelope in sent:
        payload = envelope.payload
        link = (envelope.src, envelope.dst)
        if link == (leader, follower) and isinstance(payload, FetchResponse):
            return all(p.error is Errors.NONE for p in payload.partitions)
    return False


def can_write_isr(s: State, leader: int) -> bool:
    """The spec's guard on an ISR write: the controller knows `leader` as the live leader of
    its current epoch (else the write fails, and no shrink happens)."""
    return (
        s["ctrlLeader"] == leader
        and s["ctrlEpoch"] == s["leaderEpoch"][leader - 1]
        and leader in s["ctrlLive"]
    )


def shrink_violations(
    lag: LagTimes, leader: int, before: State, after: State, now_ms: int
) -> list[tuple[str, str]]:
    """Judge a run of `leader`'s isr-expiration task (a ShrinkIsr step) by the clock: it drops
    exactly the followers that lag (R12), or none if its ISR write cannot succeed."""
    expected = lag.out_of_sync(before, leader, now_ms)
    dropped = before["isr"][leader - 1] - after["isr"][leader - 1]
    if not dropped and (not expected or not can_write_isr(before, leader)):
        return []
    if dropped == expected:
        return []
    lagging = sorted(expected) or "none"
    return [
        (
            NAME,
            f"leader {leader} dropped {sorted(dropped) or 'no follower'} from its ISR at "
            f"{now_ms} ms; lagging for more than {lag.lag_time_max_ms} ms: {lagging}",
        )
    ]


def proposal_violations(
    lag: LagTimes,
    leader: int,
    before: State,
    in_flight: bool,
    proposed: frozenset[int] | None,
    now_ms: int,
) -> list[tuple[str, str]]:
    """Judge a run of `leader`'s isr-expiration task under isr=alter-partition (KIP-497,
    Kafka 2.7), where the shrink is a proposal the controller answers later: the proposed ISR
    (`proposed`, None if it sent none) drops exactly the followers that lag (R12), and nothing
    is proposed while an earlier change is in flight."""
    expected = frozenset() if in_flight else lag.out_of_sync(before, leader, now_ms)
    dropped = frozenset() if proposed is None else before["isr"][leader - 1] - proposed
    if dropped == expected:
        return []
    lagging = sorted(expected) or "none"
    return [
        (
            NAME,
            f"leader {leader} proposed dropping {sorted(dropped) or 'no follower'} from its "
            f"ISR at {now_ms} ms; lagging for more than {lag.lag_time_max_ms} ms: {lagging}"
            + (" (an ISR change was in flight)" if in_flight else ""),
        )
    ]

"""The decisions checked, each with its bounds, its spec operator in z3 and its impl run.

Every oracle is written from spec/KafkaReplication.tla with the spec's constants at their
correct values (`Truncation = "kip279"`, `Bugs = {}`), so a seeded bug switched on in the
implementation shows as a disagreement. Offsets run 0..MAX_OFFSET and epochs 0..MAX_EPOCH;
-1 is the spec's `Undefined` / `NoLeader` and the implementation's UNDEFINED_EPOCH(_OFFSET),
UNKNOWN_OFFSET and "no leader".

Why one module over 600 lines: it is a catalog, one section per row of docs/symbolic.md's table,
each section (inputs, domain, oracle, impl run) standing alone on the bounds and harnesses at
the top, and `CHECKS` at the bottom naming them all; split by decision, the bounds would need a
module of their own and one row of the table would no longer read in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NoReturn

import z3

from kreplica.conformance.symbolic.engine import Z3, Check, Inputs, Outcome, Vars
from kreplica.impl.clock import SimClock
from kreplica.impl.config import BrokerConfig
from kreplica.impl.epoch_cache import EpochEntry, LeaderEpochFileCache
from kreplica.impl.fetch_state import TRUNCATING, PartitionFetchState
from kreplica.impl.fetcher import AbstractFetcherThread
from kreplica.impl.log import FETCH_HIGH_WATERMARK, FETCH_LOG_END, Log, OffsetAndEpoch
from kreplica.impl.log_manager import LogManager
from kreplica.impl.messages import (
    RECORD_SIZE_BYTES,
    AlterPartitionItem,
    AlterPartitionItemResponse,
    EpochEndOffset,
    Errors,
    FetchPartitionResponse,
    LeaderAndIsrPartitionState,
    LogEntry,
    TopicPartition,
)
from kreplica.impl.partition import Partition
from kreplica.impl.replica import Replica
from kreplica.impl.replica_fetcher import ReplicaFetcherThread
from kreplica.impl.replica_manager import LogAppendResult, ReplicaManager
from kreplica.impl.variants import Variant

MAX_OFFSET = 4
"""Offsets 0..MAX_OFFSET: logs of up to four records."""
MAX_EPOCH = 3
"""Leader epochs 0..MAX_EPOCH."""
CACHE_SIZE = 3
"""Epoch cache entries 0..CACHE_SIZE: every case of R3 and R6 needs at most three."""
TRUNCATION_MAX_OFFSET = 3
"""The truncation point's offsets: its input is a cache and a leader answer, so smaller."""
TRUNCATION_MAX_EPOCH = 2
"""The truncation point's epochs."""
MAX_ISR = 3
"""ISR sizes and min.insync.replicas 1..MAX_ISR (three brokers, as in the spec's models)."""
FOLLOWERS = (2, 3)
"""The leader is broker 1; these are its followers."""

TP = TopicPartition("symbolic", 0)
UNDEF = -1
NOW_MS = 1_000_000
LAG_MS = 30_000

# ------------------------------------------------------------------------------- z3 helpers


def min2(a: Z3, b: Z3) -> Z3:
    """The spec's Min2."""
    return z3.If(a <= b, a, b)


def boolean(var: Z3) -> Z3:
    """A 0/1 integer variable."""
    return z3.Or(var == 0, var == 1)


def between(var: Z3, low: Z3, high: Z3) -> Z3:
    """low <= var <= high."""
    return z3.And(low <= var, var <= high)


def cache_names(size: int) -> tuple[str, ...]:
    """The inputs of an epoch cache of up to `size` entries: its length, epochs, starts."""
    return ("n", *(f"e{i}" for i in range(size)), *(f"s{i}" for i in range(size)))


def cache_domain(v: Vars, size: int, max_epoch: int, leo: Z3) -> Z3:
    """Well-formed caches (R2): strictly increasing epochs and starts, every start <= LEO;
    entries past the length are 0 so that each cache is one input."""
    n, parts = v["n"], [between(v["n"], 0, size)]
    for i in range(size):
        e, s = v[f"e{i}"], v[f"s{i}"]
        used = z3.And(between(e, 0, max_epoch), between(s, 0, leo))
        parts.append(z3.If(i < n, used, z3.And(e == 0, s == 0)))
        if i + 1 < size:
            later = z3.And(e < v[f"e{i + 1}"], s < v[f"s{i + 1}"])
            parts.append(z3.Implies(i + 1 < n, later))
    return z3.And(parts)


def _entry(v: Vars, size: int, field: str, index: Z3) -> Z3:
    """cache[index + 1].field for a symbolic 0-based index."""
    value = v[f"{field}0"]
    for i in range(1, size):
        value = z3.If(index == i, v[f"{field}{i}"], value)
    return value


def end_offset_for(v: Vars, size: int, requested: Z3, leo: Z3) -> tuple[Z3, Z3]:
    """The spec's EndOffsetFor(cache, requested, leo) (R3, KIP-279) as two z3 terms."""
    n = v["n"]
    higher = [z3.And(i < n, v[f"e{i}"] > requested) for i in range(size)]
    at_most = [z3.And(i < n, v[f"e{i}"] <= requested) for i in range(size)]
    min_higher: Z3 = z3.IntVal(size - 1)
    for i in reversed(range(size - 1)):
        min_higher = z3.If(higher[i], i, min_higher)
    max_at_most: Z3 = z3.IntVal(0)
    for i in range(1, size):
        max_at_most = z3.If(at_most[i], i, max_at_most)
    last_epoch = _entry(v, size, "e", n - 1)
    undefined = z3.Or(requested == UNDEF, n == 0)
    no_higher = z3.Not(z3.Or(higher))
    no_at_most = z3.Not(z3.Or(at_most))

    def pick(a: Z3, b: Z3, c: Z3, d: Z3, e: Z3) -> Z3:
        return z3.If(
            undefined,
            a,
            z3.If(requested == last_epoch, b, z3.If(no_higher, c, z3.If(no_at_most, d, e))),
        )

    epoch = pick(UNDEF, requested, UNDEF, requested, _entry(v, size, "e", max_at_most))
    offset = pick(UNDEF, leo, UNDEF, v["s0"], _entry(v, size, "s", min_higher))
    return epoch, offset


def end_offset_for_kip101(v: Vars, size: int, requested: Z3, leo: Z3) -> tuple[Z3, Z3]:
    """The spec's EndOffsetForKip101(cache, requested, leo) as two z3 terms."""
    n = v["n"]
    higher = [z3.And(i < n, v[f"e{i}"] > requested) for i in range(size)]
    min_higher: Z3 = z3.IntVal(size - 1)
    for i in reversed(range(size - 1)):
        min_higher = z3.If(higher[i], i, min_higher)
    offset = z3.If(
        z3.Or(requested == UNDEF, n == 0),
        UNDEF,
        z3.If(
            requested == _entry(v, size, "e", n - 1),
            leo,
            z3.If(
                z3.Or(z3.Not(z3.Or(higher)), requested < v["e0"]),
                UNDEF,
                _entry(v, size, "s", min_higher),
            ),
        ),
    )
    return z3.IntVal(UNDEF), offset


def epoch_cache(given: Inputs, leo: int) -> LeaderEpochFileCache:
    """The implementation's cache holding the input's entries, over a log of end offset leo."""
    cache = LeaderEpochFileCache(lambda: leo)
    n = given["n"]
    cache.entries = [EpochEntry(given[f"e{i}"], given[f"s{i}"]) for i in range(n)]
    return cache


def log_of(given: Inputs, leo: int, hw: int) -> Log:
    """A log of leo records whose epochs follow the input's cache, with the given HW."""
    log = Log(TP)
    cache = [EpochEntry(given[f"e{i}"], given[f"s{i}"]) for i in range(given.get("n", 0))]
    log.entries = [
        LogEntry(o, max((e.epoch for e in cache if e.start_offset <= o), default=0), o)
        for o in range(leo)
    ]
    log.next_offset = leo
    log.leader_epoch_cache.entries = cache
    log.high_watermark = hw
    return log


# --------------------------------------------------------------------------- end_offset_for

EOF_INPUTS = (*cache_names(CACHE_SIZE), "leo", "requested")


def eof_domain(v: Vars) -> Z3:
    """Well-formed caches over a log of 0..MAX_OFFSET records; requested epochs -1..MAX_EPOCH."""
    return z3.And(
        between(v["leo"], 0, MAX_OFFSET),
        cache_domain(v, CACHE_SIZE, MAX_EPOCH, v["leo"]),
        between(v["requested"], UNDEF, MAX_EPOCH),
    )


def eof_oracle(v: Vars, out: Vars) -> Z3:
    """out = EndOffsetFor(cache, requested, leo)."""
    epoch, offset = end_offset_for(v, CACHE_SIZE, v["requested"], v["leo"])
    return z3.And(out["epoch"] == epoch, out["offset"] == offset)


def eof_impl(given: Inputs, variant: Variant) -> Outcome:
    """LeaderEpochFileCache.end_offset_for on the input."""
    return epoch_cache(given, given["leo"]).end_offset_for(given["requested"])


def eof_kip101_oracle(v: Vars, out: Vars) -> Z3:
    """out = EndOffsetForKip101(cache, requested, leo)."""
    epoch, offset = end_offset_for_kip101(v, CACHE_SIZE, v["requested"], v["leo"])
    return z3.And(out["epoch"] == epoch, out["offset"] == offset)


def eof_kip101_impl(given: Inputs, variant: Variant) -> Outcome:
    """LeaderEpochFileCache.end_offset_for_kip101 on the input."""
    return epoch_cache(given, given["leo"]).end_offset_for_kip101(given["requested"])


# ------------------------------------------------------------------------ truncation point

TP_INPUTS = (*cache_names(CACHE_SIZE), "leo", "hw", "leader_epoch", "leader_offset")


def tp_domain(v: Vars) -> Z3:
    """A follower's cache, LEO and HW (<= LEO), and any leader answer (epoch, end offset)."""
    return z3.And(
        between(v["leo"], 0, TRUNCATION_MAX_OFFSET),
        cache_domain(v, CACHE_SIZE, TRUNCATION_MAX_EPOCH, v["leo"]),
        between(v["hw"], 0, v["leo"]),
        between(v["leader_epoch"], UNDEF, TRUNCATION_MAX_EPOCH),
        between(v["leader_offset"], UNDEF, TRUNCATION_MAX_OFFSET),
    )


def truncation_point(v: Vars, out: Vars, complete_d: bool = False) -> Z3:
    """out = TruncationPoint(f, eL, oL) with Truncation = "kip279"; complete_d=True makes case
    (d) complete, so the follower would not ask again: a deliberately wrong oracle."""
    e_l, o_l, leo, hw = v["leader_epoch"], v["leader_offset"], v["leo"], v["hw"]
    mine_epoch, mine_offset = end_offset_for(v, CACHE_SIZE, e_l, leo)
    case_d = z3.And(o_l != UNDEF, e_l != UNDEF, mine_offset != UNDEF, mine_epoch != e_l)
    offset = z3.If(
        o_l == UNDEF,
        hw,
        z3.If(
            z3.Or(e_l == UNDEF, mine_offset == UNDEF),
            min2(o_l, leo),
            z3.If(mine_epoch != e_l, min2(mine_offset, leo), min2(min2(o_l, mine_offset), leo)),
        ),
    )
    complete = 1 if complete_d else z3.If(case_d, 0, 1)
    return z3.And(out["offset"] == offset, out["complete"] == complete)


class _TruncationProbe(AbstractFetcherThread):
    """A fetcher over one follower log: the hooks R6 reads answer from that log."""

    def __init__(self, log: Log, fetch_offset: int) -> None:
        super().__init__("symbolic", 0, SimClock(0), 0, 0, set())
        self.log = log
        self.partition_states.update(
            TP, PartitionFetchState(fetch_offset, None, 0, None, TRUNCATING)
        )

    def log_end_offset(self, tp: TopicPartition) -> int:
        """The follower log's LEO."""
        return self.log.log_end_offset

    def end_offset_for_epoch(self, tp: TopicPartition, epoch: int) -> OffsetAndEpoch | None:
        """The follower log's R3 answer, as ReplicaFetcherThread gives it."""
        return self.log.end_offset_for_epoch(epoch)

    def _not_read(self, *args: object, **kwargs: object) -> NoReturn:
        """A hook the truncation point does not read (R6 reads the two above only)."""
        raise AssertionError("get_offset_truncation_state read a hook it should not")

    latest_epoch = log_start_offset = truncate = truncate_fully_and_start_at = _not_read
    process_partition_data = build_fetch = build_offsets_for_leader_epoch = _not_read
    build_list_offsets = _not_read


def tp_impl(given: Inputs, variant: Variant) -> Outcome:
    """AbstractFetcherThread.get_offset_truncation_state; a Truncating fetcher's fetch offset
    is the follower's HW, the spec's hw[f] of case (a)."""
    probe = _TruncationProbe(log_of(given, given["leo"], given["hw"]), given["hw"])
    answer = EpochEndOffset(TP, Errors.NONE, given["leader_epoch"], given["leader_offset"])
    state = probe.get_offset_truncation_state(TP, answer)
    return state.offset, int(state.truncation_completed)


# --------------------------------------------------------------------- partition harnesses


class _AcceptingIsrChannel:
    """Accepts every ISR change at once (isr=sync), remembering what was proposed."""

    def __init__(self) -> None:
        self.proposed: list[frozenset[int]] = []

    def send_alter_partition(self, item: AlterPartitionItem) -> AlterPartitionItemResponse:
        """Record the proposal and accept it."""
        self.proposed.append(frozenset(item.new_isr))
        return AlterPartitionItemResponse(
            item.tp, Errors.NONE, 1, item.leader_epoch, item.new_isr, item.partition_epoch + 1
        )


class _NoPurgatory:
    """Delayed operations that there are none of."""

    def check_and_complete_all(self, tp: TopicPartition) -> None:
        """Nothing waits."""

    def check_and_complete_fetch(self, tp: TopicPartition) -> None:
        """Nothing waits."""


def partition(
    variant: Variant, log: Log, min_isr: int = 1
) -> tuple[Partition, _AcceptingIsrChannel]:
    """Broker 1's Partition over `log`, with followers 2 and 3 and an accepting ISR channel."""
    channel = _AcceptingIsrChannel()
    config = BrokerConfig(replica_lag_time_max_ms=LAG_MS, min_insync_replicas=min_isr)
    part = Partition(
        TP, 1, SimClock(NOW_MS), config, variant, lambda tp: log, channel, _NoPurgatory()
    )
    part.log = log
    part.assignment = (1, *FOLLOWERS)
    part.remote_replicas = {f: Replica(f) for f in FOLLOWERS}
    return part, channel


def as_leader(part: Partition, isr: frozenset[int], leso: int) -> Partition:
    """Broker 1 leads epoch 0 with this ISR, its epoch having started at leso."""
    part.leader_replica_id = 1
    part.leader_epoch = 0
    part.leader_epoch_start_offset = leso
    part.in_sync_replica_ids = isr
    return part


# ------------------------------------------------------------ become-follower truncation

BF_INPUTS = ("old_leader", "old_epoch", "new_leader", "new_epoch")


def bf_domain(v: Vars) -> Z3:
    """Broker 1 knew leader -1 (none), 1 (itself), 2 or 3 in epoch -1..MAX_EPOCH-1 and is told
    to follow 2 or 3 in a newer epoch (an older or equal one is ignored before this)."""
    return z3.And(
        z3.Or([v["old_leader"] == x for x in (UNDEF, 1, *FOLLOWERS)]),
        between(v["old_epoch"], UNDEF, MAX_EPOCH - 1),
        z3.Or([v["new_leader"] == x for x in FOLLOWERS]),
        between(v["new_epoch"], v["old_epoch"] + 1, MAX_EPOCH),
    )


def bf_oracle(v: Vars, out: Vars) -> Z3:
    """BecomeLeaderOrFollower, new epoch, not leader: fetchState' = "Truncating" (no skip)."""
    return out["truncates"] == 1


def bf_impl(given: Inputs, variant: Variant) -> Outcome:
    """Partition.make_follower: True makes the replica manager start truncation."""
    part, _ = partition(variant, Log(TP))
    old = given["old_leader"]
    part.leader_replica_id = None if old == UNDEF else old
    part.leader_epoch = given["old_epoch"]
    state = LeaderAndIsrPartitionState(
        TP, 1, given["new_leader"], given["new_epoch"], (given["new_leader"],), 0, (1, *FOLLOWERS)
    )
    return (int(part.make_follower(state)),)


# ------------------------------------------------------------------------- log truncation

LT_INPUTS = (*cache_names(CACHE_SIZE), "leo", "target")


def lt_domain(v: Vars) -> Z3:
    """A follower's cache over a log of 0..MAX_OFFSET records, cut at any offset 0..MAX_OFFSET
    (at, below or past its LEO)."""
    return z3.And(
        between(v["leo"], 0, MAX_OFFSET),
        cache_domain(v, CACHE_SIZE, MAX_EPOCH, v["leo"]),
        between(v["target"], 0, MAX_OFFSET),
    )


def lt_oracle(v: Vars, out: Vars) -> Z3:
    """Truncate(r, to): the log keeps Min2(to, LEO) records, and the cache keeps its entries
    that start below that (TruncateFromEnd, a prefix: starts increase), also when `to` is at
    or past the LEO (Kafka 2.6.3, the KAFKA-10706 fix)."""
    cut = min2(v["target"], v["leo"])
    kept = z3.Sum([z3.If(z3.And(i < v["n"], v[f"s{i}"] < cut), 1, 0) for i in range(CACHE_SIZE)])
    return z3.And(out["leo"] == cut, out["kept"] == kept)


def lt_impl(given: Inputs, variant: Variant) -> Outcome:
    """Partition.truncate_to (ReplicaFetcherThread.truncate's call, R6) over the input's log:
    its LEO and the epoch-cache entries left after."""
    log = log_of(given, given["leo"], 0)
    part, _ = partition(variant, log)
    part.truncate_to(given["target"])
    return log.log_end_offset, len(log.leader_epoch_cache.entries)


# ----------------------------------------------------------------------------- HW advance

HW_INPUTS = ("leo", "hw", *(f"{x}{f}" for f in FOLLOWERS for x in ("rleo", "isr", "recent")))


def hw_domain(v: Vars) -> Z3:
    """Leader LEO 0..MAX_OFFSET, its HW <= LEO; per follower: its LEO as the leader knows it
    (-1: not heard from this term, else <= the leader's LEO), in the ISR or not, caught up within
    replica.lag.time.max.ms or not. One not heard from and outside the ISR has not caught up:
    the spec counts only followers heard from as catching up (CatchingUp)."""
    parts = [between(v["leo"], 0, MAX_OFFSET), between(v["hw"], 0, v["leo"])]
    for f in FOLLOWERS:
        rleo, isr, recent = v[f"rleo{f}"], v[f"isr{f}"], v[f"recent{f}"]
        parts += [between(rleo, UNDEF, v["leo"]), boolean(isr), boolean(recent)]
        parts.append(z3.Implies(z3.And(rleo == UNDEF, isr == 0), recent == 0))
    return z3.And(parts)


def hw_oracle(v: Vars, out: Vars) -> Z3:
    """out ∈ NewHws(l, log, remoteLeo, isr): NewHw over the ISR plus any followers catching up."""
    choices = []
    for picks in [(a, b) for a in (0, 1) for b in (0, 1)]:
        counted, allowed = [], []
        for f, pick in zip(FOLLOWERS, picks, strict=True):
            rleo, isr = v[f"rleo{f}"], v[f"isr{f}"]
            if pick:
                allowed.append(z3.And(isr == 0, rleo >= 0))
            counted.append((z3.Or(isr == 1, bool(pick)), rleo))
        isr_hw = v["leo"]
        for on, rleo in counted:
            isr_hw = z3.If(z3.And(on, rleo < isr_hw), rleo, isr_hw)
        new_hw = z3.If(isr_hw > v["hw"], isr_hw, v["hw"])
        choices.append(z3.And(*allowed, out["hw"] == new_hw))
    return z3.Or(choices)


def hw_impl(given: Inputs, variant: Variant) -> Outcome:
    """Partition.maybe_increment_leader_hw on the input; the answer is the leader's HW after."""
    isr = frozenset({1} | {f for f in FOLLOWERS if given[f"isr{f}"]})
    part = as_leader(partition(variant, log_of({}, given["leo"], given["hw"]))[0], isr, 0)
    for f in FOLLOWERS:
        replica = part.remote_replicas[f]
        replica.log_end_offset = given[f"rleo{f}"]
        replica.last_caught_up_time_ms = NOW_MS if given[f"recent{f}"] else NOW_MS - LAG_MS - 1
    assert part.log is not None
    part.maybe_increment_leader_hw(part.log, NOW_MS)
    return (part.log.high_watermark,)


# ------------------------------------------------------------------- ISR expansion guard

ISR_INPUTS = ("leo", "hw", "leso", "fetch_offset", "in_isr")


def isr_domain(v: Vars) -> Z3:
    """Leader LEO 0..MAX_OFFSET; its HW, its epoch's start offset and the follower's fetch
    offset all <= LEO (a larger fetch offset is out of range); the follower in the ISR or not."""
    leo = v["leo"]
    return z3.And(
        between(leo, 0, MAX_OFFSET),
        between(v["hw"], 0, leo),
        between(v["leso"], 0, leo),
        between(v["fetch_offset"], 0, leo),
        boolean(v["in_isr"]),
    )


def isr_oracle(v: Vars, out: Vars) -> Z3:
    """LeaderHandleFetch's `expand` (the ISR write itself aside): f ∉ isr, offset >= hw, >= Leso."""
    expand = z3.And(v["in_isr"] == 0, v["fetch_offset"] >= v["hw"], v["fetch_offset"] >= v["leso"])
    return out["proposed"] == z3.If(expand, 1, 0)


def isr_impl(given: Inputs, variant: Variant) -> Outcome:
    """Partition.update_follower_fetch_state for follower 2; the answer is whether the leader
    proposed an ISR change (the only one a fetch can propose adds the follower)."""
    isr = frozenset({1, 2} if given["in_isr"] else {1})
    part, channel = partition(variant, log_of({}, given["leo"], given["hw"]))
    as_leader(part, isr, given["leso"])
    offset = given["fetch_offset"]
    part.update_follower_fetch_state(2, offset, 0, NOW_MS, given["leo"])
    return (int(bool(channel.proposed)),)


# ---------------------------------------------------------------------- follower HW update

FHW_INPUTS = ("leo", "records", "leader_hw")


def fhw_domain(v: Vars) -> Z3:
    """A follower of LEO 0..MAX_OFFSET fetches 0..(MAX_OFFSET - LEO) records; the leader's HW
    in the answer is any 0..MAX_OFFSET (it may be above what was sent)."""
    return z3.And(
        between(v["leo"], 0, MAX_OFFSET),
        between(v["records"], 0, MAX_OFFSET - v["leo"]),
        between(v["leader_hw"], 0, MAX_OFFSET),
    )


def fhw_oracle(v: Vars, out: Vars) -> Z3:
    """FollowerHandleFetchResponse: hw' = Min2(m.hw, Len(newLog))."""
    return out["hw"] == min2(v["leader_hw"], v["leo"] + v["records"])


def fhw_impl(given: Inputs, variant: Variant) -> Outcome:
    """ReplicaFetcherThread.process_partition_data on follower 1 of leader 2; the follower's
    HW after."""
    clock, config = SimClock(NOW_MS), BrokerConfig()
    logs = LogManager(config)
    manager = ReplicaManager(1, clock, config, variant, logs, _AcceptingIsrChannel(), [TP], int)
    part = Partition(
        TP, 1, clock, config, variant, logs.get_or_create_log, manager.isr_channel, manager
    )
    manager.all_partitions[TP] = part
    log = part.create_log_if_not_exists()
    leo = given["leo"]
    log.entries = [LogEntry(o, 0, o) for o in range(leo)]
    log.next_offset = leo
    part.make_follower(LeaderAndIsrPartitionState(TP, 1, 2, 0, (2,), 0, (1, *FOLLOWERS)))
    fetcher = ReplicaFetcherThread(1, 2, manager, config, variant, clock, set(), int)
    records = tuple(LogEntry(o, 0, o) for o in range(leo, leo + given["records"]))
    hw = given["leader_hw"]
    fetcher.process_partition_data(
        TP, leo, FetchPartitionResponse(TP, Errors.NONE, hw, hw, 0, records)
    )
    return (log.high_watermark,)


# ---------------------------------------------------------------------- fetch isolation bound

FB_INPUTS = ("leo", "hw", "fetch_offset", "max_records", "consumer")


def fb_domain(v: Vars) -> Z3:
    """A leader log of 0..MAX_OFFSET records, HW <= LEO, a fetch from 0..LEO for at most
    1..MAX_OFFSET records, by a follower (0) or a consumer (1)."""
    leo = v["leo"]
    return z3.And(
        between(leo, 0, MAX_OFFSET),
        between(v["hw"], 0, leo),
        between(v["fetch_offset"], 0, leo),
        between(v["max_records"], 1, MAX_OFFSET),
        boolean(v["consumer"]),
    )


def fb_oracle(v: Vars, out: Vars, consumer_bound: str = "hw") -> Z3:
    """A follower reads SubSeq(log, o + 1, Min2(LEO, o + MaxFetchRecords)) (LeaderHandleFetch);
    a consumer only what is Exposed, the offsets below the HW. consumer_bound="leo" is a
    deliberately wrong oracle."""
    o, window = v["fetch_offset"], v["fetch_offset"] + v["max_records"]
    follower_end = min2(v["leo"], window)
    consumer_end = min2(v[consumer_bound], window)
    end = z3.If(v["consumer"] == 1, consumer_end, follower_end)
    count = z3.If(end > o, end - o, 0)
    first = z3.If(count > 0, o, UNDEF)
    return z3.And(out["first"] == first, out["count"] == count)


def fb_impl(given: Inputs, variant: Variant) -> Outcome:
    """Log.read with the follower's (LEO) or the consumer's (HW) isolation; (first offset read
    or -1, records read), the offsets read being checked to run on without a gap."""
    log = log_of({}, given["leo"], given["hw"])
    isolation = FETCH_HIGH_WATERMARK if given["consumer"] else FETCH_LOG_END
    max_bytes = given["max_records"] * RECORD_SIZE_BYTES
    records = log.read(given["fetch_offset"], max_bytes, isolation, True)
    offsets = [r.offset for r in records]
    if offsets and offsets != list(range(offsets[0], offsets[0] + len(offsets))):
        return (-2, len(offsets))  # a gap: no oracle allows a first offset of -2
    return (offsets[0] if offsets else UNDEF, len(offsets))


# ---------------------------------------------------------------------- acks=-1 completion

ACK_INPUTS = ("offset", "hw", "isr_size", "min_isr")
WAIT, ACKED, NOT_ENOUGH = 0, 1, 2
"""The answer to an acks=-1 produce: none yet, success, NOT_ENOUGH_REPLICAS_AFTER_APPEND."""


def ack_domain(v: Vars) -> Z3:
    """A record appended at offset 0..MAX_OFFSET-1, the leader's HW 0..MAX_OFFSET, an ISR of
    1..MAX_ISR brokers, min.insync.replicas 1..MAX_ISR (the ISR may have shrunk since)."""
    return z3.And(
        between(v["offset"], 0, MAX_OFFSET - 1),
        between(v["hw"], 0, MAX_OFFSET),
        between(v["isr_size"], 1, MAX_ISR),
        between(v["min_isr"], 1, MAX_ISR),
    )


def ack_oracle(v: Vars, out: Vars) -> Z3:
    """Produce with acks = -1 waits (no early-ack) until DoneProduces (p.offset < newHw); then
    AckedProduces acks it only if Cardinality(isr) >= MinIsr."""
    done = v["offset"] < v["hw"]
    answer = z3.If(done, z3.If(v["isr_size"] >= v["min_isr"], ACKED, NOT_ENOUGH), WAIT)
    return out["answer"] == answer


def ack_impl(given: Inputs, variant: Variant) -> Outcome:
    """ReplicaManager's choice to answer at once or park a DelayedProduce, then the delayed
    produce's check, Partition.check_enough_replicas_reach_offset."""
    clock, config = SimClock(NOW_MS), BrokerConfig(min_insync_replicas=given["min_isr"])
    manager = ReplicaManager(
        1, clock, config, variant, LogManager(config), _AcceptingIsrChannel(), [TP], int
    )
    offset = given["offset"]
    appended = {TP: LogAppendResult(offset, offset, 0, Errors.NONE)}
    if not manager._delayed_produce_request_required(-1, {TP: (offset,)}, appended):
        return (ACKED,)  # answered at once with the append's result, which succeeded
    log = log_of({}, MAX_OFFSET, given["hw"])
    isr = frozenset(range(1, given["isr_size"] + 1))
    part = as_leader(partition(variant, log, given["min_isr"])[0], isr, 0)
    done, error = part.check_enough_replicas_reach_offset(offset + 1)
    if not done:
        return (WAIT,)
    return (ACKED if error is Errors.NONE else NOT_ENOUGH,)


# ---------------------------------------------------------------------------- the checks

CHECKS: Mapping[str, Check] = {
    c.name: c
    for c in (
        Check("end_offset_for", "EndOffsetFor", EOF_INPUTS, ("epoch", "offset"), eof_domain,
              eof_oracle, eof_impl),
        Check("end_offset_for_kip101", "EndOffsetForKip101", EOF_INPUTS, ("epoch", "offset"),
              eof_domain, eof_kip101_oracle, eof_kip101_impl),
        Check("truncation_point", "TruncationPoint", TP_INPUTS, ("offset", "complete"),
              tp_domain, truncation_point, tp_impl),
        Check("become_follower_truncation", "BecomeLeaderOrFollower", BF_INPUTS, ("truncates",),
              bf_domain, bf_oracle, bf_impl),
        Check("log_truncation", "Truncate, TruncateFromEnd", LT_INPUTS, ("leo", "kept"),
              lt_domain, lt_oracle, lt_impl),
        Check("hw_advance", "NewHws", HW_INPUTS, ("hw",), hw_domain, hw_oracle, hw_impl),
        Check("isr_expansion", "LeaderHandleFetch", ISR_INPUTS, ("proposed",), isr_domain,
              isr_oracle, isr_impl),
        Check("follower_hw", "FollowerHandleFetchResponse", FHW_INPUTS, ("hw",), fhw_domain,
              fhw_oracle, fhw_impl),
        Check("fetch_bound", "LeaderHandleFetch, Exposed", FB_INPUTS, ("first", "count"),
              fb_domain, fb_oracle, fb_impl),
        Check("acks_completion", "Produce, AckedProduces", ACK_INPUTS, ("answer",), ack_domain,
              ack_oracle, ack_impl),
    )
}  # fmt: skip
"""Every decision checked, by name."""

BUG_CHECKS: Mapping[str, str] = {
    "early-ack": "acks_completion",
    "hw-from-non-isr": "hw_advance",
    "no-leso-guard": "isr_expansion",
    "hw-not-clamped": "follower_hw",
    "skip-same-leader-truncation": "become_follower_truncation",
    "kafka-10706": "log_truncation",
}
"""The check that finds each seeded bug of impl/variants.py."""

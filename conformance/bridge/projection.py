"""The projection: implementation state onto the spec's variables (one name per concept).

`Projector(cluster, tp).project()` returns the value of every variable of
spec/KafkaReplication.tla for partition `tp`, as tlavalue values (so it encodes to ITF and
compares with TLC's states). Per-replica functions are tuples indexed by broker id - 1, as TLC
prints functions over 1..n. The spec's history variables (nextRecord, acked, committed,
crashes, uncleanShutdowns, removed) are not implementation state: the projector keeps them,
from what `observe` sees after each step, exactly as the spec's actions update them.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

from kreplica.conformance.tla.tlavalue import Record, Value
from kreplica.impl.cluster import Cluster
from kreplica.impl.epoch_cache import EpochEntry
from kreplica.impl.fetch_state import ReplicaState
from kreplica.impl.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    ListOffsetsRequest,
    ListOffsetsResponse,
    LogEntry,
    Message,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from kreplica.impl.network import Envelope

NO_LEADER = -1
# leaderEpoch of a broker that hosts no Partition (the spec's NotHosted); a hosted Partition
# that has accepted no leader epoch yet shows its own -1 (NoEpoch), as Kafka's does.
NOT_HOSTED = -2
UNDEFINED = -1
DELETED_RECORD = 0
"""The record id of the spec's entry Deleted: an offset below a log's start offset."""
DELETED = Record({"epoch": UNDEFINED, "record": DELETED_RECORD})
"""The spec's entry at an offset below a log's start offset (its record is deleted)."""
CLIENT = -1
CONTROLLER = 0
FETCH_STATES = {ReplicaState.TRUNCATING: "Truncating", ReplicaState.FETCHING: "Fetching"}

State = dict[str, Any]  # spec variable -> its TLA+ value (see tlavalue.Value)
T = TypeVar("T")


class OnVariables(Generic[T]):
    """A pure function of a few spec variables of a state that remembers its last answer.
    Called on a state whose variables it reads are the very objects of the last call (values
    are immutable, and `Projector.project` shares the values a step left unchanged), it
    answers at once. The function is given only the variables it declares (`reads`), so one
    it reads without declaring is a KeyError, never a stale answer."""

    __slots__ = ("_answer", "_read", "_values", "function", "reads")

    def __init__(self, function: Callable[[State], T], reads: tuple[str, ...]) -> None:
        self.function = function
        self.reads = reads
        self._read = operator.itemgetter(*reads, *reads[:1])  # always a tuple, one too many
        self._values: tuple[Any, ...] | None = None
        self._answer: Any = None

    def __call__(self, s: State) -> T:
        """The function's answer on `s`."""
        values = self._read(s)  # the reads, then the first again (compared, not passed on)
        last = self._values
        if last is not None and all(map(operator.is_, values, last)):
            return self._answer  # type: ignore[no-any-return]
        answer = self.function(dict(zip(self.reads, values[: len(self.reads)], strict=True)))
        self._values, self._answer = values, answer
        return answer


@dataclass
class History:
    """What the spec records as history: counters, acks, reads, removals, in-flight requests.
    Its sets only grow, and a request, once remembered, is never changed (the projection makes
    their values again only when they grew, `Projector._history_set`, `_made_of`)."""

    next_record: int = 1
    acked: set[int] = field(default_factory=set)
    committed: set[tuple[int, int]] = field(default_factory=set)
    crashes: int = 0
    unclean_shutdowns: int = 0
    removed: set[tuple[int, int, str]] = field(default_factory=set)
    # (src, src incarnation, dst, correlation id) of a request -> what its response echoes
    # (a restarted broker numbers its requests from the start again)
    requests: dict[tuple[int, int, int, int], dict[str, Value]] = field(default_factory=dict)
    # (follower, its incarnation, leader) -> the correlation id of the follower's latest
    # fetcher request to that leader: it has given up on the earlier ones (Projector._msgs)
    latest: dict[tuple[int, int, int], int] = field(default_factory=dict)
    produce_records: dict[int, tuple[int, ...]] = field(default_factory=dict)


class ReplicaView(NamedTuple):
    """What the spec's variables hold of one replica, read from its broker and its disk
    (`Projector._view`)."""

    log: tuple[Value, ...]
    hw: int
    epoch_cache: tuple[Value, ...]
    recovery_point: int
    hw_checkpoint: int
    offline: bool
    alive: bool
    incarnation: int
    leader_epoch: int
    leader: int
    fetch_state: str
    isr: frozenset[int]
    remote_leo: tuple[int, ...]
    pending: frozenset[Value]


TIMESTAMPS: dict[int, Value] = {LATEST_TIMESTAMP: "LATEST", EARLIEST_TIMESTAMP: "EARLIEST"}
"""A LIST_OFFSETS timestamp in the spec's words."""


def log_start_of(s: State, r: int) -> int:
    """LogStart(r): how many Deleted entries begin replica r's log in state `s`."""
    log = s["log"][r - 1]
    if not log or log[0]["record"] != DELETED_RECORD:  # most logs: nothing deleted
        return 0
    return next((o for o, e in enumerate(log) if e["record"] != DELETED_RECORD), len(log))


@functools.lru_cache(maxsize=1 << 16)
def _log_record(epoch: int, record: int) -> Record:
    """The spec's log entry [epoch, record] (one object per pair, shared by every log)."""
    return Record({"epoch": epoch, "record": record})


def _entry(entry: LogEntry) -> Record:
    """A log's record as the spec's log entry."""
    return _log_record(entry.epoch, entry.record_id)


@functools.lru_cache(maxsize=1 << 16)
def _cache_record(epoch: int, start_offset: int) -> Record:
    """The spec's epoch-cache entry [epoch, startOffset] (one object per pair)."""
    return Record({"epoch": epoch, "startOffset": start_offset})


def _cache_entry(entry: EpochEntry) -> Record:
    """An epoch-cache entry as the spec's."""
    return _cache_record(entry.epoch, entry.start_offset)


def delivered_to_running(cluster: Cluster, envelope: Envelope) -> bool:
    """True if the envelope goes to a running broker's current incarnation: only such
    messages are in the spec's `msgs` (the others will be dropped on arrival)."""
    dst = envelope.dst
    if dst in (CLIENT, CONTROLLER) or not cluster.is_alive(dst):
        return False
    return envelope.dst_incarnation == cluster.brokers[dst].incarnation


def is_fetcher_request(payload: Message) -> bool:
    """A request of a follower's fetcher to its leader (a consumer's FETCH is not one)."""
    if isinstance(payload, FetchRequest | ListOffsetsRequest):
        return payload.replica_id >= 0
    return isinstance(payload, OffsetsForLeaderEpochRequest)


class Projector:
    """Projects one partition of a running cluster onto the spec's variables."""

    def __init__(self, cluster: Cluster, tp: TopicPartition) -> None:
        self.cluster = cluster
        self.tp = tp
        self.replicas = tuple(sorted(cluster.assignment[tp]))
        if self.replicas != tuple(range(1, len(self.replicas) + 1)):
            raise ValueError(f"the spec numbers replicas 1..n; {tp} is on {self.replicas}")
        self.history = History()
        self._unknown = tuple(-1 for _ in self.replicas)
        """remoteLeo of a replica that does not lead."""
        self._logs: dict[int, tuple[tuple[Any, ...], tuple[Value, ...], tuple[Value, ...]]] = {}
        """Replica -> (what its log's projection was made of, the log, the epoch cache): see
        `_log_values`."""
        self._messages: dict[int, tuple[Envelope, tuple[Any, ...], list[Record]]] = {}
        """id of an envelope in flight -> (the envelope, what its spec messages were made of,
        those messages): see `_spec_messages`."""
        self._observed: dict[int, Envelope] = {}
        """The envelopes in flight that `observe_network` has seen, by id."""
        self._committed_from: dict[int, tuple[Any, int]] = {}
        """A leader replica -> what its log was made of and its HW when its committed records
        were last added to the history (`_observe_logs`)."""
        self._last: State | None = None
        """The state `project` returned last (its unchanged values are shared, see there)."""
        self._views: dict[int, ReplicaView] = {}
        """Each replica's view in the state returned last (`step` reuses those of the
        replicas a step cannot have touched)."""
        self._sets: dict[str, tuple[int, frozenset[Value]]] = {}
        """A history set's size and its value when last made (see `_history_set`)."""
        self.observe_network()

    # ------------------------------------------------------------------ per replica

    def _log_values(self, r: int) -> tuple[tuple[Value, ...], int, tuple[Value, ...], int]:
        """(log, hw, epochCache, recoveryPoint) of replica r, from its disk."""
        log = self.cluster.log(r, self.tp)
        if log is None:
            return (), 0, (), 0
        # The log and the cache change in few steps: their values are made again only when
        # what they are made of changed (records and cache entries are immutable NamedTuples,
        # so equal tuples of them project to equal values), and are otherwise the same objects
        # as before, which later comparisons see at once (`project`).
        made_of = (log, log.log_start_offset, tuple(log.entries),
                   tuple(log.leader_epoch_cache.entries))  # fmt: skip
        cached = self._logs.get(r)
        if cached is not None and cached[0] == made_of:
            return cached[1], log.high_watermark, cached[2], log.recovery_point
        entries = (DELETED,) * log.log_start_offset + tuple(map(_entry, log.entries))
        cache = tuple(map(_cache_entry, log.leader_epoch_cache.entries))
        self._logs[r] = (made_of, entries, cache)
        return entries, log.high_watermark, cache, log.recovery_point

    def _hw_checkpoint(self, r: int) -> int:
        """The HW in replica r's replication-offset-checkpoint file (0 if it holds none)."""
        return self.cluster.log_managers[r].hw_checkpoint.get(self.tp, 0)

    def _offline(self, r: int) -> bool:
        """True if replica r's log dir has failed (until the broker restarts)."""
        log = self.cluster.log(r, self.tp)
        return log is not None and log.offline

    def _role(self, r: int) -> tuple[int, int, str, frozenset[int], tuple[int, ...]]:
        """(leaderEpoch, leader, fetchState, isr, remoteLeo) of replica r as it knows them."""
        unknown = self._unknown
        partition = self.cluster.partition(r, self.tp) if self.cluster.is_alive(r) else None
        if partition is None:
            return NOT_HOSTED, NO_LEADER, "Idle", frozenset(), unknown
        leader = partition.leader_replica_id
        leader = NO_LEADER if leader is None else leader
        isr = frozenset(partition.in_sync_replica_ids)
        if leader == r:
            remote = partition.remote_replicas
            leos = tuple(
                remote[f].log_end_offset if f != r and f in remote else -1 for f in self.replicas
            )
            return partition.leader_epoch, r, "Idle", isr, leos
        # a follower's ISR is what it holds: Kafka's makeFollower empties it (the spec's {})
        return partition.leader_epoch, leader, self._fetch_state(r, leader), isr, unknown

    def _fetch_state(self, r: int, leader: int) -> str:
        """The fetcher's state for tp on follower r: Truncating, Fetching, Failed or Idle."""
        manager = self.cluster.brokers[r].replica_manager.replica_fetcher_manager
        if self.tp in manager.failed_partitions:
            return "Failed"
        fetcher = manager.fetchers.get(leader)
        state = fetcher.partition_states.state_value(self.tp) if fetcher is not None else None
        return "Idle" if state is None else FETCH_STATES[state.state]

    # ------------------------------------------------------------------ the partition

    def _pending(self, r: int) -> frozenset[Value]:
        """acks=-1 produces waiting in replica r's purgatory, if it runs: [record, replica,
        offset]."""
        if not self.cluster.is_alive(r):
            return frozenset()
        waiting: set[Value] = set()
        log = self.cluster.log(r, self.tp)
        purgatory = self.cluster.brokers[r].replica_manager.delayed_produce_purgatory
        for op in purgatory.pending():
            status = op.produce_status.get(self.tp)
            if status is None or not status.acks_pending or log is None:
                continue
            offset = status.required_offset - 1
            if log.log_start_offset <= offset < log.log_end_offset:
                record = log.entries[offset - log.log_start_offset].record_id
                waiting.add(Record({"record": record, "replica": r, "offset": offset}))
        return frozenset(waiting)

    def _view(self, r: int) -> ReplicaView:
        """Replica r's values of the spec's variables, from its broker and its disk."""
        log, hw, cache, recovery_point = self._log_values(r)
        alive = self.cluster.is_alive(r)
        return ReplicaView(
            log, hw, cache, recovery_point, self._hw_checkpoint(r), self._offline(r), alive,
            self.cluster.incarnations[r], *self._role(r), self._pending(r),
        )  # fmt: skip

    def _msgs(self, in_flight: list[Envelope]) -> frozenset[Value]:
        """Messages in flight that the spec models, as its message records.

        A follower's fetcher awaits at most one request at a time: once it has sent a newer
        request to the same leader it has given up on the earlier ones (a request timeout), as
        the spec's sending actions do. A given-up request is shown with incarnation 0 (its
        answer will be dropped), and an answer to one is not shown (it is lost)."""
        out: set[Value] = set()
        kept = {}
        cluster = self.cluster
        for envelope in in_flight:
            # answers to the client, which pile up, are out at the first test
            if envelope.dst > CONTROLLER and delivered_to_running(cluster, envelope):
                out.update(self._spec_messages(envelope))
                kept[id(envelope)] = self._messages[id(envelope)]
        self._messages = kept  # forget the envelopes no longer in flight
        return frozenset(out)

    def _delivered_to_running(self, envelope: Envelope) -> bool:
        """True if the envelope goes to a running broker's current incarnation."""
        return delivered_to_running(self.cluster, envelope)

    def shown(self, envelope: Envelope) -> bool:
        """True if the envelope is in the spec's `msgs`: it goes to a running broker's current
        incarnation, concerns tp, and is not the answer to a request given up on."""
        return self._delivered_to_running(envelope) and bool(self._spec_messages(envelope))

    def _spec_messages(self, envelope: Envelope) -> list[Record]:
        """The spec's records for the parts of one envelope that concern tp. An envelope is
        immutable, so they are made again only when what else they are made of changed (see
        `_made_of`), and are otherwise the same objects as in the previous state."""
        made_of = self._made_of(envelope)
        cached = self._messages.get(id(envelope))
        if cached is not None and cached[0] is envelope and cached[1] == made_of:
            return cached[2]
        messages = self._make_spec_messages(envelope)
        self._messages[id(envelope)] = (envelope, made_of, messages)
        return messages

    def _made_of(self, envelope: Envelope) -> tuple[Any, ...]:
        """What an envelope's spec messages depend on besides the envelope: whether the
        fetcher awaits the request (or the answer's request), and the request as the history
        remembers it (None: not yet), exactly as `_make_spec_messages` reads them; for a
        fetcher request the history does not hold yet, the cluster too (its sender's epoch,
        `_request_epoch`), so it is never reused."""
        src, dst = envelope.src, envelope.dst
        payload = envelope.payload
        if isinstance(payload, LeaderAndIsrRequest):
            return ()
        corr = getattr(payload, "correlation_id", -1)
        if is_fetcher_request(payload):
            key = (src, envelope.src_incarnation, dst, corr)
            seen = self.history.requests.get(key)
            if seen is None:
                return (object(),)  # equal to nothing: made again
            return (self.awaited(src, envelope.src_incarnation, dst, corr), seen)
        awaited = self.awaited(dst, envelope.dst_incarnation, src, corr)
        return (awaited, self.history.requests.get((dst, envelope.dst_incarnation, src, corr)))

    def _make_spec_messages(self, envelope: Envelope) -> list[Record]:
        """The spec's records for the parts of one envelope that concern tp."""
        src, dst, payload = envelope.src, envelope.dst, envelope.payload
        base: dict[str, Value] = {"src": src, "dst": dst}
        if isinstance(payload, LeaderAndIsrRequest):
            return [
                Record({"type": "LeaderAndIsr", **base, "epoch": s.leader_epoch,
                        "leader": s.leader, "isr": frozenset(s.isr)})
                for s in payload.partition_states if s.tp == self.tp
            ]  # fmt: skip
        corr = getattr(payload, "correlation_id", -1)
        if is_fetcher_request(payload):
            awaited = self.awaited(src, envelope.src_incarnation, dst, corr)
            inc = envelope.src_incarnation if awaited else 0
            seen = self.history.requests.get((src, envelope.src_incarnation, dst, corr))
            if seen is not None:  # the request as it was when sent (its epoch may be implicit)
                return [Record({**seen, "inc": inc})]
            return [Record({**r, "inc": inc}) for r in self._request_messages(envelope)]
        if not self.awaited(dst, envelope.dst_incarnation, src, corr):
            return []  # the answer to a request its sender has given up on: lost
        echo = self.history.requests.get((dst, envelope.dst_incarnation, src, corr), {})
        if isinstance(payload, FetchResponse) and echo.get("type") == "FetchRequest":
            return [
                Record({"type": "FetchResponse", **base, "epoch": echo["epoch"],
                        "offset": echo["offset"], "error": p.error.name,
                        "entries": tuple(map(_entry, p.records)),
                        "hw": p.high_watermark,
                        "logStart": p.log_start_offset if p.error.name == "NONE" else UNDEFINED})
                for p in payload.partitions if p.tp == self.tp
            ]  # fmt: skip
        if isinstance(payload, OffsetsForLeaderEpochResponse) and "requested" in echo:
            return [
                Record({"type": "OffsetsForLeaderEpochResponse", **base, "epoch": echo["epoch"],
                        "requested": echo["requested"], "error": p.error.name,
                        "leaderEpoch": p.leader_epoch, "endOffset": p.end_offset})
                for p in payload.partitions if p.tp == self.tp
            ]  # fmt: skip
        if isinstance(payload, ListOffsetsResponse) and echo.get("type") == "ListOffsetsRequest":
            return [
                Record({"type": "ListOffsetsResponse", **base, "epoch": echo["epoch"],
                        "error": p.error.name, "timestamp": echo["timestamp"],
                        "offset": p.offset if p.error.name == "NONE" else UNDEFINED})
                for p in payload.partitions if p.tp == self.tp
            ]  # fmt: skip
        return []

    def awaited(self, follower: int, incarnation: int, leader: int, corr: int) -> bool:
        """False if `follower` (in `incarnation`) has sent `leader` a later fetcher request
        than the one numbered `corr`: it has given up on that one."""
        latest = self.history.latest.get((follower, incarnation, leader))
        return latest is None or corr >= latest

    def _request_messages(self, envelope: Envelope) -> list[Record]:
        """A fetcher request's records for tp, carrying the sender's incarnation."""
        src, payload = envelope.src, envelope.payload
        request: dict[str, Value] = {"src": src, "dst": envelope.dst,
                                     "inc": envelope.src_incarnation}  # fmt: skip
        if isinstance(payload, FetchRequest):
            return [
                Record({"type": "FetchRequest", **request, **self._request_epoch(src, p),
                        "offset": p.fetch_offset})
                for p in payload.partitions if p.tp == self.tp
            ]  # fmt: skip
        if isinstance(payload, OffsetsForLeaderEpochRequest):
            return [
                Record({"type": "OffsetsForLeaderEpochRequest", **request,
                        **self._request_epoch(src, p), "requested": p.leader_epoch})
                for p in payload.partitions if p.tp == self.tp
            ]  # fmt: skip
        if isinstance(payload, ListOffsetsRequest):
            return [
                Record({"type": "ListOffsetsRequest", **request, **self._request_epoch(src, p),
                        "timestamp": TIMESTAMPS[p.timestamp]})
                for p in payload.partitions if p.tp == self.tp
            ]  # fmt: skip
        return []

    def _request_epoch(self, src: Value, part: object) -> dict[str, Value]:
        """The sender's current leader epoch (sent, or remembered when fencing is off)."""
        epoch = getattr(part, "current_leader_epoch", None)
        if epoch is None:
            partition = self.cluster.partition(int(src), self.tp)  # type: ignore[arg-type]
            epoch = partition.leader_epoch if partition is not None else -1
        return {"epoch": epoch}

    # ------------------------------------------------------------------ the state

    def project(self) -> State:
        """Every spec variable of the current state. A variable whose value equals its value
        in the state returned last is that same object: most steps change a few variables,
        and the judges compare states and remember what they computed for a value
        (`invariants`), which is then a glance."""
        self._views = {r: self._view(r) for r in self.replicas}
        return self._shared(self._project(self._msgs(self.cluster.in_flight())))

    def step(
        self,
        before: State,
        cause: str | None,
        scope: Set[int] | None = None,
        sent: list[Envelope] | None = None,
    ) -> State:
        """`observe`, then `project`: the state after a step, each log and the messages in
        flight read once for both. With a `scope` (`touch.brokers_touched`), only the
        replicas in it are read again: the step cannot have changed the others, whose views
        are those of the state returned last. With `sent`, the step changed the network on
        the client's links alone, by sending `sent` (`touch.client_links_only`): the spec's
        messages are those of the state returned last, and only `sent` is noted."""
        touched = self.replicas if scope is None else [r for r in self.replicas if r in scope]
        for r in touched:
            self._views[r] = self._view(r)
        self._observe_logs(before, cause, touched)
        if sent is not None and self._last is not None:
            self._note_sent(sent)
            return self._shared(self._project(self._last["msgs"]))
        in_flight = self.cluster.in_flight()
        self.observe_network(in_flight)
        return self._shared(self._project(self._msgs(in_flight)))

    def client_step(self, sent: list[Envelope]) -> State:
        """The state after a step that ran the client's and the network's code alone
        (`touch.client_only`): every value the last state's, the same objects; the history
        notes the requests it sent (`sent`) as `observe_network` would."""
        if self._last is None:
            raise ValueError("a client step's state is the last one: project one first")
        self._note_sent(sent)
        self._last = dict(self._last)
        return self._last

    def _note_sent(self, sent: list[Envelope]) -> None:
        """Note the envelopes a step sent, as `observe_network` notes envelopes new in flight."""
        for envelope in sent:
            self._observed[id(envelope)] = envelope
            self._note(envelope)

    def _shared(self, state: State) -> State:
        """`state`, each value equal to the last state's replaced by that one (see `project`)."""
        last = self._last
        if last is not None:
            for name, value in state.items():
                old = last[name]
                if value is not old and value == old:
                    state[name] = old
        self._last = state
        return state

    def _history_set(self, name: str, items: set[Any]) -> frozenset[Value]:
        """A history set as a value (history sets only grow: the same size, the same set)."""
        cached = self._sets.get(name)
        if cached is not None and cached[0] == len(items):
            return cached[1]
        value = frozenset(items)
        self._sets[name] = (len(items), value)
        return value

    def _project(self, msgs: frozenset[Value]) -> State:
        """Every spec variable of the current state from the replicas' views (`_views`) and
        the spec's messages in flight (`_msgs`), made afresh but for the logs and the epoch
        caches (`_log_values`)."""
        views = self._views
        (log, hw, cache, recovery_point, checkpoint, offline, alive, incarnation, epoch,
         leader, fetch_state, isr, remote_leo, pending) = zip(
            *(views[r] for r in self.replicas), strict=True)  # fmt: skip
        reg = self.cluster.controller.partitions[self.tp]
        h = self.history
        return {
            "log": log,
            "hw": hw,
            "hwCheckpoint": checkpoint,
            "epochCache": cache,
            "recoveryPoint": recovery_point,
            "leaderEpoch": epoch,
            "leader": leader,
            "fetchState": fetch_state,
            "isr": isr,
            "remoteLeo": remote_leo,
            "alive": frozenset(itertools.compress(self.replicas, alive)),
            "logDirOffline": frozenset(itertools.compress(self.replicas, offline)),
            "incarnation": incarnation,
            "ctrlLive": frozenset(self.replicas) & self.cluster.controller.live_brokers,
            "ctrlLeader": reg.leader,
            "ctrlEpoch": reg.leader_epoch,
            "ctrlIsr": frozenset(reg.isr),
            "msgs": msgs,
            "nextRecord": h.next_record,
            "pending": frozenset().union(*pending),
            "acked": self._history_set("acked", h.acked),
            "committed": self._history_set("committed", h.committed),
            "crashes": h.crashes,
            "uncleanShutdowns": h.unclean_shutdowns,
            "removed": self._removed(),
        }  # fmt: skip

    def _removed(self) -> frozenset[Value]:
        """The spec's `removed`: the records removed from a log, and why."""
        h = self.history
        cached = self._sets.get("removed")
        if cached is not None and cached[0] == len(h.removed):
            return cached[1]
        value = frozenset(
            Record({"replica": r, "record": rec, "cause": cause}) for r, rec, cause in h.removed
        )
        self._sets["removed"] = (len(h.removed), value)
        return value

    # ------------------------------------------------------------------ history

    def observe_network(self, in_flight: list[Envelope] | None = None) -> None:
        """Remember the requests now in flight (`in_flight`, by default the cluster's): their
        responses echo them; each follower's latest request to each leader, and acked
        produces. An envelope is read once: a second look changes nothing (a fetcher
        request: max, first wins; a PRODUCE: its records again; its answer: the records
        of a request read before it, acked again)."""
        observed: dict[int, Envelope] = {}
        seen = self._observed
        for envelope in self.cluster.in_flight() if in_flight is None else in_flight:
            observed[id(envelope)] = envelope
            if seen.get(id(envelope)) is not envelope:
                self._note(envelope)
        self._observed = observed

    def _note(self, envelope: Envelope) -> None:
        """Remember what the history keeps of one envelope in flight (`observe_network`)."""
        h, payload = self.history, envelope.payload
        corr = getattr(payload, "correlation_id", -1)
        if isinstance(payload, ProduceRequest):
            h.produce_records[payload.correlation_id] = tuple(
                rid for p in payload.partitions if p.tp == self.tp for rid in p.record_ids
            )
        elif isinstance(payload, ProduceResponse) and envelope.dst == CLIENT:
            if any(p.tp == self.tp and p.error.name == "NONE" for p in payload.partitions):
                h.acked.update(h.produce_records.get(payload.correlation_id, ()))
        elif is_fetcher_request(payload):
            link = (envelope.src, envelope.src_incarnation, envelope.dst)
            h.latest[link] = max(corr, h.latest.get(link, corr))
            key = (*link, corr)
            if key not in h.requests:
                for message in self._request_messages(envelope):
                    h.requests[key] = dict(message)

    def observe(self, before: State, cause: str | None) -> None:
        """Update the history after a step; `cause` names a log cut ('unclean-shutdown')."""
        for r in self.replicas:
            self._views[r] = self._view(r)
        self._observe_logs(before, cause, self.replicas)
        self.observe_network()

    def _observe_logs(self, before: State, cause: str | None, touched: Sequence[int]) -> None:
        """`observe`'s reading of the logs, given the replicas the step may have touched
        (their views just made: the others' logs and HWs did not move): the records removed
        from a log, and the records a leader's HW has passed."""
        for r in touched:
            old, new = before["log"][r - 1], self._views[r].log
            if len(new) < len(old):
                for entry in old[len(new) :]:
                    if entry != DELETED:
                        self.history.removed.add((r, entry["record"], cause or "truncation"))
        for r in touched:
            partition = self.cluster.partition(r, self.tp) if self.cluster.is_alive(r) else None
            if partition is not None and partition.leader_replica_id == r:
                log = self.cluster.log(r, self.tp)
                if log is not None:
                    # the same log, records and HW as when last added: nothing new to add
                    read = (self._logs[r][0], log.high_watermark)
                    if self._committed_from.get(r) == read:
                        continue
                    start = log.log_start_offset
                    for o in range(start, log.high_watermark):
                        self.history.committed.add((o, log.entries[o - start].record_id))
                    self._committed_from[r] = read

    def note_produce_delivered(self) -> None:
        """A PRODUCE reached a broker: the spec's producer moves to its next record."""
        self.history.next_record += 1

    def note_fault(self, unclean: bool) -> None:
        """Count a crash or an unclean shutdown."""
        if unclean:
            self.history.unclean_shutdowns += 1
        else:
            self.history.crashes += 1

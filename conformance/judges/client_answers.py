"""What a client may be told: every answer a broker sends to the client, judged at once.

The spec's variables say what the leader holds; they do not carry the answers a producer or a
consumer gets. This module is the oracle for those answers (issue #14, "record what matters"):
each PRODUCE, FETCH and LIST_OFFSETS answer a broker puts on the network towards the client is
checked against the projected state right after the step that sent it, field by field, as
Kafka 2.6.3's `ReplicaManager` builds it (`appendRecords`, `fetchMessages`,
`fetchOffsetForTimestamp`). A wrong error code, offset, HW or record is a finding, named
`ClientAnswersMatchLeader` like an invariant, and the fuzzer stops the run on it.

Answers are judged by what the client cannot be told otherwise:
- success only from a broker that leads, with exactly the leader's records and HW (R1, R15);
- an acks=-1 success only once the HW covers the records (R14), and with ISR >= min.isr;
- the errors only in the states that cause them, with Kafka's -1 placeholders for offsets;
- and on time (`held_request_violations`, with the recorder's `arrivals`): a request waits in
  a purgatory only while Kafka's DelayedProduce or DelayedFetch would (R14, R16), and no
  longer than its timeout (R17); a FETCH is not answered empty before its max_wait_ms.

The log start offset is the leader's `LogStart` (clients delete records, DeleteRecords): a
read below it is OFFSET_OUT_OF_RANGE, LIST_OFFSETS EARLIEST answers it, and a PRODUCE's answer
carries the one at its append (the recorder's `Arrival.log_start`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

from kreplica.conformance.bridge.local_partitions import PartitionRead, is_local, local_read
from kreplica.conformance.bridge.projection import CLIENT, NOT_HOSTED, State, log_start_of
from kreplica.conformance.judges.arrivals import Arrival
from kreplica.conformance.judges.invariants import leso_of
from kreplica.impl.cluster import Cluster
from kreplica.impl.config import BrokerConfig
from kreplica.impl.messages import (
    EARLIEST_TIMESTAMP,
    INTERNAL_TOPICS,
    LATEST_TIMESTAMP,
    RECORD_SIZE_BYTES,
    Errors,
    FetchPartitionData,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    Message,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from kreplica.impl.network import Envelope

NAME = "ClientAnswersMatchLeader"
"""The name a wrong answer to the client is reported under."""


def client_answer_violations(
    cluster: Cluster,
    tp: TopicPartition,
    sent: Sequence[Envelope],
    s: State,
    arrivals: Mapping[int, Arrival] | None = None,
) -> list[tuple[str, str]]:
    """The wrong answers among `sent` (one step's messages), judged in the state after it;
    `arrivals` (the recorder's) says how long a FETCH has waited."""
    found = []
    now = cluster.clock.now_ms
    for envelope in sent:
        if envelope.dst != CLIENT:
            continue
        correlation_id = getattr(envelope.payload, "correlation_id", -1)
        request = cluster.client.pending.get(correlation_id)
        if request is None:
            continue  # an answer to a request already answered (a duplicate)
        arrival = (arrivals or {}).get(correlation_id)
        waited = None if arrival is None else now - arrival.time_ms
        start = None if arrival is None else arrival.log_start
        moved = _segment_moved(cluster, arrival)
        reason = judge(
            request.request, envelope.payload, envelope.src, tp, s, cluster, waited, start, moved
        )
        if reason is not None:
            found.append((NAME, f"broker {envelope.src}: {reason}"))
    return found


def held_request_violations(
    cluster: Cluster,
    s: State,
    arrivals: Mapping[int, Arrival],
    answered: Set[int],
    arrived: int | None = None,
) -> list[tuple[str, str]]:
    """The client requests a running broker still holds, unanswered, though Kafka would have
    answered them by now (judged in the state after each step; `arrived`: the request the
    step delivered):
    - an acks=-1 PRODUCE waits in the produce purgatory until its records are under the HW
      or the broker stops leading (DelayedProduce.tryComplete, R14), at most its timeout_ms
      (R17);
    - a consumer FETCH with max_wait_ms is answered at once if what fetchMessages reads
      reaches min_bytes, or on an error; else it waits in the fetch purgatory until it could
      complete (`_fetch_ready`, DelayedFetch.tryComplete, R16), at most max_wait_ms;
    - any other request (acks=1, a FETCH that may not wait, LIST_OFFSETS) is answered in the
      step it arrives; an acks=0 PRODUCE never is.
    A request at a broker that has stopped since is lost with it."""
    found = []
    now = cluster.clock.now_ms
    for correlation_id, arrival in arrivals.items():
        b = arrival.broker
        if (
            correlation_id in answered
            or not cluster.is_alive(b)
            or cluster.brokers[b].incarnation != arrival.incarnation
        ):
            continue
        held = now - arrival.time_ms
        moved = _segment_moved(cluster, arrival)
        reason = _held_too_long(arrival.request, b, s, held, correlation_id == arrived, moved)
        if reason is not None:
            found.append((NAME, f"broker {b}: {reason}"))
    return found


def _segment_moved(cluster: Cluster, arrival: Arrival | None) -> bool:
    """A FETCH's partition log at its broker is on another segment than when the FETCH
    arrived: it restarted at another offset since (R9). The fetch offset then lies on an older
    or newer segment than the end offset, and DelayedFetch completes it (case C)."""
    if arrival is None or arrival.segment is None:
        return False
    request = arrival.request
    if not isinstance(request, FetchRequest) or len(request.partitions) != 1:
        return False
    log = cluster.log(arrival.broker, request.partitions[0].tp)
    return log is not None and log.base_offset != arrival.segment


def _held_too_long(
    request: Message, b: int, s: State, held_ms: int, just_arrived: bool, moved: bool = False
) -> str | None:
    """Why a request broker b has held for held_ms (since this step: `just_arrived`; `moved`:
    its log moved to another segment since it arrived) should have been answered, or None."""
    if isinstance(request, ProduceRequest) and request.acks == 0:
        return None
    if isinstance(request, ProduceRequest) and request.acks == -1:
        [part] = request.partitions
        what = f"an acks=-1 PRODUCE of {part.record_ids} still waits, though"
        if held_ms >= request.timeout_ms:
            return f"{what} its timeout_ms ({request.timeout_ms}) is over"
        if _produce_ready(part.record_ids, b, s):
            return f"{what} the HW ({s['hw'][b - 1]}) has passed it or the broker stepped down"
        return None
    if (
        isinstance(request, FetchRequest)
        and request.replica_id < 0
        and request.max_wait_ms > 0
        and len(request.partitions) == 1  # the fuzzer's FETCH of two partitions never waits
    ):
        [asked] = request.partitions
        what = f"a FETCH at {asked.fetch_offset} still waits, though"
        readable = _readable_bytes(asked.fetch_offset, asked.max_bytes, b, s)
        if just_arrived and (readable is None or readable >= request.min_bytes):
            read = "an error" if readable is None else f"{readable} byte(s)"
            return f"{what} fetchMessages read {read} (min_bytes {request.min_bytes})"
        if held_ms >= request.max_wait_ms:
            return f"{what} its max_wait_ms ({request.max_wait_ms}) is over"
        if _fetch_ready(request, asked.fetch_offset, asked.max_bytes, b, s, moved):
            return f"{what} it could complete (HW {s['hw'][b - 1]}, min_bytes {request.min_bytes})"
        return None
    return f"a {type(request).__name__} was not answered in the step it arrived"


def _readable_bytes(offset: int, max_bytes: int, b: int, s: State) -> int | None:
    """What ReplicaManager.fetchMessages reads for a consumer at broker b: the bytes of the
    records below the HW, at least one record (minOneMessage) and else at most max_bytes;
    None for a read that fails (not the leader, an offset out of range)."""
    if _read_error(offset, b, s) is not Errors.NONE:
        return None
    return _read_count(max(0, s["hw"][b - 1] - offset), max_bytes) * RECORD_SIZE_BYTES


def _produce_ready(records: tuple[int, ...], b: int, s: State) -> bool:
    """DelayedProduce.tryComplete (R14): the broker no longer leads, or its HW covers the
    records (a record it does not hold was refused and answered at once). At a broker whose
    log dir failed nothing tries it again (only expiry answers it)."""
    if _offline(s, b):
        return False
    if not _leads(s, b):
        return True
    offset = _offset_of(s, b, records[0]) if records else None
    return offset is not None and s["hw"][b - 1] >= offset + len(records)


def judge(
    request: Message,
    answer: Message,
    b: int,
    tp: TopicPartition,
    s: State,
    cluster: Cluster,
    waited_ms: int | None = None,
    log_start: int | None = None,
    moved: bool = False,
) -> str | None:
    """Why `answer` from broker b to `request` is wrong in state s, or None if it is right
    (`waited_ms`: how long the request has been at the broker, if known; `log_start`: b's
    log start offset when the request arrived, if known; `moved`: b's log moved to another
    segment since)."""
    if isinstance(request, ProduceRequest) and isinstance(answer, ProduceResponse):
        start = log_start_of(s, b) if log_start is None else log_start
        wrong = _produce(request, answer, b, tp, s, cluster.brokers[b].config, start)
        return wrong or _produce_too_early(request, answer, waited_ms)
    if isinstance(request, FetchRequest) and isinstance(answer, FetchResponse):
        wrong = _fetch(request, answer, b, tp, s, cluster)
        return wrong or _fetch_too_early(request, answer, b, s, waited_ms, moved)
    if isinstance(request, ListOffsetsRequest) and isinstance(answer, ListOffsetsResponse):
        return _list_offsets(request, answer, b, tp, s)
    return f"{type(answer).__name__} answers a {type(request).__name__}"


# ------------------------------------------------------------------------------ the state


def _leads(s: State, b: int) -> bool:
    return b in s["alive"] and s["leader"][b - 1] == b


def _offline(s: State, b: int) -> bool:
    """Broker b hosts the Partition and its log dir has failed: the Partition is offline
    (getPartitionOrException answers KAFKA_STORAGE_ERROR; one not hosted is not the leader)."""
    return b in s["logDirOffline"] and s["leaderEpoch"][b - 1] != NOT_HOSTED


def _offset_of(s: State, b: int, record: int) -> int | None:
    for offset, entry in enumerate(s["log"][b - 1]):
        if entry["record"] == record:
            return offset
    return None


# ------------------------------------------------------------------------------ PRODUCE

NO_APPEND_INFO = frozenset(
    {
        Errors.INVALID_RECORD,
        Errors.INVALID_REQUIRED_ACKS,
        Errors.INVALID_TOPIC_EXCEPTION,
        Errors.MESSAGE_TOO_LARGE,
        Errors.RECORD_LIST_TOO_LARGE,
        Errors.CORRUPT_MESSAGE,
        Errors.KAFKA_STORAGE_ERROR,
    }
)
"""Refusals Kafka answers with base offset and log start offset -1: the request's own checks
(validateRecords, the acks, an internal topic) and appendToLocalLog's UnknownLogAppendInfo."""


def _produce(
    request: ProduceRequest,
    answer: ProduceResponse,
    b: int,
    tp: TopicPartition,
    s: State,
    config: BrokerConfig,
    log_start: int,
) -> str | None:
    """ReplicaManager.appendRecords and DelayedProduce.onComplete, seen by the producer
    (`log_start`: the leader's log start offset at the append, which the answer carries)."""
    if request.acks == 0:
        return "an acks=0 PRODUCE was answered"
    asked = {p.tp: p.record_ids for p in request.partitions}
    got = {p.tp: p for p in answer.partitions}
    if set(got) != set(asked):
        return f"PRODUCE answered for {sorted(map(str, got))}, asked {sorted(map(str, asked))}"
    for ptp, part in got.items():
        records = asked[ptp]
        allowed = _produce_errors(request.acks, records, ptp, b, tp, s, config)
        if part.error not in allowed:
            names = " or ".join(sorted(e.name for e in allowed))
            if allowed == {Errors.REQUEST_TIMED_OUT}:
                names += f" (the HW {s['hw'][b - 1]} has not passed it: only expiry answers, R14)"
            return f"PRODUCE of {records} answered {part.error.name}, expected {names}"
        fields = (part.base_offset, part.log_start_offset)
        wrong = _produce_offsets(fields, part.error, records, ptp, b, tp, s, log_start)
        if wrong is not None:
            return f"PRODUCE of {records} {wrong}"
        if part.error is Errors.NONE:
            wrong = _produce_success(request.acks, records, part.base_offset, b, s)
            if wrong is not None:
                return wrong
    return None


def _produce_errors(
    acks: int,
    records: tuple[int, ...],
    ptp: TopicPartition,
    b: int,
    tp: TopicPartition,
    s: State,
    config: BrokerConfig,
) -> set[Errors]:
    """The errors the state allows in the answer for one partition (R14, R17)."""
    if ptp == tp and not records:  # KafkaApis' validateRecords, before anything else
        return {Errors.INVALID_RECORD}
    if acks not in (-1, 1):
        return {Errors.INVALID_REQUIRED_ACKS}
    if ptp.topic in INTERNAL_TOPICS:
        return {Errors.INVALID_TOPIC_EXCEPTION}
    if ptp != tp:
        return {Errors.UNKNOWN_TOPIC_OR_PARTITION}
    if _offline(s, b):  # refused (getPartitionOrException), or parked and expired
        return {Errors.KAFKA_STORAGE_ERROR, Errors.REQUEST_TIMED_OUT}
    if not _leads(s, b):
        return {Errors.NOT_LEADER_OR_FOLLOWER, Errors.UNKNOWN_TOPIC_OR_PARTITION}
    offset = _offset_of(s, b, records[0])
    if offset is None:  # a leader refuses an acks=-1 produce under min.isr, then a large batch
        if acks == -1 and len(s["isr"][b - 1]) < config.min_insync_replicas:
            return {Errors.NOT_ENOUGH_REPLICAS}
        if len(records) * RECORD_SIZE_BYTES > config.max_message_bytes:
            return {Errors.MESSAGE_TOO_LARGE}
        return {Errors.NOT_ENOUGH_REPLICAS} if acks == -1 else {Errors.NONE}
    if acks == 1:
        return {Errors.NONE}
    if s["hw"][b - 1] < offset + len(records):  # only expiry answers what the HW has not passed
        return {Errors.REQUEST_TIMED_OUT}
    if len(s["isr"][b - 1]) < config.min_insync_replicas:
        return {Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND}
    return {Errors.NONE}


def _produce_too_early(
    request: ProduceRequest, answer: ProduceResponse, waited_ms: int | None
) -> str | None:
    """Why a REQUEST_TIMED_OUT came before the produce's timeout_ms (DelayedProduce expires
    when its timeout passes, R17), or None."""
    if waited_ms is None or waited_ms >= request.timeout_ms:
        return None
    if any(p.error is Errors.REQUEST_TIMED_OUT for p in answer.partitions):
        return (
            f"PRODUCE answered REQUEST_TIMED_OUT after {waited_ms} ms, before its timeout_ms "
            f"({request.timeout_ms})"
        )
    return None


def _produce_success(
    acks: int, records: tuple[int, ...], base: int, b: int, s: State
) -> str | None:
    """Why a success is wrong: the records are not where the leader holds them, or an acks=-1
    success came before the HW passed them (R14)."""
    held = [e["record"] for e in s["log"][b - 1][max(base, 0) : base + len(records)]]
    if base < 0 or held != list(records):
        return f"PRODUCE of {records} answered at base offset {base}, where the leader holds {held}"
    if acks == -1 and s["hw"][b - 1] < base + len(records):
        return f"acks=-1 PRODUCE of {records} answered before the HW ({s['hw'][b - 1]}) passed it"
    return None


def _produce_offsets(
    fields: tuple[int, int],
    error: Errors,
    records: tuple[int, ...],
    ptp: TopicPartition,
    b: int,
    tp: TopicPartition,
    s: State,
    log_start: int,
) -> str | None:
    """Why the answer's (base offset, log start offset) are not Kafka's, or None. Kafka gives
    -1 for what a broker refused without a leader log of its own; the append's offset and the
    leader's log start for an append that was made (a DelayedProduce keeps both, whatever
    error it ends with)."""
    appended = _offset_of(s, b, records[0]) if ptp == tp and records and b in s["alive"] else None
    if error is Errors.KAFKA_STORAGE_ERROR and appended is not None:
        expected = [(-1, -1), (appended, log_start)]  # refused, or parked before the failure
    elif error in NO_APPEND_INFO or ptp != tp:
        expected = [(-1, -1)]
    elif error is Errors.NOT_ENOUGH_REPLICAS:
        expected = [(-1, log_start)]
    elif error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.UNKNOWN_TOPIC_OR_PARTITION):
        # refused by a follower, or parked and failed when its leader stepped down (R17),
        # when its records may be truncated already
        expected = [(-1, -1)]
        if appended is not None:
            expected.append((appended, log_start))
        elif fields[0] >= 0 and fields[1] == log_start:
            return None
    else:
        expected = [(appended if appended is not None else -1, log_start)]
    if fields in expected:
        return None
    return (
        f"answered {error.name} with (base offset, log start) {fields}, "
        f"expected {' or '.join(map(str, expected))}"
    )


# ------------------------------------------------------------------------------ FETCH


def _fetch(
    request: FetchRequest,
    answer: FetchResponse,
    b: int,
    tp: TopicPartition,
    s: State,
    cluster: Cluster,
) -> str | None:
    """ReplicaManager.fetchMessages for a consumer: each partition's records below its
    leader's HW (R1, R15), read in the request's order within what the response's byte limit
    has left, at least one record until a partition gave some (readFromLocalLog). t-0 is read
    in the spec's state, a broker's local partition in its own log (`local_partitions`)."""
    if request.replica_id >= 0:
        return "a follower's FETCH answer went to the client"
    asked = [p.tp for p in request.partitions]
    got = {p.tp: p for p in answer.partitions}
    if sorted(got) != sorted(asked) or len(got) != len(answer.partitions):
        return f"FETCH of {sorted(map(str, asked))} answered for {sorted(map(str, got))}"
    limit, min_one = request.max_bytes, True
    for part in request.partitions:
        if part.tp == tp:
            read = _spec_read(part.fetch_offset, b, s)
        elif is_local(part.tp):
            read = local_read(cluster, b, part.tp, part.fetch_offset)
        else:
            read = PartitionRead(Errors.UNKNOWN_TOPIC_OR_PARTITION)
        answered = got[part.tp]
        wrong = _fetch_part(part, answered, read, min(part.max_bytes, limit), min_one)
        if wrong is not None:
            return wrong
        if answered.records:
            min_one = False
            limit = max(0, limit - len(answered.records) * RECORD_SIZE_BYTES)
    return None


def _spec_read(offset: int, b: int, s: State) -> PartitionRead:
    """A consumer's read of t-0 at broker b from `offset`, in the spec's state s."""
    error = _read_error(offset, b, s)
    if error is not Errors.NONE:
        return PartitionRead(error)
    hw = s["hw"][b - 1]
    readable = tuple(
        (offset + i, e["epoch"], e["record"]) for i, e in enumerate(s["log"][b - 1][offset:hw])
    )
    return PartitionRead(Errors.NONE, hw, log_start_of(s, b), readable)


def _fetch_part(
    asked: FetchPartitionData,
    part: FetchPartitionResponse,
    read: PartitionRead,
    max_bytes: int,
    min_one: bool,
) -> str | None:
    """Why one partition's part of a consumer's FETCH answer is not `read`, limited to
    `max_bytes` (at least one record if `min_one`), or None."""
    where = f"FETCH of {asked.tp} at {asked.fetch_offset}"
    if part.error is not read.error:
        return f"{where} answered {part.error.name}, expected {read.error.name}"
    # the HW, the last stable offset (the HW: no transactions) and the log start; Kafka's
    # LogReadResult of a failed read has -1 for each (Log.UnknownOffset)
    offsets = (part.high_watermark, part.last_stable_offset, part.log_start_offset)
    leader = (read.high_watermark, read.high_watermark, read.log_start)
    if offsets != leader:
        name = part.error.name
        return f"{where} answered {name} with (HW, LSO, log start) {offsets}, expected {leader}"
    if part.error is not Errors.NONE:
        return None if not part.records else f"{where} answered {part.error.name} with records"
    expected = list(read.readable[: _read_count(len(read.readable), max_bytes, min_one)])
    got = [(e.offset, e.epoch, e.record_id) for e in part.records]
    if got != expected:
        hw = read.high_watermark
        return (
            f"{where} (HW {hw}, {max_bytes} bytes left) answered records {got}, expected {expected}"
        )
    return None


def _read_error(offset: int, b: int, s: State) -> Errors:
    """The error of a consumer's read at broker b (ReplicaManager.readFromLocalLog): its log
    dir failed, not the leader, an offset outside [log start, LEO], or none."""
    if _offline(s, b):
        return Errors.KAFKA_STORAGE_ERROR
    if not _leads(s, b):
        return Errors.NOT_LEADER_OR_FOLLOWER
    if not log_start_of(s, b) <= offset <= len(s["log"][b - 1]):
        return Errors.OFFSET_OUT_OF_RANGE
    return Errors.NONE


def _read_count(available: int, max_bytes: int, min_one: bool = True) -> int:
    """How many of `available` records a consumer's read returns: at most max_bytes of them,
    but at least one if `min_one` (minOneMessage: no partition of the FETCH gave any yet)."""
    most = max_bytes // RECORD_SIZE_BYTES
    return min(available, most if most > 0 else int(min_one))


def _fetch_ready(
    request: FetchRequest, offset: int, max_bytes: int, b: int, s: State, moved: bool
) -> bool:
    """DelayedFetch.tryComplete for a consumer's FETCH at broker b (R16): the broker no longer
    leads, the HW is not at the fetch offset and lies on another segment (`moved`: the log
    restarted since the FETCH arrived; one segment per log, docs/impl.md), or the bytes up to
    the HW, each partition's capped at its max_bytes, reach min_bytes. A FETCH above the HW
    on the same segment waits. Not at a broker whose log dir failed: nothing tries its
    delayed operations again, they expire."""
    hw: int = s["hw"][b - 1]
    if _offline(s, b):
        return False  # nothing tries a delayed operation of an offline Partition again
    if not _leads(s, b) or (hw != offset and moved):
        return True
    return min(max(0, hw - offset) * RECORD_SIZE_BYTES, max_bytes) >= request.min_bytes


def _fetch_too_early(
    request: FetchRequest,
    answer: FetchResponse,
    b: int,
    s: State,
    waited_ms: int | None,
    moved: bool = False,
) -> str | None:
    """Why a successful FETCH answer came before max_wait_ms with less than min_bytes and no
    reason to complete early (ReplicaManager.fetchMessages, DelayedFetch), or None."""
    if waited_ms is None or waited_ms >= request.max_wait_ms or len(request.partitions) != 1:
        return None  # (the fuzzer's FETCH of two partitions never waits)
    [asked] = request.partitions
    [part] = answer.partitions
    if part.error is not Errors.NONE:
        return None
    if len(part.records) * RECORD_SIZE_BYTES >= request.min_bytes:
        return None  # fetchMessages answers at once what it read, if it reaches min_bytes
    if _fetch_ready(request, asked.fetch_offset, asked.max_bytes, b, s, moved):
        return None
    return (
        f"FETCH at {asked.fetch_offset} answered after {waited_ms} ms with "
        f"{len(part.records)} record(s) (HW {s['hw'][b - 1]}), before its max_wait_ms "
        f"({request.max_wait_ms}) and below its min_bytes ({request.min_bytes})"
    )


# ------------------------------------------------------------------------------ LIST_OFFSETS


def _list_offsets(
    request: ListOffsetsRequest, answer: ListOffsetsResponse, b: int, tp: TopicPartition, s: State
) -> str | None:
    """Partition.fetchOffsetForTimestamp for a consumer: LATEST is the HW, EARLIEST the log
    start, in the leader's epoch; OFFSET_NOT_AVAILABLE while the HW is below the epoch's start
    offset (S13)."""
    [asked] = request.partitions
    [part] = answer.partitions
    if part.tp != asked.tp or asked.tp != tp:
        return f"LIST_OFFSETS of {asked.tp} answered for {part.tp}"
    expected: tuple[Errors, int, int]
    if _offline(s, b):
        expected = (Errors.KAFKA_STORAGE_ERROR, -1, -1)
    elif not _leads(s, b):
        expected = (Errors.NOT_LEADER_OR_FOLLOWER, -1, -1)
    elif asked.timestamp == EARLIEST_TIMESTAMP:
        expected = (Errors.NONE, log_start_of(s, b), s["leaderEpoch"][b - 1])
    elif asked.timestamp != LATEST_TIMESTAMP:
        return None
    elif leso_of(s, b) > s["hw"][b - 1]:
        expected = (Errors.OFFSET_NOT_AVAILABLE, -1, -1)
    else:
        expected = (Errors.NONE, s["hw"][b - 1], s["leaderEpoch"][b - 1])
    got = (part.error, part.offset, part.leader_epoch)
    if got != expected:
        return (
            f"LIST_OFFSETS ({'EARLIEST' if asked.timestamp == EARLIEST_TIMESTAMP else 'LATEST'}) "
            f"answered {got[0].name} {got[1:]} , expected {expected[0].name} {expected[1:]}"
        )
    return None

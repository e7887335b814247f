"""The spec's safety properties, evaluated on a projected state (same names as the spec).

Each invariant takes a state (the spec's variables, as `Projector.project` returns them) and
returns None when it holds, or a one-line reason when it does not. `LeaderEpochsOnlyGrow` and
`IsrJoinsCaughtUp` are action properties and take the state before and after a step.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping
from typing import Any

from kreplica.conformance.bridge.projection import DELETED_RECORD, OnVariables, log_start_of
from kreplica.impl.variants import Variant

State = dict[str, Any]
Check = Callable[[State], str | None]


def _replicas(s: State) -> range:
    return range(1, len(s["log"]) + 1)


def _in_office(s: State, leader: int) -> bool:
    """The controller's leader has taken office in the controller's epoch."""
    i = leader - 1
    return (
        leader in s["alive"]
        and leader == s["ctrlLeader"]
        and s["leader"][i] == leader
        and s["leaderEpoch"][i] == s["ctrlEpoch"]
    )


def _records(s: State, r: int) -> set[int]:
    return {e["record"] for e in s["log"][r - 1]} - {DELETED_RECORD}


def _deleted_below(s: State) -> int:
    """The offsets below this one are DeletedOffset: below some replica's log start."""
    return max(log_start_of(s, r) for r in _replicas(s))


def _holds(s: State, r: int, offset: int, record: int, below: int) -> bool:
    """HoldsCommitted: r holds the record at its offset, unless a client deleted it (`below`:
    `_deleted_below(s)`)."""
    log = s["log"][r - 1]
    return offset < below or (offset < len(log) and log[offset]["record"] == record)


def logs_agree(a: Any, b: Any) -> bool:
    """The two logs have the same LEO and agree wherever both still hold a record: the
    same, but for records only one of them has deleted."""
    return len(a) == len(b) and agree(a, b, len(a))


def agree(a: Any, b: Any, n: int) -> bool:
    """Agree: two logs agree on their first n offsets wherever both still hold a record."""
    if a is b:
        return True
    return all(map(_agree_at, a[:n], b[:n]))


def _agree_at(x: Any, y: Any) -> bool:
    """Two logs' entries at one offset agree: the same, or one of them deleted. (Entries are
    mostly the same objects, `projection._log_record`: `is` answers first.)"""
    return x is y or x == y or DELETED_RECORD in (x["record"], y["record"])


def high_watermark_within_log(s: State) -> str | None:
    """HW <= LEO on every replica."""
    for r in _replicas(s):
        if s["hw"][r - 1] > len(s["log"][r - 1]):
            return f"replica {r}: HW {s['hw'][r - 1]} > LEO {len(s['log'][r - 1])}"
    return None


def acked_records_never_lost(s: State) -> str | None:
    """A record acknowledged to a producer is in the log of the leader in office, unless a
    client deleted it."""
    below = _deleted_below(s)
    for leader in _replicas(s):
        if _in_office(s, leader):
            deleted = {record for offset, record in s["committed"] if offset < below}
            lost = set(s["acked"]) - _records(s, leader) - deleted
            if lost:
                return f"acked records {sorted(lost)} missing from leader {leader}"
    return None


def committed_records_on_isr(s: State) -> str | None:
    """Every ISR member holds every committed record at its offset."""
    below, committed = _deleted_below(s), sorted(s["committed"])
    for r in sorted(s["ctrlIsr"]):
        for offset, record in committed:
            if not _holds(s, r, offset, record, below):
                return f"ISR member {r} lacks committed record {record} at offset {offset}"
    return None


def consistent_reads(s: State) -> str | None:
    """A record read below a HW never changes, and the leader in office holds it."""
    seen: dict[int, int] = {}
    committed = sorted(s["committed"])
    for offset, record in committed:
        if seen.setdefault(offset, record) != record:
            return f"offset {offset} was read as record {seen[offset]} and as {record}"
    for leader in _replicas(s):
        if _in_office(s, leader):
            below = _deleted_below(s)
            for offset, record in committed:
                if not _holds(s, leader, offset, record, below):
                    return f"leader {leader} lost record {record} read at offset {offset}"
    return None


def log_matching(s: State) -> str | None:
    """Two logs that agree on the epoch at an offset agree on the whole prefix, wherever
    both still hold a record."""
    logs = s["log"]
    for a in _replicas(s):
        for b in _replicas(s):
            o = _unmatched(logs[a - 1], logs[b - 1])
            if o is not None:
                return f"replicas {a} and {b} agree on epoch at offset {o} but not before"
    return None


def _unmatched(la: Any, lb: Any) -> int | None:
    """The first offset o at which two logs have the same epoch but do not agree up to o:
    the first offset at or after their first disagreement whose epochs match (linear; the
    same o as trying `agree(la, lb, o + 1)` at each offset in turn)."""
    if la is lb:
        return None
    n = min(len(la), len(lb))
    first = next((k for k in range(n) if not _agree_at(la[k], lb[k])), None)
    if first is None:
        return None
    return next((o for o in range(first, n) if la[o]["epoch"] == lb[o]["epoch"]), None)


def followers_match_leader(s: State) -> str | None:
    """Once truncation is done, a follower's log is a prefix of its leader's."""
    for f in _replicas(s):
        leader = s["leader"][f - 1]
        if (
            leader != f
            and leader in s["alive"]
            and f in s["alive"]
            and s["fetchState"][f - 1] == "Fetching"
            and s["leader"][leader - 1] == leader
            and s["leaderEpoch"][f - 1] == s["leaderEpoch"][leader - 1]
        ):
            mine, theirs = s["log"][f - 1], s["log"][leader - 1]
            if len(mine) > len(theirs) or not agree(mine, theirs, len(mine)):
                return f"follower {f}'s log is not a prefix of leader {leader}'s"
    return None


def epoch_cache_ordered(s: State) -> str | None:
    """The epoch cache is ordered: epochs rise, start offsets do not fall."""
    for r in _replicas(s):
        cache = s["epochCache"][r - 1]
        for x, y in itertools.pairwise(cache):
            if not (x["epoch"] < y["epoch"] and x["startOffset"] <= y["startOffset"]):
                return f"replica {r}'s epoch cache is out of order"
    return None


def epoch_cache_matches_log(s: State) -> str | None:
    """Every record a replica still holds (not deleted below its log start) has the epoch of
    the last epoch-cache entry that starts at or below its offset, and there is one: the cache
    describes the log (R2, R4, R5; what KAFKA-10706's fix keeps true)."""
    for r in _replicas(s):
        cache = s["epochCache"][r - 1]
        for o, entry in enumerate(s["log"][r - 1]):
            if entry["record"] == DELETED_RECORD:
                continue
            at = [c["epoch"] for c in cache if c["startOffset"] <= o]
            if not at:
                return f"replica {r}'s epoch cache has no entry at or below offset {o}"
            if at[-1] != entry["epoch"]:
                return (
                    f"replica {r}: offset {o} has epoch {entry['epoch']}, its epoch cache says "
                    f"{at[-1]}"
                )
    return None


def leader_epochs_only_grow(before: State, after: State) -> str | None:
    """The controller's epoch and each running replica's epoch never fall (an action property)."""
    if after["ctrlEpoch"] < before["ctrlEpoch"]:
        return "the controller's leader epoch fell"
    if after["leaderEpoch"] is before["leaderEpoch"]:
        return None  # the same epochs (the projection shares an unchanged value): none fell
    for r in sorted(set(before["alive"]) & set(after["alive"])):
        if after["leaderEpoch"][r - 1] < before["leaderEpoch"][r - 1]:
            return f"replica {r}'s leader epoch fell"
    return None


def leso_of(s: State, leader: int) -> int:
    """Leso(l): where `leader`'s current epoch began in its epoch cache (its LEO if absent)."""
    i = leader - 1
    here = [c["startOffset"] for c in s["epochCache"][i] if c["epoch"] == s["leaderEpoch"][i]]
    return here[0] if here else len(s["log"][i])


def isr_joins_caught_up(before: State, after: State) -> str | None:
    """Within a leader's epoch a follower joins its ISR only from a fetch at or past the
    leader's HW and the start of its epoch (R11, the guard KAFKA-7128 lacks; an action
    property: the fetch offset is the follower's LEO the leader records after the step)."""
    if after["isr"] is before["isr"]:
        return None  # the same ISRs (the projection shares an unchanged value): none joined
    for l in _replicas(after):  # noqa: E741 (the spec's name)
        i = l - 1
        same = before["leader"][i] == after["leader"][i] == l
        if not same or before["leaderEpoch"][i] != after["leaderEpoch"][i]:
            continue
        if reason := joins_caught_up(before, after, l, after["isr"][i] - before["isr"][i]):
            return reason
    return None


def joins_caught_up(
    before: State, after: State, leader: int, joining: frozenset[int]
) -> str | None:
    """R11 for the followers `joining` leader's ISR in a step: each from a fetch at or past
    the leader's HW and the start of its epoch before the step."""
    i = leader - 1
    floor = max(before["hw"][i], leso_of(before, leader))
    for f in sorted(joining):
        if after["remoteLeo"][i][f - 1] < floor:
            return (
                f"follower {f} joined leader {leader}'s ISR from offset "
                f"{after['remoteLeo'][i][f - 1]}, below max(HW, epoch start) {floor}"
            )
    return None


INVARIANTS: dict[str, Check] = {
    "HighWatermarkWithinLog": high_watermark_within_log,
    "AckedRecordsNeverLost": acked_records_never_lost,
    "CommittedRecordsOnIsr": committed_records_on_isr,
    "ConsistentReads": consistent_reads,
    "LogMatching": log_matching,
    "FollowersMatchLeader": followers_match_leader,
    "EpochCacheOrdered": epoch_cache_ordered,
    "EpochCacheMatchesLog": epoch_cache_matches_log,
}


_IN_OFFICE = ("alive", "ctrlLeader", "leader", "leaderEpoch", "ctrlEpoch")

READS: dict[str, tuple[str, ...]] = {
    "HighWatermarkWithinLog": ("log", "hw"),
    "AckedRecordsNeverLost": ("log", "committed", "acked", *_IN_OFFICE),
    "CommittedRecordsOnIsr": ("log", "ctrlIsr", "committed"),
    "ConsistentReads": ("log", "committed", *_IN_OFFICE),
    "LogMatching": ("log",),
    "FollowersMatchLeader": ("log", "leader", "alive", "fetchState", "leaderEpoch"),
    "EpochCacheOrdered": ("log", "epochCache"),
    "EpochCacheMatchesLog": ("log", "epochCache"),
}
"""The spec variables each invariant reads. Most steps leave most of them unchanged, so each
invariant is judged again only when one of its own changed (`projection.OnVariables`: it sees
only these, so one it reads without declaring is a KeyError, not a stale verdict)."""

_REMEMBERED: dict[str, OnVariables[str | None]] = {
    name: OnVariables(check, READS[name]) for name, check in INVARIANTS.items()
}


BROKEN_BY_DESIGN: dict[str, frozenset[str]] = {
    "EpochCacheMatchesLog": frozenset({"truncation=kip101", "fencing=off", "bug=kafka-10706"}),
}
"""The invariants that variants break by design, with those variants' words as
`Variant.label` writes them: such an invariant is not judged in their states (the spec's
configs of those variants leave it out). EpochCacheMatchesLog: a follower that appends its
leader's records of an older epoch after an entry of a newer one loses every entry of that
older epoch or later (LeaderEpochFileCache.assign drops them, R2), so its cache no longer
describes the records below. It keeps such an entry with records its leader does not have
(KIP-101's truncation; a zombie leader's FETCH without KIP-320's fencing), or, under the
seeded bug kafka-10706, an epoch it began as leader and wrote nothing in."""


@functools.cache
def judged(variant: Variant | None) -> Mapping[str, Check]:
    """The invariants judged in the states of `variant` (None: every one)."""
    if variant is None:
        return INVARIANTS
    words = set(variant.label().split(","))
    return {n: c for n, c in INVARIANTS.items() if not words & BROKEN_BY_DESIGN.get(n, set())}


def violations(
    s: State, before: State | None = None, variant: Variant | None = None
) -> list[tuple[str, str]]:
    """(invariant, reason) for every property that the state (or step) breaks; in a state of
    `variant`, only those it does not break by design (`BROKEN_BY_DESIGN`)."""
    checks = judged(variant)
    found = [(name, reason) for name in checks if (reason := _REMEMBERED[name](s))]
    if before is not None and (reason := leader_epochs_only_grow(before, s)):
        found.append(("LeaderEpochsOnlyGrow", reason))
    if before is not None and (reason := isr_joins_caught_up(before, s)):
        found.append(("IsrJoinsCaughtUp", reason))
    return found

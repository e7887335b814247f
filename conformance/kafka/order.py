"""The broker events in the order their spec steps take.

Theory of operation. A hook is stamped when its locked section ends, but another thread may
see the step's effect before that (an append's records, visible once the LEO moves), and a
follower's fetch is one spec step made of two broker moments (the leader reads the log, then
records the follower's position). `produce_at_append` moves each leader append to where
another thread first saw it; `fetch_at_read` moves each fetch's state update to just after its
read, where the spec's LeaderHandleFetch answers from the log as it is, or after another
follower's read that came while it was being handled. `fetch_windows` gives, per leader, each
fetch's span from read to update, which `convert` uses to tell concurrent handlers apart.
"""

from __future__ import annotations

from collections.abc import Sequence

from kreplica.conformance.kafka.events import Event


def fetch_windows(events: Sequence[Event]) -> dict[int, list[tuple[int, int, int]]]:
    """Per leader, each follower fetch's handling: from its read (readFromLocalLog) to its
    state update (updateFollowerFetchState) on the same request handler thread."""
    windows: dict[int, list[tuple[int, int, int]]] = {}
    for read, update in fetch_pairs(events):
        windows.setdefault(read.broker, []).append((read.nano, update.nano, read.args["follower"]))
    return windows


def fetch_pairs(events: Sequence[Event]) -> list[tuple[Event, Event]]:
    """Each follower fetch's read and its state update, on one request handler thread."""
    reads: dict[tuple[int, str, int], Event] = {}
    pairs: list[tuple[Event, Event]] = []
    for e in events:
        f = e.args.get("follower")
        if not isinstance(f, int):
            continue
        key = (e.broker, e.thread, f)
        if e.name == "readFromLocalLog" and not e.args.get("delayed"):
            reads[key] = e
        elif e.name == "updateFollowerFetchState" and key in reads:
            pairs.append((reads.pop(key), e))
    return pairs


def _leo_seen(e: Event) -> int | None:
    """The leader LEO an event observed: a read's, else its state's."""
    if e.name == "readFromLocalLog" and isinstance(e.args.get("leaderLogEndOffset"), int):
        return int(e.args["leaderLogEndOffset"])
    leo = (e.state or {}).get("leo")
    return leo if isinstance(leo, int) else None


def produce_at_append(events: list[Event]) -> list[Event]:
    """The events with each leader append moved to where other threads first see it.

    The appendRecordsToLeader hook is stamped when the Partition's locked section ends; the
    record is visible to readers (a follower's fetch, lock-free) from the moment Log.append
    moves the LEO, which comes after its epoch-cache assignment (also hooked). So an append
    goes just before the first event of its broker, between the two, that saw a LEO past it;
    if none did, where its hook is."""
    last_assign: dict[tuple[int, str], Event] = {}
    before: dict[int, Event] = {}
    index = {id(e): i for i, e in enumerate(events)}
    for e in events:
        key = (e.broker, e.thread)
        if e.name == "epochCacheAssign":
            last_assign[key] = e
        elif e.name == "appendRecordsToLeader" and not e.args.get("error"):
            assign = last_assign.pop(key, None)
            offset = e.args.get("firstOffset")
            if assign is None or not isinstance(offset, int):
                continue
            for other in events[index[id(assign)] + 1 : index[id(e)]]:
                seen = (
                    _leo_seen(other)
                    if other.broker == e.broker and other.thread != e.thread
                    else None
                )
                if seen is not None and seen > offset:
                    before[id(other)] = e
                    break
    moved = {id(e) for e in before.values()}
    ordered: list[Event] = []
    for e in events:
        if id(e) in moved:
            continue
        if id(e) in before:
            ordered.append(before[id(e)])
        ordered.append(e)
    return ordered


def fetch_at_read(events: list[Event]) -> list[Event]:
    """The events with each fetch's state update moved to just after its read: the answer a
    follower gets is what the leader read, so the spec's LeaderHandleFetch (which answers
    from the log as it is) takes place there. Where another follower's fetch was read while
    this one was handled (its read before this update, and no append between the two
    reads), that read saw the HW from before this update: this fetch's step goes just after
    that one's."""
    pairs = fetch_pairs(events)
    index = {id(e): i for i, e in enumerate(events)}
    reads: dict[int, list[Event]] = {}
    for read, _ in pairs:
        reads.setdefault(read.broker, []).append(read)
    appends: dict[int, list[int]] = {}
    for i, e in enumerate(events):
        if e.name == "appendRecordsToLeader":
            appends.setdefault(e.broker, []).append(i)
    after: dict[int, list[Event]] = {}
    for read, update in pairs:
        follower = read.args.get("follower")
        start = index[id(read)]
        end = min([index[id(update)], *(i for i in appends.get(read.broker, ()) if i > start)])
        inside = [
            other
            for other in reads[read.broker]
            if start < index[id(other)] < end and other.args.get("follower") != follower
        ]
        anchor = max(inside, key=lambda e: index[id(e)]) if inside else read
        after.setdefault(id(anchor), []).append(update)
    moved = {id(update) for _, update in pairs}
    own = {id(update): id(read) for read, update in pairs}
    ordered: list[Event] = []
    for e in events:
        if id(e) in moved:
            continue
        ordered.append(e)
        # the anchor's own update first, then those that waited for its read
        ordered.extend(sorted(after.get(id(e), ()), key=lambda u: (own[id(u)] != id(e), u.nano)))
    return ordered

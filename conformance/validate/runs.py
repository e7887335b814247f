"""The TLC runs of a local input: the traces of one kind in one TLC process, across batches.

TLC takes the spec's constants from its config, so one TLC process checks only traces that
share their number of replicas and their min.insync.replicas, their kind
(`tracecheck.check_texts` groups a batch by it). `kreplica fuzz` records min.insync.replicas
per run, so a batch of its corpus holds two kinds and took two TLC processes, each paying the
JVM's start, SANY's parse of the spec and TLC's set-up (about 0.7 s of CPU, as much as
checking 500 of its traces). Here the driver first lays the local input out (`scan`: where
each trace's text lies, and its kind, read from the first bytes of the text), then cuts each
kind's traces into runs (`runs`): about as many runs as the input has batches, each of one
kind, spanning batches, so a corpus of two kinds takes as many TLC processes as one of a single
kind. Traces that begin alike share their prefixes within a run (`java/TraceDataPrefixes.java`),
now across batches too.

A batch (`--batch-size`, laid out as the process pool and Spark always laid it out:
`pool_batches`, `share_batches`) still decides what it decided from its traces' rows: which
rejected traces get their false conjunct (`--why`, the first of each batch: `why_wanted`).
The rows are written in the input's order.

A worker reads its run's texts itself (`read_places`), so the driver holds no trace: it reads
each file once, for the places of its lines and their first bytes.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from kreplica.conformance.tla.itf import printable
from kreplica.conformance.validate.sources import (
    BATCH_BYTES,
    Share,
    Whole,
    batches,
    decoded,
    is_corpus,
    share_count,
    unreadable,
)
from kreplica.conformance.validate.tracecheck import kind_of, min_isr_of
from kreplica.conformance.validate.why import wants_why

HEAD_BYTES = 16 << 10
"""How much of a trace's text tells its kind: kreplica writes #meta first, then the first state."""

Kind = tuple[int, int] | None
"""A trace's number of replicas and min.insync.replicas; None when its first bytes do not say
(it is grouped when it is read: `check_texts`)."""


@dataclass(frozen=True)
class Place:
    """One trace of the input: its number (its place in the input, from 0), its id, where its
    text lies (bytes [start, end) of `path`, the newline included) and its kind; a file that
    could not be read is one trace, whose text (`unreadable`) says why."""

    number: int
    trace_id: str
    path: str
    start: int
    end: int
    kind: Kind
    unreadable: str = ""


def scan(files: Sequence[Path], min_isr: int) -> list[Place]:
    """Every trace of local `files`, in the order and with the ids `sources.iter_local` gives
    them; `min_isr` is the kind's min.insync.replicas where a trace records none."""
    places: list[Place] = []
    for path in files:
        name = str(path)
        if is_corpus(name):
            _scan_corpus(name, min_isr, places)
        else:
            _scan_whole(name, min_isr, places)
    return places


def _kind(head: bytes, min_isr: int) -> Kind:
    """The kind of a trace whose text begins with `head`."""
    return kind_of(head.decode("utf-8", "replace"), min_isr)


def _scan_corpus(name: str, min_isr: int, places: list[Place]) -> None:
    """The non-blank lines of a corpus, numbered from 1; one that cannot be read, one trace."""
    try:
        with open(name, "rb") as handle:
            position = 0
            for number, line in enumerate(handle, 1):
                if line.strip():
                    trace_id = f"{printable(name)}:{number}"
                    end = position + len(line)
                    kind = _kind(line[:HEAD_BYTES], min_isr)
                    places.append(Place(len(places), trace_id, name, position, end, kind))
                position += len(line)
    except OSError as err:
        why = unreadable(f"cannot read: {err.strerror}")
        places.append(Place(len(places), printable(name), name, 0, 0, None, why))


def _scan_whole(name: str, min_isr: int, places: list[Place]) -> None:
    """A trace file: one trace, its whole text."""
    try:
        with open(name, "rb") as handle:
            head = handle.read(HEAD_BYTES)
            size = head_size = len(head)
            if head_size == HEAD_BYTES:
                size = handle.seek(0, 2)
    except OSError as err:
        why = unreadable(f"cannot read: {err.strerror}")
        places.append(Place(len(places), printable(name), name, 0, 0, None, why))
        return
    places.append(Place(len(places), printable(name), name, 0, size, _kind(head, min_isr)))


def read_places(places: Sequence[Place]) -> list[str]:
    """The texts of `places`, as `sources.read_piece` reads them: a corpus line, a whole file,
    or the reason it cannot be read. Each file is opened once."""
    handles: dict[str, BinaryIO | OSError] = {}
    texts = []
    try:
        for place in places:
            texts.append(_read(place, handles))
    finally:
        for handle in handles.values():
            if not isinstance(handle, OSError):
                handle.close()
    return texts


def _read(place: Place, handles: dict[str, BinaryIO | OSError]) -> str:
    """One place's text, through the open `handles` (or the error opening its file gave)."""
    if place.unreadable:
        return place.unreadable
    if place.path not in handles:
        try:
            handles[place.path] = open(place.path, "rb")  # noqa: SIM115 (closed by read_places)
        except OSError as err:
            handles[place.path] = err
    handle = handles[place.path]
    if isinstance(handle, OSError):
        return unreadable(f"cannot read: {handle.strerror}")
    try:
        handle.seek(place.start)
        whole = not is_corpus(place.path)
        return decoded(handle.read() if whole else handle.read(place.end - place.start))
    except OSError as err:
        return unreadable(f"cannot read: {err.strerror}")


_DECODER = json.JSONDecoder()

Sight = tuple[int | None, Kind, str]


def sight(text: str) -> Sight | None:
    """What the checker reads of a trace written as kreplica writes traces (#meta first): the
    text after the #meta, and what the checker reads of the #meta or by pattern
    (min.insync.replicas, the first `hw`). Two traces with the same sight get the same row but
    for their id and variant note: a run checks one of them (`conform.check_run`); a fuzz
    corpus repeats runs (Hypothesis replays them), which differ in #meta only. None for a trace
    written otherwise.

    Exact, not a guess: the #meta left out must be tame JSON, which both readers take alike
    (objects, lists, printable ASCII strings, integers of 63 bits, booleans): the Java reader
    refuses a null or a fraction where Python's takes them."""
    if not text.startswith('{"#meta":{'):
        return None
    try:
        meta, end = _DECODER.raw_decode(text, 9)
    except ValueError:
        return None
    if not text.startswith(',"vars":', end) or not _tame(meta, 0):
        return None
    return min_isr_of(meta), kind_of(text, 0), text[end:]


def _tame(value: Any, depth: int) -> bool:
    """JSON that both readers take alike, read as Python reads it."""
    if depth > 20:
        return False
    if isinstance(value, dict):
        return all(_tame(k, depth) and _tame(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return all(_tame(v, depth + 1) for v in value)
    if isinstance(value, str):
        return value.isascii() and value.isprintable()
    if isinstance(value, bool):
        return True
    return isinstance(value, int) and abs(value) < 2**63


def runs(places: Sequence[Place], batch_size: int, workers: int) -> list[list[Place]]:
    """The traces cut into runs of one kind each, in the input's order within a run: about as
    many runs as `sources.plan` makes shares (a multiple of `workers`), each of at most
    `batch_size` traces and BATCH_BYTES of text, each kind in as few runs as that allows. The
    biggest come first, so that the last to start are short."""
    if not places:
        return []
    count = share_count(len(places), sum(_size(p) for p in places), batch_size, workers)
    per = math.ceil(len(places) / count)
    kinds: dict[Kind, list[Place]] = {}
    for place in places:
        kinds.setdefault(place.kind, []).append(place)
    cut: list[list[Place]] = []
    for group in kinds.values():
        text = sum(_size(p) for p in group)
        pieces = max(
            1, round(len(group) / per), -(-len(group) // batch_size), -(-text // BATCH_BYTES)
        )
        step = len(group) / pieces
        cut += [group[round(i * step) : round((i + 1) * step)] for i in range(pieces)]
    return sorted(cut, key=len, reverse=True)


def _size(place: Place) -> int:
    """The bytes of a place's text."""
    return place.end - place.start


def pool_batches(places: Sequence[Place], size: int) -> list[list[Place]]:
    """The batches the process pool makes of the input: `size` traces each, in order."""
    return list(batches(places, size))


def share_batches(
    shares: Sequence[Share], places: Sequence[Place], batch_size: int, slack: int
) -> list[list[Place]]:
    """The batches a Spark task makes of each of `sources.plan`'s shares: the traces
    `sources.read_share` reads in it (a whole file's; a corpus's lines that begin in a piece's
    byte range; a corpus that cannot be read, in its first piece), in batches of `batch_size`
    with `slack`, as the task cuts them."""
    by_path: dict[str, list[Place]] = {}
    for place in places:
        by_path.setdefault(place.path, []).append(place)
    starts = {path: [p.start for p in held] for path, held in by_path.items()}
    seen: set[str] = set()
    out: list[list[Place]] = []
    for share in shares:
        held: list[Place] = []
        for piece in share:
            if isinstance(piece, Whole):
                held += [p for path in piece.paths for p in by_path.get(path, [])]
                continue
            found = by_path.get(piece.path, [])
            if found and found[0].unreadable:
                held += found if piece.path not in seen else []
            else:
                low = bisect.bisect_left(starts[piece.path], piece.start) if found else 0
                high = bisect.bisect_left(starts[piece.path], piece.end) if found else 0
                held += found[low:high]
            seen.add(piece.path)
        out += batches(held, batch_size, slack)
    return out


def wants_conjunct(row: dict[str, Any]) -> bool:
    """Whether a row wants its false conjunct (`why.wants_why`)."""
    return wants_why(row["verdict"], row["step"], row["action"], row["invariant"])


def why_wanted(
    laid_out: Sequence[Sequence[Place]], wants: Callable[[int], bool], budget: int
) -> list[list[Place]]:
    """For each batch, its first `budget` traces whose row wants its false conjunct (`wants`,
    given a trace's number), as `why.explain_rejections` picks them; the batches with any."""
    wanted = []
    for batch in laid_out if budget > 0 else ():
        picked = []
        for place in batch:
            if wants(place.number):
                picked.append(place)
                if len(picked) == budget:
                    break
        if picked:
            wanted.append(picked)
    return wanted

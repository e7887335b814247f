"""Where traces come from: ITF files (one trace each) and JSON-lines corpora (one per line).

A trace is handed on as `(trace id, JSON text)`, unparsed: decoding happens in the worker
that checks it, so a malformed trace becomes that trace's error row, not a crash. The id is
the file's path, with `:line` for a corpus line.

The input is planned as shares of roughly one batch each, so many workers can read it at
once without passing the traces through anyone: a share is a group of whole ITF files, or the
lines of a corpus that begin in a byte range (Hadoop's rule: a line belongs to the range
holding its first byte). A range's first line number comes from counting the newlines before
it (`number_lines`), which is all a reader needs to know about the rest of the file.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path
from typing import TypeVar

from kreplica.conformance.errors import TraceError
from kreplica.conformance.tla.itf import printable

CORPUS_SUFFIXES = (".jsonl", ".ndjson")
TRACE_SUFFIXES = (".json",)
SAMPLE_BYTES = 1 << 20
"""How much of each corpus the planner reads to estimate its bytes per trace."""
READ_BYTES = 1 << 22

Item = tuple[str, str]
T = TypeVar("T")

UNREADABLE = "\x00\x00kreplica-unreadable\x00"
"""Starts the text of an item that could not be read (no JSON text starts so); the rest says
why, and the checker makes it the item's error row (`tracecheck.prepare`)."""


def unreadable(why: str) -> str:
    """The text of an item that could not be read."""
    return UNREADABLE + why


def decoded(raw: bytes) -> str:
    """UTF-8 bytes as text, or an unreadable item saying where they are not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return unreadable(
            f"not UTF-8 text: byte 0x{raw[err.start]:02x} at offset {err.start} ({err.reason})"
        )


def is_corpus(name: str) -> bool:
    """A JSON-lines corpus (one trace per line) rather than one ITF trace."""
    return name.endswith(CORPUS_SUFFIXES)


def split_file(name: str, content: str) -> list[Item]:
    """The traces in one file's content: its lines for a corpus, else the whole file."""
    if not is_corpus(name):
        return [(name, content)]
    lines = content.split("\n")
    return [(f"{name}:{n}", line) for n, line in enumerate(lines, 1) if line.strip()]


WALKED_SUFFIXES = (".itf.json", *CORPUS_SUFFIXES)
"""What a directory walk takes: ITF traces and corpora, not the `*.schedule.json` files
`kreplica fuzz` saves beside its traces (a file named explicitly is read whatever its name)."""


def is_walked(name: str) -> bool:
    """A file a directory walk takes as traces."""
    return name.endswith(WALKED_SUFFIXES)


def walk_files(paths: Sequence[str]) -> tuple[list[Path], list[Path]]:
    """The trace files under local `paths` (directories searched recursively, each sorted),
    and the other files the walk skipped. TraceError for a missing path, or no trace files."""
    found: list[Path] = []
    skipped: list[Path] = []
    for text in paths:
        path = Path(text)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file())
            found += [p for p in files if is_walked(p.name)]
            skipped += [p for p in files if not is_walked(p.name)]
        elif path.is_file():
            found.append(path)
        else:
            raise TraceError(f"{printable(text)}: no such file or directory")
    if not found:
        named = ", ".join(printable(p) for p in paths)
        raise TraceError(f"no trace files (*.itf.json, *.jsonl) under {named}")
    return found, skipped


def skipped_note(skipped: Sequence[Path]) -> str:
    """One line saying which files a directory walk skipped ('' if none)."""
    if not skipped:
        return ""
    example = printable(str(skipped[0]))
    others = f" and {len(skipped) - 1} more" if len(skipped) > 1 else ""
    return (
        f"skipped {len(skipped)} file{'s' if len(skipped) > 1 else ''} that "
        f"{'are' if len(skipped) > 1 else 'is'} not traces (*.itf.json, *.jsonl): "
        f"{example}{others}"
    )


def local_files(paths: Sequence[str], warn: Callable[[str], None] | None = None) -> list[Path]:
    """The trace files under local `paths` (directories are searched recursively for
    `*.itf.json` and `*.jsonl`), sorted. How many other files were skipped goes to `warn`
    (stderr by default)."""
    found, skipped = walk_files(paths)
    note = skipped_note(skipped)
    if note:
        (warn or _stderr)(note)
    return found


def _stderr(line: str) -> None:
    sys.stderr.write(f"warning: {line}\n")


RecordedVariant = str | None


_VARIANT_KEY = re.compile(r'"variant"\s*:\s*')
_HEAD = 8192
"""How far into a trace's text its #meta (written first) is looked for."""


def recorded_variant(text: str) -> RecordedVariant:
    """The variant label a trace's #meta records (`kreplica fuzz`, random walks), or None.
    Only that one value is decoded, found near the start of the text (kreplica writes #meta
    first), so noting it costs next to nothing beside TLC: this is a note, not a check."""
    head = text[: min(len(text), _HEAD)]
    end = head.find('"states"')
    match = _VARIANT_KEY.search(head, 0, end if end >= 0 else len(head))
    if match is None:
        return None
    try:
        variant, _ = json.JSONDecoder().raw_decode(text, match.end())
    except ValueError:
        return None
    if isinstance(variant, dict):  # a saved failure: {"dimensions": {...}, "bugs": [...]}
        dims = variant.get("dimensions") or {}
        bugs = variant.get("bugs") or []
        if not isinstance(dims, dict) or not isinstance(bugs, list):
            return None
        words = [f"{k}={v}" for k, v in sorted(dims.items())] + [f"bug={b}" for b in sorted(bugs)]
        return ",".join(words) or "default"
    return variant if isinstance(variant, str) else None


def variant_note(text: str, checked_against: str) -> str:
    """A note when the variant a trace records differs from the one it is checked against
    (`Variant.label()` of both): '' when they agree or the trace records none."""
    recorded = recorded_variant(text)
    if recorded is None or _label_words(recorded) == _label_words(checked_against):
        return ""
    # a corrupt trace may record any text: written as printable, like every reason
    return f"recorded with variant {printable(recorded)}, checked against {checked_against}"


def _label_words(label: str) -> frozenset[str]:
    return frozenset(w for w in label.split(",") if w and w != "default")


@dataclass(frozen=True)
class Whole:
    """Whole trace files, one trace each."""

    paths: tuple[str, ...]


@dataclass(frozen=True)
class Lines:
    """The lines of corpus `path` that begin in bytes [start, end); the first is line `line`."""

    path: str
    start: int
    end: int
    line: int = 1


Piece = Whole | Lines
Share = tuple[Piece, ...]
"""A task's input: pieces of files in order, about a batch of traces in all."""


def read_share(share: Share) -> Iterator[Item]:
    """The traces of one share, read lazily."""
    for piece in share:
        yield from read_piece(piece)


def read_piece(piece: Piece) -> Iterator[Item]:
    """The traces of one piece, read lazily; an unreadable file is one item saying why."""
    if isinstance(piece, Whole):
        for path in piece.paths:
            yield printable(path), _read_whole(path)
        return
    try:
        yield from _read_lines(piece)
    except OSError as err:
        yield printable(piece.path), unreadable(f"cannot read: {err.strerror}")


def _read_whole(path: str) -> str:
    """A whole file's text, or an unreadable item when it cannot be read."""
    try:
        return decoded(Path(path).read_bytes())
    except OSError as err:
        return unreadable(f"cannot read: {err.strerror}")


def _read_lines(share: Lines) -> Iterator[Item]:
    """The non-blank lines that begin in the share's byte range, numbered."""
    with open(share.path, "rb") as handle:
        position, number = share.start, share.line
        if share.start > 0:  # the line under way at start belongs to the range before
            handle.seek(share.start - 1)
            position = share.start - 1 + len(handle.readline())
        while position < share.end:
            line = handle.readline()
            if not line:
                return
            if line.strip():
                yield f"{printable(share.path)}:{number}", decoded(line)
            position, number = position + len(line), number + 1


def iter_local(files: Iterable[Path]) -> Iterator[Item]:
    """Every trace of local `files`, one at a time (a corpus is read line by line)."""
    for path in files:
        name = str(path)
        if is_corpus(name):
            yield from read_piece(Lines(name, 0, _size(name)))
        else:
            yield from read_piece(Whole((name,)))


def _size(path: str) -> int:
    """A file's size in bytes (0 when it cannot be read: reading it will say why)."""
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0


BATCH_BYTES = 256 << 20
"""Trace text per TLC process at most, whatever the batch size: TLC's peak memory is about 4 to
4.5 times the text (`kreplica bench tlc`: 129 MB of JSON, 566 MB; 324 MB, 1,296 MB)."""


def plan(files: Sequence[Path], batch_size: int, workers: int = 1) -> list[Share]:
    """Shares of at most about `batch_size` traces (fewer if they would hold more than
    BATCH_BYTES), as many as a multiple of `workers` (when there are enough traces) so the
    last round of tasks keeps every worker busy.

    The files are laid end to end, measured in traces (a corpus's estimated from its first
    bytes), and cut into equal shares: an ITF file is never cut, a corpus is cut at byte
    offsets. The line numbers of ranges that do not begin a corpus are still to be filled in
    (`number_lines`)."""
    names = [str(f) for f in files]
    sizes = [_size(n) for n in names]
    traces = [_traces_in(n, s) for n, s in zip(names, sizes, strict=True)]
    count = share_count(sum(traces), sum(sizes), batch_size, workers)
    per = sum(traces) / count or 1.0
    shares: list[list[Piece]] = [[] for _ in range(count)]
    before = 0.0
    for name, size, length in zip(names, sizes, traces, strict=True):
        for index, piece in _pieces(name, size, before / per, length / per):
            shares[min(index, count - 1)].append(piece)
        before += length
    return [_merged(pieces) for pieces in shares if pieces]


def _traces_in(name: str, size: int) -> float:
    """A file's traces: one for an ITF file, a corpus's estimated from its first bytes."""
    return size / _bytes_per_trace(name) if is_corpus(name) else 1.0


def _tasks(traces: int, batch_size: int, workers: int) -> int:
    """Shares for `traces`: enough for batches of `batch_size`, a multiple of `workers`."""
    batches = -(-traces // batch_size)
    return max(1, min(traces, -(-batches // workers) * workers))


def share_count(traces: float, size: int, batch_size: int, workers: int) -> int:
    """Shares for `traces` that take `size` bytes: `_tasks`, with batches of `batch_size`
    traces or of BATCH_BYTES, whichever holds fewer."""
    per_trace = size / traces if traces else 1.0
    fitting = max(1, min(batch_size, int(BATCH_BYTES // max(per_trace, 1.0))))
    return _tasks(math.ceil(traces - 1e-6), fitting, workers)


def balanced_batch_size(files: Sequence[Path], batch_size: int, workers: int) -> int:
    """The batch size for checking `files` in a pool of `workers` processes: the traces of
    one of `plan`'s shares, so that small corpora too keep every worker busy."""
    names = [str(f) for f in files]
    sizes = [_size(n) for n in names]
    traces = sum(_traces_in(n, s) for n, s in zip(names, sizes, strict=True))
    return max(1, math.ceil(traces / share_count(traces, sum(sizes), batch_size, workers)))


def _pieces(name: str, size: int, start: float, length: float) -> Iterator[tuple[int, Piece]]:
    """A file's pieces and their shares, the file spanning [start, start + length) shares."""
    if not is_corpus(name):
        yield int(start), Whole((name,))
        return
    if size == 0:  # nothing to read, or unreadable: reading says so
        yield int(start), Lines(name, 0, 0)
        return
    first, last = int(start), max(int(start), math.ceil(start + length) - 1)
    for index in range(first, last + 1):
        low = 0 if index == first else round((index - start) / length * size)
        high = size if index == last else round((index + 1 - start) / length * size)
        if low < high:
            yield index, Lines(name, low, high)


def _merged(pieces: list[Piece]) -> Share:
    """A share's pieces, with runs of whole files joined into one piece."""
    merged: list[Piece] = []
    for piece in pieces:
        if isinstance(piece, Whole) and merged and isinstance(merged[-1], Whole):
            merged[-1] = Whole(merged[-1].paths + piece.paths)
        else:
            merged.append(piece)
    return tuple(merged)


def _bytes_per_trace(path: str) -> int:
    """A corpus's bytes per line, estimated from its beginning."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(SAMPLE_BYTES)
    except OSError:
        return 1
    lines = head.count(b"\n")
    return max(1, (head.rindex(b"\n") + 1) // lines if lines else len(head))


Counter = Callable[[list[tuple[str, int, int]]], list[int]]
"""Counts the newlines in each (path, start, end) byte range, in order (in parallel, maybe)."""


def number_lines(shares: list[Share], count: Counter) -> list[Share]:
    """Fill in the first line number of every range but a corpus's first, with one call to
    `count` over the bytes before each range (a corpus in one range needs none)."""
    cuts = [p for share in shares for p in share if isinstance(p, Lines) and p.start > 0]
    if not cuts:
        return shares
    starts: dict[str, list[int]] = {}
    for cut in cuts:
        starts.setdefault(cut.path, [0]).append(cut.start - 1)
    segments = [(p, a, b) for p, cut in starts.items() for a, b in pairwise(cut)]
    before: dict[tuple[str, int], int] = {}
    total: dict[str, int] = {}
    for (path, _, end), found in zip(segments, count(segments), strict=True):
        total[path] = total.get(path, 0) + found
        # its first line: past the newlines before `end` and the line under way there
        before[path, end + 1] = total[path] + 2
    return [tuple(_numbered(p, before) for p in share) for share in shares]


def _numbered(piece: Piece, first_lines: dict[tuple[str, int], int]) -> Piece:
    """A piece with the number of its first line, when it begins inside a corpus."""
    if isinstance(piece, Lines) and piece.start > 0:
        return replace(piece, line=first_lines[piece.path, piece.start])
    return piece


def newlines(path: str, start: int, end: int) -> int:
    """How many newlines bytes [start, end) of a file hold (0 if it cannot be read: reading
    its traces will say why)."""
    found = 0
    try:
        with open(path, "rb") as handle:
            handle.seek(start)
            left = end - start
            while left > 0:
                block = handle.read(min(READ_BYTES, left))
                if not block:
                    break
                found, left = found + block.count(b"\n"), left - len(block)
    except OSError:
        return 0
    return found


def batches(items: Iterable[T], size: int, slack: int = 0) -> Iterator[list[T]]:
    """Group items into lists of `size`; a last remainder of at most `slack` items joins the
    list before it instead of making a list (and a TLC process) of its own."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) > size + slack:  # more than the slack follows: the first `size` are a list
            yield batch[:size]
            batch = batch[size:]
    if batch:
        yield batch

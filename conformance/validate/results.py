"""Conformance results: one row per trace, written as Parquet, JSON lines and JUnit XML.

The row is `tracecheck.TraceResult`; both runners (Spark and the process pool) write the same
columns. The summary and the JUnit report are made by reading the Parquet back with pyarrow,
batch by batch, so no step of the driver holds every row at once.

A result set (`--out`: the Parquet, the JSON, the JUnit report and `manifest.json`) belongs to
one run and is replaced whole (`ResultSet`): the run holds a lock beside it, writes everything
into a hidden sibling directory of its own, and renames that into place once it is complete, so
an interrupted or failed run leaves the older set as it was, and two runs never mix.
"""

from __future__ import annotations

import ctypes
import errno
import glob
import hashlib
import heapq
import json
import os
import secrets
import shutil
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from kreplica.conformance.errors import KreplicaError
from kreplica.conformance.tla.itf import printable
from kreplica.conformance.validate.locks import lock_output
from kreplica.conformance.validate.tracecheck import CONFORMS, ERROR, SPEC_MODULES, VIOLATES
from kreplica.conformance.validate.why import why_text

COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("trace_id", pa.string()),
    ("verdict", pa.string()),
    ("events", pa.int64()),
    ("step", pa.int64()),
    ("action", pa.string()),
    ("args", pa.string()),
    ("variables", pa.list_(pa.string())),
    ("diff", pa.string()),
    ("reason", pa.string()),
    ("seconds", pa.float64()),
    ("note", pa.string()),
    ("why_line", pa.int64()),
    ("why", pa.string()),
    ("why_values", pa.string()),
    ("invariant", pa.string()),
)
SCHEMA = pa.schema(list(COLUMNS))
PARQUET = "results.parquet"
JSON = "results.json"
JUNIT = "junit.xml"
MANIFEST = "manifest.json"
RESULT_NAMES = frozenset({PARQUET, JSON, JUNIT, MANIFEST, JUNIT + ".tmp"})
"""What a result set directory may hold (junit.xml.tmp: left by kreplica before result sets)."""
RUN_METADATA = "kreplica.run"
"""The key of the run's metadata (JSON: the manifest as known when the run starts) in the
Parquet schema of every part."""


class RowWriter:
    """Append rows to a Parquet file and a JSON-lines file as they arrive (process pool)."""

    def __init__(
        self, out: Path, chunk: int = 1000, metadata: Mapping[str, str] | None = None
    ) -> None:
        """Open `out`/results.parquet and `out`/results.json for writing; `metadata` goes into
        the Parquet schema."""
        out.mkdir(parents=True, exist_ok=True)
        self.schema = schema_with(metadata)
        self.parquet = pq.ParquetWriter(out / PARQUET, self.schema)
        self.json = (out / JSON).open("w", encoding="utf-8")
        self.chunk = chunk
        self.rows: list[dict[str, Any]] = []
        self.written = 0

    def write(self, rows: Iterable[dict[str, Any]]) -> None:
        """Buffer rows; flush a Parquet row group every `chunk` rows."""
        for row in rows:
            self.json.write(json.dumps(row, separators=(",", ":")) + "\n")
            self.rows.append(row)
            self.written += 1
        self.json.flush()
        if len(self.rows) >= self.chunk:
            self._flush()

    def _flush(self) -> None:
        if self.rows:
            self.parquet.write_table(pa.Table.from_pylist(self.rows, schema=self.schema))
            self.rows = []

    def close(self) -> None:
        """Write what is buffered and close both files."""
        self._flush()
        self.parquet.close()
        self.json.close()


def schema_with(metadata: Mapping[str, str] | None) -> pa.Schema:
    """The rows' schema, carrying `metadata` (the run's, under RUN_METADATA) when given."""
    return SCHEMA.with_metadata(dict(metadata)) if metadata else SCHEMA


def iter_rows(path: Path, columns: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """Read result rows back from a Parquet file or directory, one record batch at a time."""
    dataset = ds.dataset(str(path), format="parquet", schema=SCHEMA)
    for batch in dataset.to_batches(columns=columns):
        yield from batch.to_pylist()


@dataclass
class Summary:
    """Counts by verdict, events checked, and the first few rejected or failed traces."""

    verdicts: Counter[str] = field(default_factory=Counter)
    events: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    notes: Counter[str] = field(default_factory=Counter)
    """How many traces got each note (recorded under another variant than checked against)."""

    @property
    def traces(self) -> int:
        """All traces."""
        return sum(self.verdicts.values())


def summarise(path: Path, keep: int = 10) -> Summary:
    """Count verdicts, and keep the `keep` rejections and errors with the smallest trace ids
    (sorted by id, whatever order the runners wrote them in), reading Parquet back."""
    summary = Summary()
    for row in iter_rows(path):
        summary.verdicts[row["verdict"]] += 1
        summary.events += row["events"] or 0
        if row.get("note"):
            summary.notes[row["note"]] += 1
    if summary.verdicts[VIOLATES]:
        summary.rejected = _first_by_id(path, VIOLATES, keep)
    if summary.verdicts[ERROR]:
        summary.errors = _first_by_id(path, ERROR, keep)
    return summary


def _first_by_id(path: Path, verdict: str, keep: int) -> list[dict[str, Any]]:
    """The `keep` rows of `verdict` with the smallest trace ids, in order (memory: `keep` rows)."""
    rows = (row for row in iter_rows(path) if row["verdict"] == verdict)
    return heapq.nsmallest(keep, rows, key=lambda row: str(row["trace_id"]))


def _testcase(row: dict[str, Any]) -> str:
    """One <testcase> element for a result row (what XML cannot hold, such as control
    characters, written as backslash escapes: `sources.printable`)."""
    name = quoteattr(printable(str(row["trace_id"])))
    head = f'  <testcase classname="kreplica.conform" name={name} time="{row["seconds"]:.3f}"'
    if row["verdict"] == CONFORMS:
        return head + "/>\n"
    kind = "failure" if row["verdict"] == VIOLATES else "error"
    where = f"step {row['step']} {row['action']} {row['args']}" if row["step"] is not None else ""
    message = quoteattr(printable(f"{where}: {row['reason']}" if where else str(row["reason"])))
    body = escape(printable(row["diff"] or row["reason"] or ""))
    if row.get("why"):
        body += escape(printable("\nwhy: " + why_text(row)))
    invariant = ""
    if row.get("invariant"):  # the violated invariants, by name, for tools that read properties
        value = quoteattr(printable(str(row["invariant"])))
        invariant = f'    <properties><property name="invariant" value={value}/></properties>\n'
    return f"{head}>\n{invariant}    <{kind} message={message}>{body}</{kind}>\n  </testcase>\n"


def write_junit(results: Path, out: Path, summary: Summary) -> None:
    """A JUnit XML report: one test case per trace (failure: violates; error: error)."""
    tmp = out.with_name(out.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write('<?xml version="1.0" encoding="UTF-8"?>\n')
        handle.write(
            f'<testsuite name="kreplica conform" tests="{summary.traces}" '
            f'failures="{summary.verdicts[VIOLATES]}" errors="{summary.verdicts[ERROR]}">\n'
        )
        for row in iter_rows(results):
            handle.write(_testcase(row))
        handle.write("</testsuite>\n")
    tmp.replace(out)


# ---------------------------------------------------------------- the run's record


def spec_hashes(spec_dir: Path) -> dict[str, str]:
    """sha256 of each spec module a batch is checked with (`tracecheck.SPEC_MODULES`), by file
    name, and of all of them together under "all" (each name, a NUL, its bytes, in order)."""
    together = hashlib.sha256()
    hashes: dict[str, str] = {}
    for name in sorted(f"{module}.tla" for module in SPEC_MODULES):
        data = (spec_dir / name).read_bytes()
        hashes[name] = hashlib.sha256(data).hexdigest()
        together.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return {"all": together.hexdigest(), **hashes}


def counts(summary: Summary) -> dict[str, int]:
    """The manifest's counts: traces, events, and traces by verdict (zeros included)."""
    verdicts = {verdict: summary.verdicts[verdict] for verdict in (CONFORMS, VIOLATES, ERROR)}
    return {"traces": summary.traces, "events": summary.events, **verdicts}


def write_manifest(directory: Path, manifest: Mapping[str, Any]) -> None:
    """`directory`/manifest.json, through a temporary file, flushed to disk."""
    target = directory / MANIFEST
    tmp = directory / f".{MANIFEST}.tmp"
    with tmp.open("w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=2, ensure_ascii=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(target)


def read_manifest(directory: Path) -> dict[str, Any]:
    """The manifest of the result set in `directory`."""
    data: dict[str, Any] = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    return data


# ---------------------------------------------------------------- result sets


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap the directories `a` and `b` in one step (Linux renameat2 RENAME_EXCHANGE). False
    where the kernel, the C library or the filesystem cannot; OSError for other failures."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]  # fmt: skip
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(a), None, str(b))


def _fsync_dir(directory: Path) -> None:
    """Flush a directory's entries (a rename in it) to disk, where the platform allows."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_tree(path: Path) -> None:
    """Remove a directory tree (twice: a Spark task cancelled a moment ago may still write)."""
    for _ in range(2):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            return
        time.sleep(0.2)
    shutil.rmtree(path, ignore_errors=True)


class ResultSet:
    """One run's hold on a result set directory `out`, from the lock to the rename.

    `claim` takes an exclusive, non-blocking `flock` on `<out>.lock` beside `out` (a second run
    fails at once, naming the holder's pid), tidies what a killed run left, refuses an `out`
    that holds anything but results, and makes the run's own staging directory, a hidden
    sibling `.<name>.tmp-<pid>-<random>` on the same filesystem. The run writes every file
    there; `commit` swaps it with the older set in one rename and only then deletes the older
    one. Leaving the `with` block without `commit` deletes the staging directory, so the older
    set is untouched. The lock file stays (deleting it would let two runs lock two files)."""

    def __init__(self, out: Path, target: Path, token: str, lock: int, older: bool) -> None:
        """Use `ResultSet.claim`."""
        self.out = out
        """`--out` as the user wrote it (for messages)."""
        self.target = target
        """The directory the set is renamed to (absolute, symbolic links resolved)."""
        self.staging = target.parent / f".{target.name}.tmp-{token}"
        """Where this run writes: its own, fresh directory."""
        self.older = older
        """An older result set was in `target` when the run started."""
        self.committed = False
        self.token = token
        """This run's id: its pid and a random part (the staging directory's suffix)."""
        self._lock = lock

    @classmethod
    def claim(cls, out: Path) -> ResultSet:
        """Lock `out`, check it holds nothing but results, and make this run's staging
        directory. OutputInUse if another run holds it; KreplicaError if `out` holds other
        files."""
        target = out.resolve() if out.is_symlink() else out.absolute()
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = lock_output(target.parent / f"{target.name}.lock", out)
        try:
            _tidy(target)
            foreign = sorted(p.name for p in target.iterdir() if p.name not in RESULT_NAMES) \
                if target.is_dir() else []  # fmt: skip
            if foreign:
                raise KreplicaError(
                    f"cannot write results to {out}: it holds {printable(foreign[0])!r}, which "
                    "is not part of a result set (a run replaces the whole directory): choose "
                    "an empty or new directory"
                )
            older = target.is_dir() and any(target.iterdir())
            claimed = cls(out, target, f"{os.getpid()}-{secrets.token_hex(4)}", lock, older)
            claimed.staging.mkdir()
        except BaseException:
            os.close(lock)
            raise
        return claimed

    def commit(self) -> None:
        """Put the staging directory in place of `out` in one rename (an older set is swapped
        out whole, then deleted). Ctrl-C waits until the rename is done."""
        with _signals_deferred():
            old = self._swap()
            self.committed = True
            _fsync_dir(self.target.parent)
        if old is not None:
            _remove_tree(old)

    def _swap(self) -> Path | None:
        """Rename staging to target; return where the older set went (None: there was none)."""
        if not self.target.exists():
            os.rename(self.staging, self.target)
            return None
        if _exchange(self.staging, self.target):
            return self.staging  # the older set now lives under the staging name
        old = self.target.parent / f".{self.target.name}.old-{self.token}"
        os.rename(self.target, old)  # no atomic swap here: a moment without `out`; a run
        os.rename(self.staging, self.target)  # killed in it has its older set put back (_tidy)
        return old

    def discard(self) -> None:
        """Delete this run's staging directory (the older set, if any, stays as it was)."""
        if not self.committed:
            _remove_tree(self.staging)

    def release(self) -> None:
        """Give the lock up."""
        if self._lock >= 0:
            os.close(self._lock)
            self._lock = -1

    def __enter__(self) -> ResultSet:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            self.discard()
        finally:
            self.release()


def _tidy(target: Path) -> None:
    """Under the lock: delete staging directories of killed runs, and put an older set back
    if a run was killed between the two renames of a non-atomic swap."""
    parent, name = target.parent, target.name
    for staging in parent.glob(f".{_escape(name)}.tmp-*"):
        _remove_tree(staging)
    olds = sorted(parent.glob(f".{_escape(name)}.old-*"))
    if olds and not target.exists():
        os.rename(olds.pop(), target)
    for old in olds:
        _remove_tree(old)


def _escape(name: str) -> str:
    """`name` with glob's special characters taken literally."""
    return glob.escape(name)


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP back (main thread only) and deliver them afterwards to
    the handlers they had, so that a rename is never cut in two by Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    kinds = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    saved = {kind: signal.signal(kind, lambda sig, frame: caught.append(sig)) for kind in kinds}
    try:
        yield
    finally:
        for kind, handler in saved.items():
            signal.signal(kind, handler)
        for number in dict.fromkeys(caught):
            signal.raise_signal(number)

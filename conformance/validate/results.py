"""Conformance results: one row per trace, written as Parquet, JSON lines and JUnit XML.

The row is `tracecheck.TraceResult`; both runners (Spark and the process pool) write the same
columns. The summary and the JUnit report are made by reading the Parquet back with pyarrow,
batch by batch, so no step of the driver holds every row at once.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from kreplica.conformance.tla.itf import printable
from kreplica.conformance.validate.tracecheck import CONFORMS, ERROR, VIOLATES

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
)
SCHEMA = pa.schema(list(COLUMNS))
PARQUET = "results.parquet"
JSON = "results.json"
JUNIT = "junit.xml"


class RowWriter:
    """Append rows to a Parquet file and a JSON-lines file as they arrive (process pool)."""

    def __init__(self, out: Path, chunk: int = 1000) -> None:
        """Open `out`/results.parquet and `out`/results.json for writing."""
        out.mkdir(parents=True, exist_ok=True)
        self.parquet = pq.ParquetWriter(out / PARQUET, SCHEMA)
        self.json = (out / JSON).open("w", encoding="utf-8")
        self.chunk = chunk
        self.rows: list[dict[str, Any]] = []

    def write(self, rows: Iterable[dict[str, Any]]) -> None:
        """Buffer rows; flush a Parquet row group every `chunk` rows."""
        for row in rows:
            self.json.write(json.dumps(row, separators=(",", ":")) + "\n")
            self.rows.append(row)
        self.json.flush()
        if len(self.rows) >= self.chunk:
            self._flush()

    def _flush(self) -> None:
        if self.rows:
            self.parquet.write_table(pa.Table.from_pylist(self.rows, schema=SCHEMA))
            self.rows = []

    def close(self) -> None:
        """Write what is buffered and close both files."""
        self._flush()
        self.parquet.close()
        self.json.close()


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
    return f"{head}>\n    <{kind} message={message}>{body}</{kind}>\n  </testcase>\n"


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

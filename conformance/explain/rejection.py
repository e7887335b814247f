"""A trace's rejection, read from the results of `kreplica conform` (`--out`), for the
pictures: the pinpointed step, the variables that differ, and the false conjunct."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kreplica.conformance.errors import TraceError
from kreplica.conformance.explain.timeline import Rejection
from kreplica.conformance.tla.itf import LINE_ID
from kreplica.conformance.validate.why import why_text

RESULTS = "results.json"
"""The JSON-lines results file of a result set (one row per trace)."""

VALUE_CHARS = 120
"""The longest value a rejection shows (longer ones are cut)."""


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    file = path / RESULTS if path.is_dir() else path
    try:
        with file.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    raise TraceError(f"{file}: line {number} is not a result row") from None
                if not isinstance(row, dict) or "trace_id" not in row:
                    raise TraceError(f"{file}: line {number} is not a result row")
                yield row
    except OSError as err:
        raise TraceError(f"cannot read the results {file}: {err.strerror or err}") from None


def _same_trace(trace_id: str, trace: Path) -> bool:
    """A result row's id names `trace`: the same file, or the same line of the same corpus."""
    if trace_id == str(trace):
        return True
    ours, theirs = LINE_ID.match(str(trace)), LINE_ID.match(trace_id)
    if ours and theirs and not trace.exists():
        if ours["line"] != theirs["line"]:
            return False
        trace_id, trace = theirs["path"], Path(ours["path"])
    try:
        return Path(trace_id).resolve() == trace.resolve()
    except (OSError, ValueError):
        return False


def find_row(results: Path, trace: Path) -> dict[str, Any]:
    """The result row of `trace` (TraceError if the results have none, or are not results)."""
    rows = list(_rows(results))
    for row in rows:
        if _same_trace(str(row["trace_id"]), trace):
            return row
    named = [r for r in rows if Path(str(r["trace_id"])).name == trace.name]
    if len(named) == 1:
        return named[0]
    raise TraceError(f"the results {results} have no row for {trace}")


def _cut(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"))
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"


def rejection_of(row: dict[str, Any]) -> Rejection | None:
    """The rejection a result row records (None: the trace conforms, or could not be
    checked)."""
    if row.get("verdict") != "violates" or row.get("step") is None:
        return None
    diff = json.loads(row.get("diff") or "{}")
    differs = tuple(
        (name, _cut(d["expected"]), " or ".join(dict.fromkeys(_cut(g) for g in d["got"][:3])))
        for name, d in diff.items()
    )
    return Rejection(int(row["step"]), str(row.get("reason", "")), differs, why_text(row))

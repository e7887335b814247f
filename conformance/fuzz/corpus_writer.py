"""The fuzzer's corpus: every run's ITF trace appended to a JSON-lines file, one line each.

`CorpusWriter(path)` opens (or creates) the file for appending; `append(trace)` writes the
trace as one line of compact JSON with a single `write` (the file is opened O_APPEND), so a
crash loses at most the line being written and never touches the lines before it. A file whose
last line has no newline is mended when it is opened again, and nothing in it is lost: a last
line that is a whole JSON value (written by hand or by another tool) gets its newline; a partial
one (a write a crash interrupted) is moved to `<file>.partial`, so the new lines start cleanly.
`itf.iter_jsonl_traces` reads the result.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import TracebackType

from kreplica.conformance.errors import KreplicaError
from kreplica.conformance.tla.itf import ItfTrace

CHUNK = 1 << 16
"""Bytes read at a time when looking for the last newline of an existing file."""


class CorpusError(KreplicaError):
    """The corpus file cannot be opened or written."""


def _oserror(path: Path, err: OSError) -> CorpusError:
    """One line naming the file and what went wrong."""
    return CorpusError(f"cannot write corpus {path}: {err.strerror or err}")


def _complete_length(fd: int) -> int:
    """The length of the file up to and including its last newline (0 if it has none)."""
    end = os.lseek(fd, 0, os.SEEK_END)
    pos = end
    while pos > 0:
        start = max(0, pos - CHUNK)
        chunk = os.pread(fd, pos - start, start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        pos = start
    return 0


def _is_json(data: bytes) -> bool:
    """Whether `data` is one whole JSON value (a line that only lacks its newline)."""
    try:
        json.loads(data)
    except (ValueError, RecursionError):
        return False
    return True


class CorpusWriter:
    """Appends ITF traces to a JSON-lines file, one flushed line each."""

    def __init__(self, path: Path) -> None:
        """Open `path` for appending (creating it and its directory); CorpusError if not."""
        self.path = path
        self.written = 0
        self.repaired = 0
        """Bytes of a partial last line moved to `set_aside` when the file was opened."""
        self.set_aside: Path | None = None
        """Where a partial last line went (None: there was none)."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o666)
        except OSError as err:
            raise _oserror(path, err) from None
        try:
            self._repair()
        except OSError as err:
            os.close(self._fd)
            raise _oserror(path, err) from None

    def _repair(self) -> None:
        """Mend a last line without a newline: end a whole JSON value with one; move a partial
        line (a write a crash interrupted) to `<file>.partial` and cut it off."""
        end = os.lseek(self._fd, 0, os.SEEK_END)
        complete = _complete_length(self._fd)
        if complete == end:
            return
        tail = os.pread(self._fd, end - complete, complete)
        if _is_json(tail):
            os.write(self._fd, b"\n")
            return
        self.set_aside = self.path.with_name(self.path.name + ".partial")
        with self.set_aside.open("ab") as aside:
            aside.write(tail + b"\n")
            aside.flush()
            os.fsync(aside.fileno())
        os.ftruncate(self._fd, complete)
        self.repaired = end - complete

    def append(self, trace: ItfTrace) -> None:
        """Write one trace as one line; CorpusError if it cannot be written."""
        line = json.dumps(trace.to_json(), ensure_ascii=False, separators=(",", ":")) + "\n"
        self._write(line.encode("utf-8"))
        self.written += 1

    def append_lines(self, data: bytes, count: int) -> None:
        """Write `count` whole lines that another writer wrote (a Spark task's corpus, read
        back as bytes: `fuzz.swarm`), as they are; CorpusError if they cannot be written."""
        if data and not data.endswith(b"\n"):
            raise ValueError("append_lines takes whole lines, each ending in a newline")
        self._write(data)
        self.written += count

    def _write(self, data: bytes) -> None:
        """Write all of `data` (a write may take less than it was given)."""
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        except OSError as err:
            raise _oserror(self.path, err) from None

    def close(self) -> None:
        """Sync the file to disk and close it."""
        if self._fd < 0:
            return
        try:
            os.fsync(self._fd)
        except OSError as err:
            raise _oserror(self.path, err) from None
        finally:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> CorpusWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

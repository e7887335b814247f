"""Where traces come from: ITF files (one trace each) and JSON-lines corpora (one per line).

A trace is handed on as `(trace id, JSON text)`, unparsed: decoding happens in the worker
that checks it, so a malformed trace becomes that trace's error row, not a crash. The id is
the file's path, with `:line` for a corpus line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from kreplica.conformance.errors import TraceError

CORPUS_SUFFIXES = (".jsonl", ".ndjson")
TRACE_SUFFIXES = (".json",)

Item = tuple[str, str]


def is_corpus(name: str) -> bool:
    """A JSON-lines corpus (one trace per line) rather than one ITF trace."""
    return name.endswith(CORPUS_SUFFIXES)


def split_file(name: str, content: str) -> list[Item]:
    """The traces in one file's content: its lines for a corpus, else the whole file."""
    if not is_corpus(name):
        return [(name, content)]
    return [(f"{name}:{n}", line) for n, line in enumerate(content.splitlines(), 1) if line.strip()]


def local_files(paths: Sequence[str]) -> list[Path]:
    """The trace files under local `paths` (directories are searched recursively), sorted."""
    found: list[Path] = []
    for text in paths:
        path = Path(text)
        if path.is_dir():
            found += sorted(
                p
                for p in path.rglob("*")
                if p.is_file() and p.name.endswith(TRACE_SUFFIXES + CORPUS_SUFFIXES)
            )
        elif path.is_file():
            found.append(path)
        else:
            raise TraceError(f"{text}: no such file or directory")
    if not found:
        raise TraceError(f"no trace files (*.json, *.jsonl) under {', '.join(paths)}")
    return found


def iter_local(files: Iterable[Path]) -> Iterator[Item]:
    """Every trace of local `files`, one at a time (a corpus is read line by line)."""
    for path in files:
        name = str(path)
        try:
            if is_corpus(name):
                with path.open(encoding="utf-8", errors="replace") as handle:
                    for n, line in enumerate(handle, 1):
                        if line.strip():
                            yield f"{name}:{n}", line
            else:
                yield name, path.read_text(encoding="utf-8", errors="replace")
        except OSError as err:
            yield name, f"<unreadable: {err.strerror}>"


def batches(items: Iterable[Item], size: int) -> Iterator[list[Item]]:
    """Group items into lists of at most `size`."""
    batch: list[Item] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch

"""Output paths, checked before any long work: a run that cannot write its results is told so at
once, in one line, not after minutes of model checking or fuzzing (and then with its findings
lost)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from kreplica.conformance.errors import KreplicaError


def _nearest_existing(path: Path) -> Path:
    """`path`, or its closest ancestor that exists."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _directory_problem(path: Path) -> str | None:
    """Why no file can be written in the directory `path` (None: it can, or can be created)."""
    existing = _nearest_existing(path)
    if not existing.is_dir():
        return f"{existing} is not a directory"
    try:  # a probe, not os.access: root passes access() where the kernel refuses (/proc)
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        return f"{existing} is not writable ({err.strerror or err})"
    return None


def check_output_dir(path: Path, what: str) -> None:
    """KreplicaError unless `path` is a directory that exists and can be written, or can be
    created (its closest existing ancestor is a writable directory). Leaves nothing behind."""
    problem = "not a directory" if path.is_file() else _directory_problem(path)
    if problem is not None:
        raise KreplicaError(f"cannot write {what} {path}: {problem}")


def check_output_file(path: Path, what: str) -> None:
    """KreplicaError unless the file `path` can be written (or created). Creates nothing."""
    if path.is_dir():
        problem: str | None = "it is a directory"
    elif path.exists():
        problem = None if os.access(path, os.W_OK) else "not writable"
    else:
        problem = _directory_problem(path.parent)
    if problem is not None:
        raise KreplicaError(f"cannot write {what} {path}: {problem}")

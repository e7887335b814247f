"""An overlay: a folder that, first on PYTHONPATH, is the `kreplica` package with one file of
kreplica.impl mutated and everything else the real code.

src/kreplica/ is the import root, and its two entries `impl` and `conformance` are links to the
top-level folders. The overlay copies that root's `__init__.py`, links `conformance` to the
real folder, and makes `impl` a real folder of links to the real modules but one, which it
writes mutated. A process started with `env(overlay)` imports the mutated module; this process
is untouched. Pinned by tests/test_mutation.py (a subprocess sees the mutation).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import kreplica
from kreplica.conformance.mutation.operators import Mutant
from kreplica.conformance.mutation.sites import impl_dir, mutated_source


def package_root() -> Path:
    """The real import root's `kreplica` folder (src/kreplica)."""
    return Path(kreplica.__file__).parent


def build_overlay(mutant: Mutant, where: Path) -> Path:
    """Make the overlay of one mutant in the empty-or-new folder `where`; return `where` (the
    folder to put first on PYTHONPATH)."""
    real_impl = impl_dir()
    package = where / "kreplica"
    (package / "impl").mkdir(parents=True)
    for entry in package_root().iterdir():
        if entry.name in ("impl", "conformance") or entry.name.startswith("__pycache__"):
            continue
        if entry.is_file():
            shutil.copy2(entry, package / entry.name)
    os.symlink(Path(package_root() / "conformance").resolve(), package / "conformance")
    for entry in sorted(real_impl.iterdir()):
        if entry.name == "__pycache__":
            continue
        target = package / "impl" / entry.name
        if entry.name == mutant.file:
            source = entry.read_text(encoding="utf-8")
            target.write_text(mutated_source(mutant, source), encoding="utf-8")
        else:
            os.symlink(entry, target)
    return where


def overlay_env(overlay: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a process that imports the overlay's kreplica (PYTHONPATH first)."""
    env = dict(os.environ if base is None else base)
    rest = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(overlay) + (os.pathsep + rest if rest else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # the real tree's caches stay the real code's
    return env

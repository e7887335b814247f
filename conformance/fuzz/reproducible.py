"""Make a seeded Hypothesis campaign depend on its seed alone.

Hypothesis (6.1xx) sometimes draws an integer from the constants it finds in the *local*
modules that happen to be imported (`hypothesis.internal.conjecture.providers`). Which
modules those are depends on the process: a test that imported `kreplica.conformance.tla.tlc`
before the fuzzer ran, or the script that started it, changes the constants and so the runs
a seed generates. `kreplica fuzz --seed 0` then finds a bug in one process and not in
another. While a campaign runs, `local_constants_off()` hides the local constants, so a seed
reproduces the same runs in any process; the global constants (0, 1, -1, ...) stay.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any


def _import_providers() -> ModuleType | None:
    """Hypothesis's private providers module, or None if a release moved it (campaigns then
    merely lose this reproducibility)."""
    try:
        return importlib.import_module("hypothesis.internal.conjecture.providers")
    except ImportError:  # pragma: no cover
        return None


_providers = _import_providers()


@contextmanager
def local_constants_off() -> Iterator[bool]:
    """Within the block Hypothesis draws no constants from local modules; yields whether
    that could be arranged (False if this Hypothesis has no such feature)."""
    providers: Any = _providers
    getter = getattr(providers, "_get_local_constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    empty = _empty_constants()
    if getter is None or cache is None or empty is None:
        yield False
        return
    cache.cache.clear()  # it may hold constants drawn from local modules already
    providers._get_local_constants = lambda: empty
    try:
        yield True
    finally:
        providers._get_local_constants = getter
        cache.cache.clear()


def _empty_constants() -> Any:
    """An empty `Constants` of this Hypothesis, or None."""
    current = getattr(_providers, "_local_constants", None)
    if current is None:
        return None
    try:
        return type(current)(**{name: type(getattr(current, name))() for name in _FIELDS})
    except (TypeError, AttributeError):
        return None


_FIELDS = ("integers", "floats", "bytes", "strings")

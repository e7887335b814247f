"""A state's key: the same bytes for the same valuation of the spec's variables, whether TLC
printed it or an ITF trace recorded it.

TLC and ITF write one value differently (record fields in another order, a function of 1..n as
a sequence or as `#map`), so the key is a digest of a canonical text: sets and functions sorted,
records and functions with the domain 1..n written as sequences. Rules: this module knows the
spec's variable names (`tla.vocabulary.VARIABLES`) and nothing of graphs or traces.
`tests/test_coverage.py` checks that a state printed by TLC and the same state recorded in ITF
get one key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from kreplica.conformance.tla.tlavalue import Map, ModelValue, Record, Value
from kreplica.conformance.tla.vocabulary import VARIABLES

StateKey = bytes
"""A state's digest (16 bytes)."""


def canonical(value: Value) -> str:
    """The canonical text of a value: equal TLA+ values, and only they, give equal texts."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, ModelValue):
        return f"@{value.name}"
    if isinstance(value, frozenset):
        return "{" + ",".join(sorted(canonical(v) for v in value)) + "}"
    if isinstance(value, tuple):
        return "<" + ",".join(canonical(v) for v in value) + ">"
    if isinstance(value, Record | Map):
        return _function(value)
    raise TypeError(f"not a TLA+ value: {value!r}")


def _function(value: Record | Map) -> str:
    """A function's canonical text: a sequence when its domain is 1..n, else sorted pairs."""
    pairs_of: dict[Value, Value] = dict(value.items())
    numbers = [k for k in pairs_of if isinstance(k, int) and not isinstance(k, bool)]
    if len(numbers) == len(pairs_of) and sorted(numbers) == list(range(1, len(numbers) + 1)):
        return canonical(tuple(pairs_of[i] for i in range(1, len(numbers) + 1)))
    pairs = sorted(f"{canonical(k)}:{canonical(v)}" for k, v in value.items())
    return "[" + ",".join(pairs) + "]"


def state_key(values: Mapping[str, Value]) -> StateKey:
    """The key of a state: a digest of every spec variable's canonical text (KeyError if one
    is missing)."""
    text = "\n".join(canonical(values[name]) for name in VARIABLES)
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def covers_every_variable(names: object) -> bool:
    """Whether `names` (a trace's vars) holds every spec variable, so its states have keys."""
    return isinstance(names, list | tuple | set | frozenset) and set(VARIABLES) <= set(names)

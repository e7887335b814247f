"""Hypothesis strategies for TLA+ values (shared by the value and ITF tests)."""

from __future__ import annotations

from hypothesis import strategies as st

from kreplica.conformance.tla.tlavalue import Map, ModelValue, Record, Value

_names = st.from_regex(r"[a-z][a-zA-Z0-9_]{0,6}", fullmatch=True)
_scalars = st.one_of(
    st.integers(min_value=-(2**31), max_value=2**31 - 1),
    st.text(max_size=8),
    st.builds(ModelValue, st.from_regex(r"[A-Z][a-z0-9_]{0,5}", fullmatch=True)),
)


def _extend(children: st.SearchStrategy[Value]) -> st.SearchStrategy[Value]:
    """Compound values over `children` (sets hold one kind, so no TRUE/1 collisions)."""
    return st.one_of(
        st.frozensets(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(_names, children, min_size=1, max_size=4).map(Record),
        st.dictionaries(children, children, min_size=1, max_size=3).map(Map),
    )


values: st.SearchStrategy[Value] = st.one_of(
    st.booleans(), st.recursive(_scalars, _extend, max_leaves=12)
)

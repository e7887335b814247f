"""The fuzzer's three uses of Hypothesis internals, in one place, checked against 6.170.17.

Hypothesis's internal modules carry no compatibility promise, so the state machine touches
them only through this module, and each use says what is lost when a release moves it:
- `draw_the_one_rule`: the machine has one rule (`machine.ReplicationMachine.act`), which
  draws what happens itself. Hypothesis would still draw it each step through the machine's
  `RuleStrategy` (its preconditions, its swarm testing's feature flags, a filtered sample of
  one rule): three draws and their bookkeeping, about a fifth of a step's time. The shim sets
  the machine's private `_rules_strategy` to `st.just` that rule. If a release moves it, the
  `RuleStrategy` draws the one rule again (swarm testing cannot switch off a machine's only
  rule): the runs and their choices are the same, only slower.
- `bytes_drawer`: the rule's choices (the run's plan, which kind of step, which of its
  enabled steps) are integers read from bytes choices of the test case (`ByteChoices`), each
  drawn by `ConjectureData.draw_bytes` (reached through `current_build_context`), without the
  span, validation and description a strategy's draw costs: one choice serves the eight steps
  of a Hypothesis step, where one integer choice per integer cost a third of a step's time.
  Hypothesis shrinks bytes towards zero, and so each integer towards its least value. If a
  release moves `draw_bytes`, each chunk is drawn as `st.binary` of its size through the test
  case's `draw`: the same choices in the same order (the runs a seed makes stay the same),
  slower.
- `stopped_by_hypothesis`: whether Hypothesis's `StopTest` (`hypothesis.errors`, not
  documented) is in flight while a run is torn down (`runs.StoppedRunFailure` says why).
  If a release renames it, no run is taken for stopped, and a failure found in the settle
  phase of an overrun run is lost again, as before issue #43.
The release is pinned in pyproject.toml. `stopped_by_hypothesis` is held by
`tests/test_fuzz_liveness.py`, which overruns a run for real; `draw_the_one_rule` and
`bytes_drawer` by `tests/test_hypothesis_shim.py` (a machine's one rule is drawn without a
choice; the drawer draws one choice of the size asked, and each integer read from it shrinks
as far as it goes alone).
`reproducible.py`, the third touch of internals, has its own module: it wraps a campaign, not
a machine.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from hypothesis.control import current_build_context

try:
    from hypothesis.errors import StopTest
except ImportError:  # pragma: no cover

    class StopTest(BaseException):  # type: ignore[no-redef]
        """Stands in for a StopTest this Hypothesis does not have: never raised."""


CHECKED_AGAINST = "6.170.17"
"""The Hypothesis release these uses were read against."""


def draw_the_one_rule(machine: Any) -> bool:
    """Let Hypothesis take the one rule of `machine` (a RuleBasedStateMachine with a single
    rule, in its `__init__`) each step without drawing it; whether that could be arranged
    (False: the machine has other rules, or this Hypothesis moved its rule strategy)."""
    rules = getattr(getattr(machine, "_rules_strategy", None), "rules", None)
    if not isinstance(rules, list) or len(rules) != 1:
        return False
    machine._rules_strategy = st.just((rules[0], {}))
    return True


IntegerDrawer = Callable[[int, int], int]
"""Draws an integer in [lo, hi], inclusive; it shrinks to lo (`ByteChoices` is one)."""


BytesDrawer = Callable[[int], bytes]
"""Draws `size` bytes as one choice of the test case; it shrinks towards zero bytes."""


def bytes_drawer() -> BytesDrawer:
    """The bytes drawer of the test case Hypothesis is running (InvalidArgument outside one):
    its `draw_bytes` for exactly `size` bytes, or where this Hypothesis has none,
    `st.binary` of that size drawn in it."""
    data: Any = current_build_context().data
    raw = getattr(data, "draw_bytes", None)
    if callable(raw):
        return lambda size: raw(size, size)
    return lambda size: data.draw(st.binary(min_size=size, max_size=size))  # pragma: no cover


class ByteChoices:
    """Integers in [lo, hi] (a range of at most 2**16 values) read in turn from bytes choices
    of the test case (`BytesDrawer`), two bytes each, so that shrinking the bytes towards zero
    shrinks each integer towards lo; a new choice of `chunk` bytes is drawn when the last is
    spent. An `IntegerDrawer`."""

    __slots__ = ("_at", "_chunk", "_data", "_draw_bytes")

    def __init__(self, draw_bytes: BytesDrawer, chunk: int) -> None:
        self._draw_bytes = draw_bytes
        self._chunk = chunk
        self._data = b""
        self._at = 0

    def __call__(self, lo: int, hi: int) -> int:
        at = self._at
        if at + 2 > len(self._data):
            self._data, at = self._draw_bytes(self._chunk), 0
        self._at = at + 2
        return lo + ((self._data[at] << 8) | self._data[at + 1]) % (hi - lo + 1)


def stopped_by_hypothesis() -> bool:
    """Whether Hypothesis has stopped the run being torn down: its StopTest is in flight
    (the teardown runs in a `finally` of Hypothesis's stateful loop). In 6.170 any exception
    a teardown raises then is discarded
    (`core.StateForActualGivenExecution._execute_once_for_engine`: data frozen, StopTest)."""
    return isinstance(sys.exc_info()[1], StopTest)

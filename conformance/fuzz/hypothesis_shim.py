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
- `integer_drawer`: the rule's choices (which kind of step, which of its enabled steps) are
  drawn as bare integer choices of the test case (`ConjectureData.draw_integer`, reached
  through `current_build_context`), without the span, validation and description a strategy's
  draw costs. Hypothesis shrinks them as any choice. If a release moves `draw_integer`, each
  is drawn as `st.integers(lo, hi)` through the test case's `draw`: the same choices in the
  same order (the runs a seed makes stay the same), slower.
- `stopped_by_hypothesis`: whether Hypothesis's `StopTest` (`hypothesis.errors`, not
  documented) is in flight while a run is torn down (`runs.StoppedRunFailure` says why).
  If a release renames it, no run is taken for stopped, and a failure found in the settle
  phase of an overrun run is lost again, as before issue #43.
The release is pinned in pyproject.toml. `stopped_by_hypothesis` is held by
`tests/test_fuzz_liveness.py`, which overruns a run for real; `draw_the_one_rule` and
`integer_drawer` by `tests/test_hypothesis_shim.py` (a machine's one rule is drawn without a
choice; the drawer's choices are the choices `st.integers` makes, and shrink like them).
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
"""Draws an integer in [lo, hi], inclusive, as one choice of the test case; it shrinks to lo."""


def integer_drawer() -> IntegerDrawer:
    """The drawer of the test case Hypothesis is running (InvalidArgument outside one): its
    `draw_integer`, or where this Hypothesis has none, `st.integers(lo, hi)` drawn in it."""
    data: Any = current_build_context().data
    raw = getattr(data, "draw_integer", None)
    if callable(raw):
        return raw  # type: ignore[no-any-return]
    return lambda lo, hi: data.draw(st.integers(lo, hi))  # pragma: no cover


def stopped_by_hypothesis() -> bool:
    """Whether Hypothesis has stopped the run being torn down: its StopTest is in flight
    (the teardown runs in a `finally` of Hypothesis's stateful loop). In 6.170 any exception
    a teardown raises then is discarded
    (`core.StateForActualGivenExecution._execute_once_for_engine`: data frozen, StopTest)."""
    return isinstance(sys.exc_info()[1], StopTest)

"""The fuzzer's two uses of Hypothesis internals, in one place, checked against 6.170.17.

Hypothesis's internal modules carry no compatibility promise, so the state machine touches
them only through this module, and each use says what is lost when a release moves it:
- `keep_every_rule_on`: Hypothesis's swarm testing switches a machine's rules off for a whole
  run at random (`RuleStrategy.enabled_rules_strategy`, a shared `FeatureStrategy`). A run
  without `deliver` or `fetch` cannot make progress, so the fuzzer keeps every rule on (its
  plan varies the faults of each run instead, `plan.swarm`), by setting that private
  attribute of the machine's `_rules_strategy` to always-enabled `FeatureFlags`. If a release
  moves either, rules are switched off again: runs differ from the ones a seed made before,
  and some make no progress, but the fuzzer still runs.
- `stopped_by_hypothesis`: whether Hypothesis's `StopTest` (`hypothesis.errors`, not
  documented) is in flight while a run is torn down (`runs.StoppedRunFailure` says why).
  If a release renames it, no run is taken for stopped, and a failure found in the settle
  phase of an overrun run is lost again, as before issue #43.
The release is pinned in pyproject.toml. `stopped_by_hypothesis` is held by
`tests/test_fuzz_liveness.py`, which overruns a run for real; `keep_every_rule_on` by
`tests/test_hypothesis_shim.py` (no draw of the rule flags switches a rule off, where without
it one does) and by the corpora a seed writes (`kreplica fuzz --seed 1 --corpus F`, the same
byte for byte as before it moved here).
`reproducible.py`, the third touch of internals, has its own module: it wraps a campaign, not
a machine.
"""

from __future__ import annotations

import sys
from typing import Any

from hypothesis import strategies as st

try:
    from hypothesis.errors import StopTest
except ImportError:  # pragma: no cover

    class StopTest(BaseException):  # type: ignore[no-redef]
        """Stands in for a StopTest this Hypothesis does not have: never raised."""


try:
    from hypothesis.strategies._internal.featureflags import FeatureFlags
except ImportError:  # pragma: no cover
    FeatureFlags = None  # type: ignore[assignment,misc]

CHECKED_AGAINST = "6.170.17"
"""The Hypothesis release these uses were read against."""


def keep_every_rule_on(machine: Any) -> bool:
    """Keep every rule of `machine` (a RuleBasedStateMachine, in its `__init__`) enabled for
    the whole run; whether that could be arranged (False: this Hypothesis moved it)."""
    rules: Any = getattr(machine, "_rules_strategy", None)
    if FeatureFlags is None or not hasattr(rules, "enabled_rules_strategy"):
        return False  # pragma: no cover
    rules.enabled_rules_strategy = st.just(FeatureFlags())
    return True


def stopped_by_hypothesis() -> bool:
    """Whether Hypothesis has stopped the run being torn down: its StopTest is in flight
    (the teardown runs in a `finally` of Hypothesis's stateful loop). In 6.170 any exception
    a teardown raises then is discarded
    (`core.StateForActualGivenExecution._execute_once_for_engine`: data frozen, StopTest)."""
    return isinstance(sys.exc_info()[1], StopTest)

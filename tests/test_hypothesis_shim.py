"""The fuzzer's touches of Hypothesis internals (conformance/fuzz/hypothesis_shim.py).

`keep_every_rule_on` is checked the way Hypothesis itself would switch a rule off: by drawing
from the machine's rule-enabling strategy. Without the shim some draw switches a rule off;
with it, no draw does (Hypothesis's `find` searches for one and must fail).
"""

from __future__ import annotations

import pytest
from hypothesis import find, settings
from hypothesis.errors import NoSuchExample
from hypothesis.stateful import RuleBasedStateMachine, rule

from kreplica.conformance.fuzz.hypothesis_shim import keep_every_rule_on

SEARCH = settings(max_examples=500, database=None)


class Machine(RuleBasedStateMachine):
    """Two rules, and the shim applied (or not) as the fuzzer's machine applies it."""

    def __init__(self, shim: bool) -> None:
        super().__init__()
        self.kept = keep_every_rule_on(self) if shim else False

    @rule()
    def deliver(self) -> None:
        """A rule a run cannot do without."""

    @rule()
    def crash(self) -> None:
        """Another rule."""


def switched_off(machine: Machine) -> object:
    """A draw of the machine's rule flags that switches `deliver` off (NoSuchExample if none)."""
    strategy = machine._rules_strategy.enabled_rules_strategy
    return find(strategy, lambda flags: not flags.is_enabled("deliver"), settings=SEARCH)


def test_without_the_shim_hypothesis_swarm_switches_a_rule_off() -> None:
    assert switched_off(Machine(shim=False)) is not None


def test_with_the_shim_no_draw_switches_a_rule_off() -> None:
    machine = Machine(shim=True)
    assert machine.kept
    with pytest.raises(NoSuchExample):
        switched_off(machine)

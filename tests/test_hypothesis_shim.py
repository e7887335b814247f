"""The fuzzer's touches of Hypothesis internals (conformance/fuzz/hypothesis_shim.py).

`draw_the_one_rule` is checked by what a machine's rule strategy then draws: its one rule, with
no choice made for it (a machine of two rules keeps Hypothesis's own). `integer_drawer` is
checked against `st.integers`: drawn in a test case, its choices are the ones `st.integers`
makes, and Hypothesis shrinks them to the same minimal example.
"""

from __future__ import annotations

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from kreplica.conformance.fuzz.hypothesis_shim import draw_the_one_rule, integer_drawer

SEARCH = settings(max_examples=500, database=None)


class OneRule(RuleBasedStateMachine):
    """One rule, which draws its own choices, as the fuzzer's machine does."""

    def __init__(self) -> None:
        super().__init__()
        self.drawn = draw_the_one_rule(self)
        self.seen: list[int] = []

    @rule()
    def act(self) -> None:
        """The one rule."""
        self.seen.append(integer_drawer()(0, 63))


class TwoRules(RuleBasedStateMachine):
    """Two rules: Hypothesis must go on choosing between them."""

    def __init__(self) -> None:
        super().__init__()
        self.drawn = draw_the_one_rule(self)

    @rule()
    def deliver(self) -> None:
        """A rule."""

    @rule()
    def crash(self) -> None:
        """Another rule."""


def test_a_machines_one_rule_is_taken_without_a_choice() -> None:
    machine = OneRule()
    assert machine.drawn
    only, arguments = find(machine._rules_strategy, lambda drawn: True)
    assert only.function.__name__ == "act" and arguments == {}
    minimal = find(st.tuples(machine._rules_strategy, st.integers(0, 9)), lambda t: t[1] >= 5)
    assert minimal[1] == 5  # the rule took no choice: the integer is the only one to shrink


def test_a_machine_of_two_rules_keeps_hypothesiss_rule_strategy() -> None:
    machine = TwoRules()
    assert not machine.drawn
    assert type(machine._rules_strategy).__name__ == "RuleStrategy"


@st.composite
def drawn_by_the_shim(draw: st.DrawFn) -> tuple[int, int, int]:
    """Three integers drawn by `integer_drawer` (`draw` makes no choice: the drawer is the
    test case's)."""
    draw(st.just(None))
    integer = integer_drawer()
    return integer(0, 63), integer(0, 63), integer(0, 9)


def test_the_drawers_choices_shrink_as_st_integers_choices_do() -> None:
    def wanted(t: tuple[int, int, int]) -> bool:
        return sum(t) >= 70 and t[2] >= 3

    by_integers = st.tuples(st.integers(0, 63), st.integers(0, 63), st.integers(0, 9))
    assert find(drawn_by_the_shim(), wanted, settings=SEARCH) == find(
        by_integers, wanted, settings=SEARCH
    )


@settings(max_examples=20, database=None)
@given(st.data())
def test_the_drawer_draws_what_st_integers_would_from_the_same_choices(data: st.DataObject) -> None:
    first = integer_drawer()(0, 5)
    assert 0 <= first <= 5
    assert data.conjecture_data.choices[-1] == first  # one choice, the value itself


def test_outside_a_test_case_there_is_no_drawer() -> None:
    with pytest.raises(InvalidArgument):
        integer_drawer()


def test_a_stateful_run_of_the_one_rule_draws_its_choices() -> None:
    seen: list[int] = []

    class Recording(OneRule):
        def teardown(self) -> None:
            seen.extend(self.seen)

    run_state_machine_as_test(Recording, settings=settings(max_examples=5, database=None))
    assert seen and all(0 <= v <= 63 for v in seen)

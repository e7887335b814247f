"""The fuzzer's touches of Hypothesis internals (conformance/fuzz/hypothesis_shim.py).

`draw_the_one_rule` is checked by what a machine's rule strategy then draws: its one rule, with
no choice made for it (a machine of two rules keeps Hypothesis's own). `bytes_drawer` draws one
choice of the size asked, and `ByteChoices` reads integers from such choices: in range, lo from
zero bytes, a new choice when one is spent, and Hypothesis shrinks each as far as it goes
alone.
"""

from __future__ import annotations

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from kreplica.conformance.fuzz.hypothesis_shim import ByteChoices, bytes_drawer, draw_the_one_rule

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
        self.seen.append(ByteChoices(bytes_drawer(), 4)(0, 63))


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
    """Three integers read by `ByteChoices` from choices of four bytes (`draw` makes no
    choice: the drawer is the test case's)."""
    draw(st.just(None))
    integer = ByteChoices(bytes_drawer(), 4)
    return integer(0, 63), integer(0, 63), integer(0, 9)


def test_the_integers_shrink_each_to_its_least_value() -> None:
    """Hypothesis shrinks the bytes, and so each integer, as far as it goes alone: no integer
    of the minimal example can be made smaller with the others kept. (`st.integers` choices
    shrink further, moving a sum from one integer to the next: (0, 61, 9) here; the fuzzer's
    failures are then minimised step by step, `replay.schedule.minimize`.)"""

    def wanted(t: tuple[int, int, int]) -> bool:
        return sum(t) >= 70 and t[2] >= 3

    found = find(drawn_by_the_shim(), wanted, settings=SEARCH)
    assert wanted(found)
    for i in range(3):
        smaller = tuple(v - 1 if j == i else v for j, v in enumerate(found))
        assert found[i] == (0, 0, 3)[i] or not wanted(smaller), found  # type: ignore[arg-type]


@settings(max_examples=20, database=None)
@given(st.data())
def test_the_drawer_draws_one_choice_of_the_size_asked(data: st.DataObject) -> None:
    drawn = bytes_drawer()(6)
    assert len(drawn) == 6
    assert data.conjecture_data.choices[-1] == drawn  # one choice, the bytes themselves


def test_integers_are_read_two_bytes_each_and_a_new_choice_when_spent() -> None:
    chunks = iter([bytes([0, 0, 1, 7, 255]), bytes([0, 65])])
    asked: list[int] = []

    def draw(size: int) -> bytes:
        asked.append(size)
        return next(chunks)

    integer = ByteChoices(draw, 5)
    assert integer(3, 9) == 3  # zero bytes: lo
    assert integer(0, 63) == (1 << 8 | 7) % 64
    assert integer(0, 63) == 65 % 64  # one byte left over: a new choice
    assert asked == [5, 5]


def test_outside_a_test_case_there_is_no_drawer() -> None:
    with pytest.raises(InvalidArgument):
        bytes_drawer()


def test_a_stateful_run_of_the_one_rule_draws_its_choices() -> None:
    seen: list[int] = []

    class Recording(OneRule):
        def teardown(self) -> None:
            seen.extend(self.seen)

    run_state_machine_as_test(Recording, settings=settings(max_examples=5, database=None))
    assert seen and all(0 <= v <= 63 for v in seen)

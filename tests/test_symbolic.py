"""Symbolic checks (issue 14): each pure decision of the implementation against the spec's
operator, on every input within the bounds of kreplica.conformance.symbolic.checks.

For each decision: with the correct protocol the implementation agrees with the oracle on every
input, and the number of inputs z3 enumerated equals the number the bounds imply, counted here
independently (so the check cannot pass on an empty or truncated space). With each seeded bug
of impl/variants.py switched on, the check of its decision finds an input where the buggy
answer is one the spec forbids and the correct implementation's is one it allows.

Three decisions have no seeded bug: end_offset_for (KIP-279 and KIP-101), the truncation point
(R6) and the fetch isolation bound (R15). For them the test shows the check can fail by holding
the implementation to a deliberately wrong oracle: the other KIP's EndOffsetFor, TruncationPoint
with case (d) complete (the follower would not ask again), and a consumer bound at the LEO
instead of the HW.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from math import comb

import pytest

from kreplica.conformance.symbolic import checks
from kreplica.conformance.symbolic.checks import BUG_CHECKS, CHECKS
from kreplica.conformance.symbolic.engine import holds, run
from kreplica.impl.variants import BUGS, Variant

N, E, C = checks.MAX_OFFSET, checks.MAX_EPOCH, checks.CACHE_SIZE


def caches(max_epoch: int, leo: int) -> int:
    """Epoch caches of up to C entries, epochs 0..max_epoch and starts 0..leo, both increasing."""
    return sum(comb(max_epoch + 1, n) * comb(leo + 1, n) for n in range(C + 1))


def count(*ranges: range, where: Callable[..., bool] = lambda *_: True) -> int:
    """How many tuples of the ranges' product satisfy `where`."""
    return sum(1 for t in itertools.product(*ranges) if where(*t))


def hw_inputs() -> int:
    """Leader LEO, HW <= LEO, and per follower (LEO, in ISR, caught up) but not (-1, out, yes)."""
    total = 0
    for leo in range(N + 1):
        per_follower = count(
            range(-1, leo + 1),
            range(2),
            range(2),
            where=lambda r, i, c: not (r < 0 and not i and c),
        )
        total += (leo + 1) * per_follower ** len(checks.FOLLOWERS)
    return total


TN, TE = checks.TRUNCATION_MAX_OFFSET, checks.TRUNCATION_MAX_EPOCH
EXPECTED = {
    "end_offset_for": sum(caches(E, leo) for leo in range(N + 1)) * (E + 2),
    "end_offset_for_kip101": sum(caches(E, leo) for leo in range(N + 1)) * (E + 2),
    "truncation_point": sum(caches(TE, leo) * (leo + 1) for leo in range(TN + 1))
    * (TE + 2)
    * (TN + 2),
    "log_truncation": sum(caches(E, leo) for leo in range(N + 1)) * (N + 1),
    "become_follower_truncation": count(
        range(4), range(-1, E), range(2), range(E + 1), where=lambda _o, old, _n, new: new > old
    ),
    "hw_advance": hw_inputs(),
    "isr_expansion": sum((leo + 1) ** 3 * 2 for leo in range(N + 1)),
    "follower_hw": sum((N - leo + 1) * (N + 1) for leo in range(N + 1)),
    "fetch_bound": sum((leo + 1) ** 2 * N * 2 for leo in range(N + 1)),
    "acks_completion": N * (N + 1) * checks.MAX_ISR**2,
}
"""The inputs each check's bounds hold, counted without z3."""


@pytest.mark.parametrize("name", list(CHECKS))
def test_the_implementation_agrees_with_the_spec_on_every_input_in_bounds(name: str) -> None:
    check = CHECKS[name]
    result = run(check, Variant())
    shown = [c.describe(check) for c in result.counterexamples[:5]]
    assert result.agrees, "\n".join(shown)
    assert result.inputs_checked == EXPECTED[name]


def test_every_seeded_bug_has_a_check() -> None:
    assert set(BUG_CHECKS) == set(BUGS)
    assert set(BUG_CHECKS.values()) <= set(CHECKS)


@pytest.mark.parametrize("bug", list(BUG_CHECKS))
def test_each_seeded_bug_is_found_by_the_check_of_its_decision(bug: str) -> None:
    check = CHECKS[BUG_CHECKS[bug]]
    result = run(check, Variant(bugs=frozenset({bug})), stop_at_first=True)
    assert result.counterexamples, f"{bug}: no disagreement in {result.inputs_checked} inputs"
    found = result.counterexamples[0]
    correct = check.impl(found.inputs, Variant())
    assert not holds(check, found.inputs, found.impl), found.describe(check)
    assert holds(check, found.inputs, correct), found.describe(check)
    assert found.spec is not None and holds(check, found.inputs, found.spec)


WRONG_ORACLES = {
    "end_offset_for": checks.eof_kip101_oracle,
    "end_offset_for_kip101": checks.eof_oracle,
    "truncation_point": functools.partial(checks.truncation_point, complete_d=True),
    "fetch_bound": functools.partial(checks.fb_oracle, consumer_bound="leo"),
}
"""For the decisions with no seeded bug: an oracle that is wrong, which the check must catch."""


@pytest.mark.parametrize("name", list(WRONG_ORACLES))
def test_a_check_without_a_seeded_bug_fails_against_a_wrong_oracle(name: str) -> None:
    check, wrong = CHECKS[name], WRONG_ORACLES[name]
    result = run(check, Variant(), oracle=wrong, stop_at_first=True)
    assert result.counterexamples, f"{name}: the wrong oracle was never contradicted"
    found = result.counterexamples[0]
    assert not holds(check, found.inputs, found.impl, oracle=wrong)
    assert holds(check, found.inputs, found.impl)


def test_a_follower_never_heard_from_but_recently_caught_up_is_outside_the_bounds() -> None:
    """The one input shape hw_domain leaves out, and why: the spec abstracts time, so a
    follower outside the ISR that the leader has not heard from this term is never catching up
    (CatchingUp), while the implementation counts its LEO (-1) while its last caught-up time is
    within replica.lag.time.max.ms, and holds the HW where the spec moves it."""
    given = {"leo": 1, "hw": 0, "rleo2": -1, "isr2": 0, "recent2": 1}
    given |= {"rleo3": -1, "isr3": 0, "recent3": 0}
    check = CHECKS["hw_advance"]
    assert check.impl(given, Variant()) == (0,)
    assert not holds(check, given, (0,))
    assert holds(check, given, (1,))

"""The engine: every input of a bounded z3 space, run on the implementation, held to an oracle.

A `Check` names a decision. Its `domain` is a z3 formula over integer input variables (bounds
and well-formedness); its `oracle` is the spec operator as a z3 formula over the inputs and the
outputs, true exactly when the spec allows those outputs for those inputs; its `impl` runs the
implementation on one concrete input. `run` asks z3 for an input of the domain, runs `impl` on
it, evaluates the oracle on the input and the implementation's answer, then blocks that input
and asks again, until z3 answers unsat: every input in the bounds has been checked, once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import z3

from kreplica.impl.variants import Variant

Z3 = Any
"""A z3 expression (z3-solver ships no type information)."""

Vars = Mapping[str, Z3]
"""Input or output variables by name."""

Inputs = Mapping[str, int]
"""One concrete input: a value per input variable."""

Outcome = tuple[int, ...]
"""The implementation's answer, one integer per output variable (booleans as 0/1)."""


@dataclass(frozen=True)
class Check:
    """One decision: its input space, its spec operator as oracle, and the implementation run."""

    name: str
    spec: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    domain: Callable[[Vars], Z3]
    oracle: Callable[[Vars, Vars], Z3]
    impl: Callable[[Inputs, Variant], Outcome]


@dataclass(frozen=True)
class Counterexample:
    """An input where the implementation's answer is one the spec does not allow."""

    inputs: dict[str, int]
    impl: Outcome
    spec: Outcome | None

    def describe(self, check: Check) -> str:
        """One line: the input, the implementation's answer and one the spec allows."""
        given = ", ".join(f"{k}={v}" for k, v in self.inputs.items())
        got = dict(zip(check.outputs, self.impl, strict=True))
        want = "none" if self.spec is None else dict(zip(check.outputs, self.spec, strict=True))
        return f"{check.name}: {given}: implementation {got}, spec allows {want}"


@dataclass
class Result:
    """How many inputs were checked, the disagreements found, and the time taken."""

    check: str
    inputs_checked: int = 0
    counterexamples: list[Counterexample] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def agrees(self) -> bool:
        """True when the implementation agreed with the oracle on every input checked."""
        return not self.counterexamples


def variables(names: Sequence[str], prefix: str = "") -> dict[str, Z3]:
    """One z3 integer variable per name (called prefix + name in z3, so that an output and an
    input of the same name stay two variables)."""
    return {name: z3.Int(prefix + name) for name in names}


def _value(model: Z3, var: Z3) -> int:
    """The model's value of an integer variable (0 when it leaves it free)."""
    value = model[var]
    return 0 if value is None else int(value.as_long())


@cache
def _constant(value: int) -> Z3:
    """The z3 integer constant `value`, made once."""
    return z3.IntVal(value)


def allowed(formula: Z3, assignment: Mapping[Z3, int]) -> bool:
    """True when the ground formula holds with every variable replaced by its value."""
    pairs = [(var, _constant(value)) for var, value in assignment.items()]
    return bool(z3.is_true(z3.simplify(z3.substitute(formula, *pairs))))


def holds(
    check: Check,
    given: Inputs,
    answer: Outcome,
    oracle: Callable[[Vars, Vars], Z3] | None = None,
) -> bool:
    """True when the oracle (the check's unless given) allows `answer` for the input `given`."""
    ins, outs = variables(check.inputs), variables(check.outputs, "out.")
    assignment = {ins[n]: given[n] for n in check.inputs}
    assignment |= {outs[n]: v for n, v in zip(check.outputs, answer, strict=True)}
    return allowed((oracle or check.oracle)(ins, outs), assignment)


def spec_answer(check: Check, oracle: Z3, ins: Vars, outs: Vars, given: Inputs) -> Outcome | None:
    """One output the oracle allows for the input, or None if it allows none."""
    solver = z3.Solver()
    solver.add(oracle, *[ins[name] == value for name, value in given.items()])
    if solver.check() != z3.sat:
        return None
    model = solver.model()
    return tuple(_value(model, outs[name]) for name in check.outputs)


LEAF_VARIABLES = 5
"""The last inputs are enumerated with blocking clauses, the ones before one value at a time."""


def enumerate_inputs(
    solver: Z3, ins: Vars, names: Sequence[str], depth: int = 0
) -> Iterator[dict[str, int]]:
    """Every model of the solver's assertions, once each, as input values.

    The inputs before the last LEAF_VARIABLES are fixed one value at a time in a solver scope
    (push, enumerate below, pop, exclude the value), the last ones by blocking each model found:
    the same models as blocking them all, without one solver carrying every blocking clause.
    """
    if depth >= len(names) - LEAF_VARIABLES:
        while solver.check() == z3.sat:
            model = solver.model()
            given = {name: _value(model, ins[name]) for name in names}
            yield given
            solver.add(z3.Or([ins[name] != _constant(given[name]) for name in names[depth:]]))
        return
    head = ins[names[depth]]
    while solver.check() == z3.sat:
        value = _value(solver.model(), head)
        solver.push()
        solver.add(head == _constant(value))
        yield from enumerate_inputs(solver, ins, names, depth + 1)
        solver.pop()
        solver.add(head != _constant(value))


def run(
    check: Check,
    variant: Variant,
    oracle: Callable[[Vars, Vars], Z3] | None = None,
    stop_at_first: bool = False,
) -> Result:
    """Check the implementation on every input of the domain; `oracle` overrides the check's."""
    started = time.perf_counter()
    ins, outs = variables(check.inputs), variables(check.outputs, "out.")
    formula = (oracle or check.oracle)(ins, outs)
    solver = z3.Solver()
    solver.add(check.domain(ins))
    result = Result(check.name)
    for given in enumerate_inputs(solver, ins, check.inputs):
        answer = check.impl(given, variant)
        assignment = {ins[n]: given[n] for n in check.inputs}
        assignment |= {outs[n]: v for n, v in zip(check.outputs, answer, strict=True)}
        result.inputs_checked += 1
        if not allowed(formula, assignment):
            spec = spec_answer(check, formula, ins, outs, given)
            result.counterexamples.append(Counterexample(given, answer, spec))
            if stop_at_first:
                break
    result.seconds = time.perf_counter() - started
    return result

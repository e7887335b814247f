"""What makes the fuzzer fast stays exact: a judge remembered for unchanged variables answers
as it would compute (`projection.OnVariables`, `invariants.READS`), and the projection shares
the values a step left unchanged with the state before (docs/fuzzing.md, "Where a step's time
goes")."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from kreplica.conformance.bridge.projection import OnVariables
from kreplica.conformance.fuzz.campaign import run_fuzz
from kreplica.conformance.fuzz.corpus_writer import CorpusWriter
from kreplica.conformance.fuzz.guidance import _abstract_state, abstract_state
from kreplica.conformance.fuzz.setup import FuzzSetup
from kreplica.conformance.judges.invariants import INVARIANTS, READS, violations
from kreplica.conformance.tla.itf import iter_jsonl_traces
from kreplica.impl.variants import parse_variant


def test_a_remembered_answer_is_given_only_for_the_same_values() -> None:
    calls: list[dict[str, Any]] = []

    def count(s: dict[str, Any]) -> int:
        calls.append(s)
        return len(s["log"]) + s["hw"]

    judge = OnVariables(count, ("log", "hw"))
    log = ((1,), (2,))
    assert judge({"log": log, "hw": 1, "msgs": 1}) == 3
    assert judge({"log": log, "hw": 1, "msgs": 2}) == 3  # msgs is not read: remembered
    assert len(calls) == 1 and set(calls[0]) == {"log", "hw"}
    assert judge({"log": ((1,), (2,), (3,)), "hw": 1}) == 4  # another log: computed
    assert judge({"log": log, "hw": 1}) == 3  # not the last one: computed again
    assert len(calls) == 3


def test_a_judge_that_reads_an_undeclared_variable_fails_loudly() -> None:
    judge = OnVariables(lambda s: s["hw"], ("log",))
    with pytest.raises(KeyError, match="hw"):
        judge({"log": (), "hw": 0})


def test_every_invariant_declares_what_it_reads() -> None:
    assert set(READS) == set(INVARIANTS)


@pytest.fixture(scope="module")
def buggy_states(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Any, Any]]:
    """(state before, state) of every step of runs that break invariants: two seeded bugs'
    campaigns recorded without judging (as `kreplica fuzz --no-invariants` does)."""
    corpus = tmp_path_factory.mktemp("speed") / "runs.jsonl"
    for bug in ("hw-from-non-isr", "hw-not-clamped"):
        setup = FuzzSetup(variant=parse_variant([], [bug]), invariants=False, rules=False)
        with CorpusWriter(corpus) as writer:
            run_fuzz(setup, examples=40, max_steps=40, seed_value=1, corpus=writer)
    pairs = []
    for trace in iter_jsonl_traces(Path(corpus)):
        states = [dict(state.values) for state in trace.states]
        for before, state in itertools.pairwise(states):  # shared as the projection shares
            state.update({v: before[v] for v in state if state[v] == before[v]})
        pairs += list(zip([None, *states[:-1]], states, strict=True))
    return pairs


def test_each_invariant_on_what_it_reads_is_the_invariant(buggy_states: list[Any]) -> None:
    """Judged on its declared variables alone, each invariant gives its verdict and reason on
    the whole state, on states that break it too; and remembered across states as the fuzzer
    judges them, every verdict is the one computed afresh."""
    broken = set()
    for before, state in buggy_states:
        for name, check in INVARIANTS.items():
            whole = check(state)
            assert check({v: state[v] for v in READS[name]}) == whole, name
            broken |= {name} if whole else set()
        fresh = [(n, r) for n, c in INVARIANTS.items() if (r := c(state))]
        remembered = [v for v in violations(state, before) if v[0] in INVARIANTS]
        assert remembered == fresh
        assert abstract_state(state) == _abstract_state(state)
    assert "CommittedRecordsOnIsr" in broken and len(broken) >= 2

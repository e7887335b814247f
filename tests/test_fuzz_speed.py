"""What makes the fuzzer fast stays exact: a judge remembered for unchanged variables answers
as it would compute (`projection.OnVariables`, `invariants.READS`), the projection shares
the values a step left unchanged with the state before (docs/fuzzing.md, "Where a step's time
goes"), and what a step cannot have touched (`bridge.touch`) is what the whole projection and
the judges it skips find."""

from __future__ import annotations

import gc
import itertools
import sys
from enum import Enum
from pathlib import Path
from types import BuiltinFunctionType, CodeType, FunctionType, ModuleType
from typing import Any

import pytest

import kreplica.impl
from kreplica.conformance.bridge.projection import OnVariables, Projector
from kreplica.conformance.bridge.touch import client_only
from kreplica.conformance.fuzz.campaign import run_fuzz
from kreplica.conformance.fuzz.corpus_writer import CorpusWriter
from kreplica.conformance.fuzz.guidance import _abstract_state, abstract_state
from kreplica.conformance.fuzz.setup import FuzzSetup
from kreplica.conformance.judges.checked_steps import (
    IMPLEMENTATION_ERROR,
    Judge,
    _timing_violations,
    offset_violations,
)
from kreplica.conformance.judges.invariants import INVARIANTS, READS, violations
from kreplica.conformance.mutation.sites import CORE
from kreplica.conformance.replay.schedule import TP
from kreplica.conformance.tla.itf import iter_jsonl_traces
from kreplica.impl.cluster import Cluster
from kreplica.impl.steps import Crash, DetectFailure, DoWork, Produce, Restart
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


# ---------------------------------------------------------------- what a step can have touched

CLIENT_CODE = frozenset({"cluster.py", "client.py", "network.py", "messages.py", "steps.py"})
"""The files of impl/ a client's step may run (`touch.client_only`): none `kreplica mutate`
edits."""


def _impl_files_run(call: Any) -> set[str]:
    """The files of impl/ whose Python functions run while `call()` runs."""
    impl = Path(kreplica.impl.__file__).resolve().parent
    seen: set[str] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        path = Path(frame.f_code.co_filename).resolve()
        if event == "call" and path.parent == impl:
            seen.add(path.name)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


def _fuzz_with(
    monkeypatch: pytest.MonkeyPatch, patches: dict[tuple[Any, str], Any], bugs: tuple[str, ...]
) -> int:
    """Fuzz the correct protocol and each seeded bug of `bugs` with every check on and the
    given methods patched in: the runs it made. The correct protocol passes and each bug
    fails, by a verdict, not an exception."""
    for (owner, name), wrapper in patches.items():
        monkeypatch.setattr(owner, name, wrapper(getattr(owner, name)))
    runs = 0
    for bug in ("", *bugs):
        setup = FuzzSetup(variant=parse_variant([], [bug] if bug else []))
        result = run_fuzz(setup, examples=25, max_steps=40, seed_value=3, shrink=False)
        failure = result.failure
        assert (failure is None) == (not bug), failure
        assert failure is None or failure.invariant != IMPLEMENTATION_ERROR, failure.reason
        runs += result.stats.runs
    return runs


def test_a_client_step_runs_no_code_a_mutant_edits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The premise of `touch.client_only`: such a step runs only the client's, the network's
    and the cluster's dispatch code, none of the core modules `kreplica mutate` edits."""
    ran: set[str] = set()
    counted = []

    def spy(apply: Any) -> Any:
        def wrapped(self: Cluster, step: Any) -> Any:
            if not client_only(step):
                return apply(self, step)
            out: list[Any] = []
            ran.update(_impl_files_run(lambda: out.append(apply(self, step))))
            counted.append(step)
            return out[0]

        return wrapped

    _fuzz_with(monkeypatch, {(Cluster, "apply"): spy}, ())
    assert len(counted) > 100 and ran and ran <= CLIENT_CODE
    assert not ran & set(CORE)


def test_what_a_step_cannot_have_touched_is_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """After every step, each replica's view the projection kept (a client's step keeps all,
    a step of one broker the others') is the one read afresh, and so is the state; and the
    judges of the logs' offsets and the fetchers' clocks, judging only the brokers a step
    could change, find what they find judging every broker: on seeded bugs too."""
    checked, wrong = [], []

    def fresh(projector: Projector, state: Any) -> None:
        step, kept = projector.cluster.history[-1], dict(projector._views)
        projector._views = {r: projector._view(r) for r in projector.replicas}
        msgs = projector._msgs(projector.cluster.in_flight())
        if projector._views != kept or projector._project(msgs) != state:
            wrong.append(step)  # not raised: the recorder reports an exception as a finding
        checked.append(step)

    def project(method: Any) -> Any:
        def wrapped(self: Projector, *args: Any) -> Any:
            state = method(self, *args)
            fresh(self, state)
            return state

        return wrapped

    def judge(after: Any) -> Any:
        def wrapped(self: Judge, step: Any, seen: Any, events: Any, invariants: bool) -> Any:
            found = after(self, step, seen, events, invariants)
            r = self.recorder
            if found is None and (
                offset_violations(r.cluster, r.tp) or _timing_violations(self, step, seen)
            ):
                wrong.append(step)
            return found

        return wrapped

    patches = {
        (Projector, "client_step"): project,
        (Projector, "step"): project,
        (Judge, "after"): judge,
    }
    _fuzz_with(monkeypatch, patches, ("hw-from-non-isr", "early-ack"))
    assert wrong == []
    assert sum(client_only(step) for step in checked) > 100
    assert sum(isinstance(step, DoWork) for step in checked) > 100


def _replicate(cluster: Cluster) -> None:
    """Run the fair scheduler until every live broker has the leader's log end and HW. Not
    `Cluster.settle`: the fuzz set-up never parks a fetch (replica.fetch.wait.max.ms 0), so the
    cluster is never quiescent, and each settle ran its ten rounds of 100,000 steps (7 s)."""
    for _ in range(100):
        cluster.run_until_quiescent(max_steps=50)
        ends = {
            (log.log_end_offset, log.high_watermark)
            for b in cluster.broker_ids
            if cluster.is_alive(b) and (log := cluster.log(b, TP)) is not None
        }
        if len(ends) == 1:
            return
    raise AssertionError(f"the brokers did not catch up: {ends}")


def _mutable_objects(root: Any, shared: set[int]) -> dict[int, Any]:
    """The objects reachable from `root` that may change (not values: numbers, strings,
    tuples, frozensets, frozen dataclasses; nor code or enum members), not going through
    `shared`."""
    found: dict[int, Any] = {}
    todo = [root]
    seen: set[int] = set()
    while todo:
        obj = todo.pop()
        if id(obj) in seen or id(obj) in shared or isinstance(obj, type | ModuleType | Enum):
            continue  # a class, a module or an enum member: code and constants
        seen.add(id(obj))
        if isinstance(obj, FunctionType | BuiltinFunctionType | CodeType):
            continue
        if not _a_value(obj):
            found[id(obj)] = obj
        todo += gc.get_referents(obj)
    return found


def _a_value(obj: Any) -> bool:
    """An object that cannot change: a number, a string, a tuple, a frozenset, a frozen
    dataclass (what it holds is walked on its own)."""
    if isinstance(obj, int | float | str | bytes | tuple | frozenset) or obj is None:
        return True
    params = getattr(type(obj), "__dataclass_params__", None)
    return params is not None and params.frozen


def test_no_broker_holds_another_brokers_objects() -> None:
    """The premise of `touch.brokers_touched`: a broker's code can reach no object of another
    broker, so a step of one broker changes no other's (the clock, the config, the variant and
    the controller are shared; messages are values). Checked on a cluster that replicated,
    lost a broker and took it back (every broker has run a fetcher, a leader a purgatory)."""
    cluster = FuzzSetup().schedule().cluster()
    for record in range(1, 4):
        cluster.apply(Produce(TP, (100 + record,), -1))
    _replicate(cluster)
    cluster.apply(Crash(1))
    cluster.apply(DetectFailure(1))
    _replicate(cluster)
    cluster.apply(Restart(1))
    _replicate(cluster)
    shared = {id(cluster.clock), id(cluster.config), id(cluster.variant), id(cluster.controller)}
    reach = {
        b: _mutable_objects((cluster.brokers[b], cluster.log_managers[b]), shared)
        for b in cluster.broker_ids
    }
    assert all(len(objects) > 30 for objects in reach.values())
    for a, b in itertools.combinations(cluster.broker_ids, 2):
        common = reach[a].keys() & reach[b].keys()
        assert not common, [type(reach[a][i]).__name__ for i in common]
    controller = _mutable_objects(cluster.controller, {id(cluster.clock), id(cluster.variant)})
    assert not any(controller.keys() & objects.keys() for objects in reach.values())


def test_the_hypothesis_floor_counts_the_draws_it_was_asked_for() -> None:
    """`kreplica bench fuzz --hypothesis-floor`: a campaign's Hypothesis steps and bytes
    choices per step of its runs are what its runs took (what it wrapped is put back after),
    and a machine that only draws takes more CPU per step for more draws."""
    from kreplica.conformance.bench import fuzz as hf
    from kreplica.conformance.fuzz import machine

    before = vars(machine)["bytes_drawer"], vars(machine)["ByteChoices"]
    acts, choices = hf.hypothesis_per_step(examples=20, max_steps=20)
    assert (vars(machine)["bytes_drawer"], vars(machine)["ByteChoices"]) == before
    assert 0 < acts < 1 / 2  # a Hypothesis step takes BURST steps, but for a run's last
    assert acts <= choices <= 2 * acts  # a chunk a Hypothesis step, rarely two
    few, many = hf.floor(1, examples=30, max_steps=30), hf.floor(12, examples=30, max_steps=30)
    assert few.steps > 0 and many.steps > 0 and many.micros > few.micros


def test_a_search_campaign_stops_at_its_runs_or_its_seconds() -> None:
    """`kreplica bench search --examples N`: a campaign takes at most about N runs (Hypothesis
    counts the valid ones) however long it may search, and stops at its seconds however many
    it may take."""
    from kreplica.conformance.bench import search

    (correct,) = search.modes_named(["correct"])
    few = search.campaign(correct, 0, seconds=60, examples=20)
    assert 20 <= few.runs < 40 and few.final > 0
    assert few.points[-1][0] < 30  # it stopped at its runs, long before its seconds
    short = search.campaign(correct, 0, seconds=1, examples=100_000)
    assert short.runs < 5_000 and short.points[-1][0] <= 1.5

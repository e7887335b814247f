"""A step passes through the judges in three phases, one way (conformance/judges/checked_steps.py):
before (the judges note what the step will be judged against), apply and record (the recorder
and the implementation, the judges out of it), after (the judges keep their books and judge).

The route of a step is followed as it runs: a module is on it while one of its functions holds
the step among its arguments (a profile hook sees every call and return), each stay counted
once. The step is a fuzzer's produce: the leader's delivery of an acks=-1 PRODUCE, the spec's
Produce. `python tests/test_judge_phases.py` prints the route and its counts.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from kreplica.conformance.bridge.projection import CLIENT
from kreplica.conformance.bridge.recorder import SpecRecorder
from kreplica.conformance.fuzz.setup import FuzzSetup
from kreplica.conformance.judges.checked_steps import Judge, apply_checked
from kreplica.conformance.replay.schedule import TP
from kreplica.impl.steps import Deliver, Produce, Step

ROOT = Path(__file__).resolve().parent.parent
RECORDER = "conformance/bridge/recorder.py"
TOUCH = "conformance/bridge/touch.py"


def _module(frame: FrameType) -> str | None:
    """The checkout-relative file of a frame's code (None: not kreplica's)."""
    name = frame.f_code.co_filename
    if not name.endswith(".py"):
        return None  # code made at run time (a dataclass's __init__ is "<string>")
    path = Path(name).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else None


def _holds(frame: FrameType, step: Step) -> bool:
    """The frame's function was handed `step` as an argument."""
    code = frame.f_code
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    return any(frame.f_locals.get(name) is step for name in names)


def follow(step: Step, run: Callable[[], Any]) -> tuple[list[str], list[str]]:
    """Run `run`; the route of `step` (the modules that held it, each stay once), and every
    kreplica module any function ran in while the recorder held the step, at any depth."""
    holding: list[tuple[FrameType, str]] = []
    route: list[str] = []
    under_recorder: list[str] = []

    def stay() -> None:
        if holding and (not route or route[-1] != holding[-1][1]):
            route.append(holding[-1][1])

    def hook(frame: FrameType, event: str, _: Any) -> None:
        module = _module(frame)
        if event == "call" and module is not None:
            if any(m == RECORDER for _, m in holding):
                under_recorder.append(module)
            if _holds(frame, step):
                holding.append((frame, module))
                stay()
        elif event == "return" and holding and holding[-1][0] is frame:
            holding.pop()
            stay()

    sys.setprofile(hook)
    try:
        run()
    finally:
        sys.setprofile(None)
    return route, under_recorder


def produce_route() -> tuple[list[str], list[str]]:
    """The route of a fuzzer's produce through `apply_checked`, on the fuzzer's cluster."""
    cluster = FuzzSetup().schedule().cluster()
    recorder = SpecRecorder(cluster, TP, {})
    judge = Judge(recorder)
    leader = cluster.leader(TP)
    assert leader is not None
    assert apply_checked(judge, Produce(TP, (1,), -1, broker=leader)) is None  # the client sends
    step = Deliver(CLIENT, leader, 0)
    found: list[object] = []
    route = follow(step, lambda: found.append(apply_checked(judge, step)))
    assert found == [None] and recorder.events[-1].action == "Produce"
    return route


def returns(route: list[str]) -> int:
    """Stays in a module the route had already left."""
    left: set[str] = set()
    count = 0
    for here, there in itertools.pairwise(route):
        left.add(here)
        count += there in left
    return count


def test_a_produce_passes_the_judges_in_three_phases() -> None:
    """The recorder holds the step once, in one stretch (with the implementation below it,
    and the bridge's `touch`, which tells it what the step can change); before it only judges
    hold the step, and after it too."""
    route, _ = produce_route()
    recorded = [i for i, module in enumerate(route) if module == RECORDER]
    assert recorded, route
    first, last = recorded[0], recorded[-1]
    record = route[first : last + 1]
    assert all(m in (RECORDER, TOUCH) or m.startswith("impl/") for m in record), route
    before, after = route[:first], route[last + 1 :]
    assert before and after, route
    assert all(m.startswith("conformance/judges/") for m in before + after), route


def test_the_recorder_calls_no_judge() -> None:
    """While the recorder applies and records the step, no judge runs: the recorder keeps no
    judge's books (lag times, arrivals, checkpoint times), the judges read its events after."""
    _, under_recorder = produce_route()
    assert under_recorder, "the recorder ran nothing"
    judges = sorted({m for m in under_recorder if m.startswith("conformance/judges/")})
    assert judges == [], judges


if __name__ == "__main__":
    walked, _ = produce_route()
    print(
        f"{len(walked)} stays in {len(set(walked))} modules, "
        f"{returns(walked)} returns to a module already left"
    )
    print(" -> ".join(walked))

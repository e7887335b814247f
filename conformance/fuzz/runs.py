"""What the runs of one campaign share and report: its set-up, its counters, its failures.

A campaign (`campaign.run_fuzz`) makes one `Campaign` and hands it to every state machine it
makes (`machine.ReplicationMachine`): the set-up each run follows, the `RunStats` every run adds
to (for the progress bar and the summary), the corpus every generated run is written to. A run
that breaks an invariant or a rule raises `FuzzFailure`, which Hypothesis shrinks; a failure
found after Hypothesis stopped the run is `StoppedRunFailure`, which ends the campaign so that
it is not lost; `TimeLimit` ends a campaign out of time. The campaign's result is a `Failure`:
the violation, its steps and their trace.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kreplica.conformance.fuzz.corpus_writer import CorpusError, CorpusWriter
from kreplica.conformance.fuzz.guidance import Coverage
from kreplica.conformance.fuzz.setup import CONFIG, FuzzSetup
from kreplica.conformance.judges.checked_steps import Violation
from kreplica.conformance.tla.itf import ItfTrace
from kreplica.impl.config import BrokerConfig
from kreplica.impl.steps import Step


@dataclass(frozen=True)
class Failure:
    """A failing run: the violation, its impl steps, and the trace of those steps."""

    invariant: str
    reason: str
    steps: tuple[Step, ...]
    trace: ItfTrace
    shrunk_steps: int = 0
    """Impl steps of the run as Hypothesis shrank it (before `minimize`)."""
    config: BrokerConfig = CONFIG
    """The run's broker config (CONFIG, or its durable form: `DURABLE_MIN_ISR`)."""

    @property
    def spec_actions(self) -> int:
        """The number of spec actions in the trace (Init excluded)."""
        return len(self.trace.states) - 1


class TimeLimit(Exception):
    """Raised when a run starts after the campaign's time limit: it ends the campaign."""


class FuzzFailure(AssertionError):
    """Raised inside a run to make Hypothesis shrink it: the violation, the impl steps and
    the run's broker config."""

    def __init__(
        self,
        violation: Violation,
        steps: Sequence[Step],
        config: BrokerConfig = CONFIG,
        settled_from: int | None = None,
    ) -> None:
        super().__init__(f"{violation[0]}: {violation[1]}")
        self.violation = violation
        self.steps = tuple(steps)
        self.config = config
        self.settled_from = settled_from
        """For a liveness failure: how many of `steps` came before the settle phase."""


class StoppedRunFailure(BaseException):
    """The campaign's first failure, found by the settle phase (in the teardown) of a run
    that Hypothesis had already stopped: a draw overran the run's buffer, or its data was
    invalid. Hypothesis discards what such a run raises (its data is closed) and would go on
    generating runs, the failure lost; so this ends the campaign instead, and
    `campaign.run_fuzz` minimises and reports `failure` like any other, without Hypothesis's
    shrinking. A BaseException, like Hypothesis's own StopTest, so that Hypothesis does not
    take it for the test's failure but lets it through (Ctrl-C does the same)."""

    def __init__(self, failure: FuzzFailure) -> None:
        super().__init__(str(failure))
        self.failure = failure


@dataclass
class RunStats:
    """Counters shared by the runs of one campaign (for the progress bar and the summary)."""

    runs: int = 0
    steps: int = 0
    """Rules applied (state-machine steps)."""
    impl_steps: int = 0
    failing_runs: int = 0
    started: float = field(default_factory=time.perf_counter)
    started_cpu: float = field(default_factory=time.process_time)
    detected: float | None = None
    """Seconds from the start to the first failing run."""
    detected_cpu: float | None = None
    """CPU seconds of this process from the start to the first failing run (on a shared
    machine, the time the search itself took)."""
    runs_to_failure: int = 0
    """Runs up to and including the first failing one."""
    on_run: Callable[[RunStats], None] | None = None
    seed: int = 0
    """The campaign's Hypothesis seed."""
    corpus_error: CorpusError | None = None
    """The first failure to write the corpus (later runs are not written)."""
    time_limit: float | None = None
    """Seconds the campaign may search for a failure (None: no limit)."""
    timed_out: bool = False
    """The time limit ended the campaign."""
    settle_steps: int = 0
    """Impl steps taken by the runs' settle phases (counted in impl_steps too)."""
    actions: Counter[str] = field(default_factory=Counter)
    """Spec actions taken, by name, in the runs Hypothesis generated (not in shrinking)."""
    coverage: Coverage = field(default_factory=Coverage)
    """The abstract states the generated runs reached (see `guidance`)."""
    leader_changes: Counter[int] = field(default_factory=Counter)
    """Generated runs by how many times the controller's leader moved to another broker."""
    multi_epoch_truncations: int = 0
    """OffsetsForLeaderEpoch requests of the generated runs sent by a follower whose epoch
    cache held two epochs or more (R6's truncation across epochs, KIP-101 and KIP-279)."""

    @property
    def elapsed(self) -> float:
        """Seconds since the campaign started."""
        return time.perf_counter() - self.started

    def run_started(self) -> None:
        """Count a run and report progress; TimeLimit once the time limit is over (unless a
        failing run is being shrunk)."""
        if self.detected is None and (self.timed_out or self._over_time()):
            self.timed_out = True
            raise TimeLimit(f"no failure in {self.time_limit} s")
        self.runs += 1
        if self.on_run is not None:
            self.on_run(self)

    def _over_time(self) -> bool:
        """The campaign has a time limit, and it is over."""
        return self.time_limit is not None and self.elapsed > self.time_limit

    def run_failed(self) -> None:
        """Count a failing run; remember when the first one happened."""
        self.failing_runs += 1
        if self.detected is None:
            self.detected = self.elapsed
            self.detected_cpu = time.process_time() - self.started_cpu
            self.runs_to_failure = self.runs


@dataclass(frozen=True)
class Campaign:
    """What every run of one campaign shares: its set-up, the counters the runs add to, the
    corpus they are written to. `campaign.machine_for` makes one per campaign and hands it to
    each machine it makes (`run_state_machine_as_test` takes that factory)."""

    setup: FuzzSetup = field(default_factory=FuzzSetup)
    stats: RunStats = field(default_factory=RunStats)
    corpus: CorpusWriter | None = None
    """Where every generated run's trace goes (None: nowhere)."""
    run_prefix: str = ""
    """The campaign's part of each run's trace id."""
    max_gap: int = 20
    """The longest gap between two faults, or two records: max steps / (max_faults + 1)."""
    max_steps: int = 100
    """The steps of a run (the machine's, several to each of Hypothesis's: `machine.BURST`)."""


def merged_stats(parts: Sequence[RunStats]) -> RunStats:
    """The counters of several campaigns summed, as one campaign's `RunStats` (for the
    summary's totals and action mix of a swarm or of a campaign's stages; its clock fields
    mean nothing)."""
    total = RunStats(seed=parts[0].seed if parts else 0)
    total.time_limit = parts[0].time_limit if parts else None
    actions: Counter[str] = Counter()
    changes: Counter[int] = Counter()
    seen: Coverage = Coverage()
    for part in parts:
        total.runs += part.runs
        total.steps += part.steps
        total.impl_steps += part.impl_steps
        total.failing_runs += part.failing_runs
        total.settle_steps += part.settle_steps
        total.multi_epoch_truncations += part.multi_epoch_truncations
        total.timed_out = total.timed_out or part.timed_out
        actions.update(part.actions)
        changes.update(part.leader_changes)
        seen.seen.update(part.coverage.seen)
    total.actions, total.leader_changes, total.coverage = actions, changes, seen
    return total

"""The fuzzer: a Hypothesis state machine drives the simulator; the judges judge every step.

`ReplicationMachine` is a `RuleBasedStateMachine` over partition t-0 on replicas 1..n. Its
verbs are what can happen in a cluster: a producer sends a record, a consumer reads, a
follower's fetcher runs, the network delivers, reorders, drops or duplicates a message or
partitions two nodes, time passes, a leader shrinks its ISR, a broker crashes, loses power or
restarts, the controller detects a failure or elects a leader. Hypothesis sees one rule,
`act`, which takes `BURST` steps of the run: each draws a kind among the kinds enabled now
(`KINDS`, `draw_kind`), and the verb of that kind takes one of the steps the simulator has
enabled now (`CHOICES`), by an index drawn too, so that a failing run shrinks. The integers
drawn are read from bytes choices of the test case (`hypothesis_shim.ByteChoices`): one
Hypothesis step and one choice serve eight of the machine's steps, and Hypothesis evaluates
no precondition and draws no rule. Hypothesis's own loop and one choice per integer were
half of a step's time when each step was a Hypothesis step (docs/fuzzing.md). Every step
goes through the recorder, so every run is an ITF trace in the spec's vocabulary, and through
the run's `Judge` (`judges.checked_steps.apply_checked`): the invariants after every spec
action, Kafka's rules on the clock, the client's answers.
Every run ends by settling the cluster (`settle`): the faults end, replication catches up,
and a run whose cluster does not (no leader, a follower behind, a produce never answered)
fails like an invariant (`judges.liveness`).

Each run starts with a plan (`ReplicationMachine.plan` draws it at the run's first step, from
the same bytes, and makes the run's cluster; `plan.plan_run` decides it),
like a small spec config: a few records and faults (at most `max_faults`), maybe of one kind
only, maybe no flushes, and a priority per node. The machine follows it: faults strike only
just after the replication state moved (`plan.stirred_by`), scheduling rules favour
high-priority nodes (`plan.urgency`), and a fault may be a change point of the priorities.
The touches of Hypothesis's internals (one rule drawn without a choice, bare bytes choices,
seeing a stopped run) go through `hypothesis_shim`.

The rooms around it: `setup.FuzzSetup` says what a campaign allows, `choices.CHOICES` which
enabled steps each rule may take, `runs.Campaign` what the runs of a campaign share.
`campaign.run_fuzz` runs a campaign for one set-up with Hypothesis's search and shrinking; the
failing run is then minimised step by step (`replay.schedule.minimize`) and comes back as a
`runs.Failure`, which `campaign.save_failure` writes as an ITF trace plus a replayable
schedule. With a corpus (`corpus_writer.CorpusWriter`) every generated run's trace is appended
as one JSON line.

This module stays over 600 lines: the verbs are methods of the one state-machine class, one
per thing that can happen in a cluster, and a reader finds them side by side; what
stands apart (the plan, the choices, the settle phase, the campaign's counters) has a module
of its own."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import target
from hypothesis.stateful import RuleBasedStateMachine, rule

from kreplica.conformance.bridge.local_partitions import LOCAL_RECORDS, local_partition
from kreplica.conformance.bridge.projection import CLIENT, CONTROLLER, NO_LEADER, log_start_of
from kreplica.conformance.bridge.recorder import SpecRecorder
from kreplica.conformance.fuzz.choices import (
    CHOICES,
    behind,
    next_deadline_ms,
    took_office,
    wrote_in_office,
)
from kreplica.conformance.fuzz.corpus_writer import CorpusError
from kreplica.conformance.fuzz.guidance import AbstractState, abstract_state
from kreplica.conformance.fuzz.hypothesis_shim import (
    ByteChoices,
    BytesDrawer,
    IntegerDrawer,
    bytes_drawer,
    draw_the_one_rule,
    stopped_by_hypothesis,
)
from kreplica.conformance.fuzz.plan import (
    UNLIMITED,
    Budget,
    Draws,
    RunPlan,
    change_priorities,
    natural_priorities,
    plan_run,
    stirred_by,
    trailing_ones,
    urgency,
)
from kreplica.conformance.fuzz.runs import (
    Campaign,
    FuzzFailure,
    StoppedRunFailure,
)
from kreplica.conformance.fuzz.settle import settle
from kreplica.conformance.fuzz.setup import (
    BATCH_MAX_RECORDS,
    CONFIG,
    COSTLY_KINDS,
    FETCH_MAX_RECORDS,
    PICK_MAX,
    SCHEDULING_KINDS,
    TICK_MS,
    TO_NEXT_DEADLINE,
)
from kreplica.conformance.judges.checked_steps import Judge, Violation, apply_checked
from kreplica.conformance.replay.schedule import (
    TP,
    variant_to_json,
)
from kreplica.conformance.tla.itf import ItfTrace
from kreplica.impl.cluster import Cluster
from kreplica.impl.config import BrokerConfig
from kreplica.impl.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    RECORD_SIZE_BYTES,
    IsolationLevel,
    TopicPartition,
)
from kreplica.impl.steps import (
    ConsumerFetch,
    ConsumerListOffsets,
    Deliver,
    Isolate,
    Produce,
    ShrinkIsr,
    Step,
    Tick,
)

REFUSED_PRODUCES = ("not-leader", "invalid-acks", "internal-topic", "empty-batch", "large-batch")
"""How the refused_produce rule gets its first attempt refused (NOT_LEADER_OR_FOLLOWER,
INVALID_REQUIRED_ACKS, INVALID_TOPIC_EXCEPTION; INVALID_RECORD for a batch without records,
MESSAGE_TOO_LARGE for a batch of two records, over the set-up's message.max.bytes)."""
INVALID_ACKS = 2
"""An acks value Kafka refuses (only -1, 0 and 1 are valid)."""
ISOLATION_LEVELS = (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED)
"""A consumer's isolation levels (Kafka's consumers read_uncommitted by default)."""
STALE_POSITION = 6
"""`pick % 8` of a consume that asks for an offset the log does not have, as a consumer whose
position went stale (its leader truncated, or a client deleted records): one past the LEO, or
half the time one below the log start when that is above 0. Kafka answers OFFSET_OUT_OF_RANGE
at once, even to a FETCH that could wait (R15, R16); the consumer would then reset its position
(auto.offset.reset), which is the LIST_OFFSETS rule's part."""
INTERNAL_TP = TopicPartition("__consumer_offsets", 0)
"""A partition of an internal topic, which a producer may not write to."""


@dataclass(frozen=True)
class ConsumerSettings:
    """How a consumer fetches: fetch.max.wait.ms, fetch.min.bytes, max.partition.fetch.bytes."""

    max_wait_ms: int
    min_bytes: int
    max_bytes: int


CONSUMER_SETTINGS = tuple(
    ConsumerSettings(wait, least, most)
    for wait in (0, 1, 500)
    for least in (1, RECORD_SIZE_BYTES, 2 * RECORD_SIZE_BYTES)
    for most in (1_048_576, RECORD_SIZE_BYTES - 1)
)
"""A consumer's settings, one per FETCH, each combination of: answered at once, the shortest
wait (1 ms: parked, and expired by the next clock advance), or Kafka's default wait of 500 ms,
which parks the FETCH in the leader's purgatory while the HW has too little past it; one byte
(Kafka's default), exactly one record (a read of one record just reaches it), or two records
at least; Kafka's default byte limit per partition, or one below a record (Kafka still returns
the first record). The follower fetches stay unparked (`CONFIG`), as the spec answers them."""

# ---------------------------------------------------------------- the state machine


class ReplicationMachine(RuleBasedStateMachine):
    """One run of `campaign`: a cluster, its recorder, and rules that each apply one choice
    of the fuzzer."""

    def __init__(self, campaign: Campaign | None = None) -> None:
        super().__init__()
        campaign = Campaign() if campaign is None else campaign
        self.setup = campaign.setup
        self.stats = campaign.stats
        self.corpus = campaign.corpus
        self.run_prefix = campaign.run_prefix
        self.max_gap = campaign.max_gap
        self.max_steps = campaign.max_steps
        self.rule_steps = 0
        """The run's steps of `act` so far (at most `max_steps`)."""
        self.config = CONFIG
        self.cluster: Cluster
        self.recorder: SpecRecorder
        self.judge: Judge
        """The run's cluster, its recorder and judge: made once the plan says the config
        (`start`, at the first step; for a run without a step, at its teardown)."""
        self.steps: list[Step] = []
        self._choices: dict[str, list[Step]] = {}
        self._now: dict[str, Any] = {}
        """What `quiet`, `lagging` and `leaders` found since the last step (they are asked
        many times a step, by the preconditions Hypothesis evaluates)."""
        self.faults = Budget(self.setup.max_faults)
        self.records = Budget(UNLIMITED)
        self.leader_changes = Budget(0)
        self.hasty = False
        """Planned leader changes need not wait for the leader to write in its epoch."""
        self.kinds = self.setup.kinds
        self.priority = natural_priorities(self._nodes())
        self.change_points = False
        self._faulting = False
        self.produced: list[int] = []
        """The records produced that no consumer has read yet (`consume` reads one)."""
        self._bytes: BytesDrawer | None = None
        """Draws the bytes this run's choices are read from (`act`)."""
        draw_the_one_rule(self)  # `act` draws the kind of step, not Hypothesis
        self._kinds_of: tuple[frozenset[str], list[str]] = (frozenset(), [])
        """The run's kinds (`kinds`) and the `KINDS` among them: what `enabled` asks about."""
        self.stats.run_started()
        self.run = self.stats.runs
        self.violation: Violation | None = None
        self.settled_from: int | None = None
        """The impl steps taken before the settle phase (None: it has not begun)."""
        self._reached: AbstractState
        """The abstract state the last step reached."""
        self.visited: set[AbstractState] = set()
        """The abstract states this run reached (see `guidance`)."""

    def teardown(self) -> None:
        """At the end of a run (unless an invariant failed): settle the cluster and check
        liveness. Then count the run's spec actions and abstract states (with --guided, hand
        its rarity to Hypothesis's `target`) and append its trace to the corpus, for the runs
        Hypothesis generates only (none once the first failing run is being shrunk); then
        raise FuzzFailure if settling broke an invariant or a liveness requirement, or
        StoppedRunFailure if that is the campaign's first failure and Hypothesis, having
        stopped the run already (an overrun), would discard a FuzzFailure."""
        if not hasattr(self, "cluster"):  # no step: the run's cluster as it starts
            self.start()
        stopped = stopped_by_hypothesis()
        late = None
        if self.violation is None:
            try:
                late = self._settled_failure()
            except FuzzFailure as err:
                late = err
        if self._generated():
            self._count_churn()
            self.stats.actions.update(e.action for e in self.recorder.events[1:])
            rarity = self.stats.coverage.observe(self.visited)
            if self.setup.guided:
                target(rarity, label="rarity of the abstract states reached")
            self._write_corpus()
        if late is not None and stopped and self.run == self.stats.runs_to_failure:
            raise StoppedRunFailure(late) from late
        if late is not None:
            raise late

    def _count_churn(self) -> None:
        """Count the run's leader changes and multi-epoch truncation requests (RunStats)."""
        events = self.recorder.events
        leaders = [e.state["ctrlLeader"] for e in events if e.state["ctrlLeader"] != NO_LEADER]
        changes = sum(a != b for a, b in itertools.pairwise(leaders))
        self.stats.leader_changes[changes] += 1
        self.stats.multi_epoch_truncations += sum(
            len(before.state["epochCache"][e.args["replica"] - 1]) >= 2
            for before, e in itertools.pairwise(events)
            if e.action == "FollowerSendOffsetsForLeaderEpoch"
        )

    def _settled_failure(self) -> FuzzFailure | None:
        """Settle the cluster: the liveness failure it shows (None: it made progress, or
        invariants are not checked); FuzzFailure if an invariant fails while settling."""
        found = self.settle()
        if found is None or not self.setup.invariants:
            return None
        self.violation = found
        self.stats.run_failed()
        return FuzzFailure(found, self.steps, self.config, self.settled_from)

    def _generated(self) -> bool:
        """Hypothesis generated this run: no failure yet, or this run is the first failing one
        (not a run replayed while shrinking)."""
        failed_first = self.violation is not None and self.run == self.stats.runs_to_failure
        return self.stats.detected is None or failed_first

    def _write_corpus(self) -> None:
        """Append the run's trace to the corpus, if the campaign keeps one (the first error
        to write it is kept in the stats; later runs are not written)."""
        if self.corpus is None or self.stats.corpus_error is not None:
            return
        try:
            self.corpus.append(self.corpus_trace())
        except CorpusError as err:
            self.stats.corpus_error = err

    def corpus_trace(self) -> ItfTrace:
        """The run's trace, with its id, set-up and outcome in #meta."""
        trace = self.recorder.trace()
        setup = self.setup
        meta: dict[str, Any] = {
            "id": f"{self.run_prefix}-{self.run}",
            "source": "kreplica fuzz",
            "variant": setup.variant.label(),
            "dimensions": variant_to_json(setup.variant)["dimensions"],
            "bugs": sorted(setup.variant.bugs),
            "replicas": setup.replicas,
            "faults": list(setup.fault_kinds),
            "max_faults": setup.max_faults,
            "seed": self.stats.seed,
            "run": self.run,
            "variables": list(trace.vars),
            "invariants": setup.invariants,
            "rules": setup.checks_rules,
            "min_insync_replicas": self.config.min_insync_replicas,
            "fetch_max_records": FETCH_MAX_RECORDS,
            "batch_max_records": BATCH_MAX_RECORDS,
            "local_records": LOCAL_RECORDS,
            "impl_steps": len(self.steps),
            "hidden_steps": True,
        }
        if self.violation is not None:
            meta["violation"] = {"invariant": self.violation[0], "reason": self.violation[1]}
        return replace(trace, meta=meta)

    # ------------------------------------------------------------ plumbing

    def choices(self, kind: str) -> list[Step]:
        """The steps the rule `kind` may take now (none if the set-up or budget rules it out)."""
        found = self._choices.get(kind)
        if found is None:
            allowed = kind in self.kinds and (kind not in COSTLY_KINDS or self._may_fault())
            if kind in ("flush", "checkpoint"):  # they matter only to unclean shutdowns
                allowed = "unclean_shutdown" in self.kinds and kind in self.kinds
            if kind == "delete_records":  # as often as a record may be produced
                allowed = allowed and self.records.ready_if(self.quiet)
            if kind == "change_leader":  # as planned (plan.LEADER_CHANGES)
                allowed = allowed and self.leader_changes.ready_if(self.quiet)
                state = self.recorder.state
                allowed = allowed and (took_office if self.hasty else wrote_in_office)(state)
            if kind == "shrink_isr":  # out of sync by either clock means behind (`lagging`)
                allowed = allowed and self.lagging()
            found = CHOICES[kind](self.cluster, self.recorder.state) if allowed else []
            if kind == "shrink_isr" and allowed:
                found = sorted(set(found) | set(self._lagging_by_the_clock()), key=repr)
            self._choices[kind] = found
        return found

    def _lagging_by_the_clock(self) -> list[Step]:
        """ShrinkIsr of each leader with a follower that lags by Kafka's clock (`lag_times`),
        whether or not the implementation thinks so: a leader that fails to drop it, or drops
        another, breaks IsrShrinksOnLagTime."""
        s, now = self.recorder.state, self.cluster.clock.now_ms
        lag = self.judge.lag_times
        return [ShrinkIsr(b) for b in self.cluster.broker_ids if lag.out_of_sync(s, b, now)]

    def _may_fault(self) -> bool:
        """The fault budget is not spent, and the replication state moved a moment ago (see
        `plan.STIRRING_VARS`) or nothing else could happen (a quiet cluster with no record to
        produce). So faults strike while replication is going on."""
        if self.faults.left <= 0:
            return False  # spent: the quiet question need not be asked
        stuck = self.records.left == 0 and self.quiet()
        return self.faults.ready(quiet=stuck)

    def quiet(self) -> bool:
        """No fetcher has work and no message but answers to the controller can arrive."""
        found = self._now.get("quiet")
        if found is None:
            found = self._now["quiet"] = self._quiet()
        return bool(found)

    def _quiet(self) -> bool:
        """`quiet`, computed."""
        # A message reorder may take waits on a link whose oldest message deliver may take (the
        # same destination), so reorder's choices matter only where deliver is not allowed.
        messages = self.choices("deliver" if "deliver" in self.kinds else "reorder")
        if any(isinstance(m, Deliver) and m.dst != CONTROLLER for m in messages):
            return False
        return not self.choices("fetch")

    def lagging(self) -> bool:
        """A leader has an ISR follower behind its LEO (time may push it out of the ISR)."""
        found = self._now.get("lagging")
        if found is None:
            found = self._now["lagging"] = self._lagging()
        return bool(found)

    def _lagging(self) -> bool:
        """`lagging`, computed."""
        return any(behind(self.recorder.state, b) for b in self.cluster.broker_ids)

    def may_produce(self) -> bool:
        """The record budget allows a record now, and a broker believes it leads."""
        return self.records.ready_if(self.quiet) and bool(self._leaders())

    def _apply(self, *steps: Step) -> None:
        """Apply steps through the recorder; stop the run at the first violation."""
        before = self.recorder.state
        for step in steps:
            self.steps.append(step)
            self.stats.impl_steps += 1
            found = apply_checked(self.judge, step, self.setup.invariants, self.setup.checks_rules)
            if found is not None:
                self.violation = found
                self.stats.run_failed()
                raise FuzzFailure(found, self.steps, self.config)
        self.stats.steps += 1
        after = self.recorder.state
        reached = abstract_state(after)
        if reached is not self._reached:  # else the same object, visited already
            self.visited.add(reached)
            self._reached = reached
        stirred = not self._faulting and stirred_by(before, after)
        self.faults.tick(stirred)
        self.records.tick()
        self.leader_changes.tick(stirred)
        self._choices = {}
        self._now = {}

    def _choose(self, kind: str, pick: int) -> None:
        """Apply one step of the rule `kind`: scheduling rules favour the run's high-priority
        nodes (see `plan.urgency`); fault rules choose evenly."""
        options = self.choices(kind)
        if kind in SCHEDULING_KINDS:
            options = sorted(options, key=lambda step: urgency(self.priority, step))
            pick = trailing_ones(pick)
        recorded = len(self.recorder.events)
        self._faulting = kind in COSTLY_KINDS  # a fault is no stir (see `plan.STIRRING_VARS`)
        self._apply(options[pick % len(options)])
        self._faulting = False
        refused = kind == "elect" and len(self.recorder.events) == recorded
        if kind in COSTLY_KINDS and not refused:  # an election the controller refused is free
            self.faults.spend()
            if self.change_points:
                self.priority = change_priorities(self.priority)

    def leaders(self) -> list[int]:
        """Running brokers that believe they lead the partition (a producer's targets)."""
        return list(self._leaders())

    def _leaders(self) -> list[int]:
        """`leaders`, computed once a step: the list itself, not to be changed."""
        found = self._now.get("leaders")
        if found is None:
            state = self.recorder.state
            found = self._now["leaders"] = [
                b for b in sorted(state["alive"]) if state["leader"][b - 1] == b
            ]
        return found

    # ------------------------------------------------------------ settling

    def settle(self) -> Violation | None:
        """The settle phase (`settle.settle`): no more faults, then the steps that end them
        and let replication catch up, within bounds; the liveness requirement the settled
        cluster breaks (None: it keeps them). Each step is recorded and checked like a rule's
        (FuzzFailure if one fails), and counted as a settling step."""
        self.settled_from = len(self.steps)

        def apply(step: Step) -> None:
            self.stats.settle_steps += 1
            self._apply(step)

        return settle(self.recorder, apply)

    def _client_request(self, step: Step, broker: int) -> None:
        """The client sends a request, and the broker gets it at once (client links stay FIFO)."""
        index = len(self.cluster.network.queue((CLIENT, broker)))
        self._apply(step, Deliver(CLIENT, broker, index))

    # ------------------------------------------------------------ the plan of a run

    def _nodes(self) -> list[int]:
        """The controller and the brokers."""
        return [CONTROLLER, *range(1, self.setup.replicas + 1)]

    def plan(self, draw: IntegerDrawer) -> None:
        """Plan the run, like a small spec config (`plan.plan_run`), from what the run's first
        step draws (before its steps), and follow the plan."""
        faults, timing, focus, records, record_gap, swarm = (draw(0, PICK_MAX) for _ in range(6))
        order, churn = draw(0, 719), draw(0, PICK_MAX)
        draws = Draws(faults, timing, focus, records, record_gap, swarm, order, churn)
        plan = plan_run(self.setup, self._nodes(), self.max_gap, draws)
        self.start(CONFIG if plan.config is None else plan.config)
        self._follow(plan)

    def _follow(self, plan: RunPlan) -> None:
        """Take the run's budgets, rules and priorities from `plan` (before the run's first
        step, on the cluster `start` made with its config)."""
        self.faults, self.records = plan.faults, plan.records
        self.kinds, self.change_points = plan.kinds, plan.change_points
        self.priority = plan.priority
        self.hasty, self.leader_changes = plan.hasty, plan.leader_changes

    def start(self, config: BrokerConfig = CONFIG) -> None:
        """Make the run's cluster of brokers with `config`, its recorder and its judge, once,
        before the run's first step: its plan does, at the first step of `act`; a test that
        takes steps itself calls it first."""
        assert not self.steps, "a run's config is set in its plan"
        self.config = config
        self.cluster = self.setup.schedule(config=config).cluster()
        self.recorder = SpecRecorder(self.cluster, TP, {})
        self.judge = Judge(self.recorder)
        self._now = {}
        self._reached = abstract_state(self.recorder.state)
        self.visited = {self._reached}

    # ------------------------------------------------------------ the one rule

    @rule()
    def act(self) -> None:
        """`BURST` steps of the run (fewer where the run reaches `max_steps`), each a kind of
        step (`draw_kind`) and its arguments (`TAKE`), taken; at the run's first, its plan
        (`plan`) first. Hypothesis draws nothing else a step
        (`hypothesis_shim.draw_the_one_rule`): the integers come from bytes choices of the
        test case (`ByteChoices`, `CHUNK_BYTES` at a time), and shrink to 0: the first kind
        of `KINDS`, the first step."""
        first = self._bytes is None
        self._bytes = self._bytes or bytes_drawer()
        draw = ByteChoices(self._bytes, CHUNK_BYTES)
        if first:
            self.plan(draw)
        for _ in range(min(BURST, self.max_steps - self.rule_steps)):
            self.rule_steps += 1
            TAKE[self.draw_kind(draw)](self, draw)

    def draw_kind(self, draw: IntegerDrawer) -> str:
        """A kind of step with a step to take now, evenly among them: up to `KIND_TRIES`
        tries of a kind the run's plan allows, each taken if it has a step (a few questions,
        not all); then one of the enabled kinds, by a pick modulo their number. A choice
        means the same kind in every state where it has a step, so that the runs Hypothesis
        makes by mutating earlier ones repeat the kinds that made them."""
        kinds = self._run_kinds()
        may = self._now_enabled()
        for _ in range(KIND_TRIES):
            kind = kinds[draw(0, len(kinds) - 1)]
            if kind in may:
                return kind
        rest = self.enabled()
        return rest[draw(0, PICK_MAX) % len(rest)]

    def _run_kinds(self) -> list[str]:
        """The kinds of step (`KINDS`) the run's plan allows: the others never have a step."""
        if self._kinds_of[0] is not self.kinds:  # the plan set the run's kinds
            self._kinds_of = (self.kinds, [k for k in KINDS if k in self.kinds or k in VERBS])
        return self._kinds_of[1]

    def _now_enabled(self) -> _Enabled:
        """Whether each kind has a step now, asked once per kind and step."""
        found = self._now.get("may")
        if found is None:
            found = self._now["may"] = _Enabled(self)
        return found

    def enabled(self) -> list[str]:
        """The kinds of step (`KINDS`) the run may take now: a verb with a step to take."""
        found = self._now.get("enabled")
        if found is None:
            may = self._now_enabled()
            found = self._now["enabled"] = [k for k in self._run_kinds() if k in may]
        return found

    def _may(self, kind: str) -> bool:
        """The verb `kind` has a step to take now (its choices, or the client's and the
        clock's conditions)."""
        if kind not in VERBS:  # most kinds: a rule of CHOICES
            return bool(self.choices(kind))
        if kind in ("produce", "refused_produce"):
            return self.may_produce()
        if kind == "list_offsets":
            return bool(self.recorder.state["alive"])
        if kind == "consume":
            return bool(self.produced) and bool(self._leaders())
        return self.quiet() or self.lagging()  # tick

    # ------------------------------------------------------------ the client

    def produce(self, pick: int, fire_and_forget: bool) -> int:
        """A producer sends a new record to a broker that believes it leads (the variant's
        acks, or acks=0)."""
        leaders = self.leaders()
        broker = leaders[pick % len(leaders)]
        acks = 0 if fire_and_forget else int(self.setup.variant.acks)
        step = replace(self.cluster.next_record(TP, acks), broker=broker)
        self.records.spend()
        return self._send_produce(step)

    def refused_produce(self, pick: int, refused: str) -> int:
        """A producer's record is first refused (sent to a broker that does not lead, with
        invalid acks, to an internal topic, in an empty batch or in a batch too large), then
        retried at a broker that believes it leads, as a producer retries."""
        leaders = self.leaders()
        step = replace(
            self.cluster.next_record(TP, int(self.setup.variant.acks)),
            broker=leaders[pick % len(leaders)],
        )
        self.records.spend()
        followers = sorted(set(self.recorder.state["alive"]) - set(leaders))
        if refused == "not-leader" and followers:
            first = replace(step, broker=followers[pick % len(followers)])
        elif refused == "internal-topic":
            first = replace(step, tp=INTERNAL_TP)
        elif refused == "empty-batch":
            first = replace(step, record_ids=())
        elif refused == "large-batch":  # the record twice: its retry keeps the spec's nextRecord
            first = replace(step, record_ids=step.record_ids * 2)
        else:
            first = replace(step, acks=INVALID_ACKS)
        assert first.broker is not None
        self._client_request(first, first.broker)
        return self._send_produce(step)

    def _send_produce(self, step: Produce) -> int:
        """Send a produce to its broker (a leader); an acks=-1 one must get an answer
        (`judges.liveness.sent_produces`). The record is one a consumer may read
        (`produced`)."""
        assert step.broker is not None
        self._client_request(step, step.broker)
        self.produced.append(step.record_ids[0])
        return step.record_ids[0]

    def delete_records(self, pick: int) -> None:
        """A client deletes the records below an offset up to the leader's HW (R4): followers
        behind it get OFFSET_OUT_OF_RANGE and start their logs at the leader's (R9)."""
        self._choose("delete_records", pick)

    def list_offsets(self, pick: int, latest: bool) -> None:
        """A consumer asks a running broker for the partition's latest offset (the HW) or its
        earliest (the log start): a broker that believes it leads, as `consume` chooses one
        (one time in four one that does not, or any running broker when none leads)."""
        leaders = self.leaders()
        others = sorted(set(self.recorder.state["alive"]) - set(leaders))
        if others and (pick % 4 == 3 or not leaders):
            broker = others[(pick // 4) % len(others)]
        else:
            broker = leaders[pick % len(leaders)]
        timestamp = LATEST_TIMESTAMP if latest else EARLIEST_TIMESTAMP
        self._client_request(ConsumerListOffsets(TP, timestamp, broker), broker)
        answers = len(self.cluster.network.queue((broker, CLIENT)))
        if answers:  # the answer comes back at once: it changes nothing the spec sees
            self._apply(Deliver(broker, CLIENT, answers - 1))

    def consume(self, record: int, pick: int, settings: ConsumerSettings) -> None:
        """A consumer reads from a leader (one time in four from a broker that does not lead,
        if one runs), also while replication goes on, so a FETCH that waits in the purgatory
        sees the HW move (R16): at `record`'s offset if the broker holds it, else at its HW (one
        time in two at the HW anyway, as a consumer that has read everything), and one time in
        eight at a stale position outside the log (`STALE_POSITION`); read_committed or
        read_uncommitted (the same bound, the HW, without transactions); with one of
        `CONSUMER_SETTINGS`. Half the FETCHes that may not wait also read the broker's local
        partition (`local_partitions`), before or after t-0, within a response limit of one,
        two or three records, which the two partitions share as Kafka's readFromLocalLog
        shares fetch.max.bytes."""
        leaders = self.leaders()
        others = sorted(set(self.recorder.state["alive"]) - set(leaders))
        if others and pick % 4 == 3:
            broker = others[(pick // 4) % len(others)]
        else:
            broker = leaders[pick % len(leaders)]
        log = self.recorder.state["log"][broker - 1]
        offsets = [o for o, entry in enumerate(log) if entry["record"] == record]
        hw = self.recorder.state["hw"][broker - 1]
        offset = offsets[0] if offsets and pick < 32 else hw
        if pick % 8 == STALE_POSITION:  # an invalid request: a position outside the log
            start = log_start_of(self.recorder.state, broker)
            offset = start - 1 if start > 0 and pick % 16 == STALE_POSITION else len(log) + 1
        isolation = ISOLATION_LEVELS[(pick // 16) % 2]
        step = ConsumerFetch(
            TP,
            offset,
            broker,
            isolation,
            settings.max_bytes,
            settings.max_wait_ms,
            settings.min_bytes,
        )
        if settings.max_wait_ms == 0 and (pick // 2) % 2 == 1:
            step = replace(
                step,
                other=local_partition(broker),
                other_offset=(pick // 4) % (LOCAL_RECORDS + 1),
                other_first=(pick // 8) % 2 == 1,
                response_max_bytes=(1 + (pick // 16) % 3) * RECORD_SIZE_BYTES,
            )
        self._client_request(step, broker)

    # ------------------------------------------------------------ replication and time

    def fetch(self, pick: int) -> None:
        """A follower's fetcher runs once: maybe truncate, then maybe send a request."""
        self._choose("fetch", pick)

    def tick(self, ms: int) -> None:
        """Time passes, when a follower lags or nothing else would happen: followers fall out
        of sync, backoffs end, delayed produces expire; or just to the next deadline."""
        if ms == TO_NEXT_DEADLINE:
            ms = next_deadline_ms(self.cluster) or TICK_MS[0]
        self._apply(Tick(ms))

    def shrink_isr(self, pick: int) -> None:
        """A leader's isr-expiration task runs."""
        self._choose("shrink_isr", pick)

    # ------------------------------------------------------------ the network

    def deliver(self, pick: int) -> None:
        """The oldest message of a link arrives."""
        self._choose("deliver", pick)

    def reorder(self, pick: int) -> None:
        """A message arrives before older ones on its link."""
        self._choose("reorder", pick)

    def drop(self, pick: int) -> None:
        """A message is lost."""
        self._choose("drop", pick)

    def duplicate(self, pick: int) -> None:
        """A message is sent twice."""
        self._choose("duplicate", pick)

    def isolate(self, pick: int) -> None:
        """A network partition separates two nodes: their messages wait."""
        self._choose("isolate", pick)

    def heal(self, pick: int) -> None:
        """A network partition ends."""
        self._choose("heal", pick)

    # ------------------------------------------------------------ brokers and the controller

    def crash(self, pick: int) -> None:
        """A broker process dies (its log survives)."""
        self._choose("crash", pick)

    def fail_log_dir(self, pick: int) -> None:
        """A broker's log dir fails: it answers KAFKA_STORAGE_ERROR until it halts."""
        self._choose("fail_log_dir", pick)

    def halt_on_log_dir_failure(self, pick: int) -> None:
        """A broker whose log dir failed halts (no live log dir left)."""
        self._choose("halt_on_log_dir_failure", pick)

    def unclean_shutdown(self, pick: int) -> None:
        """A broker loses power: its log loses what was not flushed."""
        self._choose("unclean_shutdown", pick)

    def flush(self, pick: int) -> None:
        """A broker flushes its log (its recovery point moves to its LEO)."""
        self._choose("flush", pick)

    def checkpoint(self, pick: int) -> None:
        """A broker's highwatermark-checkpoint task runs early (the spec's
        CheckpointHighWatermarks may run at any time; the clock runs it on schedule too)."""
        self._choose("checkpoint", pick)

    def restart(self, pick: int) -> None:
        """A dead broker starts again and registers with the controller."""
        self._choose("restart", pick)

    def detect_failure(self, pick: int) -> None:
        """The controller sees a dead broker's session expire, and re-elects."""
        self._choose("detect_failure", pick)

    def change_leader(self, pick: int) -> None:
        """The controller moves leadership to another live ISR replica (a planned leader
        change: `plan.LEADER_CHANGES`); a hasty one away from the preferred replica first cuts the
        controller off from it, where the set-up allows network partitions."""
        options = self.choices("change_leader")  # before the partition: it resets choices()
        leader = self.recorder.state["ctrlLeader"]
        if self._loses_touch(leader):
            self._apply(Isolate(CONTROLLER, leader))
        self._apply(options[pick % len(options)])
        self.leader_changes.spend()

    def _loses_touch(self, leader: int) -> bool:
        """A hasty change away from the preferred replica cuts the controller off from it,
        where the set-up allows network partitions and none separates them yet."""
        return (
            self.hasty
            and leader == min(self.cluster.broker_ids)
            and "isolate" in self.setup.kinds
            and (CONTROLLER, leader) not in self.cluster.network.blocked
        )

    def elect(self, pick: int) -> None:
        """The controller is asked to elect a leader (it refuses what the variant forbids)."""
        self._choose("elect", pick)


class _Enabled:
    """Whether a kind of step has a step to take in a machine's current state: `kind in it`,
    each kind asked of the machine once (a fault only if the fault budget allows one now)."""

    __slots__ = ("_answers", "_faults", "_machine")

    def __init__(self, machine: ReplicationMachine) -> None:
        self._machine = machine
        self._answers: dict[str, bool] = {}
        self._faults: bool | None = None

    def __contains__(self, kind: object) -> bool:
        assert isinstance(kind, str)
        found = self._answers.get(kind)
        if found is None:
            m = self._machine
            found = kind in VERBS or kind in m.kinds
            if found and kind in COSTLY_KINDS:
                if self._faults is None:
                    self._faults = m._may_fault()
                found = self._faults
            found = self._answers[kind] = found and m._may(kind)
        return found


# ---------------------------------------------------------------- what the one rule takes


def _take_pick(kind: str) -> Callable[[ReplicationMachine, IntegerDrawer], None]:
    """Take a step of the verb `kind`, which chooses among its enabled steps by a pick."""
    verb = getattr(ReplicationMachine, kind)
    return lambda machine, draw: verb(machine, draw(0, PICK_MAX))


def _take_produce(machine: ReplicationMachine, draw: IntegerDrawer) -> None:
    """A producer sends a record, with the variant's acks or fire and forget."""
    machine.produce(draw(0, PICK_MAX), bool(draw(0, 1)))


def _take_refused_produce(machine: ReplicationMachine, draw: IntegerDrawer) -> None:
    """A producer's record is refused first, one of the `REFUSED_PRODUCES` ways."""
    machine.refused_produce(draw(0, PICK_MAX), _drawn(draw, REFUSED_PRODUCES))


def _take_consume(machine: ReplicationMachine, draw: IntegerDrawer) -> None:
    """A consumer reads a record no consumer read yet (shrinking to the newest)."""
    produced = machine.produced
    record = produced.pop(len(produced) - 1 - draw(0, len(produced) - 1))
    machine.consume(record, draw(0, PICK_MAX), _drawn(draw, CONSUMER_SETTINGS))


def _drawn(draw: IntegerDrawer, options: tuple[Any, ...]) -> Any:
    """One of `options`, drawn (shrinking to the first)."""
    return options[draw(0, len(options) - 1)]


TICKS = (*TICK_MS, TO_NEXT_DEADLINE)
"""The tick rule's clock advances."""

ORDER = (
    "change_leader", "checkpoint", "crash", "delete_records", "deliver", "detect_failure",
    "drop", "duplicate", "elect", "fail_log_dir", "fetch", "flush", "halt_on_log_dir_failure",
    "heal", "isolate", "reorder", "restart", "shrink_isr", "tick", "unclean_shutdown",
    "list_offsets", "consume", "produce", "refused_produce",
)  # fmt: skip
"""The kinds of step in the order Hypothesis sorted them when each was a rule of its own (by
target bundle, number of arguments, name), so that a choice picks the kind it picked then."""

SPECIAL: dict[str, Callable[[ReplicationMachine, IntegerDrawer], None]] = {
    "produce": _take_produce,
    "refused_produce": _take_refused_produce,
    "consume": _take_consume,
    "list_offsets": lambda m, draw: m.list_offsets(draw(0, PICK_MAX), bool(draw(0, 1))),
    "tick": lambda m, draw: m.tick(_drawn(draw, TICKS)),
}

TAKE: dict[str, Callable[[ReplicationMachine, IntegerDrawer], None]] = {
    kind: SPECIAL.get(kind) or _take_pick(kind) for kind in ORDER
}
"""How the one rule (`ReplicationMachine.act`) takes a step of each kind: it draws the verb's
arguments, one integer each, in the order the verb takes them, and calls it. A verb that
chooses among its enabled steps draws a pick."""

VERBS = frozenset({"produce", "refused_produce", "consume", "list_offsets", "tick"})
"""The kinds of step that are no rule of CHOICES: the client's and the clock's, always allowed."""

KINDS = ORDER
"""The kinds of step the one rule draws among (`ReplicationMachine.draw_kind`), each a verb of
the machine. A failing run shrinks towards the first."""

BURST = 8
"""The machine's steps per Hypothesis step (`act`): Hypothesis's stateful loop costs about as
much as a step of the simulator and its judges (docs/fuzzing.md), so eight share one."""

KIND_TRIES = len(KINDS)
"""Tries of a kind before `draw_kind` asks every kind whether it has a step: a try asks one
kind, once a step, and a draw costs little."""

CHUNK_BYTES = 128
"""The bytes of one choice the integers of `act` are read from (`ByteChoices`, two bytes an
integer): eight steps of about seven integers each, the plan's eight; more are drawn when
they run out."""

"""A fuzz campaign's set-up: the variant, the replicas, the faults allowed, and the rules
they enable (by the names of `choices.CHOICES`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from hypothesis import strategies as st

from kreplica.conformance.bridge.local_partitions import LOCAL_RECORDS
from kreplica.conformance.replay.schedule import (
    Schedule,
)
from kreplica.impl.config import BrokerConfig
from kreplica.impl.messages import RECORD_SIZE_BYTES
from kreplica.impl.steps import (
    Step,
)
from kreplica.impl.variants import Variant

FETCH_MAX_RECORDS = 2
"""Records per follower fetch, so that a lagging follower catches up over several fetches
(the spec bounds a fetch by MaxFetchRecords likewise)."""

BATCH_MAX_RECORDS = 1
"""Records per produced batch at most (message.max.bytes): the spec's Produce appends one."""

CONFIG = BrokerConfig(
    replica_fetch_wait_max_ms=0,
    replica_fetch_max_bytes=FETCH_MAX_RECORDS * RECORD_SIZE_BYTES,
    max_message_bytes=BATCH_MAX_RECORDS * RECORD_SIZE_BYTES,
)
"""Follower fetches are answered at once, as the spec answers them, and they are short; a
produced batch holds one record (message.max.bytes), as the spec's Produce appends one, so a
batch of two is refused with MESSAGE_TOO_LARGE."""

DURABLE_MIN_ISR = 2
"""min.insync.replicas of Kafka's durable set-up (replication factor 3, min.insync.replicas 2,
acks=all), which half the runs of three or more replicas use (`plan.swarm`): an
acks=-1 produce to an ISR of one is refused with NOT_ENOUGH_REPLICAS, or answered
NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank while it waited (R14)."""

TICK_MS = (1_000, 30_001)
"""Clock advances: one replica.fetch.backoff.ms; just past replica.lag.time.max.ms and the
produce timeout (followers fall out of sync, delayed produces expire)."""

TO_NEXT_DEADLINE = 0
"""The tick rule's third draw: exactly to the cluster's next deadline (`choices.next_deadline_ms`),
where a `<` and a `<=` of Kafka's timers differ and a tick can split two parked operations;
a fixed tick never lands there."""

DEFAULT_STEPS = 40
"""Most steps per run by default. The spec's counterexamples take at most 16 actions, and every
run ends with a settle phase of its own; a short run leaves time for more runs, and each run
draws a new plan (faults, records, priorities). At 100 steps per run the default set-up found
`--bug no-leso-guard` with none of 5 seeds within 500 runs (about 50 s each); at 40, with 4 of
5 within 3,000 runs, the median seed after 52 s (docs/fuzzing.md)."""

DEFAULT_EXAMPLES = 3_000
"""Runs per campaign by default: about two minutes of one core for the correct protocol, time for
every target (targets.py) to be found with the default options, every seed within seconds
(docs/fuzzing.md, the default-detection table)."""

PICK_MAX = 63
PICK = st.integers(min_value=0, max_value=PICK_MAX)
"""A rule's choice among its enabled steps, modulo their number (shrinks to the first)."""


PROGRESS_KINDS = frozenset({"deliver", "reorder", "fetch", "shrink_isr"})
SCHEDULING_KINDS = frozenset({"deliver", "reorder", "fetch"})
"""The rules that schedule the nodes' work: they favour high-priority nodes."""
CRASH_KINDS = frozenset(
    {
        "crash",
        "fail_log_dir",
        "halt_on_log_dir_failure",
        "restart",
        "detect_failure",
        "elect",
        "change_leader",
    }
)
UNCLEAN_KINDS = frozenset({"unclean_shutdown", "flush", "checkpoint"})
NETWORK_KINDS = frozenset({"drop", "duplicate", "isolate", "heal"})
CLIENT_KINDS = frozenset({"delete_records"})
"""The client's requests that are spec actions, apart from produces: DeleteRecords."""
FAULTS = ("crash", "unclean_shutdown", "elect", "drop", "duplicate", "isolate", "fail_log_dir")
COSTLY_KINDS = frozenset(FAULTS)
"""The faults, which spend a run's fault budget (restarts, detection, healing and the halt
after a log dir failure are free)."""
FAULT_CODES = {
    "crash": "c",
    "unclean_shutdown": "u",
    "elect": "e",
    "drop": "d",
    "duplicate": "p",
    "isolate": "i",
    "fail_log_dir": "l",
}
"""A letter per fault, for file names."""
DEFAULT_FAULTS = ("cuedpil", 4)
"""The default set-up's fault letters and max_faults (left out of file names)."""


@dataclass(frozen=True)
class FuzzSetup:
    """What a campaign runs: the variant, the number of replicas and the faults allowed."""

    variant: Variant = field(default_factory=Variant)
    replicas: int = 3
    faults: bool = True
    """Crashes, failed log dirs, restarts, failure detection, elections."""
    unclean: bool = True
    """Unclean shutdowns (power loss: a log loses what was not flushed), flushes and HW
    checkpoints (what a power loss reads back)."""
    network: bool = True
    """Lost and duplicated messages, network partitions (reordering is always on)."""
    max_faults: int = 4
    """At most this many faults per run (see COSTLY_KINDS)."""
    invariants: bool = True
    """Check the spec's invariants after every step (False: only record the runs)."""
    only_faults: frozenset[str] = frozenset()
    """Allow only these faults (names of FAULTS); empty: every fault the flags above allow."""
    guided: bool = False
    """Hand each run's rarity to Hypothesis's `target()` (`guidance`): what `kreplica fuzz
    --guided` did before it handed out rounds instead (`guided`); kept for the library and
    `kreplica bench search`, which measures it."""
    deletes: bool = True
    """Clients delete records below the leader's HW (DeleteRecords), in half the runs."""
    rules: bool = False
    """With `invariants` False, still check Kafka's rules (timing, the answers to clients, the
    HW by the clock, a step's effect; `checked_steps.apply_checked`): an unsafe variant breaks
    the spec's invariants by design, but not those (`fuzz --rules-only`)."""

    @property
    def checks_rules(self) -> bool:
        """Kafka's rules are checked: with the invariants, or alone (`rules`)."""
        return self.invariants or self.rules

    def schedule(self, steps: Sequence[Step] = (), config: BrokerConfig = CONFIG) -> Schedule:
        """A schedule of `steps` for this set-up (its cluster is the fuzzer's, with each broker's
        local partition, `local_partitions`; `config`: the run's broker config, CONFIG or its
        durable form)."""
        return Schedule(
            self.variant, self.replicas, tuple(steps), config, local_records=LOCAL_RECORDS
        )

    @property
    def kinds(self) -> frozenset[str]:
        """The rules this set-up allows (by the names of CHOICES)."""
        kinds = set(PROGRESS_KINDS)
        if self.deletes:
            kinds |= CLIENT_KINDS
        if self.faults:
            kinds |= CRASH_KINDS
        if self.unclean:
            kinds |= UNCLEAN_KINDS
        if self.network:
            kinds |= NETWORK_KINDS
        if self.only_faults:
            kinds -= COSTLY_KINDS - self.only_faults
        return frozenset(kinds)

    @property
    def fault_kinds(self) -> tuple[str, ...]:
        """The faults this set-up allows, in the order of FAULTS."""
        kinds = self.kinds
        return tuple(kind for kind in FAULTS if kind in kinds)

    def describe(self) -> str:
        """One line: variant, replicas, faults, and whether invariants are checked."""
        faults = ", ".join(k.replace("_", " ") for k in self.fault_kinds) or "none"
        checked = "" if self.invariants else "; invariants not checked"
        checked += "" if self.invariants or not self.rules else ", Kafka's rules checked"
        deletes = "" if self.deletes else "; no record deletion"
        return (
            f"variant {self.variant.label()}, {self.replicas} replicas, "
            f"faults: {faults} (at most {self.max_faults} per run){deletes}{checked}"
        )

    def name(self, seed_value: int) -> str:
        """A file-name stem for a campaign of this set-up with `seed_value`: the variant, the
        replicas, the faults when they are not the default ones (`f` and a letter per kind,
        then max_faults; `-noinv` without invariants, `-rules` with Kafka's rules alone,
        `-guided` with guidance), the seed."""
        label = re.sub(r"[^A-Za-z0-9.-]+", "_", self.variant.label().replace("=", "-"))
        faults = "".join(FAULT_CODES[k] for k in self.fault_kinds)
        tag = f"-f{faults}{self.max_faults}" if (faults, self.max_faults) != DEFAULT_FAULTS else ""
        tag += "" if self.invariants else "-rules" if self.rules else "-noinv"
        tag += "" if self.deletes else "-nodel"
        tag += "-guided" if self.guided else ""
        return f"{label}-r{self.replicas}{tag}-s{seed_value}"

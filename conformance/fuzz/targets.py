"""The fuzzer's targets: every seeded bug and every unsafe variant, with the set-up that
hunts each and what finding it breaks.

Each target's set-up is the fuzzer's default one, narrowed where the spec's model config of
the same scenario is narrower (`spec/*.cfg`): no client deletes records (no such config sets
`RecordDeletion`, and a deleted record is exempt from the durability invariants); durability
is only checked in runs without a power loss (`checked_steps.checked_violations`), so the
targets that lose acknowledged or committed records run without unclean shutdowns; KAFKA-7128
needs elections and nothing else, KAFKA-7164 a power loss of the leader of two replicas, S4
(fencing=off) two elections of two replicas, KAFKA-10706 (Kafka 2.6.0's truncation livelock)
elections of two replicas and nothing else, and only the settle phase sees it (`liveness`).
`command` renders a set-up as the `kreplica fuzz` options that run it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from kreplica.conformance.fuzz.setup import FAULTS, FuzzSetup
from kreplica.impl.variants import BUGS, parse_variant


@dataclass(frozen=True)
class Target:
    """A seeded bug or unsafe variant, the set-up that hunts it, and why that one."""

    word: str
    """A seeded bug's name, or an unsafe variant as NAME=VALUE."""
    setup: FuzzSetup
    why: str
    breaks: frozenset[str]
    """The invariants and liveness requirements whose failure is this target's: a campaign
    that fails another one has not found it."""

    @property
    def default_setup(self) -> FuzzSetup:
        """The default set-up with this target's bug or variant (`kreplica fuzz --bug X` or
        `--variant X` and no other option)."""
        return FuzzSetup(variant=self.setup.variant)

    def options(self) -> list[str]:
        """The `kreplica fuzz` options of the set-up (the defaults left out)."""
        return setup_options(self.setup)

    def command(self, seed: int | None = None) -> str:
        """The command line that runs this target's campaign."""
        words = ["kreplica fuzz", *self.options()]
        return " ".join(words if seed is None else [*words, f"--seed {seed}"])


def setup_options(setup: FuzzSetup) -> list[str]:
    """The `kreplica fuzz` options that run a campaign of `setup` (the defaults left out): its
    variant and bugs, the set-up's other fields, and its checks."""
    s, default = setup, FuzzSetup()
    out = [
        f"--variant {f.name}={getattr(s.variant, f.name)}"
        for f in fields(s.variant)
        if f.name != "bugs" and getattr(s.variant, f.name) != getattr(default.variant, f.name)
    ]
    out += [f"--bug {bug}" for bug in sorted(s.variant.bugs)]
    if s.replicas != default.replicas:
        out.append(f"--replicas {s.replicas}")
    switches = [("faults", "--no-faults"), ("unclean", "--no-unclean")]
    switches.append(("network", "--no-network-faults"))
    switches.append(("deletes", "--no-delete-records"))
    out += [flag for name, flag in switches if not getattr(s, name)]
    out += [f"--fault {k.replace('_', '-')}" for k in FAULTS if k in s.only_faults]
    if s.max_faults != default.max_faults:
        out.append(f"--max-faults {s.max_faults}")
    if not s.invariants:
        out.append("--rules-only" if s.rules else "--no-invariants")
    if s.guided:
        out.append("--guided")
    return out


def _target(word: str, why: str, breaks: frozenset[str], **setup: Any) -> Target:
    """A target from its registry word, what it breaks, and the set-up fields that differ
    from the default."""
    known = {f.name for f in fields(FuzzSetup)}
    assert set(setup) <= known, set(setup) - known
    bugs = [word] if word in BUGS else []
    variant = parse_variant([] if bugs else [word], bugs)
    return Target(word, FuzzSetup(variant=variant, deletes=False, **setup), why, breaks)


DURABILITY = "durability is checked only in runs without a power loss"
DURABLE = frozenset({"AckedRecordsNeverLost", "CommittedRecordsOnIsr", "ConsistentReads"})
"""The invariants a lost acknowledged or committed record breaks."""
DIVERGED = frozenset({"FollowersMatchLeader"})
"""A follower's log that is no prefix of its leader's."""

TARGETS: tuple[Target, ...] = (
    _target(
        "early-ack",
        DURABILITY,
        frozenset({"AckedRecordsNeverLost", "ClientAnswersMatchLeader"}),
        unclean=False,
    ),
    _target(
        "hw-from-non-isr",
        "the default set-up, without deletions",
        # HighWatermarkOnTime judges the HW where the leader computes it (R13), as
        # IsrJoinsCaughtUp judges no-leso-guard's join: the wrong HW before it loses a record
        frozenset({"CommittedRecordsOnIsr", "HighWatermarkOnTime"}),
    ),
    _target(
        "no-leso-guard",
        "elections only, and few, as in spec/BugNoLesoGuard.cfg (no crashes, one epoch)",
        frozenset({"CommittedRecordsOnIsr", "IsrJoinsCaughtUp"}),
        only_faults=frozenset({"elect"}),
        max_faults=2,
    ),
    _target(
        "skip-same-leader-truncation",
        "2 replicas and power losses only, as in spec/BugSkipSameLeaderTruncation.cfg",
        DIVERGED | {"EventuallyReplicated"},
        replicas=2,
        only_faults=frozenset({"unclean_shutdown"}),
    ),
    _target(
        "hw-not-clamped",
        "the default set-up, without deletions",
        frozenset({"HighWatermarkWithinLog"}),
    ),
    # no invariant breaks: a follower keeps an epoch it wrote nothing in and asks for its end
    # forever, which only the settle phase sees (EpochCacheMatchesLog, which the bug breaks
    # on the way, is not judged under it: invariants.BROKEN_BY_DESIGN)
    _target(
        "kafka-10706",
        "2 replicas and elections only, as in spec/Kafka10706Livelock.cfg (no crash): the "
        "livelock needs back-to-back elections and nothing else",
        frozenset({"EventuallyReplicated"}),
        replicas=2,
        only_faults=frozenset({"elect"}),
    ),
    _target(
        "truncation=kip101",
        "the default set-up, without deletions (S3's own shape, 2 replicas and elections "
        "only, did no better: docs/fuzzing.md)",
        DURABLE | DIVERGED,
    ),
    _target("truncation=hw", DURABILITY, DURABLE | DIVERGED, unclean=False),
    # an unclean leader may hold less than a follower that cannot truncate below its HW (its
    # epoch cache emptied by deleted records): the logs diverge, as they lose records
    _target("election=unclean", DURABILITY, DURABLE | DIVERGED, unclean=False),
    _target("acks=1", DURABILITY, frozenset({"AckedRecordsNeverLost"}), unclean=False),
    _target(
        "fencing=off",
        "2 replicas and two elections, as in spec/FencingOff.cfg (epochs <= 2)",
        DURABLE | DIVERGED,
        replicas=2,
        only_faults=frozenset({"elect"}),
        max_faults=2,
    ),
)
"""Every seeded bug (impl/variants.py BUGS) and every unsafe variant of the registry
(truncation=kip101, truncation=hw, election=unclean, acks=1, fencing=off), in the registry's
order."""


def target(word: str) -> Target:
    """The target named `word`; KeyError if there is none."""
    for t in TARGETS:
        if t.word == word:
            return t
    raise KeyError(word)

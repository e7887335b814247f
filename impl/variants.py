"""The one registry of protocol variants and seeded bugs (DESIGN.md, "Protocol variants").

Every name here is spelled the same in the spec's model configs (TLA+ constants), in the
implementation (a `Variant` value) and on the command line (`--variant truncation=hw`,
`--bug early-ack`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields

# dimension -> allowed values; the first value is the default (the correct modern protocol).
DIMENSIONS: Mapping[str, tuple[str, ...]] = {
    "truncation": ("kip279", "kip101", "hw", "fetch-diverging"),
    "election": ("clean", "unclean"),
    "acks": ("-1", "1"),
    "fencing": ("kip320", "off"),
    "isr": ("sync", "alter-partition"),
    "elr": ("off", "on"),
}

# seeded bug -> what it does
BUGS: Mapping[str, str] = {
    "early-ack": "acks=-1 answered before the HW covers the record",
    "hw-from-non-isr": "HW advanced by replicas outside the ISR",
    "no-leso-guard": "ISR expansion without the leader-epoch-start-offset guard (KAFKA-7128)",
    "skip-same-leader-truncation": (
        "no truncation when the leader is unchanged but the epoch moved (KAFKA-7164)"
    ),
    "hw-not-clamped": "follower HW not clamped to its own LEO",
    "kafka-10706": (
        "truncation to or past the LEO leaves the epoch cache as it is (Kafka 2.6.0, KAFKA-10706)"
    ),
}

SPEC_CONSTANTS: Mapping[str, str] = {
    "truncation": "Truncation",
    "election": "Election",
    "acks": "Acks",
    "fencing": "Fencing",
}
"""The TLA+ constant of each dimension the spec models (spec/*.cfg); the seeded bugs are `Bugs`."""

IMPL_ONLY: Mapping[str, tuple[str, ...]] = {
    "truncation": ("fetch-diverging",),
    "isr": ("alter-partition",),
    "elr": ("on",),
}
"""Values the implementation has and the spec does not model (Kafka after 2.6: truncation on
fetch, ALTER_PARTITION, eligible leader replicas). `isr` and `elr` have no spec constant: the
spec is always `isr=sync`, `elr=off`."""


NOT_IMPLEMENTED: Mapping[str, tuple[str, ...]] = {"elr": ("on",)}
"""Values the registry names and the implementation refuses to run (`Cluster` raises
NotImplementedError): KIP-966's eligible leader replicas."""

RUNS_AS_DEFAULT: Mapping[str, tuple[str, ...]] = {"truncation": ("fetch-diverging",)}
"""Values the implementation runs with the default's code, under another name: Kafka 2.7's
truncation on fetch truncates at the same points as KIP-279 (`replica_fetcher`)."""


def distinct_variants() -> tuple[Variant, ...]:
    """Every variant of one non-default dimension value that the implementation runs with code
    of its own (not NOT_IMPLEMENTED, not RUNS_AS_DEFAULT), in the registry's order: the
    protocol variants a campaign must take besides the correct protocol to run all the code."""
    left_out = {(d, v) for table in (NOT_IMPLEMENTED, RUNS_AS_DEFAULT) for d in table
                for v in table[d]}  # fmt: skip
    return tuple(
        Variant(**{dim: value})  # type: ignore[arg-type]
        for dim, values in DIMENSIONS.items()
        for value in values[1:]
        if (dim, value) not in left_out
    )


def not_in_spec(variant: Variant) -> list[str]:
    """The variant's `dimension=value` choices that the spec does not model."""
    return [
        f"{dim}={getattr(variant, dim)}"
        for dim, values in IMPL_ONLY.items()
        if getattr(variant, dim) in values
    ]


class VariantError(ValueError):
    """A variant or bug name that is not in the registry."""


@dataclass(frozen=True)
class Variant:
    """One protocol choice per dimension plus a set of seeded bugs; the default is correct."""

    truncation: str = "kip279"
    election: str = "clean"
    acks: str = "-1"
    fencing: str = "kip320"
    isr: str = "sync"
    elr: str = "off"
    bugs: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        for name, allowed in DIMENSIONS.items():
            value = getattr(self, name)
            if value not in allowed:
                raise VariantError(
                    f"unknown value {value!r} for {name}; choose one of {', '.join(allowed)}"
                )
        unknown = sorted(set(self.bugs) - set(BUGS))
        if unknown:
            raise VariantError(f"unknown bug {unknown[0]!r}; choose from {', '.join(BUGS)}")

    def has_bug(self, bug: str) -> bool:
        """True when the seeded bug `bug` (a registry name) is switched on."""
        if bug not in BUGS:
            raise VariantError(f"unknown bug {bug!r}")
        return bug in self.bugs

    @property
    def is_safe(self) -> bool:
        """True for the correct protocol: every dimension at its default, no bug."""
        return self == Variant()

    def label(self) -> str:
        """A short stable name, e.g. 'truncation=hw,bug=early-ack' ('default' when safe)."""
        parts = [
            f"{f.name}={getattr(self, f.name)}"
            for f in fields(self)
            if f.name != "bugs" and getattr(self, f.name) != DIMENSIONS[f.name][0]
        ]
        parts += [f"bug={b}" for b in sorted(self.bugs)]
        return ",".join(parts) or "default"


def parse_variant(assignments: Iterable[str] = (), bugs: Iterable[str] = ()) -> Variant:
    """Build a Variant from CLI words like 'truncation=hw' and bug names; VariantError if bad."""
    chosen: dict[str, str] = {}
    for word in assignments:
        name, sep, value = word.partition("=")
        if not sep or name not in DIMENSIONS:
            raise VariantError(
                f"bad --variant {word!r}; expected NAME=VALUE with NAME one of "
                f"{', '.join(DIMENSIONS)}"
            )
        chosen[name] = value
    return Variant(bugs=frozenset(bugs), **chosen)

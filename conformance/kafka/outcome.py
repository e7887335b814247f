"""What a schedule's run ends with, in either world, and whether two such outcomes agree."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class ReplicaState:
    """One replica at the end of a run: its log as record values in offset order, HW, LEO."""

    broker: int
    records: tuple[int, ...]
    high_watermark: int
    log_end_offset: int
    leader_epoch: int
    """The newest epoch in the replica's leader-epoch cache (-1 if empty)."""


@dataclass(frozen=True)
class Outcome:
    """The end of a run: what the client saw acknowledged, what survived, the partition's state.

    `acked` maps each acks setting to the record values the producer saw acknowledged;
    `lost` the acknowledged values that the final leader's log (up to its HW) does not hold.
    Values are the producer's sequence numbers, 0, 1, 2, ... in the order they were sent."""

    acked: dict[int, tuple[int, ...]]
    lost: dict[int, tuple[int, ...]]
    diverged: bool
    """Two replicas hold different records at the same offset (below both their LEOs)."""
    leader: int | None
    leader_epoch: int
    isr: tuple[int, ...]
    high_watermark: int
    """The final leader's HW (-1 with no leader)."""
    replicas: tuple[ReplicaState, ...] = field(default=())
    notes: tuple[str, ...] = field(default=())

    @property
    def acked_lost(self) -> bool:
        """Some acknowledged record (any acks) is gone."""
        return any(self.lost.values())

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (acks keys as strings)."""
        data = asdict(self)
        data["acked"] = {str(k): list(v) for k, v in self.acked.items()}
        data["lost"] = {str(k): list(v) for k, v in self.lost.items()}
        return data


AGREEMENT_FIELDS = ("acked_lost", "diverged", "high_watermark", "isr", "leader_epoch")
"""What two outcomes are compared on, in the outcome table's column order."""


def disagreements(predicted: Outcome, real: Outcome) -> list[str]:
    """The fields on which the model's prediction and real Kafka differ, as 'field: a vs b'."""
    out: list[str] = []
    for name in AGREEMENT_FIELDS:
        a, b = getattr(predicted, name), getattr(real, name)
        if name == "isr":
            a, b = tuple(sorted(a)), tuple(sorted(b))
        if a != b:
            out.append(f"{name}: kreplica {a} vs kafka {b}")
    return out


def outcome_from_json(data: dict[str, Any]) -> Outcome:
    """An Outcome from `Outcome.to_json` (KeyError/TypeError if it is not one)."""
    return Outcome(
        acked={int(k): tuple(v) for k, v in data["acked"].items()},
        lost={int(k): tuple(v) for k, v in data["lost"].items()},
        diverged=bool(data["diverged"]),
        leader=data["leader"],
        leader_epoch=int(data["leader_epoch"]),
        isr=tuple(data["isr"]),
        high_watermark=int(data["high_watermark"]),
        replicas=tuple(
            ReplicaState(**{**r, "records": tuple(r["records"])}) for r in data.get("replicas", [])
        ),
        notes=tuple(data.get("notes", ())),
    )

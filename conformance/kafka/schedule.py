"""The fault schedule format that both worlds read: a real Kafka cluster and kreplica's simulator.

A schedule is a JSON object, for example::

    {"name": "acks1-leader-fails", "acks": 1, "min_insync_replicas": 2, "unclean": false,
     "steps": [{"op": "produce", "count": 5},
               {"op": "partition", "groups": [[1], [2, 3, "zk"]]},
               {"op": "produce", "count": 5},
               {"op": "crash", "broker": 1},
               {"op": "heal"},
               {"op": "restart", "broker": 1}]}

Brokers are 1, 2 and 3, and broker 1 is the first leader (the topic's preferred replica). Every
step names a fault or a client action in real-world terms; each side translates it into its own
actions (processes, iptables rules, admin requests; or simulator steps). The ops:

    produce   {count, acks?}           produce `count` fresh records, one request each (acks:
                                        the schedule's default); every acknowledgement counts
    crash     {broker}                 kill -9 (the page cache survives)
    crash-controller {}                kill -9 the broker the controller runs on now (read
                                        from ZooKeeper's /controller; any of the three)
    power-loss {broker}                the broker's host loses power: kill -9, and its log
                                        directory loses every write not yet fsynced (restart it
                                        with `restart`); docs/power-loss.md
    restart   {broker}                 start a crashed or shut-down broker again
    shutdown  {broker}                 controlled shutdown (SIGTERM): leadership moves first
    pause     {broker}                 SIGSTOP: a long GC pause
    resume    {broker}                 SIGCONT
    partition {groups}                 nodes in different groups cannot talk; a group may hold
                                        "zk"; a node named in no group stays with ZooKeeper
    heal      {}                       every partition ends
    elect     {kind}                   "preferred" (back to broker 1) or "unclean"
    wait      {until, timeout_s?}      until "isr-shrunk" (the ISR lost someone), "isr-full"
                                        (all three are in the ISR), "leader" (some leader)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kreplica.conformance.errors import KreplicaError

BROKERS = (1, 2, 3)
"""The cluster's broker ids; broker 1 is the preferred (first) leader."""

ZK = "zk"
"""ZooKeeper's name in a partition's groups."""

OPS: dict[str, tuple[str, ...]] = {
    "produce": ("count",),
    "crash": ("broker",),
    "crash-controller": (),
    "power-loss": ("broker",),
    "restart": ("broker",),
    "shutdown": ("broker",),
    "pause": ("broker",),
    "resume": ("broker",),
    "partition": ("groups",),
    "heal": (),
    "elect": ("kind",),
    "wait": ("until",),
}
"""Each op and its required fields."""

OPTIONAL: dict[str, tuple[str, ...]] = {"produce": ("acks",), "wait": ("timeout_s",)}
"""Each op's optional fields."""

ELECTIONS = ("preferred", "unclean")
WAITS = ("isr-shrunk", "isr-full", "leader")
ACKS = (-1, 1)


class ScheduleError(KreplicaError):
    """A schedule file that is missing, not JSON, or not a valid schedule."""


@dataclass(frozen=True)
class Step:
    """One step of a schedule: an op and its fields (see the module docstring)."""

    op: str
    broker: int | None = None
    count: int | None = None
    acks: int | None = None
    groups: tuple[tuple[int | str, ...], ...] | None = None
    kind: str | None = None
    until: str | None = None
    timeout_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The step as the JSON object it was read from (fields left unset are omitted)."""
        out: dict[str, Any] = {"op": self.op}
        for name in (*OPS[self.op], *OPTIONAL.get(self.op, ())):
            value = getattr(self, name)
            if value is not None:
                out[name] = [list(g) for g in value] if name == "groups" else value
        return out

    def __str__(self) -> str:
        args = " ".join(f"{k}={v}" for k, v in self.to_json().items() if k != "op")
        return f"{self.op} {args}".strip()


@dataclass(frozen=True)
class Schedule:
    """A named list of steps on a 3-broker cluster with one topic partition (RF 3)."""

    name: str
    steps: tuple[Step, ...]
    acks: int = -1
    min_insync_replicas: int = 2
    unclean: bool = False
    notes: str = field(default="", compare=False)

    def to_json(self) -> dict[str, Any]:
        """The schedule as JSON (what `load_schedule` reads back)."""
        return {
            "name": self.name,
            "acks": self.acks,
            "min_insync_replicas": self.min_insync_replicas,
            "unclean": self.unclean,
            **({"notes": self.notes} if self.notes else {}),
            "steps": [s.to_json() for s in self.steps],
        }


def _int(where: str, value: Any, allowed: tuple[int, ...] | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScheduleError(f"{where}: expected an integer, got {json.dumps(value)}")
    if allowed is not None and value not in allowed:
        raise ScheduleError(f"{where}: {value} is not one of {', '.join(map(str, allowed))}")
    return value


def _choice(where: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ScheduleError(f"{where}: {json.dumps(value)} is not one of {', '.join(allowed)}")
    return str(value)


def _groups(where: str, value: Any) -> tuple[tuple[int | str, ...], ...]:
    if not isinstance(value, list) or len(value) < 2:
        raise ScheduleError(f"{where}: expected a list of at least two groups")
    seen: set[int | str] = set()
    groups: list[tuple[int | str, ...]] = []
    for group in value:
        if not isinstance(group, list) or not group:
            raise ScheduleError(f'{where}: each group is a non-empty list of brokers or "zk"')
        for node in group:
            if node != ZK:
                _int(where, node, BROKERS)
            if node in seen:
                raise ScheduleError(f"{where}: {json.dumps(node)} is in two groups")
            seen.add(node)
        groups.append(tuple(group))
    return tuple(groups)


def parse_step(where: str, raw: Any) -> Step:
    """One step from its JSON object; ScheduleError names `where` and the field that is wrong."""
    if not isinstance(raw, Mapping) or "op" not in raw:
        raise ScheduleError(f'{where}: expected an object with an "op"')
    op = _choice(f"{where}.op", raw["op"], tuple(OPS))
    allowed = {"op", *OPS[op], *OPTIONAL.get(op, ())}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ScheduleError(f"{where}: {op} takes no field {unknown[0]!r}")
    missing = [name for name in OPS[op] if name not in raw]
    if missing:
        raise ScheduleError(f"{where}: {op} needs {missing[0]!r}")
    fields: dict[str, Any] = {}
    if "broker" in raw:
        fields["broker"] = _int(f"{where}.broker", raw["broker"], BROKERS)
    if "count" in raw:
        fields["count"] = _int(f"{where}.count", raw["count"])
        if not 1 <= fields["count"] <= 10_000:
            raise ScheduleError(f"{where}.count: expected 1 to 10000, got {fields['count']}")
    if "acks" in raw:
        fields["acks"] = _int(f"{where}.acks", raw["acks"], ACKS)
    if "groups" in raw:
        fields["groups"] = _groups(f"{where}.groups", raw["groups"])
    if "kind" in raw:
        fields["kind"] = _choice(f"{where}.kind", raw["kind"], ELECTIONS)
    if "until" in raw:
        fields["until"] = _choice(f"{where}.until", raw["until"], WAITS)
    if "timeout_s" in raw:
        timeout = raw["timeout_s"]
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ScheduleError(f"{where}.timeout_s: expected a positive number of seconds")
        fields["timeout_s"] = float(timeout)
    return Step(op, **fields)


def parse_schedule(raw: Any, where: str = "schedule") -> Schedule:
    """A schedule from its JSON value; ScheduleError says which step and field are wrong."""
    if not isinstance(raw, Mapping):
        raise ScheduleError(f"{where}: expected a JSON object")
    unknown = sorted(
        set(raw) - {"name", "steps", "acks", "min_insync_replicas", "unclean", "notes"}
    )
    if unknown:
        raise ScheduleError(f"{where}: unknown field {unknown[0]!r}")
    steps = raw.get("steps")
    if not isinstance(steps, list) or not steps:
        raise ScheduleError(f'{where}: "steps" must be a non-empty list')
    name = raw.get("name", "")
    if not isinstance(name, str) or not name:
        raise ScheduleError(f'{where}: "name" must be a non-empty string')
    unclean = raw.get("unclean", False)
    if not isinstance(unclean, bool):
        raise ScheduleError(f"{where}.unclean: expected true or false")
    return Schedule(
        name=name,
        steps=tuple(parse_step(f"{where}.steps[{i}]", s) for i, s in enumerate(steps)),
        acks=_int(f"{where}.acks", raw.get("acks", -1), ACKS),
        min_insync_replicas=_int(
            f"{where}.min_insync_replicas", raw.get("min_insync_replicas", 2), (1, 2, 3)
        ),
        unclean=unclean,
        notes=str(raw.get("notes", "")),
    )


def load_schedule(path: Path) -> Schedule:
    """Read a schedule file; a missing file, bad JSON or a bad step is one ScheduleError line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ScheduleError(f"cannot read {path}: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise ScheduleError(f"{path}: not UTF-8 text") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise ScheduleError(f"{path}: not JSON ({err.msg} at line {err.lineno})") from None
    except RecursionError:
        raise ScheduleError(f"{path}: nested too deeply to be a schedule") from None
    return parse_schedule(raw, path.name)

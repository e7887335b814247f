"""Simulator steps as JSON: `{"step": "Deliver", "src": 1, "dst": 2, "index": 0}`.

A step is a JSON object naming its class in kreplica.impl.steps and holding its fields. A topic
partition is `{"topic": "t", "partition": 0}`, a tuple of record ids a list, an isolation level
its name. Schedules (`*.schedule.json`) and recorded traces (a state's hidden steps) use it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from enum import Enum
from typing import Any

from kreplica.conformance.errors import TraceError
from kreplica.impl import steps as steps_module
from kreplica.impl.messages import IsolationLevel, TopicPartition
from kreplica.impl.steps import Step

STEP_CLASSES: dict[str, type] = {
    name: cls
    for name, cls in vars(steps_module).items()
    if isinstance(cls, type) and cls.__module__ == steps_module.__name__
}
"""Every step class of kreplica.impl.steps, by name."""


def _tp(v: Any) -> TopicPartition:
    """A topic partition from its JSON object."""
    return TopicPartition(str(v["topic"]), int(v["partition"]))


# Fields whose JSON form is not the Python value itself: field name -> decoder.
_DECODERS: dict[str, Callable[[Any], Any]] = {
    "tp": _tp,
    "other": _tp,
    "record_ids": lambda v: tuple(int(x) for x in v),
    "together": lambda v: tuple(int(x) for x in v),
    "isolation_level": lambda v: IsolationLevel[v],
}


def _encode_value(value: Any) -> Any:
    """One field value as JSON."""
    if isinstance(value, TopicPartition):
        return {"topic": value.topic, "partition": value.partition}
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, tuple):
        return [_encode_value(v) for v in value]
    return value


_LEFT_OUT_AT_DEFAULT = frozenset({"together", "failover"})
"""Fields added to a step after traces were written with it: left out at their defaults, so
an older step reads the same and writes the same."""


def step_to_json(step: Step) -> dict[str, Any]:
    """A step as a JSON object: its class name, then its fields (a field that is None is left
    out: its default; ITF has no null)."""
    out: dict[str, Any] = {"step": type(step).__name__}
    for f in fields(step):
        value = getattr(step, f.name)
        if value is None or (f.name in _LEFT_OUT_AT_DEFAULT and value == f.default):
            continue
        out[f.name] = _encode_value(value)
    return out


def step_from_json(obj: Any, where: str = "step") -> Step:
    """Decode a step written by `step_to_json`; TraceError if it is not one."""
    if not isinstance(obj, dict) or not isinstance(obj.get("step"), str):
        raise TraceError(f"{where}: expected an object with a 'step' name")
    cls = STEP_CLASSES.get(obj["step"])
    if cls is None:
        raise TraceError(f"{where}: unknown step {obj['step']!r}")
    try:
        args = {k: _DECODERS.get(k, lambda v: v)(v) for k, v in obj.items() if k != "step"}
        step: Step = cls(**args)
    except (TypeError, KeyError, ValueError, AttributeError) as err:
        raise TraceError(f"{where}: bad {obj['step']} step: {err}") from None
    return step

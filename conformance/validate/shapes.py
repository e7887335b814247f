"""The shapes of the spec's variables and of each action's arguments, and the check that a
trace's values have them.

A trace whose values have the wrong type (a string where the spec has an integer, a list where
it has a set) is not a behaviour the spec could even compare: TLC stops the whole run with an
evaluation error when it meets one, costing every other trace of the batch its verdict. So a
trace is held to these shapes before TLC sees it: here, in Python, on the traces Python decodes
(`tracecheck.full_prepare`), and by the Java reader (`java/TraceDataJson.java`), which gets
them as text (`Shape.text`) in the vocabulary of the batch file and refuses a trace whose value
does not fit, with the step and the variable.

The shapes are those of the spec's TypeOK (spec/KafkaReplication.tla) and of the messages its
actions send; a message is a record whose `type` names one of the message shapes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from kreplica.conformance.tla.itf import ItfTrace, to_itf
from kreplica.conformance.tla.tlavalue import Map, Record, Value

INT_MIN, INT_MAX = -(2**31), 2**31 - 1


class ShapeError(Exception):
    """A value that does not have its shape: where, and what was expected; `check_shapes`
    adds the step, and the variable (or argument) it is the value of."""

    def __init__(self, message: str, step: int | None = None, name: str | None = None) -> None:
        """The message, and the step and variable when known."""
        super().__init__(message)
        self.step = step
        self.name = name


@dataclass(frozen=True)
class Shape:
    """A TLA+ type: `int`, `str`, `bool`, `seq(T)`, `set(T)`, `rec(f:T,...)` (exactly these
    fields), `msg(Name=rec(...),...)` (a record whose `type` field names its shape)."""

    kind: str
    elem: Shape | None = None
    fields: tuple[tuple[str, Shape], ...] = ()

    @property
    def text(self) -> str:
        """The shape as the Java reader parses it."""
        if self.kind in ("int", "str", "bool"):
            return self.kind
        if self.kind in ("seq", "set"):
            assert self.elem is not None
            return f"{self.kind}({self.elem.text})"
        sep = ":" if self.kind == "rec" else "="
        return f"{self.kind}(" + ",".join(f"{k}{sep}{s.text}" for k, s in self.fields) + ")"

    def describe(self) -> str:
        """The shape in words, for an error message."""
        if self.kind == "int":
            return "an integer"
        if self.kind == "str":
            return "a string"
        if self.kind == "bool":
            return "a boolean"
        if self.kind == "seq":
            return "a sequence (a JSON array)"
        if self.kind == "set":
            return 'a set ({"#set": [...]})'
        if self.kind == "rec":
            return "a record with fields " + ", ".join(k for k, _ in self.fields)
        return "a message (a record whose type is " + ", ".join(k for k, _ in self.fields) + ")"

    def check(self, value: Value, where: str) -> None:
        """ShapeError unless `value` has this shape; `where` names it."""
        kind = self.kind
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise self._wrong(value, where)
            if not INT_MIN <= value <= INT_MAX:
                raise ShapeError(f"{where}: integer {value} is out of TLC's range (32 bits)")
        elif kind == "str":
            if not isinstance(value, str):
                raise self._wrong(value, where)
        elif kind == "bool":
            if not isinstance(value, bool):
                raise self._wrong(value, where)
        elif kind == "seq":
            assert self.elem is not None
            if isinstance(value, Record | Map) and not value:
                return  # {} and an empty #map are <<>>, as TLC reads them
            if not isinstance(value, tuple):
                raise self._wrong(value, where)
            for i, item in enumerate(value):
                self.elem.check(item, f"{where}[{i}]")
        elif kind == "set":
            assert self.elem is not None
            if not isinstance(value, frozenset):
                raise self._wrong(value, where)
            for item in value:
                self.elem.check(item, f"{where}[..]")
        elif kind == "rec":
            self._check_record(value, where)
        else:
            tag = value.get("type") if isinstance(value, Record) else None
            shape = dict(self.fields).get(tag) if isinstance(tag, str) else None
            if shape is None:
                raise self._wrong(value, where)
            shape.check(value, where)

    def _check_record(self, value: Value, where: str) -> None:
        """A record with exactly this shape's fields, each of its shape."""
        if not isinstance(value, Record) or set(value) != {k for k, _ in self.fields}:
            raise self._wrong(value, where)
        for name, shape in self.fields:
            shape.check(value[name], f"{where}.{name}")

    def _wrong(self, value: Value, where: str) -> ShapeError:
        """The error for a value of another shape."""
        try:
            shown = json.dumps(to_itf(value), ensure_ascii=True, separators=(",", ":"))
        except Exception:  # only for the message
            shown = "a value"
        if len(shown) > 60:
            shown = shown[:57] + "..."
        return ShapeError(f"{where}: expected {self.describe()}, got {shown}")


INT, STR, BOOL = Shape("int"), Shape("str"), Shape("bool")


def seq(elem: Shape) -> Shape:
    """Sequences of `elem`."""
    return Shape("seq", elem)


def set_of(elem: Shape) -> Shape:
    """Sets of `elem`."""
    return Shape("set", elem)


def rec(**fields: Shape) -> Shape:
    """Records with exactly these fields."""
    return Shape("rec", fields=tuple(fields.items()))


def msg(alternatives: Mapping[str, Shape]) -> Shape:
    """Records whose `type` field names their shape."""
    return Shape("msg", fields=tuple(alternatives.items()))


ENTRY = rec(epoch=INT, record=INT)
_HEAD = {"type": STR, "src": INT, "dst": INT}
MESSAGE = msg(
    {
        "LeaderAndIsr": rec(**_HEAD, epoch=INT, leader=INT, isr=set_of(INT)),
        "FetchRequest": rec(**_HEAD, epoch=INT, inc=INT, offset=INT),
        "FetchResponse": rec(
            **_HEAD,
            epoch=INT,
            error=STR,
            hw=INT,
            offset=INT,
            entries=seq(ENTRY),
            logStart=INT,
        ),
        "ListOffsetsRequest": rec(**_HEAD, inc=INT, epoch=INT, timestamp=STR),
        "ListOffsetsResponse": rec(**_HEAD, epoch=INT, error=STR, offset=INT, timestamp=STR),
        "OffsetsForLeaderEpochRequest": rec(**_HEAD, epoch=INT, inc=INT, requested=INT),
        "OffsetsForLeaderEpochResponse": rec(
            **_HEAD, epoch=INT, error=STR, leaderEpoch=INT, requested=INT, endOffset=INT
        ),
    }
)
"""The messages the spec's actions send (spec/KafkaReplication.tla, `type |-> ...`)."""

VARIABLE_SHAPES: dict[str, Shape] = {
    "log": seq(seq(ENTRY)),
    "hw": seq(INT),
    "hwCheckpoint": seq(INT),
    "epochCache": seq(seq(rec(epoch=INT, startOffset=INT))),
    "recoveryPoint": seq(INT),
    "leaderEpoch": seq(INT),
    "leader": seq(INT),
    "fetchState": seq(STR),
    "isr": seq(set_of(INT)),
    "remoteLeo": seq(seq(INT)),
    "alive": set_of(INT),
    "logDirOffline": set_of(INT),
    "incarnation": seq(INT),
    "ctrlLive": set_of(INT),
    "ctrlLeader": INT,
    "ctrlEpoch": INT,
    "ctrlIsr": set_of(INT),
    "msgs": set_of(MESSAGE),
    "nextRecord": INT,
    "pending": set_of(rec(replica=INT, record=INT, offset=INT)),
    "acked": set_of(INT),
    "committed": set_of(seq(INT)),
    "crashes": INT,
    "uncleanShutdowns": INT,
    "removed": set_of(rec(replica=INT, record=INT, cause=STR)),
}
"""Each of the spec's variables (tla.vocabulary.VARIABLES) and its shape."""

ARGUMENT_SHAPES: dict[str, Shape] = {"followers": set_of(INT)}
"""Arguments of another shape than an integer, by name (every other argument is one)."""


def argument_shape(name: str) -> Shape:
    """The shape of an action's argument `name`."""
    return ARGUMENT_SHAPES.get(name, INT)


def check_shapes(trace: ItfTrace) -> None:
    """ShapeError, naming the step and the variable or argument, unless every value the trace
    records has its shape."""
    for index, state in enumerate(trace.states):
        for name, value in state.values.items():
            shape = VARIABLE_SHAPES.get(name)
            if shape is not None:
                try:
                    shape.check(value, name)
                except ShapeError as err:
                    raise ShapeError(
                        f"step {index}: variable {name!r}: {err}", index, name
                    ) from None
        if index > 0:
            for name, value in state.args.items():
                try:
                    argument_shape(name).check(value, name)
                except ShapeError as err:
                    raise ShapeError(f"step {index}: argument {name!r}: {err}", index) from None


def shape_table() -> list[tuple[str, str]]:
    """(key, shape text) for the Java reader: each variable by its name, each action's
    argument as `Action.argument`."""
    from kreplica.conformance.tla.vocabulary import ACTION_ARGS

    table = [(name, shape.text) for name, shape in VARIABLE_SHAPES.items()]
    for action, args in ACTION_ARGS.items():
        table += [(f"{action}.{arg}", argument_shape(arg).text) for arg in sorted(args)]
    return table

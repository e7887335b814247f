"""validate/shapes.py against the spec's own text: the shape of each variable that TypeOK
constrains, and the fields of each message record the spec's actions send. A change to the spec
that the shapes do not follow fails here, not as a false error on a good trace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kreplica.conformance.tla.vocabulary import VARIABLES
from kreplica.conformance.validate.shapes import (
    INT,
    MESSAGE,
    STR,
    VARIABLE_SHAPES,
    Shape,
    seq,
    set_of,
)

SPEC = (Path(__file__).parent.parent / "spec" / "KafkaReplication.tla").read_text()

# TypeOK's conjuncts: `var[r][f] \in X` (under \A r, f \in Replicas), `var \subseteq X`.
CONJUNCT = re.compile(r"(?:\\A \w+ \\in Replicas : )?(\w+)((?:\[\w\])*) (\\in|\\subseteq) (.+)$")


def typeok() -> list[str]:
    """TypeOK's conjuncts, one per line (`/\\ a /\\ b` on one line split in two)."""
    body = SPEC.split("TypeOK ==", 1)[1].split("\n\n", 1)[0]
    parts = re.split(r"/\\", body)
    return [p.strip() for p in parts if p.strip() and not p.strip().startswith("\\A r")] + [
        p.strip() for p in re.findall(r"\\A r \\in Replicas : ([^/\n]+)", body)
    ]


def element(rhs: str) -> Shape:
    """The shape of one value of a TypeOK set expression."""
    entry = re.search(r"Entry == \[(.+?)\]", SPEC)
    assert entry is not None
    if rhs.startswith("Seq(Entry)"):
        fields = re.findall(r"(\w+) :", entry.group(1))
        return seq(Shape("rec", fields=tuple((f, INT) for f in fields)))
    if rhs == "States":
        assert re.search(r'States == \{"\w+"', SPEC)
        return STR
    if rhs.startswith("1..") or rhs.startswith("Replicas") or rhs in ("Nat",) or ".." in rhs:
        return INT
    if rhs.startswith("{NotHosted, NoEpoch}"):
        return INT
    raise AssertionError(f"TypeOK form not understood: {rhs!r}")


def expected_shapes() -> dict[str, Shape]:
    """Each variable TypeOK constrains, and the shape its conjunct gives it."""
    found: dict[str, Shape] = {}
    for conjunct in typeok():
        for piece in conjunct.split(" /\\ "):
            match = CONJUNCT.match(piece.strip())
            if not match or match.group(1) not in VARIABLES:
                continue
            name, index, op, rhs = match.groups()
            shape = element(rhs.strip()) if op == "\\in" else set_of(element(rhs.strip()))
            for _ in range(index.count("[")):
                shape = seq(shape)
            found.setdefault(name, shape)
    return found


def test_typeok_is_read() -> None:
    assert set(expected_shapes()) >= {"log", "hw", "isr", "remoteLeo", "alive", "acked"}


@pytest.mark.parametrize("name", sorted(expected_shapes()))
def test_each_typeok_variable_has_its_shape(name: str) -> None:
    assert VARIABLE_SHAPES[name].text == expected_shapes()[name].text


def test_every_spec_variable_has_a_shape() -> None:
    assert list(VARIABLE_SHAPES) == list(VARIABLES)


def message_literals() -> dict[str, set[str]]:
    """Each `[type |-> "Name", ...]` record of the spec: its field names."""
    found: dict[str, set[str]] = {}
    for start in (m.start() for m in re.finditer(r'\[type \|-> "', SPEC)):
        depth, end = 0, start
        while True:  # to the bracket that closes the record
            depth += {"[": 1, "]": -1}.get(SPEC[end], 0)
            if depth == 0:
                break
            end += 1
        text, top = SPEC[start + 1 : end], []
        depth = 0
        for char in text:  # the text at depth 0 keeps the field names
            depth += {"[": 1, "(": 1, "{": 1, "]": -1, ")": -1, "}": -1}.get(char, 0)
            top.append(char if depth == 0 else " ")
        name = re.match(r'type \|-> "(\w+)"', text)
        assert name is not None
        fields = set(re.findall(r"(\w+) \|->", "".join(top)))
        found.setdefault(name.group(1), set()).update(fields)
    return found


def test_each_message_the_spec_sends_has_its_fields() -> None:
    literals = message_literals()
    shapes = {name: {f for f, _ in shape.fields} for name, shape in MESSAGE.fields}
    assert literals == shapes

"""The parser and printer of TLA+ values as TLC prints them."""

from __future__ import annotations

import pytest
from hypothesis import given
from tlavalue_strategies import values

from kreplica.conformance.errors import TlaValueError
from kreplica.conformance.tla.tlavalue import (
    Map,
    ModelValue,
    Record,
    Value,
    format_value,
    parse_assignments,
    parse_value,
    quote_string,
    unescape_string,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("-17", -17),
        ("2147483647", 2147483647),
        ("TRUE", True),
        ("FALSE", False),
        ('"hello"', "hello"),
        ('""', ""),
        ("r1", ModelValue("r1")),
        ("NoLeader", ModelValue("NoLeader")),
        ("1_OF_T", ModelValue("1_OF_T")),
        ("{}", frozenset()),
        ("{1, 2, 3}", frozenset({1, 2, 3})),
        ("<<>>", ()),
        ("<< >>", ()),
        ("<<1, <<2>>>>", (1, (2,))),
        ("[a |-> 1, b |-> <<>>]", Record({"a": 1, "b": ()})),
        ("(0 :> 1)", Map({0: 1})),
        ('(0 :> "z" @@ 2 :> r1)', Map({0: "z", 2: ModelValue("r1")})),
        ('("a b" :> 1 @@ "c" :> 2)', Map({"a b": 1, "c": 2})),
        ("(<<1, 2>> :> 3)", Map({(1, 2): 3})),
        ("((1 :> 2) :> 3)", Map({Map({1: 2}): 3})),
        ("{[x |-> -1], [x |-> 2]}", frozenset({Record({"x": -1}), Record({"x": 2})})),
    ],
)
def test_parse_value(text: str, expected: Value) -> None:
    """Each form TLC prints parses to the Python value of the module docstring's table."""
    assert parse_value(text) == expected


def test_string_escapes() -> None:
    """TLC escapes quotes, backslashes, tabs and newlines; unknown escapes stay as they are."""
    assert parse_value(r'"tab\there\nnl \\ back \"q\""') == 'tab\there\nnl \\ back "q"'
    assert unescape_string(r"a\qb") == r"a\qb"
    assert quote_string('a"b\\c\n') == r'"a\"b\\c\n"'


def test_wrapped_value() -> None:
    """TLC wraps long values across lines with extra spaces; layout is insignificant."""
    text = """<< [ leo |-> 1,
     log |-> (0 :> <<0, 1, "rec">>) ],
   [ leo |-> 2,
     log |->
         (0 :> <<0, 1, "rec">> @@ 1 :> <<1, 1, "rec">>) ] >>"""
    value = parse_value(text)
    assert isinstance(value, tuple)
    assert value[1] == Record({"leo": 2, "log": Map({0: (0, 1, "rec"), 1: (1, 1, "rec")})})


def test_records_and_maps_compare_as_functions() -> None:
    """A record equals a function with the same string keys, in any order, and hashes alike."""
    record = Record({"a": 1, "b": 2})
    assert record == Map({"b": 2, "a": 1})
    assert hash(record) == hash(Map({"b": 2, "a": 1}))
    assert record == {"a": 1, "b": 2}
    assert len({record, Record({"b": 2, "a": 1})}) == 1
    assert list(record) == ["a", "b"]
    assert "Record" in repr(record)


def test_parse_assignments() -> None:
    """A state is `/\\ var = value` lines, or a bare `var = value` for a single variable."""
    state = parse_assignments('/\\ x = 1\n/\\ log = <<[a |-> "x"]>>\n/\\ s = {\n  1 }\n')
    assert state == {"x": 1, "log": (Record({"a": "x"}),), "s": frozenset({1})}
    assert list(state) == ["x", "log", "s"]
    assert parse_assignments("x = 0\n") == {"x": 0}
    assert parse_assignments("") == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{1, 2", "expected '}', found end of text at line 1, col 6"),
        ('"abc', "unterminated string at line 1, col 1"),
        ("[a |-> ]", "unexpected ']'"),
        ("<<1 2>>", "expected '>>', found '2'"),
        ("1 2", "unexpected text after the value: '2'"),
        ("@", "unexpected character"),
        ("(1 :> 2", "expected ')'"),
        ("[1 |-> 2]", "expected a record field name"),
        ("", "unexpected end of value"),
        ("{1,\n 2,\n ?}", "line 3, col 2"),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    """Malformed text raises TlaValueError naming what and where."""
    with pytest.raises(TlaValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_value(text)


def test_parse_assignment_errors() -> None:
    """A state that is not `var = value` lines is rejected."""
    with pytest.raises(TlaValueError, match="expected a variable name"):
        parse_assignments("/\\ 1 = 2")
    with pytest.raises(TlaValueError, match="expected '='"):
        parse_assignments("/\\ x 2")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "TRUE"),
        (-3, "-3"),
        (frozenset({3, 1, 2}), "{1, 2, 3}"),
        (("a", ModelValue("r1")), '<<"a", r1>>'),
        (Record({"b": 1, "a": 2}), "[b |-> 1, a |-> 2]"),
        (Record({}), "<<>>"),
        (Map({2: "x", 1: "y"}), '(2 :> "x" @@ 1 :> "y")'),
        (Record({"a b": 1}), '("a b" :> 1)'),
        (Map({"TRUE": 1}), '("TRUE" :> 1)'),
    ],
)
def test_format_value(value: Value, text: str) -> None:
    """Values print in TLC's syntax, sets sorted."""
    assert format_value(value) == text


# ---------------------------------------------------------------- round trip


@given(values)
def test_print_then_parse_round_trips(value: Value) -> None:
    """Printing a value TLC-style and parsing it back gives the same value."""
    assert parse_value(format_value(value)) == value


@given(values)
def test_parse_survives_tlc_line_wrapping(value: Value) -> None:
    """Breaking the printed text at every comma (as TLC's wrapping does) changes nothing."""
    text = format_value(value)
    if '"' not in text:
        assert parse_value(text.replace(", ", ",\n    ")) == value

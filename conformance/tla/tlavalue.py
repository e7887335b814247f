"""TLA+ values as Python values, and a parser and printer for values as TLC prints them.

The Python model of a TLA+ value (`Value`):

| TLA+                         | Python                          |
|------------------------------|---------------------------------|
| integer, string, boolean     | `int`, `str`, `bool`            |
| set `{a, b}`                 | `frozenset`                     |
| sequence / tuple `<<a, b>>`  | `tuple` (TLC cannot tell them apart; `<<>>` is the empty tuple) |
| record `[f |-> v]`           | `Record` (a hashable, ordered, read-only mapping str -> Value) |
| function `(1 :> a @@ 2 :> b)`| `Map` (a hashable, ordered, read-only mapping Value -> Value)  |
| model value `r1`             | `ModelValue("r1")`              |

`Record` and `Map` compare equal when they hold the same pairs (a record is a function whose
domain is a set of strings). TLC prints the empty function as `<< >>`, so it parses as `()`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, TypeAlias, TypeVar, Union

from kreplica.conformance.errors import TlaValueError

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True, order=True)
class ModelValue:
    """A TLC model value (an uninterpreted constant such as `r1` or `NoLeader`)."""

    name: str

    def __str__(self) -> str:
        """Return the bare name, as TLC prints it."""
        return self.name


class _FrozenMapping(Mapping[K, V], Generic[K, V]):
    """An immutable, hashable, insertion-ordered mapping."""

    __slots__ = ("_hash", "_items")

    def __init__(self, items: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> None:
        """Copy `items` (a mapping or pairs)."""
        self._items: dict[K, V] = dict(items)
        self._hash: int | None = None

    def __getitem__(self, key: K) -> V:
        """Return the value at `key`."""
        return self._items[key]

    def __iter__(self) -> Iterator[K]:
        """Iterate over the keys in insertion order."""
        return iter(self._items)

    def __len__(self) -> int:
        """Return the number of keys."""
        return len(self._items)

    def __hash__(self) -> int:
        """Hash the set of pairs (so equal mappings hash equal, whatever their order)."""
        if self._hash is None:
            self._hash = hash(frozenset(self._items.items()))
        return self._hash

    def __repr__(self) -> str:
        """Show the class name and the pairs."""
        return f"{type(self).__name__}({self._items!r})"


class Record(_FrozenMapping[str, "Value"]):
    """A TLA+ record: field name -> value, in the order the fields were given."""

    __slots__ = ()


class Map(_FrozenMapping["Value", "Value"]):
    """A TLA+ function with an arbitrary domain: key -> value."""

    __slots__ = ()


Value: TypeAlias = Union[  # noqa: UP007 (a recursive alias needs the string forward references)
    bool, int, str, frozenset["Value"], tuple["Value", ...], Record, Map, ModelValue
]

_IDENT = re.compile(r"[A-Za-z0-9_]*[A-Za-z_][A-Za-z0-9_]*")
_RESERVED = frozenset({"TRUE", "FALSE"})
_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<punct><<|>>|\|->|:>|@@|/\\|[{}\[\](),=])
  | (?P<ident>[0-9]*[A-Za-z_][A-Za-z0-9_]*)
  | (?P<int>-?[0-9]+)
    """,
    re.VERBOSE | re.DOTALL,
)
_UNESCAPE = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", '"': '"', "\\": "\\"}
_ESCAPE = {v: "\\" + k for k, v in _UNESCAPE.items()}


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    offset: int


def _where(text: str, offset: int) -> str:
    """Describe `offset` in `text` as line/column plus a short excerpt."""
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    excerpt = text[offset : offset + 30].split("\n")[0]
    return f"line {line}, col {col} (at {excerpt!r})" if excerpt else f"line {line}, col {col}"


def _tokenize(text: str) -> list[_Token]:
    """Split `text` into tokens, skipping whitespace (TLC wraps long values across lines)."""
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            what = "unterminated string" if text[pos] == '"' else "unexpected character"
            raise TlaValueError(f"{what} at {_where(text, pos)}")
        kind = match.lastgroup or ""
        if kind != "ws":
            tokens.append(_Token(kind, match.group(), pos))
        pos = match.end()
    return tokens


def unescape_string(body: str) -> str:
    """Decode the escapes of a TLA+ string literal body (without the quotes)."""
    return re.sub(r"\\(.)", lambda m: _UNESCAPE.get(m.group(1), m.group()), body, flags=re.DOTALL)


def quote_string(text: str) -> str:
    """Quote `text` as a TLA+ string literal, as TLC prints it."""
    return '"' + "".join(_ESCAPE.get(ch, ch) for ch in text) + '"'


class _Parser:
    """Recursive descent over the tokens of one text."""

    def __init__(self, text: str) -> None:
        """Tokenize `text`."""
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0

    def peek(self) -> _Token | None:
        """Return the next token without consuming it."""
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> _Token:
        """Consume and return the next token."""
        tok = self.peek()
        if tok is None:
            raise TlaValueError(f"unexpected end of value at {_where(self.text, len(self.text))}")
        self.pos += 1
        return tok

    def accept(self, text: str) -> bool:
        """Consume the next token if it is the punctuation `text`."""
        tok = self.peek()
        if tok is not None and tok.kind == "punct" and tok.text == text:
            self.pos += 1
            return True
        return False

    def expect(self, text: str) -> None:
        """Consume the punctuation `text` or fail."""
        if not self.accept(text):
            tok = self.peek()
            found = "end of text" if tok is None else repr(tok.text)
            offset = len(self.text) if tok is None else tok.offset
            raise TlaValueError(f"expected {text!r}, found {found} at {_where(self.text, offset)}")

    def fail(self, tok: _Token, what: str) -> TlaValueError:
        """Build an error for `tok`."""
        return TlaValueError(f"{what} {tok.text!r} at {_where(self.text, tok.offset)}")

    def value(self) -> Value:
        """Parse one value."""
        tok = self.take()
        if tok.kind == "int":
            return int(tok.text)
        if tok.kind == "string":
            return unescape_string(tok.text[1:-1])
        if tok.kind == "ident":
            return self.atom(tok)
        opener = {"{": self.set_, "<<": self.seq, "[": self.record, "(": self.function}
        if tok.kind == "punct" and tok.text in opener:
            return opener[tok.text]()
        raise self.fail(tok, "unexpected")

    def atom(self, tok: _Token) -> Value:
        """A boolean or a model value."""
        if tok.text in ("TRUE", "FALSE"):
            return tok.text == "TRUE"
        return ModelValue(tok.text)

    def items(self, close: str) -> list[Value]:
        """Comma-separated values up to the punctuation `close`."""
        if self.accept(close):
            return []
        out = [self.value()]
        while self.accept(","):
            out.append(self.value())
        self.expect(close)
        return out

    def set_(self) -> Value:
        """The rest of `{a, b}`."""
        return frozenset(self.items("}"))

    def seq(self) -> Value:
        """The rest of `<<a, b>>`."""
        return tuple(self.items(">>"))

    def field_name(self) -> str:
        """A record field name."""
        tok = self.take()
        if tok.kind != "ident":
            raise self.fail(tok, "expected a record field name, found")
        return tok.text

    def record(self) -> Value:
        """The rest of `[f |-> v, g |-> w]`."""
        fields: list[tuple[str, Value]] = []
        while True:
            name = self.field_name()
            self.expect("|->")
            fields.append((name, self.value()))
            if not self.accept(","):
                break
        self.expect("]")
        return Record(fields)

    def function(self) -> Value:
        """The rest of `(k1 :> v1 @@ k2 :> v2)`."""
        pairs: list[tuple[Value, Value]] = []
        while True:
            key = self.value()
            self.expect(":>")
            pairs.append((key, self.value()))
            if not self.accept("@@"):
                break
        self.expect(")")
        return Map(pairs)

    def assignment(self) -> tuple[str, Value]:
        """One `/\\ var = value` (the `/\\` is optional: TLC omits it for one variable)."""
        self.accept("/\\")
        tok = self.take()
        if tok.kind != "ident":
            raise self.fail(tok, "expected a variable name, found")
        self.expect("=")
        return tok.text, self.value()

    def at_end(self) -> None:
        """Fail unless every token was consumed."""
        tok = self.peek()
        if tok is not None:
            raise self.fail(tok, "unexpected text after the value:")


def parse_value(text: str) -> Value:
    """Parse one TLA+ value printed by TLC (whitespace and line breaks are insignificant)."""
    parser = _Parser(text)
    value = parser.value()
    parser.at_end()
    return value


def parse_assignments(text: str) -> dict[str, Value]:
    """Parse a state as TLC prints it: `/\\ x = 1` lines (or a bare `x = 1`) -> {var: value}."""
    parser = _Parser(text)
    out: dict[str, Value] = {}
    while parser.peek() is not None:
        name, value = parser.assignment()
        out[name] = value
    return out


def value_sort_key(value: Value) -> tuple[object, ...]:
    """A total order on values of one kind (numbers by value, strings alphabetically)."""
    if isinstance(value, bool):
        return (0, int(value))
    if isinstance(value, int):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    if isinstance(value, ModelValue):
        return (3, value.name)
    if isinstance(value, tuple):
        return (4, tuple(value_sort_key(v) for v in value))
    if isinstance(value, frozenset):
        return (5, tuple(sorted(value_sort_key(v) for v in value)))
    items = sorted((value_sort_key(k), value_sort_key(v)) for k, v in value.items())
    return (6, tuple(items))


def is_identifier(text: str) -> bool:
    """Whether `text` can be a TLA+ record field name."""
    return _IDENT.fullmatch(text) is not None and text not in _RESERVED


def format_value(value: Value) -> str:
    """Print `value` on one line in TLC's syntax (sets sorted; also valid TLA+ source)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return quote_string(value)
    if isinstance(value, ModelValue):
        return value.name
    if isinstance(value, frozenset):
        return "{" + ", ".join(format_value(v) for v in sorted(value, key=value_sort_key)) + "}"
    if isinstance(value, tuple):
        return "<<" + ", ".join(format_value(v) for v in value) + ">>"
    return _format_mapping(value)


def _format_mapping(value: Record | Map) -> str:
    """Print a record as `[f |-> v]` when it can be one, else as `(k :> v @@ ...)`."""
    if not value:
        return "<<>>"
    items: list[tuple[Value, Value]] = list(value.items())
    if all(isinstance(k, str) and is_identifier(k) for k, _ in items):
        return "[" + ", ".join(f"{k} |-> {format_value(v)}" for k, v in items) + "]"
    pairs = (f"{format_value(k)} :> {format_value(v)}" for k, v in items)
    return "(" + " @@ ".join(pairs) + ")"

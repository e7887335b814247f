"""Mutation operators over Python's `ast`: each finds the places in a module it can edit, and
makes one small edit to the source text there.

A mutant is one edit at one node: a comparison swapped (`<`/`<=`, `>`/`>=`, `==`/`!=`), an
integer constant moved by one, `+`/`-` swapped (also `+=`/`-=`), `and`/`or` swapped, a `not`
removed, `min`/`max` swapped, `True`/`False` swapped, or a statement replaced by `pass`. Its id
is stable while the file does not change: `FILE:LINE:COL:OPERATOR` (`log.py:123:8:cmp-lt-le`).

The edit is spliced into the original text (the node's source span replaced by the unparsed
mutated node), so the rest of the file keeps its comments and layout; `splice` checks that the
result parses to exactly the mutated tree. Pinned by tests/test_mutation.py.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass

COMPARE_SWAPS: dict[type[ast.cmpop], tuple[type[ast.cmpop], str]] = {
    ast.Lt: (ast.LtE, "cmp-lt-le"),
    ast.LtE: (ast.Lt, "cmp-le-lt"),
    ast.Gt: (ast.GtE, "cmp-gt-ge"),
    ast.GtE: (ast.Gt, "cmp-ge-gt"),
    ast.Eq: (ast.NotEq, "cmp-eq-ne"),
    ast.NotEq: (ast.Eq, "cmp-ne-eq"),
}
"""Each comparison operator, the one it becomes, and the operator's name."""

ARITH_SWAPS: dict[type[ast.operator], tuple[type[ast.operator], str]] = {
    ast.Add: (ast.Sub, "add-sub"),
    ast.Sub: (ast.Add, "sub-add"),
}
"""`+` and `-`, each to the other (in a BinOp and in an augmented assignment)."""

DELETABLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Raise, ast.Delete)
"""Statements the `stmt-pass` operator replaces by `pass` (not `return`, whose deletion only
changes a value to None, and not `assert`, which states an invariant and has no effect). Only
statements inside a function: a module's or class's assignments declare names, not behaviour."""


@dataclass(frozen=True, slots=True)
class Mutant:
    """One edit of one file: where (line, column of the node), which operator, what it does."""

    file: str
    line: int
    col: int
    operator: str
    description: str
    ordinal: int = 0
    """The how-manieth node of this operator at this line and column (0: the first); a
    comparison chain `a < b <= c` has one node with two operators."""

    @property
    def id(self) -> str:
        """The stable id `FILE:LINE:COL:OPERATOR` (`#N` appended for the N-th same place)."""
        base = f"{self.file}:{self.line}:{self.col}:{self.operator}"
        return f"{base}#{self.ordinal}" if self.ordinal else base


@dataclass(frozen=True, slots=True)
class Site:
    """A place an operator can edit: the node, its mutated copy, the operator's name and what
    the edit does, in words."""

    node: ast.AST
    mutated: ast.AST
    operator: str
    description: str


Finder = Callable[[ast.AST], Iterator[Site]]
"""An operator: the sites it can edit in one node (none, one, or several)."""


def _replaced(node: ast.AST, **fields: object) -> ast.AST:
    """A deep copy of `node` with some fields replaced."""
    new = copy.deepcopy(node)
    for name, value in fields.items():
        setattr(new, name, value)
    return new


def compare_swaps(node: ast.AST) -> Iterator[Site]:
    """`<`↔`<=`, `>`↔`>=`, `==`↔`!=`, one site per operator of a comparison chain."""
    if not isinstance(node, ast.Compare):
        return
    for i, op in enumerate(node.ops):
        swap = COMPARE_SWAPS.get(type(op))
        if swap is None:
            continue
        new_op, name = swap
        ops = [*node.ops[:i], new_op(), *node.ops[i + 1 :]]
        yield Site(node, _replaced(node, ops=ops), name, f"{_op(op)} -> {_op(new_op())}")


def int_constants(node: ast.AST) -> Iterator[Site]:
    """An integer constant (not a bool) plus one, and minus one."""
    if not isinstance(node, ast.Constant) or type(node.value) is not int:
        return
    value = node.value
    yield Site(node, _int(node, value + 1), "int-plus1", f"{value} -> {value + 1}")
    yield Site(node, _int(node, value - 1), "int-minus1", f"{value} -> {value - 1}")


def _int(node: ast.Constant, value: int) -> ast.AST:
    """An integer literal as Python parses it (a negative one is `-` applied to a constant)."""
    if value >= 0:
        return _replaced(node, value=value)
    return ast.UnaryOp(op=ast.USub(), operand=ast.Constant(value=-value))


def arith_swaps(node: ast.AST) -> Iterator[Site]:
    """`+`↔`-` in a binary operation or an augmented assignment."""
    if not isinstance(node, ast.BinOp | ast.AugAssign):
        return
    swap = ARITH_SWAPS.get(type(node.op))
    if swap is not None:
        new_op, name = swap
        yield Site(node, _replaced(node, op=new_op()), name, f"{_op(node.op)} -> {_op(new_op())}")


def bool_swaps(node: ast.AST) -> Iterator[Site]:
    """`and`↔`or`."""
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            yield Site(node, _replaced(node, op=ast.Or()), "and-or", "and -> or")
        else:
            yield Site(node, _replaced(node, op=ast.And()), "or-and", "or -> and")


def not_removals(node: ast.AST) -> Iterator[Site]:
    """`not x` becomes `x`."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield Site(node, copy.deepcopy(node.operand), "not-drop", "not x -> x")


def min_max_swaps(node: ast.AST) -> Iterator[Site]:
    """A call of the builtin `min` becomes `max`, and the reverse."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        other = {"min": "max", "max": "min"}.get(node.func.id)
        if other is not None:
            func = ast.Name(id=other, ctx=ast.Load())
            yield Site(
                node,
                _replaced(node, func=func),
                f"{node.func.id}-{other}",
                f"{node.func.id} -> {other}",
            )


def bool_constants(node: ast.AST) -> Iterator[Site]:
    """`True`↔`False`."""
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        new = not node.value
        name = "true-false" if node.value else "false-true"
        yield Site(node, _replaced(node, value=new), name, f"{node.value} -> {new}")


def statement_deletions(node: ast.AST) -> Iterator[Site]:
    """An assignment, an expression statement, a `raise` or a `del` becomes `pass`."""
    if isinstance(node, DELETABLE):
        if isinstance(node, ast.AnnAssign) and node.value is None:
            return  # a bare annotation does nothing to delete
        first = ast.unparse(node).splitlines()[0]
        yield Site(node, ast.Pass(), "stmt-pass", f"`{_short(first)}` -> pass")


OPERATORS: tuple[Finder, ...] = (
    compare_swaps,
    int_constants,
    arith_swaps,
    bool_swaps,
    not_removals,
    min_max_swaps,
    bool_constants,
    statement_deletions,
)
"""Every operator, in the order their sites are listed for one node."""


OP_TEXT: dict[type[ast.AST], str] = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
    ast.Add: "+", ast.Sub: "-",
}  # fmt: skip
"""The source text of each operator the swaps touch."""


def _op(op: ast.AST) -> str:
    """The source text of an operator node (`<=`, `+`)."""
    return OP_TEXT[type(op)]


def _short(text: str, width: int = 60) -> str:
    """`text`, cut to `width` characters with an ellipsis."""
    return text if len(text) <= width else text[: width - 1] + "…"


def _offsets(source: str) -> list[int]:
    """The character offset where each line (1-based, index 0 unused) starts."""
    starts = [0, 0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _span(node: ast.AST, source: str) -> tuple[int, int]:
    """The character offsets of a node's source text (ast gives UTF-8 byte columns)."""
    lines = source.splitlines(keepends=True)
    starts = _offsets(source)

    def at(line: int, byte_col: int) -> int:
        text = lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8")
        return starts[line] + len(text)

    return at(node.lineno, node.col_offset), at(node.end_lineno or 0, node.end_col_offset or 0)  # type: ignore[attr-defined]


def splice(source: str, site: Site) -> str:
    """The source with the site's node replaced by its mutated form (parenthesised if the
    splice would otherwise parse differently); ValueError if no splice gives the tree."""
    tree = ast.parse(source)
    expected = ast.dump(_swap_in(tree, site.node, site.mutated))
    start, end = _span(site.node, source)
    text = ast.unparse(site.mutated)
    for candidate in (text, f"({text})"):
        mutated = source[:start] + candidate + source[end:]
        try:
            if ast.dump(ast.parse(mutated)) == expected:
                return mutated
        except SyntaxError:
            continue
        if isinstance(site.mutated, ast.stmt):
            break
    raise ValueError(f"cannot splice {site.operator} at line {site.node.lineno}")  # type: ignore[attr-defined]


def _swap_in(tree: ast.Module, node: ast.AST, mutated: ast.AST) -> ast.Module:
    """A copy of `tree` with the node at `node`'s position and type replaced by `mutated`."""
    where = (type(node), node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]

    class Swap(ast.NodeTransformer):
        def visit(self, n: ast.AST) -> ast.AST:
            if (type(n), *[getattr(n, a, None) for a in _POSITION]) == where:
                return mutated
            return self.generic_visit(n)

    swapped = Swap().visit(copy.deepcopy(tree))
    assert isinstance(swapped, ast.Module)
    return swapped


_POSITION = ("lineno", "col_offset", "end_lineno", "end_col_offset")

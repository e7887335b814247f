"""Every mutant of the core modules of impl/, in one deterministic order, and a seeded sample.

What is mutated: executable code of the core (`CORE`). What is not: docstrings and other bare
string statements, type annotations, decorators and class bases, `__repr__`/`__str__`, the
`if TYPE_CHECKING:` imports, f-strings (messages) and `assert` statements (an invariant stated,
not behaviour). Pinned by tests/test_mutation.py (same list twice, same sample for a seed).
"""

from __future__ import annotations

import ast
import random
from collections.abc import Iterator
from pathlib import Path

from kreplica.conformance.mutation.operators import OPERATORS, Mutant, Site, splice

CORE: tuple[str, ...] = (
    "log.py",
    "epoch_cache.py",
    "partition.py",
    "replica.py",
    "replica_manager.py",
    "replica_fetcher.py",
    "fetcher.py",
    "fetch_state.py",
    "controller.py",
    "delayed_ops.py",
    "purgatory.py",
)
"""The modules of impl/ that replicate: the log, leader and follower, the controller, purgatory."""

SKIPPED_FUNCTIONS = frozenset({"__repr__", "__str__"})
"""Functions whose text only describes an object."""


def impl_dir() -> Path:
    """The real impl/ folder (kreplica.impl's files)."""
    import kreplica.impl

    return Path(kreplica.impl.__file__).resolve().parent


def _is_bare_string(node: ast.AST) -> bool:
    """A statement that is only a constant: a docstring, an attribute's docstring, `...`."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def _is_type_checking(node: ast.AST) -> bool:
    """`if TYPE_CHECKING:` (imports for annotations only)."""
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def mutable_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """The node and every node under it that may be mutated, in source order."""
    if _is_bare_string(node) or _is_type_checking(node):
        return
    if isinstance(node, ast.Assert | ast.Import | ast.ImportFrom | ast.JoinedStr | ast.arg):
        return
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        if node.name in SKIPPED_FUNCTIONS:
            return
        children: list[ast.AST] = [*node.args.defaults, *filter(None, node.args.kw_defaults)]
        children += node.body
    elif isinstance(node, ast.ClassDef):
        children = list(node.body)
    elif isinstance(node, ast.AnnAssign):
        yield node
        children = [node.target] + ([node.value] if node.value is not None else [])
    else:
        yield node
        children = list(ast.iter_child_nodes(node))
    for child in children:
        yield from mutable_nodes(child)


def file_sites(file: str, source: str) -> list[tuple[Mutant, Site]]:
    """Every mutant of one file's source, with the site that makes it, in source order."""
    tree = ast.parse(source)
    declarations = {id(s) for n in ast.walk(tree) if isinstance(n, ast.Module | ast.ClassDef)
                    for s in n.body}  # fmt: skip
    found: list[tuple[Mutant, Site]] = []
    seen: dict[str, int] = {}
    for node in mutable_nodes(tree):
        for finder in OPERATORS:
            for site in finder(node):
                if site.operator == "stmt-pass" and id(node) in declarations:
                    continue
                line, col = node.lineno, node.col_offset  # type: ignore[attr-defined]
                key = f"{line}:{col}:{site.operator}"
                ordinal = seen.get(key, 0)
                seen[key] = ordinal + 1
                found.append(
                    (Mutant(file, line, col, site.operator, site.description, ordinal), site)
                )
    return found


def mutants_of(file: str, source: str) -> list[Mutant]:
    """Every mutant of one file's source, in source order."""
    return [mutant for mutant, _ in file_sites(file, source)]


def all_mutants(root: Path | None = None, files: tuple[str, ...] = CORE) -> list[Mutant]:
    """Every mutant of the core modules (of `root`, default the real impl/), file by file."""
    folder = root or impl_dir()
    return [m for f in files for m in mutants_of(f, (folder / f).read_text(encoding="utf-8"))]


def sample(mutants: list[Mutant], size: int, seed: int) -> list[Mutant]:
    """`size` mutants drawn without replacement by `seed` (all, if there are fewer), in the
    order drawn: the same list and seed give the same sample."""
    return random.Random(seed).sample(mutants, min(size, len(mutants)))


def mutated_source(mutant: Mutant, source: str) -> str:
    """The file's source with the mutant's edit made (KeyError: no such mutant in it)."""
    for candidate, site in file_sites(mutant.file, source):
        if candidate.id == mutant.id:
            return splice(source, site)
    raise KeyError(mutant.id)

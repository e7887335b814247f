"""The house's layout: imports flow one way between rooms, no module cycle, a sans-IO core.

The room graph is data, `kreplica.conformance.ROOMS`; this test is its compiler. It reads every
module's imports with `ast` (at the top of a file, inside a function or under TYPE_CHECKING
alike) and fails with the file, the line and the forbidden edge. Python refuses no cycle, so
this test does: between rooms (ROOMS must be a DAG) and between modules.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import pytest

from kreplica.conformance import ROOMS

ROOT = Path(__file__).resolve().parent.parent
"""The checkout: impl/ and conformance/ are the rooms' folders."""

NEUTRAL = frozenset({"kreplica", "kreplica.conformance"})
"""Package roots that hold only docstrings and the room graph: anyone may import them."""

SANS_IO_FORBIDDEN = frozenset(
    {"time", "datetime", "threading", "multiprocessing", "asyncio", "socket", "selectors",
     "subprocess", "signal", "random", "os"}
)  # fmt: skip
"""Modules that would give impl/ a clock, threads, sockets, processes or ambient randomness:
the simulator owns time and the network (DESIGN.md, 'The implementation core is sans-IO')."""


def module_name(path: Path, root: Path) -> str:
    """The import name of a source file under `root` (impl/x.py is kreplica.impl.x)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["kreplica", *parts])


def room_of(module: str) -> str | None:
    """The room a kreplica module lives in (None: a neutral package root)."""
    if module in NEUTRAL:
        return None
    parts = module.split(".")
    if parts[1] == "impl":
        return "impl"
    return parts[2]  # kreplica.conformance.<room>[...], or the module `errors`


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of the nodes under `if TYPE_CHECKING:` (imports for annotations only)."""
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden |= {id(child) for stmt in node.body for child in ast.walk(stmt)}
    return hidden


NAMED_MODULE = re.compile(r"\bkreplica\.(?:conformance\.\w+|impl)(?:\.\w+)*")
"""A kreplica module named in a string: code run in another process (`python -c`, `-m`)."""


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the string constants that are docstrings or other bare string statements."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def named_in_strings(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) for every kreplica module a string of the file names (not a docstring):
    an import that runs in another process is an edge of the room graph too."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docs = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            for name in NAMED_MODULE.findall(node.value):
                yield node.lineno, name


def imports_of(path: Path, module: str, at_run_time: bool = False) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import in a file; `from package import name` also
    yields package.name (it may be a module). `at_run_time`: leave out the imports under
    `if TYPE_CHECKING:`, which never run."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    skipped = _type_checking_only(tree) if at_run_time else set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def sources(root: Path) -> dict[str, Path]:
    """Every module of kreplica under `root` (impl/ and conformance/), by import name."""
    found = {}
    for folder in ("impl", "conformance"):
        for path in sorted((root / folder).rglob("*.py")):
            found[module_name(path, root)] = path
    return found


def room_edges(root: Path) -> Iterator[tuple[Path, int, str, str, str, str]]:
    """(file, line, module, target, its room, target's room) for every import of a module of
    another room, and every module of another room a string names (`named_in_strings`)."""
    modules = sources(root)
    for module, path in modules.items():
        source_room = room_of(module)
        named = [*imports_of(path, module), *named_in_strings(path)]
        for line, target in named:
            if target not in modules or target in NEUTRAL:
                continue
            target_room = room_of(target)
            if source_room is None or target_room is None or target_room == source_room:
                continue
            yield path, line, module, target, source_room, target_room


def forbidden_imports(root: Path, rooms: dict[str, frozenset[str]]) -> list[str]:
    """One line per import that goes against the room graph: `file:line: a -> b (room x may
    import only ...)`."""
    found: dict[tuple[Path, int, str], str] = {}
    for path, line, module, target, source_room, target_room in room_edges(root):
        if target_room not in rooms[source_room]:
            key = (path, line, module)  # one line per import statement: its most precise name
            found[key] = max(found.get(key, ""), target, key=len)
    problems = []
    for (path, line, module), target in sorted(found.items()):
        source_room = room_of(module)
        assert source_room is not None
        may = ", ".join(sorted(rooms[source_room])) or "nothing else"
        problems.append(
            f"{path.relative_to(root)}:{line}: {module} -> {target} "
            f"(room {source_room!r} may import only {may})"
        )
    return problems


def module_graph(root: Path) -> nx.DiGraph:
    """Module -> module it imports when it runs, for every kreplica module under `root`.

    Type-only imports are left out: impl/fetcher.py, impl/replica_fetcher.py and
    impl/delayed_ops.py name ReplicaManager in annotations, as Kafka's fetcher threads and
    DelayedProduce hold a ReplicaManager, while replica_manager.py imports them; no import runs
    in a circle."""
    modules = sources(root)
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for module, path in modules.items():
        for _, target in imports_of(path, module, at_run_time=True):
            if target in modules and target not in NEUTRAL and target != module:
                graph.add_edge(module, target)
    return graph


def test_every_import_follows_the_room_graph() -> None:
    problems = forbidden_imports(ROOT, ROOMS)
    assert not problems, "imports against kreplica.conformance.ROOMS:\n" + "\n".join(problems)


KEPT_EDGES: dict[tuple[str, str], str] = {}
"""Edges of ROOMS that no import uses, each with why it is kept (none today)."""


def test_every_edge_of_the_room_graph_is_used() -> None:
    """ROOMS allows only what the code does: an edge no import (or string-named module) uses
    is either removed or listed in KEPT_EDGES with a reason."""
    used = {(a, b) for *_, a, b in room_edges(ROOT)}
    unused = sorted(
        (a, b) for a, bs in ROOMS.items() for b in bs if (a, b) not in used | set(KEPT_EDGES)
    )
    assert not unused, "edges of kreplica.conformance.ROOMS no import uses: " + ", ".join(
        f"{a} -> {b}" for a, b in unused
    )


def test_each_room_docstring_names_its_modules() -> None:
    """Every room's `__init__.py` says what it holds: each module and subpackage of the room,
    by name in backquotes."""
    missing = []
    for folder in sorted((ROOT / "conformance").iterdir()):
        init = folder / "__init__.py"
        if not init.exists():
            continue
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        names = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
        names += [p.name for p in folder.iterdir() if (p / "__init__.py").exists()]
        missing += [f"{folder.name}/{n}" for n in sorted(names) if f"`{n}`" not in doc]
    assert not missing, "modules no room docstring names: " + ", ".join(missing)


def test_a_module_named_in_a_string_is_an_edge(tmp_path: Path) -> None:
    """Code run in another process (`python -c "from kreplica.conformance.cli ..."`) is an
    import all the same: the scan catches it, and leaves docstrings alone."""
    for module in ("conformance/__init__.py", "conformance/cli/__init__.py",
                   "conformance/cli/main.py", "conformance/bench/__init__.py"):  # fmt: skip
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).write_text("")
    (tmp_path / "impl").mkdir()
    (tmp_path / "conformance/bench/x.py").write_text(
        '"""Runs kreplica.conformance.cli.main, as a docstring says."""\n'
        'CODE = "from kreplica.conformance.cli.main import main; main()"\n'
    )
    problems = forbidden_imports(tmp_path, {"cli": frozenset({"bench"}), "bench": frozenset()})
    assert problems == [
        "conformance/bench/x.py:2: kreplica.conformance.bench.x -> kreplica.conformance.cli.main "
        "(room 'bench' may import only nothing else)"
    ]


def test_the_room_graph_is_a_dag_and_names_every_room() -> None:
    graph = nx.DiGraph([(a, b) for a, bs in ROOMS.items() for b in bs])
    assert nx.is_directed_acyclic_graph(graph)
    folders = {p.name for p in (ROOT / "conformance").iterdir() if (p / "__init__.py").exists()}
    modules = {p.stem for p in (ROOT / "conformance").glob("*.py") if p.stem != "__init__"}
    assert modules == {"errors", "spark"}  # the rooms that are one module each
    assert folders | modules | {"impl"} == set(ROOMS)


def test_no_module_imports_itself_back() -> None:
    cycles = list(nx.simple_cycles(module_graph(ROOT)))
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_impl_is_sans_io() -> None:
    modules = sources(ROOT)
    problems = [
        f"{path.relative_to(ROOT)}:{line}: imports {target}"
        for module, path in modules.items()
        if room_of(module) == "impl"
        for line, target in imports_of(path, module)
        if target.split(".")[0] in SANS_IO_FORBIDDEN
    ]
    assert not problems, "impl/ must have no clock, thread, socket or process:\n" + "\n".join(
        problems
    )


@pytest.mark.parametrize(
    ("where", "source", "edge"),
    [
        (
            "conformance/tla/vocabulary.py",
            "from kreplica.conformance.bridge.projection import State\n",
            "kreplica.conformance.tla.vocabulary -> kreplica.conformance.bridge.projection",
        ),
        (
            "impl/log.py",
            "def f():\n    import kreplica.conformance.tla.itf\n",
            "kreplica.impl.log -> kreplica.conformance.tla.itf",
        ),
        (
            "conformance/validate/x.py",
            "from kreplica.conformance.fuzz import machine\n",
            "kreplica.conformance.validate.x -> kreplica.conformance.fuzz.machine",
        ),
        (
            "conformance/bridge/x.py",
            "from ..cli import main\n",
            "kreplica.conformance.bridge.x -> kreplica.conformance.cli",
        ),
    ],
    ids=["tla-to-bridge", "impl-to-conformance", "validate-to-fuzz", "bridge-to-cli-relative"],
)
def test_a_forbidden_import_is_reported_with_its_file_and_line(
    tmp_path: Path, where: str, source: str, edge: str
) -> None:
    """The scan itself: a small tree with one upward import is caught, with file and line."""
    for module in (
        "conformance/__init__.py",
        "conformance/tla/__init__.py",
        "conformance/tla/itf.py",
        "conformance/tla/vocabulary.py",
        "conformance/bridge/__init__.py",
        "conformance/bridge/projection.py",
        "conformance/fuzz/__init__.py",
        "conformance/fuzz/machine.py",
        "conformance/validate/__init__.py",
        "conformance/cli/__init__.py",
        "conformance/cli/main.py",
        "impl/__init__.py",
        "impl/log.py",
    ):
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).write_text("")
    assert forbidden_imports(tmp_path, ROOMS) == []
    (tmp_path / where).write_text(source)
    problems = forbidden_imports(tmp_path, ROOMS)
    assert len(problems) == 1
    assert problems[0].startswith(f"{where}:")
    assert edge in problems[0]


def test_a_module_cycle_is_found_unless_it_is_type_only(tmp_path: Path) -> None:
    (tmp_path / "conformance/tla").mkdir(parents=True)
    (tmp_path / "impl").mkdir()
    (tmp_path / "conformance/tla/a.py").write_text("from kreplica.conformance.tla import b\n")
    back = "import kreplica.conformance.tla.a\n"
    (tmp_path / "conformance/tla/b.py").write_text(back)
    assert len(list(nx.simple_cycles(module_graph(tmp_path)))) == 1
    type_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    " + back
    (tmp_path / "conformance/tla/b.py").write_text(type_only)
    assert list(nx.simple_cycles(module_graph(tmp_path))) == []

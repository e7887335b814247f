"""The vocabulary (conformance/tla/vocabulary.py) is the spec's own: same variables, same order,
same actions with the same argument names, read from the text of spec/KafkaReplication.tla."""

from __future__ import annotations

import re
from pathlib import Path

from kreplica.conformance.tla.specs import default_spec_dir
from kreplica.conformance.tla.vocabulary import ACTION_ARGS, INIT_ACTION, VARIABLES
from kreplica.impl.variants import BUGS, DIMENSIONS, IMPL_ONLY, SPEC_CONSTANTS

SPEC = (default_spec_dir() / "KafkaReplication.tla").read_text()


def spec_variables() -> list[str]:
    """The names in the spec's VARIABLES declaration, in order (comments dropped)."""
    block = SPEC.split("\nVARIABLES\n", 1)[1].split("\n\n", 1)[0]
    code = "\n".join(line.split("\\*", 1)[0] for line in block.splitlines())
    return [name.strip() for name in code.split(",") if name.strip()]


def spec_actions() -> dict[str, frozenset[str]]:
    """Each `Act("Name", [arg |-> ..., ...])` of the spec: the action and its argument names."""
    found: dict[str, frozenset[str]] = {}
    for match in re.finditer(r'Act\("(\w+)",\s*\[(.*?)\]\)', SPEC, re.DOTALL):
        found[match.group(1)] = frozenset(re.findall(r"(\w+)\s*\|->", match.group(2)))
    return found


def test_variables_are_the_specs_in_its_order_with_action_in_meta() -> None:
    assert spec_variables() == [*VARIABLES, "action"]


def test_every_action_and_its_argument_names_are_the_specs() -> None:
    assert spec_actions() == ACTION_ARGS


def test_the_first_state_is_named_init_as_in_the_spec() -> None:
    assert f'action = [name |-> "{INIT_ACTION}", args |-> <<>>]' in SPEC


def spec_constants() -> list[str]:
    """The names in the spec's CONSTANTS declaration (comments and type annotations dropped)."""
    block = SPEC.split("\nCONSTANTS\n", 1)[1].split("\n\n", 1)[0]
    code = "\n".join(line.split("\\*", 1)[0] for line in block.splitlines())
    return [name.strip() for name in code.split(",") if name.strip()]


def test_each_variant_dimension_is_a_spec_constant_with_the_registrys_values() -> None:
    """The registry's dimensions, less what only the implementation has (IMPL_ONLY), are the
    spec's constants, and each ASSUME allows exactly the registry's values; bugs likewise."""
    assert set(SPEC_CONSTANTS.values()) <= set(spec_constants())
    for dim, constant in SPEC_CONSTANTS.items():
        assume = re.search(rf"ASSUME {constant} \\in \{{(.*?)\}}", SPEC)
        assert assume is not None, constant
        spec_values = set(re.findall(r'"([^"]+)"', assume.group(1)))
        assert spec_values == set(DIMENSIONS[dim]) - set(IMPL_ONLY.get(dim, ())), dim
    for dim in set(DIMENSIONS) - set(SPEC_CONSTANTS):  # impl-only: the spec is the default
        assert set(IMPL_ONLY[dim]) == set(DIMENSIONS[dim][1:]), dim
    bugs = re.search(r"ASSUME Bugs \\subseteq \{(.*?)\}", SPEC, re.DOTALL)
    assert bugs is not None and set(re.findall(r'"([^"]+)"', bugs.group(1))) == set(BUGS)


def test_conform_refuses_a_variant_the_spec_does_not_model(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from kreplica.conformance.cli.main import main

    trace = default_spec_dir().parent / "traces" / "golden"
    args = ["conform", str(trace), "--no-spark", "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(main, [*args, "--variant", "isr=alter-partition"])
    assert result.exit_code == 2
    assert "the spec does not model isr=alter-partition" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()

"""The vocabulary (conformance/tla/vocabulary.py) is the spec's own: same variables, same order,
same actions with the same argument names, read from the text of spec/KafkaReplication.tla."""

from __future__ import annotations

import re

from kreplica.conformance.tla.specs import default_spec_dir
from kreplica.conformance.tla.vocabulary import ACTION_ARGS, INIT_ACTION, VARIABLES

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

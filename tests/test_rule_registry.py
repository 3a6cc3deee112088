"""The rule registry: every rule id in code is a typed id of one version, named through ``mqttaudit.spec.ids``; the
parts that check rules say so to the registry, and ``mqttaudit rules`` reads its coverage from there."""

from __future__ import annotations

import ast
import pickle
import re
from pathlib import Path

import pytest

from mqttaudit.cli.rules import coverage
from mqttaudit.codec import ProtocolVersion
from mqttaudit.probe import cases as _cases  # noqa: F401 - registers the case library
from mqttaudit.probe.case import CASES, Case, CaseRegistry
from mqttaudit.spec import generate, identity, load_catalogue, registry
from mqttaudit.spec.ids import R5, R311

SOURCES = Path(__file__).resolve().parents[1] / "src" / "mqttaudit"
RULE_ID = re.compile(r"^MQTT-\d+(?:\.\d+)*-[A-Za-z0-9-]+(?:@5\.0)?$")


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def test_no_rule_id_is_written_as_a_string_outside_the_spec_package() -> None:
    offenders = []
    for path in sorted(SOURCES.rglob("*.py")):
        if path.parent.name == "spec":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = _docstrings(tree)
        offenders += [
            f"{path.relative_to(SOURCES)}:{node.lineno}: {node.value}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and RULE_ID.match(node.value)
        ]
    assert offenders == []


def test_the_scan_finds_a_rule_id_written_as_a_string() -> None:
    tree = ast.parse('"""doc MQTT-4.7.3-1"""\nRULE = "MQTT-4.7.3-1"\nOTHER = "MQTT-3.8.3-4@5.0"\n')
    docstrings = _docstrings(tree)
    found = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and id(node) not in docstrings and RULE_ID.match(str(node.value))
    ]
    assert found == ["MQTT-4.7.3-1", "MQTT-3.8.3-4@5.0"]


def test_the_ids_module_is_what_the_catalogues_generate() -> None:
    written = (SOURCES / "spec" / "ids.py").read_text(encoding="utf-8")
    assert written == generate.render(), "run `python -m mqttaudit.spec.generate` after changing a catalogue"


def test_every_rule_of_every_version_has_a_typed_id_of_that_version() -> None:
    for version, namespace in (("3.1.1", R311), ("5.0", R5)):
        catalogue = load_catalogue(version)
        for rule in catalogue:
            rule_id = getattr(namespace, generate.constant_name(rule.id))
            assert (rule_id, rule_id.version, rule_id.rule) == (rule.id, version, rule)


def test_a_3_1_1_id_and_a_5_0_id_of_the_same_text_are_two_rules() -> None:
    # 3.1.1's MQTT-2.2.2-1 is the reserved fixed-header flags; 5.0's an empty property set written as Property
    # Length 0. As text both are the id a report shows; as keys of the judge and the codec they never meet.
    old, new = R311.MQTT_2_2_2_1, R5.MQTT_2_2_2_1
    assert old == "MQTT-2.2.2-1" == new and (old.version, new.version) == ("3.1.1", "5.0")
    assert old.key is old and new.key == "MQTT-2.2.2-1@5.0" and len({old.key, new.key}) == 2
    assert identity.statement_id(new.key, "5.0") == new and identity.statement_id(new.key, "3.1.1") is None
    assert R5.MQTT_4_13_1_1.key is R5.MQTT_4_13_1_1  # no 3.1.1 rule has that text
    assert (old.rule.section, new.rule.section) == ("2.2.2", "2.2.2.1") and old.rule.summary != new.rule.summary
    assert identity.statement_id(new, "3.1.1") is None
    assert identity.statement_id(old, "5.0") == R5.MQTT_2_1_3_1


def test_an_id_and_a_key_survive_pickling() -> None:
    # Findings cross Spark's stages pickled.
    back = pickle.loads(pickle.dumps(R5.MQTT_4_13_1_1))
    assert isinstance(back, registry.StatementId) and back.version == "5.0" and back == R5.MQTT_4_13_1_1
    key = pickle.loads(pickle.dumps(R5.MQTT_3_8_3_4.key))
    assert isinstance(key, registry.RuleKey) and key.statement.version == "5.0" and key == "MQTT-3.8.3-4@5.0"


def test_a_name_that_is_no_rule_fails_at_once() -> None:
    with pytest.raises(AttributeError):
        getattr(R5, "MQTT_4_13_1_9")  # noqa: B009 - the misspelt name a module would fail to import on
    with pytest.raises(KeyError, match=r"MQTT 5\.0 states no rule MQTT-4\.13\.1-9"):
        registry.statement("MQTT-4.13.1-9", "5.0")


def test_a_reference_by_plain_text_is_refused() -> None:
    with pytest.raises(TypeError, match="not a registry id"):
        registry.refer("judge", "tests", "PLAIN", ["MQTT-4.7.3-1"])


def test_a_case_that_cites_another_versions_statement_is_refused() -> None:
    async def script(_context: object) -> None:
        return None

    cases = CaseRegistry("nothing")
    mixed = Case("v5/mixed", (R311.MQTT_4_7_3_1,), "mixed", script, protocol=ProtocolVersion.V5)
    with pytest.raises(ValueError, match=r"speaks MQTT 5\.0 but cites"):
        cases.register(mixed)


def test_every_case_cites_statements_of_the_version_it_speaks() -> None:
    assert len(CASES) > 800
    for case in CASES.values():
        assert case.statements, case.id
        assert all(getattr(s, "version", None) == case.protocol.value for s in case.statements), case.id


def test_coverage_keeps_the_rules_of_two_versions_apart() -> None:
    reserved_flags = coverage(load_catalogue("3.1.1")["MQTT-2.2.2-1"])
    empty_properties = coverage(load_catalogue("5.0")["MQTT-2.2.2-1"])
    assert reserved_flags.codec == ("RESERVED_FLAGS",)
    assert empty_properties.codec == ("PROPERTY_LENGTH_ABSENT",)
    # 5.0 states the reserved flags as MQTT-2.1.3-1: the same codec check, under the 5.0 number.
    assert coverage(load_catalogue("5.0")["MQTT-2.1.3-1"]).codec == ("RESERVED_FLAGS",)


def test_probe_coverage_comes_from_the_cases_references() -> None:
    found = coverage(load_catalogue("5.0")["MQTT-6.0.0-1"]).probe
    assert found and all(case_id.startswith("v5/websocket/") for case_id in found)
    assert set(found) == {c.id for c in CASES.values() if R5.MQTT_6_0_0_1 in c.statements and c.id.startswith("v5/")}


def test_every_constant_holding_a_rule_id_states_its_type() -> None:
    """mypyc (the compiled build) cannot infer the type of a module constant set from a registry id across the
    modules it compiles ("Cannot determine type"), though mypy can: each says ``Final[str]`` (or its type)."""
    pattern = re.compile(r"^\s*[A-Z_0-9]+: Final = R(?:311|5)\.", re.MULTILINE)
    offenders = [
        f"{path.relative_to(SOURCES)}: {match.group(0).strip()}"
        for path in sorted(SOURCES.rglob("*.py"))
        for match in pattern.finditer(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []

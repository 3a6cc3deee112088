"""The JSON Schemas shipped for the machine-readable outputs are valid draft 2020-12 schemas, `mqttaudit schema`
prints them as shipped, and they refuse what their outputs never hold (the real outputs are validated where they are
made: every broker's whole-library findings.json in test_probe_brokers, real audits' findings.jsonl in
test_audit_machine_outputs)."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest

from mqttaudit.report.output_schemas import SCHEMAS, output_schema

from .child import run_child

#: A findings.json of one passing case, as a probe writes it (the shape, not a copy of any run).
RUN: dict[str, Any] = {
    "mqttaudit_version": "0.1.0",
    "target": "mqtt://127.0.0.1:1883",
    "started": "2026-11-29T19:00:00+00:00",
    "duration_s": 1.5,
    "broker_down": None,
    "incomplete": None,
    "strict": False,
    "not_spoken": {},
    "baseline": None,
    "summary": {"pass": 1, "fail": 0, "inconclusive": 0, "not-applicable": 0, "lenient": 0},
    "violations": [],
    "results": [
        {
            "case": "ping/pingresp",
            "title": "PINGREQ is answered with PINGRESP",
            "protocol": "3.1.1",
            "statements": ["MQTT-3.12.4-1"],
            "provokes": [],
            "rules": [
                {
                    "id": "MQTT-3.12.4-1",
                    "version": "3.1.1",
                    "section": "3.12.4",
                    "level": "MUST",
                    "binds": "server",
                    "summary": "The Server MUST send a PINGRESP packet in response to a PINGREQ packet",
                }
            ],
            "verdict": "pass",
            "reason": "",
            "error": False,
            "level": "MUST",
            "lenient": [],
            "evidence": {
                "connections": [
                    {
                        "name": "c",
                        "client_id": "mqa1",
                        "events": [
                            {
                                "t": 0.001,
                                "from": "client",
                                "offset": 0,
                                "length": 2,
                                "hex": "c0 00",
                                "packet": "PINGREQ",
                                "violations": [],
                                "violations_omitted": 0,
                            },
                            {"t": 0.002, "closed_by": "client", "how": "fin"},
                        ],
                        "omitted": None,
                    }
                ],
                "findings": [],
                "findings_omitted": 0,
                "other_findings": [],
                "other_findings_omitted": 0,
                "other_acts": {},
                "other_owed": {},
                "other_after_malformed": {},
                "lenient": [],
                "statements": {"MQTT-3.12.4-1": "pass"},
                "assessed": ["MQTT-3.12.4-1"],
                "reason": "",
                "crash": None,
                "duration_s": 0.01,
            },
            "reproducer": None,
        }
    ],
}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_each_shipped_schema_is_a_valid_schema_and_printed_as_shipped(name: str) -> None:
    schema = output_schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    printed = run_child("schema", name, timeout=60)
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout) == schema


def _errors(run: dict[str, Any]) -> list[str]:
    return [error.message for error in jsonschema.Draft202012Validator(output_schema("findings.json")).iter_errors(run)]


def test_the_findings_json_schema_takes_a_run_of_the_shape_the_probe_writes() -> None:
    assert _errors(RUN) == []


def _changed(path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    run = copy.deepcopy(RUN)
    holder: Any = run
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = value
    return run


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("results", 0, "verdict"), "passed"),  # not a verdict
        (("results", 0, "protocol"), "5"),  # not a version's name
        (("results", 0, "surprise"), 1),  # a field no result has
        (("surprise",), 1),  # a field no run has
        (("summary", "pass"), -1),  # a count below zero
        (("results", 0, "evidence", "connections", 0, "events", 1), {"t": 0.2, "how": "fin"}),  # a close by nobody
        (("results", 0, "reproducer"), {"script": "reproducers/x.py"}),  # a reproducer without its limits
    ],
)
def test_the_findings_json_schema_refuses_what_a_probe_never_writes(path: tuple[str | int, ...], value: Any) -> None:
    assert _errors(_changed(path, value))

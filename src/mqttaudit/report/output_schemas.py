"""The JSON Schemas (draft 2020-12) of the machine-readable outputs, shipped in this package: ``findings.json`` (a
probe run) and ``findings.jsonl`` (one line of an audit's findings). ``mqttaudit schema NAME`` prints them."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

#: Each output whose schema ships, by its file name, and where the schema is in the package.
SCHEMAS = {
    "findings.json": "schemas/findings.json.schema.json",
    "findings.jsonl": "schemas/findings.jsonl.schema.json",
}


def output_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of the output named ``name`` (a key of :data:`SCHEMAS`), as data."""
    schema: dict[str, Any] = json.loads(files("mqttaudit.report").joinpath(SCHEMAS[name]).read_text(encoding="utf-8"))
    return schema

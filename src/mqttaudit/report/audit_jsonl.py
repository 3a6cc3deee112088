"""``findings.jsonl`` of an audit: one JSON object per line for every violation and every routing finding, for
log pipelines (one event per line, like Suricata's EVE): ``event_type`` (``violation`` or ``routing``), an ISO 8601
``timestamp`` beside the ``time`` in seconds, the flow keys as EVE names them (``flow_id``, ``src_ip``,
``src_port``, ``dest_ip``, ``dest_port``, ``proto``, ``community_id``: see :mod:`.audit_flows`), the capture, the
tool's version, then the table row's columns (``frame`` numbered from 1, as Wireshark numbers frames). The schema
of a line is ``schemas/findings.jsonl.schema.json`` in this package. Ill-formed UTF-8 from the wire is written as
the tables write it: each ill-formed byte as ``\\xNN``."""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import __version__
from ..codec.describe import wire_text
from .audit_flows import flow_fields

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def finding_record(event_type: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON object of one table row (with its connection's ``client`` and ``server`` endpoints, as
    :func:`~.audit_tables.finding_rows` gives it): ``event_type``, ``timestamp``, the EVE flow keys,
    ``mqttaudit_version``, ``capture``, then the row's columns (NaN and infinite times as null)."""
    values = {name: None if _not_finite(value) else value for name, value in row.items()}
    time = values.get("time")
    client, server = values.pop("client", None), values.pop("server", None)
    # A routing finding is the broker's: it did not deliver as it had to, or delivered what it must not.
    side = "server" if event_type == "routing" else str(values.get("actor") or "")
    return {
        "event_type": event_type,
        "timestamp": iso_time(time) if isinstance(time, int | float) else None,
        **flow_fields(values.get("flow"), client, server, side),
        "mqttaudit_version": __version__,
        "capture": values.pop("capture", None),
        **values,
    }


def iso_time(seconds: float) -> str:
    """A capture time (seconds since the epoch) in ISO 8601, UTC, to the microsecond."""
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat(timespec="microseconds")


def json_line(record: Mapping[str, Any]) -> bytes:
    """One UTF-8 line of JSON (newline included); a lone surrogate in a string (an ill-formed byte from the wire)
    is written as the text ``\\xNN`` (:func:`~mqttaudit.codec.describe.wire_text`), never as itself."""
    text = _ENCODER.encode(record)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return _ENCODER.encode(_wire(record)).encode("utf-8") + b"\n"


def _wire(value: Any) -> Any:
    """``value`` with :func:`wire_text` applied to every string in it, keys included."""
    if isinstance(value, str):
        return wire_text(value)
    if isinstance(value, Mapping):
        return {_wire(key): _wire(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_wire(item) for item in value]
    return value


def write_jsonl(
    path: Path,
    rows: Iterable[tuple[str, Mapping[str, Any]]],
    seen: Callable[[str, Mapping[str, Any]], None] = lambda event_type, row: None,
) -> int:
    """Writes one line per ``(event type, row)`` to ``path``, handing each row to ``seen`` as it goes (so that one
    pass over the tables serves several outputs); returns the number of lines."""
    lines = 0
    with path.open("wb") as handle:
        for event_type, row in rows:
            handle.write(json_line(finding_record(event_type, row)))
            seen(event_type, row)
            lines += 1
    return lines


def _not_finite(value: object) -> bool:
    return isinstance(value, float) and not math.isfinite(value)

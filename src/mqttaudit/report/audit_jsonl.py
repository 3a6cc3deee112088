"""``findings.jsonl`` of an audit: one JSON object per line for every violation and every routing finding, for
log pipelines (one event per line, like Suricata's EVE): the table row's columns, ``event_type`` (``violation``
or ``routing``), the capture, the tool's version, and an ISO 8601 ``timestamp`` beside the ``time`` in seconds."""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import __version__

#: Lone surrogates: ill-formed UTF-8 from the wire, kept by the codec as U+DC80..U+DCFF (PEP 383). UTF-8 cannot
#: hold them, so each becomes U+FFFD in the JSON.
_SURROGATE = re.compile("[\ud800-\udfff]")
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def finding_record(event_type: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON object of one table row: ``event_type``, ``timestamp``, ``mqttaudit_version``, ``capture``, then
    the row's columns (NaN and infinite times as null)."""
    values = {name: None if _not_finite(value) else value for name, value in row.items()}
    time = values.get("time")
    return {
        "event_type": event_type,
        "timestamp": iso_time(time) if isinstance(time, int | float) else None,
        "mqttaudit_version": __version__,
        "capture": values.pop("capture", None),
        **values,
    }


def iso_time(seconds: float) -> str:
    """A capture time (seconds since the epoch) in ISO 8601, UTC, to the microsecond."""
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat(timespec="microseconds")


def json_line(record: Mapping[str, Any]) -> bytes:
    """One UTF-8 line of JSON (newline included); lone surrogates in strings become U+FFFD."""
    text = _ENCODER.encode(record)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = _SURROGATE.sub("\ufffd", text).encode("utf-8")
    return data + b"\n"


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

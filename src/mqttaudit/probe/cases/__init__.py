"""The case library: importing this package registers every case in :data:`mqttaudit.probe.case.CASES`."""

from __future__ import annotations

from . import delivery, malformed, routing, session

__all__ = ["delivery", "malformed", "routing", "session"]

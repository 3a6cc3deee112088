"""Protocol versions: which MQTT a connection speaks, as its CONNECT names it (Protocol Name and Level)."""

from __future__ import annotations

import enum

from mqttaudit.spec import identity


class ProtocolVersion(enum.Enum):
    """MQTT 3.1 (Level 3, "MQIsdp"), 3.1.1 (Level 4, "MQTT") and 5.0 (Level 5, "MQTT"); the value is the name
    the catalogue and the reports use."""

    V3_1 = identity.V3_1
    V3_1_1 = identity.V3_1_1
    V5 = identity.V5

    __hash__ = object.__hash__  # singletons: identity hashing keeps look-ups in C

    @property
    def level(self) -> int:
        """The Protocol Level byte of a CONNECT of this version."""
        return _LEVELS[self]

    @property
    def protocol_name(self) -> str:
        """The Protocol Name string of a CONNECT of this version."""
        return "MQIsdp" if self is ProtocolVersion.V3_1 else "MQTT"

    @classmethod
    def from_level(cls, level: int) -> ProtocolVersion | None:
        """The version a CONNECT's Protocol Level names; None for a level no MQTT version has."""
        return _BY_LEVEL.get(level)

    @classmethod
    def parse(cls, value: ProtocolVersion | str | int | None) -> ProtocolVersion | None:
        """``value`` as a version: "3.1", "3.1.1", "5" or "5.0" (also "mqttv5"-style, and the Protocol Levels 3, 4,
        5); None stays None (learn it from the CONNECT); anything else is a ``ValueError``."""
        if value is None or isinstance(value, ProtocolVersion):
            return value
        text = str(value).strip().lower().removeprefix("mqttv").removeprefix("mqtt").strip(" v")
        found = _NAMES.get(text)
        if found is None:
            raise ValueError(f"unknown MQTT protocol version {value!r}: use 3.1, 3.1.1 or 5")
        return found


_LEVELS = {ProtocolVersion.V3_1: 3, ProtocolVersion.V3_1_1: 4, ProtocolVersion.V5: 5}
_BY_LEVEL = {level: version for version, level in _LEVELS.items()}
_NAMES = {
    "3.1": ProtocolVersion.V3_1,
    "3": ProtocolVersion.V3_1,
    "31": ProtocolVersion.V3_1,
    "3.1.1": ProtocolVersion.V3_1_1,
    "311": ProtocolVersion.V3_1_1,
    "4": ProtocolVersion.V3_1_1,
    "5": ProtocolVersion.V5,
    "5.0": ProtocolVersion.V5,
    "50": ProtocolVersion.V5,
}

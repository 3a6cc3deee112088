"""What an MQTT 5.0 broker declares it supports: read from its CONNACK (section 3.2.2.3), with the values the
specification gives an absent property, and overridden by the operator's profile where the CONNACK cannot say."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Final

from ..codec import Connack
from ..codec import properties as props
from .profile import BrokerProfile

#: CONNACK properties that say what the server supports, by the capability they set.
CONNACK_PROPERTIES: Final[dict[str, int]] = {
    "maximum_qos": 0x24,
    "retain_available": 0x25,
    "wildcard_available": 0x28,
    "subscription_identifiers_available": 0x29,
    "shared_available": 0x2A,
    "topic_alias_maximum": 0x22,
    "receive_maximum": 0x21,
    "maximum_packet_size": 0x27,
    "server_keep_alive": 0x13,
}


@dataclass(frozen=True, slots=True)
class Capabilities:
    """The server's declared limits; each default is what 5.0 says an absent property means."""

    maximum_qos: int = 2  # [MQTT-3.2.2-9] absent: QoS 2 supported (3.2.2.3.4)
    retain_available: bool = True  # 3.2.2.3.5
    wildcard_available: bool = True  # 3.2.2.3.11
    subscription_identifiers_available: bool = True  # 3.2.2.3.12
    shared_available: bool = True  # 3.2.2.3.13
    topic_alias_maximum: int = 0  # 3.2.2.3.8: absent, the client sends no Topic Alias [MQTT-3.2.2-18]
    receive_maximum: int = 65535  # 3.2.2.3.3
    maximum_packet_size: int | None = None  # 3.2.2.3.6: absent, no limit beyond the Remaining Length's
    server_keep_alive: int | None = None  # 3.2.2.3.14: absent, the client's Keep Alive holds [MQTT-3.2.2-22]
    #: Where each value came from: ``CONNACK``, ``profile``; a field in neither is the specification's default.
    sources: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_connack(cls, connack: Connack) -> Capabilities:
        """The capabilities a 5.0 CONNACK declares; what it leaves out takes the default."""
        values: dict[str, object] = {}
        for name, identifier in CONNACK_PROPERTIES.items():
            value = props.first(connack.properties, identifier)
            if isinstance(value, int):
                values[name] = bool(value) if isinstance(cls.default(name), bool) else value
        return cls(**values, sources=tuple((name, "CONNACK") for name in values))  # type: ignore[arg-type]

    @classmethod
    def default(cls, name: str) -> object:
        return {f.name: f.default for f in fields(cls)}[name]

    def merged(self, profile: BrokerProfile) -> Capabilities:
        """These capabilities with every value the profile declares put over them."""
        declared = profile.capabilities()
        if not declared:
            return self
        sources = dict(self.sources) | dict.fromkeys(declared, "profile")
        return replace(self, **declared, sources=tuple(sources.items()))  # type: ignore[arg-type]

    def source(self, name: str) -> str:
        """Who declared ``name``: ``CONNACK``, ``profile``, or ``default`` (absent, as 5.0 defines it)."""
        return dict(self.sources).get(name, "default")

    def unsupported(self, feature: str) -> str | None:
        """Why ``feature`` (see :data:`FEATURES`) is declared unsupported, or None when it may be used."""
        if feature not in FEATURES:
            raise ValueError(f"unknown feature {feature!r}; known: {', '.join(FEATURES)}")
        name, needed = FEATURES[feature]
        value = getattr(self, name)
        ok = value is needed if isinstance(needed, bool) else value is None or value >= needed
        return None if ok else f"{_by(self.source(name))} {name} = {_shown(value)}"


#: Features a case may require: the capability that declares each, and the value it needs (at least, for numbers).
FEATURES: Final[dict[str, tuple[str, int | bool]]] = {
    "qos1": ("maximum_qos", 1),
    "qos2": ("maximum_qos", 2),
    "retain": ("retain_available", True),
    "wildcard-subscriptions": ("wildcard_available", True),
    "subscription-identifiers": ("subscription_identifiers_available", True),
    "shared-subscriptions": ("shared_available", True),
    "topic-aliases": ("topic_alias_maximum", 1),
}


def _by(source: str) -> str:
    return {"CONNACK": "the broker's CONNACK declares", "profile": "the profile declares"}.get(
        source, "by default (absent from the CONNACK)"
    )


def _shown(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)

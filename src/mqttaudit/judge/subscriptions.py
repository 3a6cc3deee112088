"""The subscriptions one connection shows: asked for by SUBSCRIBE, granted or refused by SUBACK, removed by
UNSUBSCRIBE; in MQTT 5.0 also their options and Subscription Identifiers."""

from __future__ import annotations

from collections.abc import Iterable

from mqttaudit.codec import Suback, Subscribe, Subscription
from mqttaudit.codec.properties import SUBSCRIPTION_IDENTIFIER
from mqttaudit.spec import identity
from mqttaudit.topics import InvalidTopic, matches, matches_but_for_dollar_rule, parse_shared

#: SUBACK return code of a refused subscription (3.9.3).
FAILURE = 0x80
#: Topic Names whose matching filters are remembered at most (a connection may see any number of topics).
BOUNDS_KEPT = 4096


def refused(code: int, version: str) -> bool:
    """A SUBACK code refuses its subscription: 0x80 in 3.1.1, any code from 0x80 up in 5.0 (section 3.9.3)."""
    return code >= FAILURE if version == identity.V5 else code == FAILURE


def subscription_identifier(subscribe: Subscribe) -> int | None:
    """The Subscription Identifier a 5.0 SUBSCRIBE gives every subscription it makes (section 3.8.2.1.2)."""
    for prop in subscribe.properties:
        if prop.identifier == SUBSCRIPTION_IDENTIFIER and isinstance(prop.value, int):
            return prop.value
    return None


def matched_part(topic_filter: str, version: str) -> str:
    """The filter Topic Names are matched against: in 5.0 a shared subscription matches by the filter after its
    ShareName (section 4.8.2)."""
    if version != identity.V5:
        return topic_filter
    try:
        shared = parse_shared(topic_filter)
    except InvalidTopic:
        return topic_filter
    return topic_filter if shared is None else shared[1]


class InEffect:
    """A 5.0 subscription granted on this connection: its options, its Subscription Identifier and the event of
    the SUBACK that granted it."""

    def __init__(self, topic_filter: str, options: Subscription, identifier: int | None, since: int) -> None:
        self.topic_filter = topic_filter
        self.options = options
        self.identifier = identifier
        self.since = since


class Subscriptions:
    def __init__(self) -> None:
        self._requested: dict[str, int] = {}  # every filter asked for, with the highest QoS requested
        self._granted: dict[str, int] = {}  # filters granted at least once, with the highest QoS granted
        self._refused: set[str] = set()  # filters refused and never granted
        self._held: set[str] = set()  # filters asked for and not unsubscribed since
        #: The filter each requested one matches by (itself, or the part after a 5.0 ShareName).
        self._matched_by: dict[str, str] = {}
        #: :meth:`bounds` per Topic Name until a SUBSCRIBE or SUBACK changes them (deliveries repeat topics).
        self._bounds: dict[str, dict[str, int]] = {}
        # MQTT 5.0: the subscriptions in effect with their options, the filters whose SUBSCRIBE or UNSUBSCRIBE
        # awaits its answer (either state may hold meanwhile), and every identifier each filter was given.
        self._in_effect: dict[str, InEffect] = {}
        self._unsettled: dict[str, int] = {}
        self._identifiers: dict[str, set[int]] = {}
        #: :meth:`in_effect` and :meth:`identifiers_given` per Topic Name until a 5.0 subscription changes.
        self._effect: dict[str, tuple[list[InEffect], set[int]]] = {}
        #: Some 5.0 SUBSCRIBE asked for No Local, or gave a Subscription Identifier (else those rules are moot).
        self.uses_no_local = False
        self.uses_identifiers = False

    def asked(self, subscribe: Subscribe, version: str = identity.V3_1_1) -> None:
        self._bounds.clear()
        identifier = subscription_identifier(subscribe) if version == identity.V5 else None
        self.uses_identifiers = self.uses_identifiers or identifier is not None
        for subscription in subscribe.subscriptions:
            name = subscription.topic_filter
            self.uses_no_local = self.uses_no_local or (version == identity.V5 and subscription.no_local)
            self._requested[name] = max(self._requested.get(name, 0), subscription.qos)
            self._held.add(name)
            self._matched_by[name] = matched_part(name, version)
            if version == identity.V5:
                self._effect.clear()
                self._unsettled[name] = self._unsettled.get(name, 0) + 1
                if identifier is not None:
                    self._identifiers.setdefault(name, set()).add(identifier)

    def answered(self, subscribe: Subscribe, suback: Suback, version: str = identity.V3_1_1, event: int = -1) -> None:
        self._bounds.clear()
        identifier = subscription_identifier(subscribe) if version == identity.V5 else None
        for subscription, code in zip(subscribe.subscriptions, suback.return_codes, strict=False):
            name = subscription.topic_filter
            if version == identity.V5:
                self._effect.clear()
                self._settle(name)
                if refused(code, version):
                    self._in_effect.pop(name, None)  # whether a refused replacement keeps the old one is unsaid
                else:
                    self._in_effect[name] = InEffect(name, subscription, identifier, event)
            if refused(code, version):
                if name not in self._granted:
                    self._refused.add(name)
                continue
            self._granted[name] = max(self._granted.get(name, 0), code)
            self._refused.discard(name)

    def removed(self, topic_filters: Iterable[str], version: str = identity.V3_1_1) -> None:
        """An UNSUBSCRIBE was sent: its filters are removed (in 5.0 they stay unsettled until its UNSUBACK)."""
        names = list(topic_filters)
        self._held.difference_update(names)
        if version == identity.V5:
            for name in names:
                self._unsettled[name] = self._unsettled.get(name, 0) + 1

    def unsubscribed(self, topic_filters: Iterable[str]) -> None:
        """The UNSUBACK of a 5.0 UNSUBSCRIBE came: its filters are no longer in effect."""
        self._effect.clear()
        for name in topic_filters:
            self._settle(name)
            self._in_effect.pop(name, None)

    def _settle(self, name: str) -> None:
        left = self._unsettled.get(name, 0) - 1
        if left > 0:
            self._unsettled[name] = left
        else:
            self._unsettled.pop(name, None)

    def holds_any(self, topic_filters: Iterable[str]) -> bool:
        """Some filter is one the session holds, compared character by character [MQTT-3.10.4-1]."""
        return any(name in self._held for name in topic_filters)

    def holds(self, topic_filter: str) -> bool | None:
        """The 5.0 session holds this filter (True), surely does not (False), or either may be so (None: a
        SUBSCRIBE or UNSUBSCRIBE of it awaits its answer, or it was asked for and never answered)."""
        if self._unsettled.get(topic_filter, 0) > 0:
            return None
        if topic_filter in self._in_effect:
            return True
        return False if topic_filter not in self._held else None

    def all_granted(self, topic_filters: Iterable[str]) -> bool:
        """Every one of these filters had a SUBACK grant it (its bound is a granted QoS, not a requested one)."""
        return all(name in self._granted for name in topic_filters)

    def bounds(self, topic: str) -> dict[str, int]:
        """Every filter that may have been in effect and matches ``topic``, with the highest QoS it allows: the
        granted QoS once a SUBACK said so, the requested one before. (The caller must not change it.)"""
        found = self._bounds.get(topic)
        if found is None:
            if len(self._bounds) >= BOUNDS_KEPT:
                self._bounds.clear()
            found = self._bounds[topic] = self._find_bounds(topic)
        return found

    def _find_bounds(self, topic: str) -> dict[str, int]:
        return {
            name: self._granted.get(name, requested)
            for name, requested in self._requested.items()
            if name not in self._refused and matches(self._matched_by.get(name, name), topic)
        }

    def in_effect(self, topic: str) -> list[InEffect]:
        """The 5.0 subscriptions granted here and not unsubscribed that match ``topic``. (The caller must not
        change it.)"""
        return self._effects(topic)[0]

    def identifiers_given(self, topic: str) -> set[int]:
        """Every Subscription Identifier a SUBSCRIBE of this connection gave a filter matching ``topic``. (The
        caller must not change it.)"""
        return self._effects(topic)[1]

    def _effects(self, topic: str) -> tuple[list[InEffect], set[int]]:
        found = self._effect.get(topic)
        if found is None:
            if len(self._effect) >= BOUNDS_KEPT:
                self._effect.clear()
            matching = [name for name in self._matched_by if matches(self._matched_by[name], topic)]
            subscriptions = [self._in_effect[name] for name in matching if name in self._in_effect]
            given: set[int] = set()
            for name in matching:
                given |= self._identifiers.get(name, set())
            found = self._effect[topic] = (subscriptions, given)
        return found

    def unsettled(self, topic: str) -> list[str]:
        """Filters matching ``topic`` whose 5.0 SUBSCRIBE or UNSUBSCRIBE awaits its answer."""
        return [name for name in self._unsettled if matches(self._matched_by.get(name, name), topic)]

    def blocked_by_dollar_rule(self, topic: str) -> list[str]:
        """Filters that would match ``topic`` but for the '$' rule [MQTT-4.7.2-1]."""
        return [
            name
            for name in self._requested
            if name not in self._refused and matches_but_for_dollar_rule(self._matched_by.get(name, name), topic)
        ]

"""What an MQTT 5.0 server keeps and changes when it forwards a message: the properties it sends on unaltered
(Payload Format Indicator, Content Type, Response Topic, Correlation Data, User Properties in order), the Message
Expiry Interval it counts down, and the Subscription Identifiers of the subscriptions the copy answers to.

Pure: each check takes what was published and what arrived and returns :class:`Check` records (held, broken or
undecided, with a detail); the routing replay writes them to the subscriber's ledger. Topic Alias and
Subscription Identifier are the connection's own and never compared with the publisher's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from mqttaudit.codec.packets import Properties, PropertyValue
from mqttaudit.codec.properties import (
    CONTENT_TYPE,
    CORRELATION_DATA,
    MESSAGE_EXPIRY_INTERVAL,
    PAYLOAD_FORMAT_INDICATOR,
    RESPONSE_TOPIC,
    SUBSCRIPTION_IDENTIFIER,
    USER_PROPERTY,
    first,
)
from mqttaudit.spec import registry

from . import expiry_5
from . import model_rules_5 as rules_5

HELD: Final = 0
BROKEN: Final = 1
UNDECIDED: Final = 2

#: The single-valued properties forwarded unaltered, with the statement that says so and their names.
UNALTERED: Final[tuple[tuple[int, str, str], ...]] = (
    (PAYLOAD_FORMAT_INDICATOR, rules_5.PAYLOAD_FORMAT_FORWARDED, "Payload Format Indicator"),
    (CONTENT_TYPE, rules_5.CONTENT_TYPE_FORWARDED, "Content Type"),
    (RESPONSE_TOPIC, rules_5.RESPONSE_TOPIC_FORWARDED, "Response Topic"),
    (CORRELATION_DATA, rules_5.CORRELATION_DATA_FORWARDED, "Correlation Data"),
)
#: The identifiers of the properties the checks compare (a delivery may be matched to one of several messages
#: with its topic and payload only if they agree on these).
COMPARED: Final = frozenset({identifier for identifier, _, _ in UNALTERED} | {USER_PROPERTY})


class Check:
    """One decided (or undecidable) instance of ``rule`` on a delivery."""

    def __init__(self, rule: str, outcome: int, detail: str = "", expected: str = "") -> None:
        self.rule = rule
        self.outcome = outcome
        self.detail = detail
        self.expected = expected


def compared(properties: Properties | None) -> tuple[tuple[int, PropertyValue], ...]:
    """The properties :func:`unaltered` compares, in order."""
    return tuple((p.identifier, p.value) for p in properties or () if p.identifier in COMPARED)


def unaltered(published: Properties | None, delivered: Properties | None) -> list[Check]:
    """[MQTT-3.3.2-4, -15, -16, -20] Each of these properties the message had arrives with the same value;
    [MQTT-3.3.2-17] every User Property arrives, [MQTT-3.3.2-18] in the order it was published."""
    checks: list[Check] = []
    for identifier, rule, name in UNALTERED:
        sent = first(published, identifier)
        if sent is None:
            continue  # nothing to forward: no instance of the rule
        got = first(delivered, identifier)
        if got == sent:
            checks.append(Check(rule, HELD))
        else:
            what = "lacks it" if got is None else f"carries {got!r}"
            checks.append(
                Check(
                    rule,
                    BROKEN,
                    f"the message was published with {name} {sent!r}; the copy {what}",
                    f"the server forwards the {name} unaltered",
                )
            )
    pairs = [p.value for p in published or () if p.identifier == USER_PROPERTY]
    if not pairs:
        return checks
    arrived = [p.value for p in delivered or () if p.identifier == USER_PROPERTY]
    missing = list(pairs)
    for pair in arrived:
        if pair in missing:
            missing.remove(pair)
    expected = "the server forwards every User Property unaltered, in the order published"
    if missing:
        detail = f"the copy lacks the User Properties {missing!r} the message was published with"
        checks.append(Check(rules_5.USER_PROPERTIES_FORWARDED, BROKEN, detail, expected))
        return checks
    checks.append(Check(rules_5.USER_PROPERTIES_FORWARDED, HELD))
    if _in_order(pairs, arrived):
        checks.append(Check(rules_5.USER_PROPERTIES_IN_ORDER, HELD))
    else:
        detail = f"the User Properties arrive as {arrived!r}, published as {pairs!r}"
        checks.append(Check(rules_5.USER_PROPERTIES_IN_ORDER, BROKEN, detail, expected))
    return checks


def _in_order(pairs: Sequence[PropertyValue], arrived: Sequence[PropertyValue]) -> bool:
    """``pairs`` occur in ``arrived`` in their order (other properties may come between)."""
    position = 0
    for pair in arrived:
        if position < len(pairs) and pair == pairs[position]:
            position += 1
    return position == len(pairs)


def remaining(interval: float, taken_from: float, sent_by: float, delivered: Properties | None) -> Check:
    """[MQTT-3.3.2-6] A copy of a message published with a Message Expiry Interval carries the interval minus
    the time it waited in the server (whole seconds: one second either way is allowed)."""
    carried = first(delivered, MESSAGE_EXPIRY_INTERVAL)
    low, high = expiry_5.remaining_allowed(interval, taken_from, sent_by)
    expected = "a forwarded copy carries the Message Expiry Interval received minus the time it waited"
    if not isinstance(carried, int):
        return Check(
            rules_5.EXPIRY_REMAINING,
            BROKEN,
            f"the message was published with Message Expiry Interval {interval:g}; the copy carries none",
            expected,
        )
    if low <= carried <= high:
        return Check(rules_5.EXPIRY_REMAINING, HELD)
    return Check(
        rules_5.EXPIRY_REMAINING,
        BROKEN,
        f"the copy carries Message Expiry Interval {carried}; published with {interval:g} and waiting at most "
        f"{sent_by - taken_from:.3f} s, it may carry {max(low, 0):.0f} to {high:g}",
        expected,
    )


def carried_identifiers(delivered: Properties | None) -> list[int]:
    return [p.value for p in delivered or () if p.identifier == SUBSCRIPTION_IDENTIFIER and isinstance(p.value, int)]


def identifiers(carried: list[int], held: dict[int, str], matching: int) -> Check:
    """[MQTT-3.3.4-3] The copy carries the identifiers of its matching subscriptions (``held``: identifier ->
    filter, of ``matching`` subscriptions in all) and no other; [MQTT-3.3.4-4] one copy carries them all,
    [MQTT-3.3.4-5] or each copy its own subscription's."""
    expected = (
        "a delivery carries the Subscription Identifiers of the subscriptions it matches: all of them in one copy, "
        "or each copy its own subscription's"
    )
    strays = [value for value in carried if value not in held]
    if strays:
        known = ", ".join(map(str, sorted(held))) or "none"
        detail = (
            f"the copy carries Subscription Identifier {', '.join(map(str, strays))}, which no matching subscription "
            f"of the session was given (theirs: {known})"
        )
        return Check(rules_5.IDENTIFIERS_SENT, BROKEN, detail, expected)
    missing = sorted(set(held) - set(carried))
    if not missing:
        return Check(rules_5.ONE_COPY_ALL_IDENTIFIERS if matching > 1 else rules_5.IDENTIFIERS_SENT, HELD)
    lacking = ", ".join(f"{value} of {held[value]!r}" for value in missing)
    if matching == 1:
        return Check(rules_5.IDENTIFIERS_SENT, BROKEN, f"the copy lacks Subscription Identifier {lacking}", expected)
    if len(set(carried)) > 1:
        detail = f"the copy carries Subscription Identifiers {carried} but not {lacking}"
        return Check(rules_5.ONE_COPY_ALL_IDENTIFIERS, BROKEN, detail, expected)
    if not carried and len(held) == matching:
        detail = f"the copy carries no Subscription Identifier though every subscription it matches has one ({lacking})"
        return Check(rules_5.COPY_PER_SUBSCRIPTION, BROKEN, detail, expected)
    return Check(
        rules_5.ONE_COPY_ALL_IDENTIFIERS,
        UNDECIDED,
        f"the copy lacks {lacking}: it may be one of several copies, one per subscription (MQTT-3.3.4-5)",
    )


# What this module decides, for ``mqttaudit rules``.
registry.refer_names("judge", __name__, dict(globals()))

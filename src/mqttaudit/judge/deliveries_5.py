"""What MQTT 5.0 subscription options and identifiers ask of the deliveries on one connection: No Local, Retain As
Published and the Subscription Identifiers a delivered PUBLISH carries.

One connection knows only its own publications: a delivery with the topic and payload of a PUBLISH this client
sent is taken for that message (another client may have sent the same bytes: the findings say what matched). A
message published before its subscription was granted may come back as a retained message, which none of these
rules governs, so it decides nothing.

What only the other connections can show (whose message a delivery is, with which RETAIN flag it was published,
which other copies were sent) is left to the broker model, which judges these rules across the scenario: no row
here says it is undecided, so a pass there stands. What nobody can tell (the subscriptions in effect while a
SUBSCRIBE awaits its SUBACK) is not assessable.
"""

from __future__ import annotations

from typing import Final

from mqttaudit.codec import Direction, Publish
from mqttaudit.codec.properties import SUBSCRIPTION_IDENTIFIER
from mqttaudit.spec import registry
from mqttaudit.spec.ids import R5

from ..codec.describe import quoted
from . import reasons, rules
from .context import Context, Seen
from .subscriptions import InEffect, Subscriptions
from .verdict import LEAK

SERVER: Final = Direction.FROM_SERVER

#: [MQTT-3.8.3-3] No Local: the server does not forward a message to the connection that published it. (5.0's id
#: is 3.1.1's MQTT-3.8.3-3, another rule: the key says which one is meant.)
NO_LOCAL: Final[str] = R5.MQTT_3_8_3_3.key
#: [MQTT-3.3.1-12] Retain As Published 0: a forwarded message has RETAIN 0 (3.1.1's key MQTT-3.3.1-9).
RETAIN_CLEARED: Final = rules.RETAIN_CLEARED_ON_ESTABLISHED
#: [MQTT-3.3.1-13] Retain As Published 1: a forwarded message keeps the RETAIN flag it was published with.
RETAIN_AS_PUBLISHED: Final[str] = R5.MQTT_3_3_1_13
#: [MQTT-3.3.4-3] The Subscription Identifiers of the matching subscriptions are sent with the message.
IDENTIFIERS_SENT: Final[str] = R5.MQTT_3_3_4_3
#: [MQTT-3.3.4-4] One copy for overlapping subscriptions carries the identifiers of all of them.
ONE_COPY_ALL_IDENTIFIERS: Final[str] = R5.MQTT_3_3_4_4
#: [MQTT-3.3.4-5] One copy per subscription carries that subscription's identifier.
COPY_PER_SUBSCRIPTION: Final[str] = R5.MQTT_3_3_4_5
#: [MQTT-3.8.4-7] Each SUBACK code shows the maximum QoS granted: no delivery on the subscription exceeds it.
SUBACK_CODE_IS_GRANT: Final[str] = R5.MQTT_3_8_4_7
#: Own publications remembered at most (the oldest are forgotten first).
OWN_KEPT: Final = 4096


class Own:
    """A PUBLISH the client sent on this connection."""

    def __init__(self, event: int, retain: bool) -> None:
        self.event = event
        self.retain = retain


class OptionChecks:
    def __init__(self, ctx: Context, subscriptions: Subscriptions) -> None:
        self._ctx = ctx
        self._subscriptions = subscriptions
        #: By topic and payload (its hash and length: a payload may be large, and is not kept).
        self._own: dict[tuple[str, int, int], Own] = {}
        #: Why the client's own publications are not all known (one named only by a Topic Alias, or forgotten).
        self._own_unknown: str | None = None
        #: Rules already left undecided on this connection (one row says why; later deliveries repeat it).
        self._noted: set[str] = set()

    def published(self, seen: Seen, packet: Publish, topic: str | None) -> None:
        """A client PUBLISH standing for ``topic`` (None: named by a Topic Alias whose mapping is unknown)."""
        if topic is None:
            self._own_unknown = f"{seen.describe()} names its topic only by a Topic Alias whose mapping is unknown"
            return
        if len(self._own) >= OWN_KEPT:
            del self._own[next(iter(self._own))]
            self._own_unknown = f"more than {OWN_KEPT} of the client's publications are not remembered"
        key = (topic, hash(packet.payload), len(packet.payload))
        self._own.pop(key, None)  # the latest copy last, so forgetting starts with the oldest
        self._own[key] = Own(seen.event, packet.retain)

    def delivered(self, seen: Seen, packet: Publish, topic: str) -> None:
        """Judges a delivery standing for ``topic`` that matches a subscription of a session that started on this
        connection."""
        unsettled = self._subscriptions.unsettled(topic)
        if unsettled:
            detail = (
                f"the SUBSCRIBE or UNSUBSCRIBE of {', '.join(map(quoted, unsettled))} awaits its answer: the "
                f"options and identifiers {seen.describe()} answers to are either the old or the new ones"
            )
            if self._subscriptions.uses_no_local:
                self._undecided(seen, NO_LOCAL, detail)
            if self._subscriptions.uses_identifiers:
                self._undecided(seen, IDENTIFIERS_SENT, detail)
            return
        subscriptions = self._subscriptions.in_effect(topic)
        if not subscriptions:
            return  # delivered under a subscription being removed: the 3.1.1 checks said what is known
        own = self._own.get((topic, hash(packet.payload), len(packet.payload)))
        if own is not None and own.event > seen.event:
            own = None
        forwarded = own is not None and all(own.event > sub.since for sub in subscriptions)
        if self._no_local(seen, packet, subscriptions, own, forwarded):
            self._retain_as_published(seen, packet, subscriptions, own, forwarded)
        # The client's own message (or one that may be) is owed nothing through its No Local subscriptions.
        may_be_own = own is not None or self._own_unknown is not None
        owed = [sub for sub in subscriptions if not (may_be_own and sub.options.no_local)]
        self._identifiers(seen, packet, topic, owed)

    def _no_local(
        self, seen: Seen, packet: Publish, subscriptions: list[InEffect], own: Own | None, forwarded: bool
    ) -> bool:
        """[MQTT-3.8.3-3] A message the client published does not come back through No Local subscriptions.
        Returns False when the delivery broke it (nothing else about it is judged then)."""
        local = [sub for sub in subscriptions if sub.options.no_local]
        if not local:
            return True
        if len(local) < len(subscriptions) or (own is None and self._own_unknown is None):
            self._ctx.ledger.held(NO_LOCAL)
            return True
        if own is None or not forwarded:
            return True  # another client's message, or this one's retained before the subscription: the model's
        names = ", ".join(quoted(sub.topic_filter) for sub in local)
        self._ctx.ledger.fail(
            NO_LOCAL,
            SERVER,
            seen.time,
            seen.event,
            f"{seen.describe()} has the topic and payload the client published in event {own.event}, and every "
            f"subscription it matches ({names}) has No Local set",
            "with No Local set the server does not forward a message to the connection that published it",
            LEAK,
        )
        return False

    def _retain_as_published(
        self, seen: Seen, packet: Publish, subscriptions: list[InEffect], own: Own | None, forwarded: bool
    ) -> None:
        """[MQTT-3.3.1-12] Retain As Published 0 clears RETAIN on forwarding; [MQTT-3.3.1-13] 1 keeps the flag the
        message was published with. Only a message this client published after its subscription is known to be
        forwarded, with a known flag; a RETAIN 0 delivery keeps Retain As Published 0 whatever it was."""
        cleared = [sub for sub in subscriptions if not sub.options.retain_as_published]
        kept = [sub for sub in subscriptions if sub.options.retain_as_published]
        if own is not None and forwarded:
            if cleared and not packet.retain:
                self._ctx.ledger.held(RETAIN_CLEARED)
            elif kept and packet.retain == own.retain:
                self._ctx.ledger.held(RETAIN_AS_PUBLISHED)
            else:
                self._retain_wrong(seen, packet, own, kept or cleared, RETAIN_AS_PUBLISHED if kept else RETAIN_CLEARED)
            return
        if cleared and not packet.retain:
            self._ctx.ledger.held(RETAIN_CLEARED)
        # Otherwise a retained message sent for the subscription, or a forwarded one whose RETAIN flag as published
        # only the publisher's connection shows: the model's to judge.

    def _retain_wrong(self, seen: Seen, packet: Publish, own: Own, subscriptions: list[InEffect], rule: str) -> None:
        names = ", ".join(quoted(sub.topic_filter) for sub in subscriptions)
        as_published = "keeps" if rule == RETAIN_AS_PUBLISHED else "clears"
        self._ctx.ledger.fail(
            rule,
            SERVER,
            seen.time,
            seen.event,
            f"{seen.describe()} forwards the client's PUBLISH of event {own.event} (RETAIN {int(own.retain)}, same "
            f"topic and payload) with RETAIN {int(packet.retain)} under {names} (Retain As Published "
            f"{int(rule == RETAIN_AS_PUBLISHED)})",
            f"a forwarded message {as_published} the RETAIN flag it was published with",
        )

    def _identifiers(self, seen: Seen, packet: Publish, topic: str, subscriptions: list[InEffect]) -> None:
        """[MQTT-3.3.4-3] A delivery carries the Subscription Identifiers of the matching subscriptions it is owed
        through (``subscriptions``) and no other subscription's; [MQTT-3.3.4-4] one copy carries all of them,
        [MQTT-3.3.4-5] one copy per subscription its own."""
        carried = [p.value for p in packet.properties if p.identifier == SUBSCRIPTION_IDENTIFIER]
        given = self._subscriptions.identifiers_given(topic)
        strays = [value for value in carried if value not in given]
        if strays:
            known = ", ".join(map(str, sorted(given))) or "none"
            self._fail_identifiers(
                seen,
                IDENTIFIERS_SENT,
                f"carries Subscription Identifier {', '.join(map(str, strays))}, which no subscription matching "
                f"the topic was given (identifiers given to matching filters here: {known})",
            )
            return
        held = {sub.identifier: sub for sub in subscriptions if sub.identifier is not None}
        missing = sorted(set(held) - set(carried))
        if not held:
            return
        if not missing:
            self._ctx.ledger.held(IDENTIFIERS_SENT)
            if len(subscriptions) > 1:
                self._ctx.ledger.held(ONE_COPY_ALL_IDENTIFIERS)
            return
        lacking = ", ".join(f"{value} of {quoted(held[value].topic_filter)}" for value in missing)
        if len(subscriptions) == 1:
            self._fail_identifiers(seen, IDENTIFIERS_SENT, f"lacks the Subscription Identifier {lacking}")
        elif len(set(carried)) > 1:
            self._fail_identifiers(
                seen,
                ONE_COPY_ALL_IDENTIFIERS,
                f"carries Subscription Identifiers {', '.join(map(str, carried))} but not {lacking}: neither one "
                "copy with all of them nor a copy per subscription",
            )
        elif not carried and len(held) == len(subscriptions):
            self._fail_identifiers(
                seen,
                COPY_PER_SUBSCRIPTION,
                f"carries no Subscription Identifier though every subscription it matches has one ({lacking})",
            )
        else:
            # One identifier of a matching subscription: right for a copy per subscription; whether the other
            # copies came is the model's question (a missing delivery), and one copy was then not all that was sent.
            self._ctx.ledger.held(COPY_PER_SUBSCRIPTION)

    def _fail_identifiers(self, seen: Seen, rule: str, detail: str) -> None:
        self._ctx.ledger.fail(
            rule,
            SERVER,
            seen.time,
            seen.event,
            f"{seen.describe()} {detail}",
            "a delivery carries the Subscription Identifiers of the subscriptions it matches: all of them in one "
            "copy, or each copy its own subscription's",
        )

    def _undecided(self, seen: Seen, rule: str, detail: str) -> None:
        if rule in self._noted:
            return
        self._noted.add(rule)
        why = reasons.reason(reasons.AMBIGUOUS, f"{detail} (this delivery, and later ones like it)")
        self._ctx.ledger.undecided(rule, why, side=SERVER, event=seen.event, time=seen.time)


# What this module decides, for ``mqttaudit rules``.
registry.refer_names("judge", __name__, dict(globals()))

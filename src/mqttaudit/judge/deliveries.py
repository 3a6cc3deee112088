"""Deliveries on one connection: every PUBLISH the server sends matches a subscription of the session, in the
'$' namespace only through filters that do not start with a wildcard, at no higher QoS than the subscription
allows. Whether each message that should arrive did is the broker model's question (several connections).

In MQTT 5.0 the subscription options and identifiers add to that (see :mod:`.deliveries_5`), and a PUBLISH that
names its topic only by a Topic Alias has a topic this module does not know.
"""

from __future__ import annotations

from typing import Final

from mqttaudit.codec import Direction, Publish
from mqttaudit.codec.properties import TOPIC_ALIAS, first
from mqttaudit.spec import identity

from ..codec.describe import quoted
from . import reasons, rules
from .connection import Connection
from .context import Context, Seen
from .deliveries_5 import SUBACK_CODE_IS_GRANT, OptionChecks
from .subscriptions import Subscriptions
from .topic_alias import TopicSource, topic_of
from .transcript import Delivered
from .verdict import LEAK, QOS

SERVER: Final = Direction.FROM_SERVER
CLIENT: Final = Direction.FROM_CLIENT


class Deliveries:
    def __init__(
        self, ctx: Context, connection: Connection, subscriptions: Subscriptions, topics: TopicSource | None = None
    ) -> None:
        """``topics`` resolves the topic of a 5.0 PUBLISH named only by its Topic Alias (without it, or when it
        cannot, what depends on that topic is not assessable)."""
        self._ctx = ctx
        self._topics = topics
        self._connection = connection
        self._subscriptions = subscriptions
        #: The rules unknown subscriptions left undecided (noted once per connection, at the first such delivery).
        self._unknown_noted: set[str] = set()
        self._alias_noted = False
        self._options = OptionChecks(ctx, subscriptions)

    def on_packet(self, seen: Seen) -> None:
        """A PUBLISH of either side. One the server sends is a delivery even when it breaks a rule itself (a
        property no PUBLISH may carry, such as a Will's Will Delay Interval left in): that rule is the codec's
        finding, and the delivery is held to every duty of a delivery all the same, so a Will published too soon
        with a leaked property is too soon, not missing. One the client sends that breaks a rule is the offence its
        server must close on, never a message to route."""
        packet = seen.packet
        if not isinstance(packet, Publish) or (seen.offends and seen.sender is CLIENT):
            return
        v5 = self._connection.version == identity.V5
        topic = topic_of(seen, packet, self._topics) if v5 else packet.topic
        if seen.sender is CLIENT:
            if v5:
                self._options.published(seen, packet, topic)
            return
        self._ctx.transcript.delivered.append(Delivered(seen.event, seen.time, packet))
        unknown = self._unknown_subscriptions()
        if unknown is not None:
            self._with_unknown_subscriptions(seen, packet, topic, unknown)
            return
        if topic is None:
            self._topic_unknown(seen, packet)
            return
        bounds = self._subscriptions.bounds(topic)
        if self._matches_a_subscription(seen, topic, bounds):
            self._qos_within_grant(seen, packet, bounds)
            if v5:
                self._options.delivered(seen, packet, topic)

    def _with_unknown_subscriptions(self, seen: Seen, packet: Publish, topic: str | None, unknown: str) -> None:
        """A delivery while the session may hold subscriptions this connection did not show: one that matches a
        subscription it did show (a SUBSCRIBE captured here) matches a subscription whatever else the session held
        [MQTT-3.3.2-3], and one within the QoS that subscription allows is within the QoS granted [MQTT-3.8.4-6];
        anything else may answer to a subscription not seen (not assessable, noted once per rule)."""
        bounds = {} if topic is None else self._subscriptions.bounds(topic)
        undecided: list[str] = []
        if bounds:
            self._ctx.ledger.held(rules.DELIVERY_MATCHES_SUBSCRIPTION)
        else:
            undecided.append(rules.DELIVERY_MATCHES_SUBSCRIPTION)
        if bounds and packet.qos <= max(bounds.values()):
            self._qos_within_grant(seen, packet, bounds)
        else:
            undecided.append(rules.DELIVERY_QOS)
        why = f"{unknown} (this delivery, and later ones while that holds)"
        for rule in undecided:
            if rule not in self._unknown_noted:
                self._unknown_noted.add(rule)
                self._ctx.ledger.undecided(rule, why, side=SERVER, event=seen.event, time=seen.time)

    def _topic_unknown(self, seen: Seen, packet: Publish) -> None:
        """A 5.0 PUBLISH with an empty Topic Name and a Topic Alias whose mapping is unknown: nothing that depends
        on the topic is decided (the empty name is never matched)."""
        if self._alias_noted:
            return
        self._alias_noted = True
        why = reasons.reason(
            reasons.AMBIGUOUS,
            f"{seen.describe()} names its topic only by Topic Alias {first(packet.properties, TOPIC_ALIAS)!r}, "
            "whose mapping is not known (this delivery, and later ones named the same way)",
        )
        for rule in (rules.DELIVERY_MATCHES_SUBSCRIPTION, rules.DELIVERY_QOS):
            self._ctx.ledger.undecided(rule, why, side=SERVER, event=seen.event, time=seen.time)

    def _unknown_subscriptions(self) -> str | None:
        """Why the subscriptions a delivery may answer to are unknown (None: all of them were seen here)."""
        connection = self._connection
        if connection.connect is None:
            if connection.mid_stream:
                return reasons.reason(
                    reasons.MID_STREAM, "no CONNECT seen: the session and its subscriptions are unknown"
                )
            if CLIENT in connection.lost:
                return reasons.reason(
                    reasons.GAP_BEFORE_CONNECT,
                    "the client's CONNECT may be in bytes not captured: the session and its subscriptions are unknown",
                )
            return reasons.reason(reasons.EARLIER_SESSION, "no CONNECT seen: the session is unknown")
        if connection.session_known:
            return None
        if connection.connack is None:
            return reasons.reason(
                reasons.EARLIER_SESSION,
                "CleanSession 0 and no CONNACK seen: the session may hold subscriptions of earlier connections",
            )
        return reasons.reason(
            reasons.EARLIER_SESSION,
            "session resumed (Session Present 1): subscriptions of earlier connections are unknown",
        )

    def _matches_a_subscription(self, seen: Seen, topic: str, bounds: dict[str, int]) -> bool:
        """[MQTT-3.3.2-3] The Topic Name matches a filter of the session; [MQTT-4.7.2-1] a '$' name never
        matches through a filter that starts with a wildcard."""
        if bounds:
            self._ctx.ledger.held(rules.DELIVERY_MATCHES_SUBSCRIPTION)
            return True
        blocked = self._subscriptions.blocked_by_dollar_rule(topic)
        if blocked:
            self._ctx.ledger.fail(
                rules.DOLLAR_TOPICS_NOT_MATCHED_BY_WILDCARDS,
                SERVER,
                seen.time,
                seen.event,
                f"{seen.describe()} reaches the client only through {', '.join(map(repr, blocked))}",
                "a Topic Filter starting with '#' or '+' does not match a Topic Name starting with '$'",
                LEAK,
            )
            return False
        self._ctx.ledger.fail(
            rules.DELIVERY_MATCHES_SUBSCRIPTION,
            SERVER,
            seen.time,
            seen.event,
            f"{seen.describe()} matches no Topic Filter the client subscribed to on this connection",
            "the server sends a client only messages whose Topic Name matches one of its subscriptions",
            LEAK,
        )
        return False

    def _qos_within_grant(self, seen: Seen, packet: Publish, bounds: dict[str, int]) -> None:
        """[MQTT-3.8.4-6] A delivery uses at most the QoS its subscription was granted (requested, until the
        SUBACK says)."""
        allowed = max(bounds.values())
        judged = [rules.DELIVERY_QOS]
        if self._connection.version == identity.V5 and self._subscriptions.all_granted(bounds):
            # [MQTT-3.8.4-7] The SUBACK codes showed the maximum QoS granted: no delivery exceeds them.
            judged.append(SUBACK_CODE_IS_GRANT)
        if packet.qos <= allowed:
            for rule in judged:
                self._ctx.ledger.held(rule)
            return
        grants = ", ".join(f"{quoted(name)}: QoS {qos}" for name, qos in sorted(bounds.items()))
        self._ctx.ledger.fail(
            rules.DELIVERY_QOS,
            SERVER,
            seen.time,
            seen.event,
            f"{seen.describe()} exceeds the QoS its subscriptions allow ({grants})",
            "a message is delivered at the lower of its publish QoS and the QoS granted to the subscription"
            + ("; each SUBACK Reason Code shows the maximum QoS granted to its subscription" if judged[1:] else ""),
            QOS,
            also=judged[1:],
        )

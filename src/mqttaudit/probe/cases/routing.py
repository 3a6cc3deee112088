"""Routing: does each PUBLISH reach exactly the subscribers whose filters match it (section 4.7), at the right QoS?

Every row of :data:`TABLE` is one case: a subscriber with Topic Filter F, a publisher on Topic Name T, and whether
T must reach F. The examples of section 4.7 and the edge cases a router gets wrong (empty levels, '#' matching its
parent level, '+' matching an empty level, '$' topics and leading wildcards, no normalisation of Unicode or case)
are written under the case's own prefix ``mqttaudit/<run>/<case>``, so concurrent cases never share a topic; the
'$' rows use a Topic Name whose first level is ``$mqttaudit``. A delivery that should not happen is a ``leak``
finding [MQTT-3.3.2-3, MQTT-4.7.2-1], a delivery that does not happen a ``missing`` one [MQTT-4.5.0-1], except on
a '$' topic: section 4.7.2 says the server SHOULD keep clients from exchanging messages there, so a broker that
refuses or withholds one is not failed (the case is not applicable, or not assessable).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mqttaudit.spec.ids import R311

from ...codec import Disconnect, ProtocolVersion, encode
from ..case import CaseContext, NotApplicable, case, is_refusal

DISCONNECT = encode(Disconnect())
#: Stands for the case's own topic prefix in the table.
P: Final = "{p}"
#: Stands for the case's prefix without its first level, behind a '$' first level.
DOLLAR: Final = "$mqttaudit/{rest}"

DELIVERED = R311.MQTT_4_5_0_1
NO_LEAK = R311.MQTT_3_3_2_3
DOLLAR_RULE = R311.MQTT_4_7_2_1


@dataclass(frozen=True)
class Row:
    name: str
    topic_filter: str
    topic: str
    delivered: bool
    why: str

    @property
    def statements(self) -> tuple[str, ...]:
        if self.delivered:
            return (DELIVERED,)
        return (DOLLAR_RULE,) if self.topic.startswith("$") else (NO_LEAK,)


TABLE: Final[tuple[Row, ...]] = (
    # Section 4.7.1.2, the multi-level wildcard.
    Row("hash-parent", f"{P}/sport/tennis/player1/#", f"{P}/sport/tennis/player1", True, "'#' matches its parent"),
    Row("hash-child", f"{P}/sport/tennis/player1/#", f"{P}/sport/tennis/player1/ranking", True, "one level below"),
    Row(
        "hash-grandchild",
        f"{P}/sport/tennis/player1/#",
        f"{P}/sport/tennis/player1/score/wimbledon",
        True,
        "any number of levels below",
    ),
    Row("hash-sibling", f"{P}/sport/tennis/player1/#", f"{P}/sport/tennis/player2", False, "another branch"),
    Row("hash-alone-parent", f"{P}/#", P, True, "'#' matches the level above it"),
    # Section 4.7.1.3, the single-level wildcard.
    Row("plus-level", f"{P}/sport/tennis/+", f"{P}/sport/tennis/player1", True, "'+' fills one level"),
    Row("plus-not-deeper", f"{P}/sport/tennis/+", f"{P}/sport/tennis/player1/ranking", False, "'+' is one level"),
    Row("plus-not-parent", f"{P}/sport/+", f"{P}/sport", False, "'+' needs a level to fill"),
    Row("plus-empty-trailing", f"{P}/sport/+", f"{P}/sport/", True, "'+' matches the empty last level"),
    Row("plus-empty-leading", f"{P}/+/monitor/Clients", f"{P}//monitor/Clients", True, "an empty level is a level"),
    Row("plus-plus-finance", f"{P}/+/+", f"{P}//finance", True, "'/finance' has two levels, the first empty"),
    Row("plus-one-finance", f"{P}/+", f"{P}//finance", False, "'/finance' has two levels"),
    # Empty levels are real levels.
    Row("empty-level-exact", f"{P}/a//b", f"{P}/a//b", True, "the same levels, one of them empty"),
    Row("empty-level-plus", f"{P}/a/+/b", f"{P}/a//b", True, "'+' matches the empty level"),
    Row("empty-level-dropped", f"{P}/a/b", f"{P}/a//b", False, "'a/b' has no empty level"),
    Row("trailing-slash", f"{P}/a", f"{P}/a/", False, "'a/' has an empty last level"),
    Row("trailing-hash", f"{P}/a/#", f"{P}/a/", True, "'#' matches the empty level below"),
    # Section 4.7.2: '$' topics and leading wildcards.
    Row("dollar-plus", "+/{rest}/monitor/Clients", f"{DOLLAR}/monitor/Clients", False, "a leading '+'"),
    Row("dollar-hash", "#", f"{DOLLAR}/x", False, "'#' alone never matches a '$' topic"),
    Row("dollar-exact", f"{DOLLAR}/monitor/+", f"{DOLLAR}/monitor/Clients", True, "a filter that starts with '$'"),
    # Section 4.7.3: no normalisation, case matters, spaces are characters.
    Row("case-sensitive", f"{P}/ACCOUNTS", f"{P}/Accounts", False, "'ACCOUNTS' and 'Accounts' differ"),
    Row("no-unicode-normalisation", f"{P}/caf\u00e9", f"{P}/cafe\u0301", False, "precomposed vs decomposed 'é'"),
    Row("space-is-a-character", f"{P}/Accounts payable", f"{P}/Accounts payable", True, "spaces are allowed"),
    Row("unicode-exact", f"{P}/\u20ac/+", f"{P}/\u20ac/x", True, "any Unicode character is a character"),
)


def expand(template: str, context: CaseContext) -> str:
    """A table template with the case's own prefix (``{p}``) and that prefix without its first level (``{rest}``)."""
    prefix = context.topic()
    return template.format(p=prefix, rest=prefix.split("/", 1)[1])


def _exchange_on_dollar_topics(granted: tuple[int, ...], taken: int | None, protocol: ProtocolVersion) -> None:
    """:class:`NotApplicable` when the broker refused the subscription to a '$' filter or the PUBLISH to a '$' topic:
    section 4.7.2 says it SHOULD keep clients from exchanging messages on such topics, and a SHOULD followed leaves
    no delivery to judge (one withheld without a refusal, the judge finds allowed: see
    :func:`mqttaudit.judge.model.withheld`)."""
    refused = [f"SUBACK 0x{code:02x}" for code in granted if is_refusal(code, protocol)]
    if taken is not None and is_refusal(taken, protocol):
        refused.append(f"PUBACK 0x{taken:02x}")
    if refused:
        raise NotApplicable(
            f"the broker keeps clients from exchanging messages on '$' topics ({', '.join(refused)}), as section "
            "4.7.2 says it SHOULD: no delivery to judge"
        )


def register(row: Row, protocol: ProtocolVersion = ProtocolVersion.V3_1_1, statements: tuple[str, ...] = ()) -> None:
    """Registers the row's case in ``protocol`` (``v5/routing/<name>`` in 5.0), targeting ``statements`` (the
    row's own 3.1.1 ids by default)."""

    async def script(context: CaseContext) -> None:
        topic_filter, topic = expand(row.topic_filter, context), expand(row.topic, context)
        subscriber = await context.connect("subscriber")
        # '#' alone receives every other case's messages too: at QoS 0 it owes them no acknowledgement, which would
        # otherwise fill its connection's evidence with answers to traffic that is not the case's.
        granted = await context.subscribe(subscriber, (topic_filter, 0 if row.topic_filter == "#" else 1))
        publisher = await context.connect("publisher")
        taken = await context.publish(publisher, topic, row.name.encode(), qos=1)
        if row.delivered and topic.startswith("$"):
            _exchange_on_dollar_topics(granted, taken, protocol)
        if row.delivered:
            await context.deliveries(subscriber, topic)
        await context.settle(subscriber)
        await publisher.send(DISCONNECT)
        await subscriber.send(DISCONNECT)

    shown_filter, shown_topic = row.topic_filter.replace(P, "<p>"), row.topic.replace(P, "<p>")
    case(
        f"{'v5/' if protocol is ProtocolVersion.V5 else ''}routing/{row.name}",
        statements or row.statements,
        f"Filter {shown_filter!r} and Topic Name {shown_topic!r}: {'delivered' if row.delivered else 'not delivered'}",
        stimulus=f"subscribe to {shown_filter!r} at QoS 1, publish QoS 1 to {shown_topic!r} (<p> is the case's own "
        "prefix)",
        expected=("delivered once" if row.delivered else "not delivered")
        + f" ({row.why})"
        + (
            "; or refused or withheld: the server SHOULD keep clients from exchanging messages on '$' topics (4.7.2)"
            if row.delivered and row.topic.startswith("$")
            else ""
        ),
        family="v5/routing" if protocol is ProtocolVersion.V5 else "",
        protocol=protocol,
    )(script)


for _row in TABLE:
    register(_row)


@case(
    "routing/retained-to-wildcard-subscribers",
    [R311.MQTT_3_3_1_6, R311.MQTT_3_3_1_8, NO_LEAK],
    "Retained messages reach new wildcard subscriptions that match them, and only those",
    stimulus="retained PUBLISH to '<p>/r/a' and '<p>/r/b/c'; then one subscriber to '<p>/r/#', another to '<p>/r/+'",
    expected="'<p>/r/#' gets both with RETAIN 1; '<p>/r/+' gets '<p>/r/a' only",
)
async def retained_to_wildcards(context: CaseContext) -> None:
    publisher = await context.connect("publisher")
    await context.publish(publisher, context.topic("r", "a"), b"a", qos=1, retain=True)
    await context.publish(publisher, context.topic("r", "b", "c"), b"bc", qos=1, retain=True)
    await publisher.send(DISCONNECT)
    deep = await context.subscriber("deep", (context.topic("r", "#"), 1))
    shallow = await context.subscriber("shallow", (context.topic("r", "+"), 1))
    await context.deliveries(deep, context.topic("r", "b", "c"))
    await context.settle(deep, shallow)
    await context.leave(deep, shallow)


@case(
    "routing/overlapping-three-filters",
    [R311.MQTT_3_3_5_1, DELIVERED],
    "A message matching three filters of one session: at least one copy at the highest granted QoS",
    stimulus="subscribe to '<p>/#' (QoS 0), '<p>/+/x' (QoS 2) and '<p>/a/x' (QoS 1); publish QoS 2 to '<p>/a/x'",
    expected="one copy at QoS 2 (up to one further copy per other matching subscription, none above its QoS)",
)
async def overlapping_three(context: CaseContext) -> None:
    topic = context.topic("a", "x")
    subscriber = await context.connect("subscriber")
    await context.subscribe(
        subscriber, (context.topic("#"), 0), (context.topic("+", "x"), 2), (context.topic("a", "x"), 1)
    )
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"three", qos=2)
    await context.deliveries(subscriber, topic)
    await context.settle(subscriber)
    await context.leave(publisher, subscriber)


@case(
    "routing/qos-downgrade",
    [R311.MQTT_3_8_4_6, DELIVERED],
    "Each subscriber gets a QoS 2 message at its own granted QoS",
    stimulus="three subscribers to '<p>/q' at QoS 0, 1 and 2; publish QoS 2 to '<p>/q'",
    expected="delivered at QoS 0, 1 and 2 respectively",
)
async def qos_downgrade(context: CaseContext) -> None:
    topic = context.topic("q")
    subscribers = []
    for qos in (0, 1, 2):
        subscriber = await context.connect(f"subscriber-qos{qos}")
        await context.subscribe(subscriber, (topic, qos))
        subscribers.append(subscriber)
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"downgrade", qos=2)
    for subscriber in subscribers:
        await context.deliveries(subscriber, topic)
    await context.settle(*subscribers)
    await publisher.send(DISCONNECT)
    for subscriber in subscribers:
        await subscriber.send(DISCONNECT)

"""MQTT 5.0 sessions, Wills, shared subscriptions and topic matching decided across connections (sections 1.5.4,
3.1.2.4, 3.1.2.5, 3.1.3, 3.1.4, 4.1, 4.7.3, 4.8.2): the Clean Start processing and the session state a ClientId
names, what is kept while a connection is open and discarded once the Session Expiry Interval passed, the Will
stored with the session and dropped once published or discarded, its User Properties in order, a BOM in a topic,
and what becomes of a share group's message its chosen member refuses or never finishes receiving.

The broker model of the judge (:mod:`mqttaudit.judge.model`) decides every statement a case lists; the scripts
only drive the traffic. Every session a case opens ends with it.
"""

from __future__ import annotations

import asyncio
from typing import Final

from mqttaudit.spec.ids import R5

from ...codec import Puback, Publish, Pubrec
from ...codec import properties as props
from ...judge.expiry_5 import GRANULARITY
from ..case import SETTLE_MARGIN, CaseContext, Script
from ..connection import ProbeConnection
from .v5_connect import v5_case
from .v5_routing import (
    PAST,
    SHORT,
    WILL_DELAY,
    WITH_WILL,
    _abrupt_will,
    _discard_session,
    _due,
    _end_session,
    _keep,
    _require_qos,
    _watcher,
    _will,
)

#: The 5.0 statement ids the cases target.
BOM_KEPT: Final[str] = R5.MQTT_1_5_4_3
NO_NORMALISATION: Final[str] = R5.MQTT_4_7_3_4
NEW_SESSION: Final[str] = R5.MQTT_3_1_2_6
CLEAN_START_PROCESSED: Final[str] = R5.MQTT_3_1_4_4
SESSION_BY_CLIENT_ID: Final[str] = R5.MQTT_3_1_3_2
KEPT_WHILE_OPEN: Final[str] = R5.MQTT_4_1_0_1
DISCARDED_AFTER_EXPIRY: Final[str] = R5.MQTT_4_1_0_2
WILL_STORED: Final[str] = R5.MQTT_3_1_2_7
WILL_DROPPED: Final[str] = R5.MQTT_3_1_2_10
WILL_USER_PROPERTIES_IN_ORDER: Final[str] = R5.MQTT_3_1_3_10
CONNACK_FOR_VALID_CONNECT: Final[str] = R5.MQTT_3_1_4_5
ROUTED: Final[str] = R5.MQTT_4_5_0_1
SHARED_QOS2_COMPLETED: Final[str] = R5.MQTT_4_8_2_4
SHARED_NOT_REASSIGNED: Final[str] = R5.MQTT_4_8_2_5
SHARED_REFUSED_DISCARDED: Final[str] = R5.MQTT_4_8_2_6
#: A Session Expiry Interval that passes within a case, long enough that a message published just after the
#: close surely reaches the session before it ends (servers count whole seconds).
EXPIRING: Final = 2
#: PUBACK / PUBREC Reason Code 0x80 Unspecified error.
REFUSED: Final = 0x80
#: User Properties in an order no sorting keeps, a name twice.
WILL_USER_PROPERTIES: Final = props.make(user_property=[("z", "1"), ("a", "2"), ("z", "0"), ("m", "")])


# Topic matching ---------------------------------------------------------------------------------------------------


@v5_case(
    "v5/topics/bom-kept",
    [BOM_KEPT, NO_NORMALISATION],
    "A BOM (EF BB BF) in a topic is kept: matched and delivered as U+FEFF",
    stimulus="one client SUBSCRIBEs '\\ufeff<case>/lead' and '<case>/in\\ufeffside', another the same filters without "
    "the BOM; a QoS 0 message to each topic",
    expected="the first client gets both, each Topic Name with its BOM; the second gets neither",
)
async def bom_kept(context: CaseContext) -> None:
    topics = ("\ufeff" + context.topic("lead"), context.topic("in\ufeffside"))
    exact = await context.subscriber("exact", *((topic, 0) for topic in topics))
    stripped = await context.subscriber("stripped", *((topic.replace("\ufeff", ""), 0) for topic in topics))
    publisher = await context.connect("publisher")
    for topic in topics:
        await context.publish(publisher, topic, b"bom", qos=0)
    await context.settle(exact, stripped)
    for connection in (publisher, exact, stripped):
        await context.disconnect(connection)


# Sessions ---------------------------------------------------------------------------------------------------------


@v5_case(
    "v5/session/clean-start-0-new-session",
    [NEW_SESSION, CLEAN_START_PROCESSED],
    "Clean Start 0 with no session held starts a new one",
    stimulus=f"Clean Start 1 and leave (no session is left); {PAST:g} s later the same ClientId with Clean Start 0",
    expected="Session Present 0",
)
async def clean_start_0_new_session(context: CaseContext) -> None:
    client_id = context.client_id()
    await _discard_session(context, client_id)
    await asyncio.sleep(PAST)  # servers count the interval in whole seconds: 0 may end it up to 1 s later
    again = await context.connect("again", client_id=client_id, clean_session=False)
    await context.disconnect(again)


@v5_case(
    "v5/session/clean-start-1-processing",
    [CLEAN_START_PROCESSED],
    "Clean Start 1 after a kept session starts a new one",
    stimulus="Clean Start 1, Session Expiry Interval 60, SUBSCRIBE, DISCONNECT; the same ClientId with Clean Start 1",
    expected="Session Present 0",
)
async def clean_start_1_processing(context: CaseContext) -> None:
    client_id = context.client_id()
    first = await context.connect("first", client_id=client_id, properties=_keep())
    await context.subscribe_granted(first, context.topic("t"), 0)
    await context.disconnect(first)
    again = await context.connect("again", client_id=client_id)
    await context.disconnect(again)


@v5_case(
    "v5/session/other-client-id",
    [SESSION_BY_CLIENT_ID, NEW_SESSION, CLEAN_START_PROCESSED],
    "Another ClientId does not resume a session",
    stimulus="ClientId B connects and leaves with nothing kept; ClientId A keeps a session with a QoS 1 subscription "
    "and leaves; a QoS 1 message to its topic; B connects with Clean Start 0; then A with Clean Start 0",
    expected="B: Session Present 0 and nothing of A's session; A: Session Present 1 and the queued message",
)
async def other_client_id(context: CaseContext) -> None:
    topic = context.topic("t")
    other, owner = context.client_id(), context.client_id()
    await _discard_session(context, other)
    await asyncio.sleep(PAST)
    first = await context.connect("owner", client_id=owner, properties=_keep())
    _require_qos(context, 1)
    await context.subscribe_granted(first, topic, 1)
    await context.disconnect(first)
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"queued", qos=1)
    stranger = await context.connect("stranger", client_id=other, clean_session=False)
    await context.settle(stranger)
    await context.disconnect(stranger)
    back = await context.connect("back", client_id=owner, clean_session=False, properties=_keep())
    await context.deliveries(back, topic)
    await _end_session(context, back)
    await context.disconnect(publisher)


@v5_case(
    "v5/session/kept-while-open",
    [KEPT_WHILE_OPEN],
    "Session state outlives the Session Expiry Interval while the connection is open",
    stimulus=f"Clean Start 1, Session Expiry Interval {SHORT}, SUBSCRIBE; {SHORT + 2 * PAST:g} s later a message to "
    "the topic",
    expected="the message is delivered: the interval runs from the close",
    timing=True,
)
async def kept_while_open(context: CaseContext) -> None:
    topic = context.topic("t")
    subscriber = await context.connect("subscriber", properties=_keep(SHORT))
    await context.subscribe_granted(subscriber, topic, 0)
    await asyncio.sleep(SHORT + 2 * PAST)
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"still-here", qos=0)
    await context.deliveries(subscriber, topic)
    await context.disconnect(publisher)
    await _end_session(context, subscriber)


@v5_case(
    "v5/session/expired-discards-queued",
    [DISCARDED_AFTER_EXPIRY, NEW_SESSION, CLEAN_START_PROCESSED],
    "A session whose Session Expiry Interval passed is discarded with its queued messages",
    stimulus=f"Clean Start 1, Session Expiry Interval {EXPIRING}, SUBSCRIBE QoS 1, DISCONNECT; a QoS 1 message to the "
    f"topic at once; {EXPIRING + PAST:g} s later the same ClientId with Clean Start 0",
    expected="Session Present 0; the queued message is not delivered",
    timing=True,
)
async def expired_discards_queued(context: CaseContext) -> None:
    client_id = context.client_id()
    topic = context.topic("t")
    first = await context.connect("first", client_id=client_id, properties=_keep(EXPIRING))
    _require_qos(context, 1)
    await context.subscribe_granted(first, topic, 1)
    await context.disconnect(first)
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"queued", qos=1)
    await asyncio.sleep(EXPIRING + PAST)
    again = await context.connect("again", client_id=client_id, clean_session=False)
    await context.settle(again)
    await context.disconnect(again)
    await context.disconnect(publisher)


# Wills ------------------------------------------------------------------------------------------------------------


@v5_case(
    "v5/will/stored-with-session",
    [WILL_STORED],
    "A Will outlives its connection, stored with the session until its delay passes",
    stimulus=f"CONNECT, Session Expiry Interval 60, with a Will whose Will Delay Interval is {WILL_DELAY} s, then a "
    "TCP reset",
    expected=f"the Will is published {WILL_DELAY} s after the drop",
    timing=True,
)
async def will_stored(context: CaseContext) -> None:
    client_id = context.client_id()
    will = _will(context, properties=props.make(will_delay_interval=WILL_DELAY))
    watcher = await _watcher(context, will.topic)
    dying = await context.connect("dying", client_id=client_id, will=will, properties=_keep())
    await dying.close(abrupt=True)
    await watcher.observe(_due(context, WILL_DELAY))
    await _discard_session(context, client_id)
    await context.disconnect(watcher)


def _will_dropped(*, published: bool) -> Script:
    """A Will published on a reset (``published``) or discarded by DISCONNECT 0x00; the session comes back without
    a Will and ends its connection the way that would publish one (DISCONNECT 0x04, a reset), then ends."""

    async def script(context: CaseContext) -> None:
        client_id = context.client_id()
        will = _will(context)
        watcher = await _watcher(context, will.topic)
        dying = await context.connect("dying", client_id=client_id, will=will, properties=_keep())
        if published:
            await dying.close(abrupt=True)
            await context.deliveries(watcher, will.topic)
        else:
            await context.disconnect(dying)
        again = await context.connect("again", client_id=client_id, clean_session=False, properties=_keep())
        if published:
            await context.disconnect(again, WITH_WILL)
        else:
            await again.close(abrupt=True)
        await watcher.observe(context.timeout + SETTLE_MARGIN)
        await _discard_session(context, client_id)
        await watcher.observe(GRANULARITY + context.timeout + SETTLE_MARGIN)
        await context.disconnect(watcher)

    return script


v5_case(
    "v5/will/dropped-once-published",
    [WILL_DROPPED],
    "A Will published once is dropped: never published again",
    stimulus="CONNECT, Session Expiry Interval 60, with a Will; a TCP reset; the same ClientId with Clean Start 0 and "
    "no Will, DISCONNECT 0x04; then the session ends",
    expected="the Will is published once",
    timing=True,
)(_will_dropped(published=True))
v5_case(
    "v5/will/dropped-after-disconnect",
    [WILL_DROPPED],
    "A Will discarded by DISCONNECT 0x00 is dropped: a later close of the session publishes nothing",
    stimulus="CONNECT, Session Expiry Interval 60, with a Will; DISCONNECT 0x00; the same ClientId with Clean Start 0 "
    "and no Will, a TCP reset; then the session ends",
    expected="the Will is never published",
    timing=True,
)(_will_dropped(published=False))


@v5_case(
    "v5/will/user-properties-in-order",
    [CONNACK_FOR_VALID_CONNECT, WILL_USER_PROPERTIES_IN_ORDER],
    "A Will's User Properties are published in their order",
    stimulus="CONNECT with a QoS 0 Will carrying four User Properties (a name twice, in no sorted order), then a TCP "
    "reset",
    expected="the Will arrives with the four User Properties in the order sent",
    timing=True,
)
async def will_user_properties(context: CaseContext) -> None:
    await _abrupt_will(0, properties=WILL_USER_PROPERTIES)(context)


# Shared subscriptions ---------------------------------------------------------------------------------------------


async def _members(context: CaseContext, qos: int, expiry: int) -> tuple[str, list[ProbeConnection]]:
    """Two members of a share group at ``qos`` that acknowledge nothing themselves, sessions kept ``expiry`` s."""
    group = f"$share/{context.run_id}/{context.topic('t')}"
    members = [await context.connect("member1", auto_ack=False, properties=_keep(expiry))]
    _require_qos(context, qos)
    context.require("shared-subscriptions", "a shared subscription")
    members.append(await context.connect("member2", auto_ack=False, properties=_keep(expiry)))
    for member in members:
        await context.subscribe_granted(member, group, qos)
    return group, members


async def _first_delivery(context: CaseContext, members: list[ProbeConnection]) -> ProbeConnection | None:
    """The member that got a PUBLISH first (None: neither within the timeout)."""
    waits = [member.wait_for(lambda p: isinstance(p, Publish), context.timeout + SETTLE_MARGIN) for member in members]
    found = await asyncio.gather(*waits)
    got = [member for member, packet in zip(members, found, strict=True) if packet is not None]
    return got[0] if got else None


async def _refuse(context: CaseContext, member: ProbeConnection, seconds: float) -> None:
    """Answers every QoS 1 or 2 PUBLISH ``member`` gets for ``seconds`` with PUBACK or PUBREC 0x80."""
    until = context.clock() + seconds
    answered = 0
    while (left := until - context.clock()) > 0:
        packet = await member.wait_for(lambda p: isinstance(p, Publish) and p.qos > 0, left, since=answered)
        if not isinstance(packet, Publish):
            return
        answered = next(i for i, p in enumerate(member.received) if p is packet) + 1
        kind = Puback if packet.qos == 1 else Pubrec
        await member.send(kind(packet_id=packet.packet_id or 0, reason_code=REFUSED))


def _refused(qos: int) -> Script:
    async def script(context: CaseContext) -> None:
        _, members = await _members(context, qos, 0)
        publisher = await context.connect("publisher")
        await context.publish(publisher, context.topic("t"), b"refused", qos=qos)
        await asyncio.gather(*(_refuse(context, m, 2 * (context.timeout + SETTLE_MARGIN)) for m in members))
        await context.disconnect(publisher)
        for member in members:
            await context.disconnect(member)

    return script


for _qos in (1, 2):
    v5_case(
        f"v5/shared/refused-discarded-qos{_qos}",
        [ROUTED, SHARED_REFUSED_DISCARDED],
        f"A shared subscription's QoS {_qos} message refused by its member is not sent to another",
        stimulus=f"two members of '$share/<run>/<topic>' at QoS {_qos}, each answering every PUBLISH with "
        f"{'PUBACK' if _qos == 1 else 'PUBREC'} 0x80; one QoS {_qos} message",
        expected="the message reaches one member, which refuses it; the other never gets it",
    )(_refused(_qos))


def _interrupted(*, back: bool) -> Script:
    async def script(context: CaseContext) -> None:
        _, members = await _members(context, 2, 60 if back else SHORT)
        publisher = await context.connect("publisher")
        await context.publish(publisher, context.topic("t"), b"interrupted", qos=2)
        chosen = await _first_delivery(context, members)
        others = [member for member in members if member is not chosen]
        if chosen is not None:
            await chosen.close(abrupt=True)  # before any PUBREC
        if chosen is not None and back:
            again = await context.connect("again", client_id=chosen.client_id, clean_session=False, properties=_keep())
            await context.settle(again, *others)
            await _end_session(context, again)
        else:
            await asyncio.gather(*(other.observe(_due(context, SHORT)) for other in others))
        await context.disconnect(publisher)
        for other in others:
            await _end_session(context, other)

    return script


v5_case(
    "v5/shared/qos2-completed-on-reconnect",
    [ROUTED, SHARED_QOS2_COMPLETED],
    "A QoS 2 delivery to a shared subscriber that broke off is completed when it reconnects",
    stimulus="two members of '$share/<run>/<topic>' at QoS 2, sessions kept 60 s; a QoS 2 message; the member that "
    "gets it drops (TCP reset) before PUBREC and connects again with Clean Start 0",
    expected="the message is sent again to that member's new connection, never to the other member",
    timing=True,
)(_interrupted(back=True))
v5_case(
    "v5/shared/qos2-not-reassigned",
    [ROUTED, SHARED_NOT_REASSIGNED],
    "A QoS 2 delivery to a shared subscriber whose session then ends goes to no other member",
    stimulus=f"two members of '$share/<run>/<topic>' at QoS 2, Session Expiry Interval {SHORT}; a QoS 2 message; the "
    "member that gets it drops (TCP reset) before PUBREC and does not come back",
    expected="the other member never gets the message",
    timing=True,
)(_interrupted(back=False))

"""Negative controls: well-formed neighbours of the malformed shapes, which a conforming broker must accept.

A broker that rejects too much fails here, as one that accepts too much fails the malformed families. Each row is
one case ``accepted/<name>``; a new control is one row.

- A Topic Filter row subscribes to a filter that only looks unusual ('+' and '#' alone in their level at each
  position, characters that are no wildcards), publishes to a topic it matches, then unsubscribes: the broker
  answers SUBSCRIBE with SUBACK [MQTT-3.8.4-1], delivers the message [MQTT-4.5.0-1] with its own Topic Name (one
  that matches the filter [MQTT-3.3.2-3]: RabbitMQ 3.10.8 delivers 'a.b' as 'a/b') and answers UNSUBSCRIBE with
  UNSUBACK [MQTT-3.10.4-4]. Closing the connection instead of an answer is treating a well-formed packet as
  malformed; refusing the subscription with SUBACK 0x80 is allowed, and makes the case not applicable.
- A CONNECT row sends a CONNECT whose fields only look unusual (a zero-length User Name or Password, the largest
  Keep Alive, a Will with an empty message), then PINGREQ: a broker that accepts it answers PINGRESP
  [MQTT-3.12.4-1]. Refusing it with a CONNACK return code is allowed (authentication may fail), and makes the case
  not applicable; closing without any CONNACK is only a SHOULD of section 3.1.4, so it leaves the case
  inconclusive, with that reason, rather than failed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from mqttaudit.spec.ids import R311

from ...codec import Connack, Pingreq, Pingresp, ProtocolVersion
from ..case import CaseContext, Inconclusive, NotApplicable, case
from .malformed import connect_frame, field, no_properties
from .routing import DELIVERED, NO_LEAK, P, expand

SUBACK_SENT: Final[str] = R311.MQTT_3_8_4_1
UNSUBACK_SENT: Final[str] = R311.MQTT_3_10_4_4
PINGRESP_SENT: Final[str] = R311.MQTT_3_12_4_1
#: What a filter row targets: the SUBACK, the delivery (with its own matching Topic Name) and the UNSUBACK.
FILTER_STATEMENTS: Final = (SUBACK_SENT, DELIVERED, NO_LEAK, UNSUBACK_SENT)
#: The Will Flag of the Connect Flags byte.
WILL_FLAG: Final = 0x04
_DISCONNECT: Final = bytes((0xE0, 0x00))


@dataclass(frozen=True)
class FilterRow:
    name: str
    topic_filter: str
    topic: str
    why: str


#: Filters (and the topic each must deliver) that are well-formed, beside the malformed wildcard and Topic Name
#: shapes; ``{p}`` is the case's own prefix, ``{rest}`` that prefix without its first level.
FILTER_ROWS: Final[tuple[FilterRow, ...]] = (
    FilterRow("plus-alone-first-level", "+/{rest}/z", "mqttaudit/{rest}/z", "'+' alone in the first level"),
    FilterRow("plus-alone-middle-level", f"{P}/+/z", f"{P}/a/z", "'+' alone in a middle level"),
    FilterRow("plus-alone-last-level", f"{P}/+", f"{P}/a", "'+' alone in the last level"),
    FilterRow("hash-alone-last-level", f"{P}/#", f"{P}/a/b", "'#' alone in the last level"),
    FilterRow("plus-then-hash", f"{P}/+/#", f"{P}/a/b/c", "'+' then '#', each alone in its level"),
    FilterRow("star", f"{P}/a*b", f"{P}/a*b", "'*' is no wildcard in MQTT"),
    FilterRow("dot", f"{P}/a.b", f"{P}/a.b", "'.' is no level separator in MQTT"),
    FilterRow("greater-than", f"{P}/>", f"{P}/>", "'>' is no wildcard in MQTT"),
    FilterRow("percent", f"{P}/a%2Fb", f"{P}/a%2Fb", "'%' escapes nothing in MQTT"),
    FilterRow("dollar-inside", f"{P}/a$b", f"{P}/a$b", "'$' inside a topic is a character"),
    FilterRow("two-byte-utf8", f"{P}/\u00fc", f"{P}/\u00fc", "a two-byte UTF-8 character"),
    FilterRow("four-byte-utf8", f"{P}/\U0001f600", f"{P}/\U0001f600", "a four-byte UTF-8 character"),
)


def register_filter(
    row: FilterRow, protocol: ProtocolVersion = ProtocolVersion.V3_1_1, statements: tuple[str, ...] = ()
) -> None:
    """Registers the row's case in ``protocol`` (``v5/accepted/<name>`` in 5.0), targeting ``statements`` (the
    3.1.1 ids by default)."""

    async def script(context: CaseContext) -> None:
        topic_filter, topic = expand(row.topic_filter, context), expand(row.topic, context)
        subscriber = await context.connect("subscriber")
        await context.subscribe_granted(subscriber, topic_filter, 0)
        publisher = await context.connect("publisher")
        await context.publish(publisher, topic, row.name.encode(), qos=1)
        await context.deliveries(subscriber, topic)
        await context.unsubscribe(subscriber, topic_filter)
        await context.leave(publisher, subscriber)

    shown_filter, shown_topic = (
        text.replace(P, "<p>").replace("{rest}", "<run>/<case>") for text in (row.topic_filter, row.topic)
    )
    case(
        f"{_prefix(protocol)}accepted/{row.name}",
        statements or FILTER_STATEMENTS,
        f"Topic Filter {shown_filter!r} is accepted and matches {shown_topic!r}",
        stimulus=f"subscribe to {shown_filter!r}, publish QoS 1 to {shown_topic!r}, then unsubscribe (<p> is the "
        "case's own prefix)",
        expected=f"SUBACK, the message delivered, UNSUBACK ({row.why})",
        family="v5/accepted-topic-filter" if protocol is ProtocolVersion.V5 else "accepted/topic-filter",
        protocol=protocol,
    )(script)


@dataclass(frozen=True)
class ConnectRow:
    name: str
    title: str
    #: The Connect Flags byte, the Keep Alive, and what follows the Client Identifier, from the case's prefix.
    flags: int
    keep_alive: int
    tail: Callable[[bytes], bytes]
    #: The Client Identifier, when it is not the case's own.
    client_id: bytes | None = None


#: CONNECTs that are well-formed, beside the malformed CONNECT shapes.
CONNECT_ROWS: Final[tuple[ConnectRow, ...]] = (
    ConnectRow("empty-user-name", "a zero-length User Name", 0x82, 0, lambda _p: field(b"")),
    ConnectRow(
        "empty-password", "a User Name and a zero-length Password", 0xC2, 0, lambda _p: field(b"u") + field(b"")
    ),
    ConnectRow("largest-keep-alive", "Keep Alive 65535", 0x02, 65535, lambda _p: b""),
    ConnectRow("will-empty-message", "a Will with an empty message", 0x06, 0, lambda p: field(p + b"/w") + field(b"")),
    # not retained: a broker that closes the connection publishes the Will, which must leave nothing behind
    ConnectRow("will-qos-2", "a QoS 2 Will", 0x16, 0, lambda p: field(p + b"/w") + field(b"w")),
)


def connect_bytes(
    row: ConnectRow, client_id: str, prefix: str, protocol: ProtocolVersion = ProtocolVersion.V3_1_1
) -> bytes:
    """The row's CONNECT with the case's Client Identifier and topic prefix, in ``protocol`` (5.0: Protocol Level
    5, empty CONNECT Properties, and empty Will Properties before a Will Topic)."""
    will = no_properties(protocol) if row.flags & WILL_FLAG else b""
    tail = will + row.tail(prefix.encode())
    identifier = client_id.encode() if row.client_id is None else row.client_id
    return connect_frame(identifier, flags=row.flags, tail=tail, keep_alive=row.keep_alive, level=protocol.level)


def register_connect(
    row: ConnectRow, protocol: ProtocolVersion = ProtocolVersion.V3_1_1, statements: tuple[str, ...] = ()
) -> None:
    """Registers the row's case in ``protocol`` (``v5/accepted/connect-<name>`` in 5.0), targeting ``statements``
    (the 3.1.1 id by default)."""

    async def script(context: CaseContext) -> None:
        connection = await context.open()
        connection.client_id = context.client_id()
        await connection.send(connect_bytes(row, connection.client_id, context.topic(), protocol))
        ack = await connection.wait_type(Connack)
        if not isinstance(ack, Connack):
            raise Inconclusive(
                f"{connection.missing('CONNACK')}: closing on a CONNECT it cannot process is only a SHOULD of 3.1.4"
            )
        if ack.return_code != 0:
            code = f"0x{ack.return_code:02x}" if protocol is ProtocolVersion.V5 else str(ack.return_code)
            raise NotApplicable(f"the broker refused the CONNECT with return code {code}, as it may")
        since = len(connection.received)
        await connection.send(Pingreq())
        await connection.wait_type(Pingresp, since=since)
        await connection.send(_DISCONNECT)

    case(
        f"{_prefix(protocol)}accepted/connect-{row.name}",
        statements or (PINGRESP_SENT,),
        f"A CONNECT with {row.title} is accepted (or refused with a return code)",
        stimulus=f"CONNECT with {row.title}, then PINGREQ",
        expected="CONNACK; when it is 0, PINGRESP: the connection works (a refusal with a return code is allowed)",
        family="v5/accepted-connect" if protocol is ProtocolVersion.V5 else "accepted/connect",
        protocol=protocol,
    )(script)


def _prefix(protocol: ProtocolVersion) -> str:
    return "v5/" if protocol is ProtocolVersion.V5 else ""


for _filter_row in FILTER_ROWS:
    register_filter(_filter_row)
for _connect_row in CONNECT_ROWS:
    register_connect(_connect_row)

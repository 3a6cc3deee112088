"""Malformed and forbidden packets: the broker must close the connection and act on none of them.

Each case sends one defective packet, either as the first packet of a connection (CONNECT defects) or after a
CONNECT the broker accepted. The statements a case targets are the ones the judge finds broken when a broker accepts
the stimulus: the rules the packet breaks and the duty to close on it [MQTT-4.8.0-1] (or the more specific
statement, such as [MQTT-3.8.1-1]; for CONNECT, without a CONNACK [MQTT-3.1.4-1]). The stimulus bytes and the
judge are the single source of both.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...codec import (
    Connack,
    Connect,
    Direction,
    Frame,
    Packet,
    Pingreq,
    Publish,
    StreamDecoder,
    Subscribe,
    Subscription,
    Unsubscribe,
    Will,
    encode,
)
from ...judge import Event, Quiet, Sent, judge
from ..case import CaseContext, case


@dataclass(frozen=True)
class Stimulus:
    case_id: str
    title: str
    data: bytes
    #: True: sent instead of CONNECT on a fresh connection; False: sent after an accepted CONNECT.
    as_connect: bool = False


def _raw(packet: Packet) -> bytes:
    return encode(packet, validate=False)


def _hex(text: str) -> bytes:
    return bytes.fromhex(text)


def _connect(protocol_name: str = "MQTT", will: Will | None = None) -> bytes:
    return _raw(Connect(client_id="mqa0malformed0connect00", protocol_name=protocol_name, will=will))


def _with_connect_flags(flags: int, payload_tail: bytes = b"") -> bytes:
    """A CONNECT with client id 'mqa' and the given Connect Flags byte, then ``payload_tail``."""
    body = b"\x00\x04MQTT\x04" + bytes((flags,)) + b"\x00\x00" + b"\x00\x03mqa" + payload_tail
    return bytes((0x10, len(body))) + body


STIMULI: tuple[Stimulus, ...] = (
    # --- framing and fixed header ---------------------------------------------------------------------------
    Stimulus("remaining-length-fifth-byte", "Remaining Length with a fifth byte", _hex("30 ff ff ff ff 01")),
    Stimulus("reserved-packet-type-0", "Reserved packet type 0", _hex("00 00")),
    Stimulus("reserved-packet-type-15", "Reserved packet type 15", _hex("f0 00")),
    Stimulus("client-sends-connack", "A client sends CONNACK", _hex("20 02 00 00")),
    Stimulus("client-sends-suback", "A client sends SUBACK", _hex("90 03 00 01 00")),
    Stimulus("pingreq-reserved-flags", "PINGREQ with a reserved flag bit set", _hex("c1 00")),
    Stimulus("pingreq-with-body", "PINGREQ with a Remaining Length of 1", _hex("c0 01 00")),
    Stimulus("puback-reserved-flags", "PUBACK with a reserved flag bit set", _hex("42 02 00 01")),
    Stimulus("puback-long", "PUBACK with a Remaining Length of 3", _hex("40 03 00 01 00")),
    Stimulus("pubrel-flags-0000", "PUBREL with flags 0000 instead of 0010", _hex("60 02 00 01")),
    Stimulus("disconnect-reserved-flags", "DISCONNECT with a reserved flag bit set", _hex("e1 00")),
    Stimulus("disconnect-with-body", "DISCONNECT with a Remaining Length of 1", _hex("e0 01 00")),
    # --- PUBLISH --------------------------------------------------------------------------------------------
    Stimulus("publish-qos-3", "PUBLISH with QoS 3", _hex("36 07 00 03 61 2f 62 00 01")),
    Stimulus("publish-dup-on-qos-0", "PUBLISH with QoS 0 and DUP set", _raw(Publish(topic="a/b", dup=True))),
    Stimulus(
        "publish-packet-id-0", "QoS 1 PUBLISH with Packet Identifier 0", _raw(Publish(topic="a", qos=1, packet_id=0))
    ),
    Stimulus("publish-topic-empty", "PUBLISH with an empty Topic Name", _raw(Publish(topic="", payload=b"x"))),
    Stimulus("publish-topic-hash", "PUBLISH to a Topic Name with '#'", _raw(Publish(topic="sensor/#", payload=b"x"))),
    Stimulus("publish-topic-plus", "PUBLISH to a Topic Name with '+'", _raw(Publish(topic="sensor/+/t", payload=b"x"))),
    Stimulus("publish-topic-null", "PUBLISH to a Topic Name holding U+0000", _raw(Publish(topic="a\x00b"))),
    Stimulus("publish-topic-ill-formed-utf8", "PUBLISH Topic Name with ill-formed UTF-8", _hex("30 05 00 03 61 2f ff")),
    Stimulus(
        "publish-topic-surrogate", "PUBLISH Topic Name encoding a UTF-16 surrogate", _hex("30 06 00 04 61 ed a0 80")
    ),
    Stimulus(
        "publish-topic-overrun", "PUBLISH whose Topic Name length runs past the packet", _hex("30 04 00 09 61 62")
    ),
    # --- SUBSCRIBE / UNSUBSCRIBE ----------------------------------------------------------------------------
    Stimulus("subscribe-empty-filter", "SUBSCRIBE with an empty Topic Filter", _hex("82 05 00 01 00 00 00")),
    Stimulus("subscribe-no-payload", "SUBSCRIBE without a Topic Filter", _hex("82 02 00 01")),
    Stimulus(
        "subscribe-flags-0000", "SUBSCRIBE with flags 0000 instead of 0010", _hex("80 08 00 01 00 03 61 2f 62 00")
    ),
    Stimulus("subscribe-packet-id-0", "SUBSCRIBE with Packet Identifier 0", _hex("82 08 00 00 00 03 61 2f 62 00")),
    Stimulus("subscribe-qos-3", "SUBSCRIBE requesting QoS 3", _hex("82 08 00 01 00 03 61 2f 62 03")),
    Stimulus(
        "subscribe-reserved-option-bits", "SUBSCRIBE with reserved option bits", _hex("82 08 00 01 00 03 61 2f 62 04")
    ),
    Stimulus(
        "subscribe-hash-not-last",
        "SUBSCRIBE to 'a/#/b'",
        _raw(Subscribe(packet_id=1, subscriptions=[Subscription(topic_filter="a/#/b")])),
    ),
    Stimulus(
        "subscribe-hash-not-alone",
        "SUBSCRIBE to 'a/b#'",
        _raw(Subscribe(packet_id=1, subscriptions=[Subscription(topic_filter="a/b#")])),
    ),
    Stimulus(
        "subscribe-plus-not-alone",
        "SUBSCRIBE to 'a/b+'",
        _raw(Subscribe(packet_id=1, subscriptions=[Subscription(topic_filter="a/b+")])),
    ),
    Stimulus(
        "subscribe-filter-null",
        "SUBSCRIBE to a Topic Filter holding U+0000",
        _raw(Subscribe(packet_id=1, subscriptions=[Subscription(topic_filter="a\x00")])),
    ),
    Stimulus(
        "subscribe-filter-ill-formed-utf8",
        "SUBSCRIBE Topic Filter with ill-formed UTF-8",
        _hex("82 07 00 01 00 02 61 c3 00"),
    ),
    Stimulus("unsubscribe-empty-filter", "UNSUBSCRIBE with an empty Topic Filter", _hex("a2 04 00 02 00 00")),
    Stimulus("unsubscribe-no-payload", "UNSUBSCRIBE without a Topic Filter", _hex("a2 02 00 02")),
    Stimulus(
        "unsubscribe-flags-0000", "UNSUBSCRIBE with flags 0000 instead of 0010", _hex("a0 07 00 02 00 03 61 2f 62")
    ),
    Stimulus(
        "unsubscribe-packet-id-0",
        "UNSUBSCRIBE with Packet Identifier 0",
        _raw(Unsubscribe(packet_id=0, topic_filters=["a"])),
    ),
    Stimulus(
        "unsubscribe-filter-ill-formed-utf8",
        "UNSUBSCRIBE Topic Filter with ill-formed UTF-8",
        _hex("a2 05 00 02 00 01 80"),
    ),
    Stimulus(
        "unsubscribe-hash-not-last", "UNSUBSCRIBE 'a/#/b'", _raw(Unsubscribe(packet_id=2, topic_filters=["a/#/b"]))
    ),
    # --- CONNECT (sent as the first packet) -----------------------------------------------------------------
    Stimulus("connect-reserved-flag", "CONNECT with the reserved flag bit set", _with_connect_flags(0x03), True),
    Stimulus(
        "connect-will-qos-without-will", "CONNECT with Will QoS 1 but Will Flag 0", _with_connect_flags(0x0A), True
    ),
    Stimulus(
        "connect-will-retain-without-will", "CONNECT with Will Retain but Will Flag 0", _with_connect_flags(0x22), True
    ),
    Stimulus("connect-will-qos-3", "CONNECT with Will QoS 3", _with_connect_flags(0x1E, b"\x00\x01w\x00\x00"), True),
    Stimulus(
        "connect-will-flag-without-will", "CONNECT with Will Flag 1 but no Will fields", _with_connect_flags(0x06), True
    ),
    Stimulus(
        "connect-password-without-username",
        "CONNECT with a password but no user name",
        _with_connect_flags(0x42, b"\x00\x01p"),
        True,
    ),
    Stimulus(
        "connect-username-flag-without-username",
        "CONNECT with User Name Flag 1 but no user name",
        _with_connect_flags(0x82),
        True,
    ),
    Stimulus(
        "connect-password-flag-without-password",
        "CONNECT with Password Flag 1 but no password",
        _with_connect_flags(0xC2, b"\x00\x01u"),
        True,
    ),
    Stimulus(
        "connect-no-client-id", "CONNECT without a Client Identifier", _hex("10 0a 00 04 4d 51 54 54 04 02 00 00"), True
    ),
    Stimulus(
        "connect-client-id-ill-formed-utf8",
        "CONNECT Client Identifier with ill-formed UTF-8",
        _hex("10 0e 00 04 4d 51 54 54 04 02 00 00 00 02 61 ff"),
        True,
    ),
    Stimulus(
        "connect-will-topic-ill-formed-utf8",
        "CONNECT Will Topic with ill-formed UTF-8",
        _with_connect_flags(0x06, b"\x00\x01\xfe\x00\x00"),
        True,
    ),
    Stimulus(
        "connect-will-topic-wildcard",
        "CONNECT Will Topic with '#'",
        _connect(will=Will(topic="w/#", message=b"x")),
        True,
    ),
    Stimulus(
        "connect-username-ill-formed-utf8",
        "CONNECT User Name with ill-formed UTF-8",
        _with_connect_flags(0x82, b"\x00\x01\xc0"),
        True,
    ),
    Stimulus(
        "first-packet-not-connect",
        "PINGREQ as the first packet of a connection",
        _raw(Pingreq()),
        True,
    ),
)


#: A broker that accepts the defect: it answers CONNECT (when the defect is not the CONNECT itself) and then
#: stays silent and open far past any grace.
_ACCEPTED_CONNECT = (Connect(client_id="mqa0malformed0connect00"), Connack())
_LONG_AFTER = 3600.0


def targeted(stimulus: Stimulus) -> tuple[str, ...]:
    """The statements a broker that accepts the stimulus breaks, as the judge itself decides them: the rules the
    packet breaks (which the receiver upholds by rejecting it) and the duty to close on it."""
    events: list[Event] = []
    if not stimulus.as_connect:
        connect, connack = _ACCEPTED_CONNECT
        events.append(Sent(0.0, Direction.FROM_CLIENT, Frame(0, 0, encode(connect), connect)))
        events.append(Sent(0.0, Direction.FROM_SERVER, Frame(0, 0, encode(connack), connack)))
    events += [
        Sent(0.0, Direction.FROM_CLIENT, frame) for frame in StreamDecoder(Direction.FROM_CLIENT).feed(stimulus.data)
    ]
    events.append(Quiet(_LONG_AFTER))
    findings = judge(events).findings
    return tuple(dict.fromkeys(f.rule for f in findings if f.side is Direction.FROM_SERVER))


def _register(stimulus: Stimulus) -> None:
    async def script(context: CaseContext) -> None:
        if stimulus.as_connect:
            connection = await context.open()
        else:
            connection = await context.connect()
        await connection.send(stimulus.data)
        await connection.wait_close()

    where = "as the first packet of a connection" if stimulus.as_connect else "after an accepted CONNECT"
    expected = "close the connection without a CONNACK" if stimulus.as_connect else "close the connection"
    case(
        f"malformed/{stimulus.case_id}",
        targeted(stimulus),
        stimulus.title,
        stimulus=f"{stimulus.title}, {where}: {stimulus.data.hex(' ')}",
        expected=f"{expected}; act on nothing in it",
    )(script)


for _stimulus in STIMULI:
    _register(_stimulus)

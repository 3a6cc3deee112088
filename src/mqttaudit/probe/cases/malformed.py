"""Malformed and forbidden packets: the broker must close the connection and act on none of them.

Each case sends one defective packet, either as the first packet of a connection (CONNECT defects) or after a
CONNECT the broker accepted. The statements a case targets are the ones the judge finds broken when a broker accepts
the stimulus: the rules the packet breaks and the duty to close on it [MQTT-4.8.0-1] (or the more specific
statement, such as [MQTT-3.8.1-1]; for CONNECT, without a CONNACK [MQTT-3.1.4-1]). The stimulus bytes and the
judge are the single source of both.
"""

from __future__ import annotations

from collections.abc import Callable
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
    Will,
    encode,
)
from ...codec.remaining_length import encode_remaining_length
from ...judge import Event, Quiet, Sent, judge
from ..case import CaseContext, case
from ..connection import client_frames

#: What a stimulus's bytes are made of at run time: the case's own Client Identifier and topic prefix
#: (``CaseContext.client_id()`` and ``CaseContext.topic()``), so that no two cases or runs share a session or a
#: topic, whatever the broker makes of the defect.
Shape = Callable[[str, str], bytes]

#: The identifier and prefix the case list and the tests show a stimulus with.
EXAMPLE_CLIENT_ID = "mqa" + "0" * 20
EXAMPLE_PREFIX = "mqttaudit/<run>/<case>"


@dataclass(frozen=True)
class Stimulus:
    case_id: str
    title: str
    #: Fixed bytes, or the bytes for a Client Identifier and a topic prefix (see :data:`Shape`).
    shape: bytes | Shape
    #: True: sent instead of CONNECT on a fresh connection; False: sent after an accepted CONNECT.
    as_connect: bool = False

    def build(self, client_id: str, prefix: str) -> bytes:
        return self.shape if isinstance(self.shape, bytes) else self.shape(client_id, prefix)

    @property
    def data(self) -> bytes:
        """The bytes with the example identifier and prefix."""
        return self.build(EXAMPLE_CLIENT_ID, EXAMPLE_PREFIX)

    @property
    def personal(self) -> bool:
        """The bytes carry the case's own Client Identifier or topic."""
        return not isinstance(self.shape, bytes)


def _raw(packet: Packet) -> bytes:
    return encode(packet, validate=False)


def _hex(text: str) -> bytes:
    return bytes.fromhex(text)


def _frame(first_byte: int, body: bytes) -> bytes:
    return bytes((first_byte,)) + encode_remaining_length(len(body)) + body


def _string(data: bytes) -> bytes:
    """A length-prefixed field holding ``data`` as it is (ill-formed UTF-8 included)."""
    return len(data).to_bytes(2, "big") + data


def _connect_bytes(flags: int, client_id: bytes, payload_tail: bytes = b"") -> bytes:
    """A CONNECT (MQTT 3.1.1, Keep Alive 0) with the Connect Flags byte ``flags``, then ``payload_tail``."""
    return _frame(0x10, b"\x00\x04MQTT\x04" + bytes((flags,)) + b"\x00\x00" + _string(client_id) + payload_tail)


def _with_connect_flags(flags: int, payload_tail: bytes = b"") -> Shape:
    """A CONNECT with the case's Client Identifier and the given Connect Flags byte, then ``payload_tail``."""
    return lambda client_id, _prefix: _connect_bytes(flags, client_id.encode(), payload_tail)


def _with_will_topic(flags: int, level: bytes) -> Shape:
    """A CONNECT with the given flags whose Will Topic is ``<prefix>/`` then ``level`` (raw bytes), an empty
    Will Message: a broker that takes it publishes the Will only where this case alone listens."""
    return lambda client_id, prefix: _connect_bytes(
        flags, client_id.encode(), _string(prefix.encode() + b"/" + level) + _string(b"")
    )


def _ill_formed_client_id(client_id: str, _prefix: str) -> bytes:
    """The case's Client Identifier with its last character replaced by 0xFF, a byte UTF-8 never has: still 23
    bytes, so the encoding is the only defect."""
    return _connect_bytes(0x02, client_id[:-1].encode() + b"\xff")


def _publish(first_byte: int, level: bytes, after_topic: bytes = b"") -> Shape:
    """A PUBLISH with fixed header byte ``first_byte`` to ``<prefix>/`` then ``level`` (raw bytes)."""
    return lambda _client_id, prefix: _frame(first_byte, _string(prefix.encode() + b"/" + level) + after_topic)


def _filters(first_byte: int, packet_id: int, *levels: bytes, options: bytes | None = None) -> Shape:
    """A SUBSCRIBE (``options``: the byte after each filter) or an UNSUBSCRIBE (None) with fixed header byte
    ``first_byte`` and a Topic Filter ``<prefix>/<level>`` for each of ``levels`` (raw bytes)."""

    def shape(_client_id: str, prefix: str) -> bytes:
        filters = b"".join(_string(prefix.encode() + b"/" + level) + (options or b"") for level in levels)
        return _frame(first_byte, packet_id.to_bytes(2, "big") + filters)

    return shape


def _packet(make: Callable[[str], Packet]) -> Shape:
    """The codec's encoding, unvalidated, of the packet ``make`` builds from the case's topic prefix."""
    return lambda _client_id, prefix: _raw(make(prefix))


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
    # --- PUBLISH (to the case's own topics, so that a broker that routes it reaches no other case) -----------
    Stimulus("publish-qos-3", "PUBLISH with QoS 3", _publish(0x36, b"a/b", b"\x00\x01")),
    Stimulus(
        "publish-dup-on-qos-0",
        "PUBLISH with QoS 0 and DUP set",
        _packet(lambda prefix: Publish(topic=f"{prefix}/a/b", dup=True)),
    ),
    Stimulus(
        "publish-packet-id-0",
        "QoS 1 PUBLISH with Packet Identifier 0",
        _packet(lambda prefix: Publish(topic=f"{prefix}/a", qos=1, packet_id=0)),
    ),
    Stimulus("publish-topic-empty", "PUBLISH with an empty Topic Name", _raw(Publish(topic="", payload=b"x"))),
    Stimulus(
        "publish-topic-hash",
        "PUBLISH to a Topic Name with '#'",
        _packet(lambda prefix: Publish(topic=f"{prefix}/sensor/#", payload=b"x")),
    ),
    Stimulus(
        "publish-topic-plus",
        "PUBLISH to a Topic Name with '+'",
        _packet(lambda prefix: Publish(topic=f"{prefix}/sensor/+/t", payload=b"x")),
    ),
    Stimulus(
        "publish-topic-null",
        "PUBLISH to a Topic Name holding U+0000",
        _packet(lambda prefix: Publish(topic=f"{prefix}/a\x00b")),
    ),
    Stimulus("publish-topic-ill-formed-utf8", "PUBLISH Topic Name with ill-formed UTF-8", _publish(0x30, b"\xff")),
    Stimulus(
        "publish-topic-surrogate", "PUBLISH Topic Name encoding a UTF-16 surrogate", _publish(0x30, b"a\xed\xa0\x80")
    ),
    Stimulus(
        "publish-topic-overrun", "PUBLISH whose Topic Name length runs past the packet", _hex("30 04 00 09 61 62")
    ),
    # --- SUBSCRIBE / UNSUBSCRIBE (the case's own filters: nothing another case publishes matches them) --------
    Stimulus("subscribe-empty-filter", "SUBSCRIBE with an empty Topic Filter", _hex("82 05 00 01 00 00 00")),
    Stimulus("subscribe-no-payload", "SUBSCRIBE without a Topic Filter", _hex("82 02 00 01")),
    Stimulus(
        "subscribe-flags-0000", "SUBSCRIBE with flags 0000 instead of 0010", _filters(0x80, 1, b"a/b", options=b"\0")
    ),
    Stimulus("subscribe-packet-id-0", "SUBSCRIBE with Packet Identifier 0", _filters(0x82, 0, b"a/b", options=b"\0")),
    Stimulus("subscribe-qos-3", "SUBSCRIBE requesting QoS 3", _filters(0x82, 1, b"a/b", options=b"\x03")),
    Stimulus(
        "subscribe-reserved-option-bits",
        "SUBSCRIBE with reserved option bits",
        _filters(0x82, 1, b"a/b", options=b"\x04"),
    ),
    Stimulus("subscribe-hash-not-last", "SUBSCRIBE to '<p>/a/#/b'", _filters(0x82, 1, b"a/#/b", options=b"\0")),
    Stimulus("subscribe-hash-not-alone", "SUBSCRIBE to '<p>/a/b#'", _filters(0x82, 1, b"a/b#", options=b"\0")),
    Stimulus("subscribe-plus-not-alone", "SUBSCRIBE to '<p>/a/b+'", _filters(0x82, 1, b"a/b+", options=b"\0")),
    Stimulus(
        "subscribe-filter-null",
        "SUBSCRIBE to a Topic Filter holding U+0000",
        _filters(0x82, 1, b"a\x00", options=b"\0"),
    ),
    Stimulus(
        "subscribe-filter-ill-formed-utf8",
        "SUBSCRIBE Topic Filter with ill-formed UTF-8",
        _filters(0x82, 1, b"a\xc3", options=b"\0"),
    ),
    Stimulus("unsubscribe-empty-filter", "UNSUBSCRIBE with an empty Topic Filter", _hex("a2 04 00 02 00 00")),
    Stimulus("unsubscribe-no-payload", "UNSUBSCRIBE without a Topic Filter", _hex("a2 02 00 02")),
    Stimulus("unsubscribe-flags-0000", "UNSUBSCRIBE with flags 0000 instead of 0010", _filters(0xA0, 2, b"a/b")),
    Stimulus("unsubscribe-packet-id-0", "UNSUBSCRIBE with Packet Identifier 0", _filters(0xA2, 0, b"a")),
    Stimulus(
        "unsubscribe-filter-ill-formed-utf8",
        "UNSUBSCRIBE Topic Filter with ill-formed UTF-8",
        _filters(0xA2, 2, b"\x80"),
    ),
    Stimulus("unsubscribe-hash-not-last", "UNSUBSCRIBE '<p>/a/#/b'", _filters(0xA2, 2, b"a/#/b")),
    # --- CONNECT (sent as the first packet, with the case's own Client Identifier) ---------------------------
    Stimulus("connect-reserved-flag", "CONNECT with the reserved flag bit set", _with_connect_flags(0x03), True),
    Stimulus(
        "connect-will-qos-without-will", "CONNECT with Will QoS 1 but Will Flag 0", _with_connect_flags(0x0A), True
    ),
    Stimulus(
        "connect-will-retain-without-will", "CONNECT with Will Retain but Will Flag 0", _with_connect_flags(0x22), True
    ),
    Stimulus("connect-will-qos-3", "CONNECT with Will QoS 3", _with_will_topic(0x1E, b"w"), True),
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
    # The one stimulus without an identifier of its own: the zero-length Client Identifier is its defect.
    Stimulus(
        "connect-no-client-id", "CONNECT without a Client Identifier", _hex("10 0a 00 04 4d 51 54 54 04 02 00 00"), True
    ),
    Stimulus(
        "connect-client-id-ill-formed-utf8",
        "CONNECT Client Identifier with ill-formed UTF-8",
        _ill_formed_client_id,
        True,
    ),
    Stimulus(
        "connect-will-topic-ill-formed-utf8",
        "CONNECT Will Topic with ill-formed UTF-8",
        _with_will_topic(0x06, b"\xfe"),
        True,
    ),
    Stimulus(
        "connect-will-topic-wildcard",
        "CONNECT Will Topic with '#'",
        lambda client_id, prefix: _raw(Connect(client_id=client_id, will=Will(topic=f"{prefix}/w/#", message=b"x"))),
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
_ACCEPTED_CONNECT = (Connect(client_id=EXAMPLE_CLIENT_ID), Connack())
_LONG_AFTER = 3600.0


def targeted(stimulus: Stimulus) -> tuple[str, ...]:
    """The statements a broker that accepts the stimulus breaks, as the judge itself decides them: the rules the
    packet breaks (which the receiver upholds by rejecting it) and the duty to close on it."""
    events: list[Event] = []
    if not stimulus.as_connect:
        connect, connack = _ACCEPTED_CONNECT
        events.append(Sent(0.0, Direction.FROM_CLIENT, Frame(0, 0, encode(connect), connect)))
        events.append(Sent(0.0, Direction.FROM_SERVER, Frame(0, 0, encode(connack), connack)))
    frames, _begun = client_frames(StreamDecoder(Direction.FROM_CLIENT), stimulus.data)
    events += [Sent(0.0, Direction.FROM_CLIENT, frame) for frame in frames]
    events.append(Quiet(_LONG_AFTER))
    findings = judge(events).findings
    return tuple(dict.fromkeys(f.rule for f in findings if f.side is Direction.FROM_SERVER))


_SHOWN_WITH = (
    f" (shown with Client Identifier {EXAMPLE_CLIENT_ID} and topic prefix <p> = {EXAMPLE_PREFIX}: each run and"
    " case has its own)"
)


def _register(stimulus: Stimulus) -> None:
    async def script(context: CaseContext) -> None:
        if stimulus.as_connect:
            connection = await context.open()
            connection.client_id = context.client_id()
        else:
            connection = await context.connect()
        # built now: the case's own identifier and topics, never another case's or another run's
        await connection.send(stimulus.build(connection.client_id, context.topic()))
        await connection.wait_close()

    where = "as the first packet of a connection" if stimulus.as_connect else "after an accepted CONNECT"
    expected = "close the connection without a CONNACK" if stimulus.as_connect else "close the connection"
    case(
        f"malformed/{stimulus.case_id}",
        targeted(stimulus),
        stimulus.title,
        stimulus=f"{stimulus.title}, {where}: {stimulus.data.hex(' ')}{_SHOWN_WITH if stimulus.personal else ''}",
        expected=f"{expected}; act on nothing in it",
    )(script)


for _stimulus in STIMULI:
    _register(_stimulus)

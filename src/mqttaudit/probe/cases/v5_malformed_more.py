"""More MQTT 5.0 Malformed Packets a client can send: the broker must close the connection and act on none of them.

Beside the property defects of :mod:`.v5_malformed`, five families of byte-level defects 5.0 adds, each rule sent
in several shapes (other packets, places and values), since an implementation that checks one place often misses
the next:

- ``vbi-shortest``: a Variable Byte Integer in more bytes than its value needs [MQTT-1.5.5-1]: a Remaining Length
  (PINGREQ, PUBLISH, SUBSCRIBE), a Property Length (PUBLISH, SUBSCRIBE, CONNECT), a Subscription Identifier.
- ``string-pair``: a User Property whose name or value is ill-formed UTF-8 or holds U+0000 [MQTT-1.5.7-1], in
  PUBLISH, SUBSCRIBE, UNSUBSCRIBE, CONNECT and the Will Properties.
- ``property-length-absent``: a PUBLISH that ends where its Property Length belongs [MQTT-2.2.2-1]. Only a packet
  that ends there breaks this rule alone: in any other the next bytes read as the Property Length (another defect),
  and a SUBSCRIBE, UNSUBSCRIBE or CONNECT cut there lacks its payload too.
- ``response-topic`` and ``content-type``: a Response Topic that is ill-formed UTF-8 [MQTT-3.3.2-13] or holds a
  wildcard [MQTT-3.3.2-14], a Content Type that is ill-formed UTF-8 [MQTT-3.3.2-19], in PUBLISH and in the Will
  Properties.
- ``shared-filter``: a Shared Subscription's Topic Filter without a ShareName [MQTT-4.8.2-1], or with a ShareName
  that holds a wildcard or is not followed by '/' and a Topic Filter [MQTT-4.8.2-2], in SUBSCRIBE and UNSUBSCRIBE.
  Such a filter is a Protocol Error the server must close on [MQTT-4.13.1-1]: no SUBACK or UNSUBACK code fits it
  (0x8F Topic Filter invalid is for a filter "correctly formed but not allowed for this Client", Table 3.8 and
  3.11). Both statements bind every filter that starts ``$share/`` (were ``$share/a`` an ordinary filter, no filter
  could ever break them), so none of these may be taken as an ordinary subscription either. A broker that declares
  Shared Subscription Available 0 never reads a ShareName (it may refuse every ``$share/`` filter with SUBACK 0x9E,
  Shared Subscriptions not supported): these cases do not apply to it.

Each shape is its own case, built like :mod:`.v5_malformed`: one defective packet, sent as the first packet of a
connection (a CONNECT) or after a CONNECT the broker accepted, on a connection of its own, with the case's own Client
Identifier and topics. The statements a case targets are those the judge decides on it (:func:`.v5_malformed.targeted`):
the duty to close ([MQTT-4.13.1-1], for UTF-8 [MQTT-1.5.4-1] or [MQTT-1.5.4-2], for a CONNECT [MQTT-3.1.4-1]) and
the rules the packet breaks. A DISCONNECT (or a CONNACK) with Reason Code 0x81 or 0x82 before the close is allowed
(section 4.13).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from mqttaudit.spec.ids import R5

from ...codec import ProtocolVersion
from ...codec import properties as props
from ...codec.remaining_length import encode_remaining_length
from ..case import CaseContext, Script, case
from .malformed import EXAMPLE_CLIENT_ID, EXAMPLE_PREFIX, Shape, Stimulus, field, provoked
from .v5_malformed import decoded_rules, targeted

V5: Final = ProtocolVersion.V5

#: [MQTT-1.5.5-1] A Variable Byte Integer uses the fewest bytes that hold its value.
VBI_SHORTEST: Final[str] = R5.MQTT_1_5_5_1
#: [MQTT-1.5.7-1] Both strings of a UTF-8 String Pair are UTF-8 Encoded Strings.
STRING_PAIR: Final[str] = R5.MQTT_1_5_7_1
#: [MQTT-2.2.2-1] A packet with properties carries a Property Length, 0 when there are none.
PROPERTY_LENGTH_ABSENT: Final[str] = R5.MQTT_2_2_2_1
#: [MQTT-3.3.2-13] The Response Topic is a UTF-8 Encoded String; [MQTT-3.3.2-14] it holds no wildcard.
RESPONSE_TOPIC_UTF8: Final[str] = R5.MQTT_3_3_2_13
RESPONSE_TOPIC_WILDCARD: Final[str] = R5.MQTT_3_3_2_14
#: [MQTT-3.3.2-19] The Content Type is a UTF-8 Encoded String.
CONTENT_TYPE_UTF8: Final[str] = R5.MQTT_3_3_2_19
#: [MQTT-4.8.2-1] A ShareName of one character or more; [MQTT-4.8.2-2] without '/', '+' or '#', followed by '/'
#: and a Topic Filter.
SHARE_NAME_PRESENT: Final[str] = R5.MQTT_4_8_2_1
SHARE_NAME_FORM: Final[str] = R5.MQTT_4_8_2_2
#: What else the same bytes break: ill-formed UTF-8 [MQTT-1.5.4-1], U+0000 [MQTT-1.5.4-2], a wildcard in a Topic
#: Name (the Response Topic is one) [MQTT-4.7.0-1].
ILL_FORMED: Final[str] = R5.MQTT_1_5_4_1
NUL: Final[str] = R5.MQTT_1_5_4_2
WILDCARD_IN_TOPIC_NAME: Final[str] = R5.MQTT_4_7_0_1

#: The feature a shared-filter case needs the broker to support.
SHARED: Final = "shared-subscriptions"


@dataclass(frozen=True)
class MoreStimulus(Stimulus):
    #: The 5.0 statements the 5.0 decoder reads in the packet, in its order: exactly these (a test holds that).
    breaks: tuple[str, ...] = ()
    #: A feature of :data:`mqttaudit.probe.capabilities.FEATURES` the broker must support for the shape to apply.
    needs: str = ""


# Building blocks: raw bytes, so that ill-formed UTF-8 and padded integers go out exactly as written.


def _frame(first_byte: int, body: bytes, *, padding: int = 0) -> bytes:
    """A packet of ``body``; ``padding`` writes its Remaining Length in that many bytes more than it needs."""
    length = encode_remaining_length(len(body))
    if padding:
        length = _padded(len(body), len(length) + padding)
    return bytes((first_byte,)) + length + body


def _padded(value: int, size: int) -> bytes:
    """``value`` as a Variable Byte Integer of ``size`` bytes: continuation bits on every byte but the last, which
    is 0 once the value has run out (the overlong form 1.5.5 forbids)."""
    out = bytearray()
    for index in range(size):
        digit = value & 0x7F
        value >>= 7
        out.append(digit | (0x80 if index < size - 1 else 0))
    return bytes(out)


def _properties(*encoded: bytes) -> bytes:
    """A Property Length and the properties after it."""
    body = b"".join(encoded)
    return encode_remaining_length(len(body)) + body


def _string_property(identifier: int, raw: bytes) -> bytes:
    return bytes((identifier,)) + field(raw)


def _user_property(name: bytes, value: bytes) -> bytes:
    return bytes((props.USER_PROPERTY,)) + field(name) + field(value)


def _publish(properties: bytes, *, qos: int = 0, padding: int = 0) -> Shape:
    """A PUBLISH to ``<prefix>/v5`` (QoS 1 and 2: Packet Identifier 1) with ``properties`` as written, payload
    ``x``."""

    def shape(_client_id: str, prefix: str) -> bytes:
        packet_id = b"\x00\x01" if qos else b""
        return _frame(0x30 | qos << 1, field(f"{prefix}/v5".encode()) + packet_id + properties + b"x", padding=padding)

    return shape


def _cut_publish(qos: int) -> Shape:
    """A PUBLISH to ``<prefix>/v5`` that ends where its Property Length belongs: no Property Length, no payload."""

    def shape(_client_id: str, prefix: str) -> bytes:
        return _frame(0x30 | qos << 1, field(f"{prefix}/v5".encode()) + (b"\x00\x01" if qos else b""))

    return shape


def _subscribe(properties: bytes = b"\x00", *filters: str, padding: int = 0) -> Shape:
    """A SUBSCRIBE (Packet Identifier 1) of ``filters`` at QoS 0 (``{p}`` is the case's prefix; default
    ``<prefix>/v5``), with ``properties`` as written."""

    def shape(_client_id: str, prefix: str) -> bytes:
        payload = b"".join(field(f.format(p=prefix).encode()) + b"\x00" for f in filters or ("{p}/v5",))
        return _frame(0x82, b"\x00\x01" + properties + payload, padding=padding)

    return shape


def _unsubscribe(properties: bytes = b"\x00", *filters: str) -> Shape:
    """An UNSUBSCRIBE (Packet Identifier 1) of ``filters`` (``{p}`` is the case's prefix), ``properties`` as
    written."""

    def shape(_client_id: str, prefix: str) -> bytes:
        payload = b"".join(field(f.format(p=prefix).encode()) for f in filters or ("{p}/v5",))
        return _frame(0xA2, b"\x00\x01" + properties + payload)

    return shape


def _connect(properties: bytes = b"\x00", will_properties: bytes | None = None) -> Shape:
    """A 5.0 CONNECT (Clean Start, Keep Alive 0) with the case's Client Identifier and ``properties`` as written;
    with ``will_properties``, a Will (QoS 0) to ``<prefix>/will`` with those Will Properties and an empty message,
    so that a broker that takes it publishes the Will only where this case alone listens."""

    def shape(client_id: str, prefix: str) -> bytes:
        flags, will = 0x02, b""
        if will_properties is not None:
            flags |= 0x04
            will = will_properties + field(f"{prefix}/will".encode()) + field(b"")
        head = field(b"MQTT") + bytes((V5.level, flags)) + b"\x00\x00"
        return _frame(0x10, head + properties + field(client_id.encode()) + will)

    return shape


#: Ill-formed UTF-8 (section 1.5.4): a byte UTF-8 never has, an encoded surrogate (U+D800), an overlong U+0000
#: (C0 80), a sequence cut short.
FF: Final = b"\xff"
SURROGATE: Final = b"\xed\xa0\x80"
OVERLONG: Final = b"\xc0\x80"
CUT_SHORT: Final = b"a\xc3"


def _vbi_family() -> tuple[MoreStimulus, ...]:
    """[MQTT-1.5.5-1] Overlong Variable Byte Integers: the value needs one byte, the packet spends two or three."""
    sub_id = props.SUBSCRIPTION_IDENTIFIER
    rows = (
        (
            "pingreq-remaining-length-two-bytes",
            "PINGREQ with Remaining Length 0 in two bytes (80 00)",
            bytes.fromhex("c08000"),
        ),
        (
            "pingreq-remaining-length-three-bytes",
            "PINGREQ with Remaining Length 0 in three bytes (80 80 00)",
            bytes.fromhex("c0808000"),
        ),
        (
            "publish-qos1-remaining-length-padded",
            "QoS 1 PUBLISH with its Remaining Length one byte longer than it needs",
            _publish(b"\x00", qos=1, padding=1),
        ),
        (
            "subscribe-remaining-length-padded",
            "SUBSCRIBE with its Remaining Length one byte longer than it needs",
            _subscribe(padding=1),
        ),
        (
            "publish-qos1-property-length-padded",
            "QoS 1 PUBLISH with Property Length 0 in two bytes (80 00)",
            _publish(b"\x80\x00", qos=1),
        ),
        (
            "subscribe-property-length-padded",
            "SUBSCRIBE with Property Length 0 in three bytes (80 80 00)",
            _subscribe(b"\x80\x80\x00"),
        ),
        (
            "subscribe-subscription-identifier-padded",
            "SUBSCRIBE with Subscription Identifier 1 in two bytes (81 00)",
            _subscribe(_properties(bytes((sub_id, 0x81, 0x00)))),
        ),
        (
            "subscribe-subscription-identifier-padded-three-bytes",
            "SUBSCRIBE with Subscription Identifier 1 in three bytes (81 80 00)",
            _subscribe(_properties(bytes((sub_id, 0x81, 0x80, 0x00)))),
        ),
        (
            "connect-property-length-padded",
            "CONNECT with Property Length 0 in two bytes (80 00)",
            _connect(b"\x80\x00"),
        ),
    )
    return tuple(
        MoreStimulus(case_id, title, shape, as_connect=case_id.startswith("connect"), breaks=(VBI_SHORTEST,))
        for case_id, title, shape in rows
    )


def _pair_family() -> tuple[MoreStimulus, ...]:
    """[MQTT-1.5.7-1] A User Property whose name or value is not a UTF-8 Encoded String: ill-formed
    [MQTT-1.5.4-1] or holding U+0000 [MQTT-1.5.4-2]."""

    def pair(name: bytes, value: bytes) -> bytes:
        return _properties(_user_property(name, value))

    rows: tuple[tuple[str, str, bytes | Shape, str], ...] = (
        (
            "publish-user-property-name-ill-formed",
            "PUBLISH with a User Property name holding the byte FF",
            _publish(pair(FF, b"v")),
            ILL_FORMED,
        ),
        (
            "publish-qos1-user-property-value-surrogate",
            "QoS 1 PUBLISH with a User Property value holding an encoded surrogate (ED A0 80)",
            _publish(pair(b"k", SURROGATE), qos=1),
            ILL_FORMED,
        ),
        (
            "publish-qos1-user-property-value-nul",
            "QoS 1 PUBLISH with a User Property value holding U+0000",
            _publish(pair(b"k", b"a\x00b"), qos=1),
            NUL,
        ),
        (
            "subscribe-user-property-name-nul",
            "SUBSCRIBE with a User Property name that is U+0000",
            _subscribe(pair(b"\x00", b"v")),
            NUL,
        ),
        (
            "subscribe-user-property-value-overlong",
            "SUBSCRIBE with a User Property value holding an overlong U+0000 (C0 80)",
            _subscribe(pair(b"k", OVERLONG)),
            ILL_FORMED,
        ),
        (
            "unsubscribe-user-property-value-cut-short",
            "UNSUBSCRIBE with a User Property value whose last character is cut short (61 C3)",
            _unsubscribe(pair(b"k", CUT_SHORT)),
            ILL_FORMED,
        ),
        (
            "connect-user-property-name-ill-formed",
            "CONNECT with a User Property name holding the byte FF",
            _connect(pair(FF, b"v")),
            ILL_FORMED,
        ),
        (
            "connect-user-property-value-nul",
            "CONNECT with a User Property value holding U+0000",
            _connect(pair(b"k", b"\x00")),
            NUL,
        ),
        (
            "will-user-property-value-ill-formed",
            "CONNECT whose Will Properties hold a User Property value with the byte FF",
            _connect(will_properties=pair(b"k", FF)),
            ILL_FORMED,
        ),
        (
            "will-user-property-name-nul",
            "CONNECT whose Will Properties hold a User Property name with U+0000",
            _connect(will_properties=pair(b"k\x00", b"v")),
            NUL,
        ),
    )
    return tuple(
        MoreStimulus(
            case_id, title, shape, as_connect=case_id.startswith(("connect", "will")), breaks=(utf8, STRING_PAIR)
        )
        for case_id, title, shape, utf8 in rows
    )


def _absent_family() -> tuple[MoreStimulus, ...]:
    """[MQTT-2.2.2-1] A PUBLISH that ends where its Property Length belongs."""
    return tuple(
        MoreStimulus(
            f"publish-qos{qos}-without-property-length",
            f"QoS {qos} PUBLISH that ends after its {after} (no Property Length, no payload)",
            _cut_publish(qos),
            breaks=(PROPERTY_LENGTH_ABSENT,),
        )
        for qos, after in ((0, "Topic Name"), (1, "Packet Identifier"), (2, "Packet Identifier"))
    )


def _message_property_family(
    identifier: int, word: str, name: str, rows: tuple[tuple[str, bytes, int | None, tuple[str, ...]], ...]
) -> tuple[MoreStimulus, ...]:
    """A message property (``identifier``) holding ``raw``: per row (what it holds, the bytes, the PUBLISH QoS or
    None for the Will Properties of a CONNECT, the rules broken)."""
    out = []
    for holds, raw, qos, breaks in rows:
        encoded = _properties(_string_property(identifier, raw))
        slug = holds.split(" (")[0].replace(" ", "-").replace("'", "")
        if qos is None:
            out.append(
                MoreStimulus(
                    f"will-{word}-{slug}",
                    f"CONNECT whose Will Properties hold a {name} {holds}",
                    _connect(will_properties=encoded),
                    as_connect=True,
                    breaks=breaks,
                )
            )
        else:
            prefix = "publish" if not qos else f"publish-qos{qos}"
            packet = "PUBLISH" if not qos else f"QoS {qos} PUBLISH"
            out.append(
                MoreStimulus(
                    f"{prefix}-{word}-{slug}",
                    f"{packet} with a {name} {holds}",
                    _publish(encoded, qos=qos),
                    breaks=breaks,
                )
            )
    return tuple(out)


def _response_topic_family() -> tuple[MoreStimulus, ...]:
    """[MQTT-3.3.2-13] A Response Topic of ill-formed UTF-8; [MQTT-3.3.2-14] one holding a wildcard (it is a Topic
    Name, which holds none [MQTT-4.7.0-1])."""
    ill, wild = (ILL_FORMED, RESPONSE_TOPIC_UTF8), (RESPONSE_TOPIC_WILDCARD, WILDCARD_IN_TOPIC_NAME)
    return _message_property_family(
        props.RESPONSE_TOPIC,
        "response-topic",
        "Response Topic",
        (
            ("ill-formed (FF)", b"a/" + FF, 0, ill),
            ("surrogate (ED A0 80)", SURROGATE, 1, ill),
            ("plus (a/+)", b"a/+", 1, wild),
            ("hash (#)", b"#", 0, wild),
            ("ill-formed (FF)", FF, None, ill),
            ("hash (a/#)", b"a/#", None, wild),
            ("plus (+/b)", b"+/b", None, wild),
        ),
    )


def _content_type_family() -> tuple[MoreStimulus, ...]:
    """[MQTT-3.3.2-19] A Content Type of ill-formed UTF-8."""
    ill = (ILL_FORMED, CONTENT_TYPE_UTF8)
    return _message_property_family(
        props.CONTENT_TYPE,
        "content-type",
        "Content Type",
        (
            ("ill-formed (FF)", b"text/" + FF, 0, ill),
            ("cut short (61 C3)", CUT_SHORT, 1, ill),
            ("surrogate (ED A0 80)", SURROGATE, 0, ill),
            ("ill-formed (FF)", FF, None, ill),
            ("overlong (C0 80)", OVERLONG, None, ill),
        ),
    )


#: Shared Subscription Topic Filters that break 4.8.2: (id word, what is wrong, the filter, the rule). ``{p}`` is
#: the case's prefix; a form without a filter after the ShareName uses a ShareName of its own.
SHARE_FILTERS: Final = (
    ("share-name-empty", "no ShareName ($share//<p>)", "$share//{p}", SHARE_NAME_PRESENT),
    (
        "share-name-without-filter",
        "a ShareName and no '/' after it ($share/mqttaudit)",
        "$share/mqttaudit",
        SHARE_NAME_FORM,
    ),
    (
        "share-name-then-empty-filter",
        "a ShareName, '/' and no Topic Filter ($share/mqttaudit/)",
        "$share/mqttaudit/",
        SHARE_NAME_FORM,
    ),
    ("share-name-with-plus", "'+' inside the ShareName ($share/a+b/<p>)", "$share/a+b/{p}", SHARE_NAME_FORM),
    ("share-name-with-hash", "'#' inside the ShareName ($share/a#/<p>)", "$share/a#/{p}", SHARE_NAME_FORM),
    ("share-name-plus", "the ShareName '+' ($share/+/<p>)", "$share/+/{p}", SHARE_NAME_FORM),
)
#: The forms an UNSUBSCRIBE sends too: each rule, and a wildcard in the ShareName.
UNSUBSCRIBED_FORMS: Final = ("share-name-empty", "share-name-without-filter", "share-name-with-hash")


def _shared_filter_family() -> tuple[MoreStimulus, ...]:
    """[MQTT-4.8.2-1, -2] Shared Subscription filters of a broken form, in SUBSCRIBE (alone, and after a good
    filter) and UNSUBSCRIBE."""
    rows = [
        MoreStimulus(
            f"subscribe-{word}",
            f"SUBSCRIBE of a Shared Subscription with {what}",
            _subscribe(b"\x00", f),
            breaks=(rule,),
            needs=SHARED,
        )
        for word, what, f, rule in SHARE_FILTERS
    ]
    rows += [
        MoreStimulus(
            f"subscribe-{word}-after-a-good-filter",
            f"SUBSCRIBE of <p>/v5, then of a Shared Subscription with {what}",
            _subscribe(b"\x00", "{p}/v5", f),
            breaks=(rule,),
            needs=SHARED,
        )
        for word, what, f, rule in SHARE_FILTERS
        if word in ("share-name-empty", "share-name-with-plus")
    ]
    rows += [
        MoreStimulus(
            f"unsubscribe-{word}",
            f"UNSUBSCRIBE of a Shared Subscription with {what}",
            _unsubscribe(b"\x00", f),
            breaks=(rule,),
            needs=SHARED,
        )
        for word, what, f, rule in SHARE_FILTERS
        if word in UNSUBSCRIBED_FORMS
    ]
    return tuple(rows)


#: The families, in the order the library lists them: (name, what the family covers, its shapes).
FAMILIES: Final[tuple[tuple[str, str, tuple[MoreStimulus, ...]], ...]] = (
    ("vbi-shortest", "a Variable Byte Integer longer than its value needs", _vbi_family()),
    ("string-pair", "a User Property that is not a pair of UTF-8 Encoded Strings", _pair_family()),
    ("property-length-absent", "a PUBLISH without its Property Length", _absent_family()),
    ("response-topic", "a Response Topic of ill-formed UTF-8 or with a wildcard", _response_topic_family()),
    ("content-type", "a Content Type of ill-formed UTF-8", _content_type_family()),
    ("shared-filter", "a Shared Subscription filter of a broken form", _shared_filter_family()),
)

STIMULI: Final[tuple[MoreStimulus, ...]] = tuple(
    replace(stimulus, family=family) for family, _title, stimuli in FAMILIES for stimulus in stimuli
)

_SHOWN_WITH = (
    f" (shown with Client Identifier {EXAMPLE_CLIENT_ID} and topic prefix <p> = {EXAMPLE_PREFIX}: each run and"
    " case has its own)"
)


def _script(stimulus: MoreStimulus) -> Script:
    async def script(context: CaseContext) -> None:
        if stimulus.as_connect:
            connection = await context.open()
            connection.client_id = context.client_id()
        else:
            connection = await context.connect()
        if stimulus.needs:  # after the CONNACK, which declares what the broker supports
            context.require(stimulus.needs, stimulus.title)
        # built now: the case's own identifier and topics, never another case's or another run's
        await connection.send(stimulus.build(connection.client_id, context.topic()))
        await connection.wait_close()

    return script


def _register(stimulus: MoreStimulus) -> None:
    where = "as the first packet of a connection" if stimulus.as_connect else "after an accepted 5.0 CONNECT"
    if stimulus.needs:
        where += " whose CONNACK does not declare Shared Subscriptions unavailable"
    case(
        f"v5/malformed/{stimulus.case_id}",
        targeted(stimulus),
        stimulus.title,
        stimulus=f"{stimulus.title} (breaks {', '.join(stimulus.breaks)}), {where}: {stimulus.data.hex(' ')}"
        f"{_SHOWN_WITH}",
        expected="close the connection (a DISCONNECT or CONNACK with Reason Code 0x81 or 0x82 may come first); "
        "act on nothing in it",
        family=f"v5/malformed-{stimulus.family}",
        protocol=V5,
        provokes=provoked(stimulus, V5),
    )(_script(stimulus))


for _stimulus in STIMULI:
    _register(_stimulus)

__all__ = ["FAMILIES", "STIMULI", "MoreStimulus", "decoded_rules", "targeted"]

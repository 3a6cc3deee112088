"""MQTT 5.0 duplicate properties (section 2.2.2.2): every property that may appear once, twice, in every place a
client puts properties. The broker must close the connection and act on nothing in the packet.

Each property's definition in chapter 3 calls including it more than once a Protocol Error; only User Property may
repeat everywhere, and Subscription Identifier in a PUBLISH, which only a server sends with one
[MQTT-2.2.2-property-duplicate]. The shapes are generated from the property table
(:data:`mqttaudit.codec.properties.PROPERTIES`): for each place of :data:`PLACES` (CONNECT and its Will Properties,
PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP, SUBSCRIBE, UNSUBSCRIBE, DISCONNECT, AUTH), each property the place may hold
but not repeat, twice, with a value its definition allows (:data:`VALUES` where the smallest would change the
conversation). A new property or place is one row of a table and yields its shapes here; UNSUBSCRIBE holds nothing
but User Properties, so it yields none.

Each packet goes where a client may send it, so the repeat is its only defect: a CONNECT as the first packet of a
connection; a PUBLISH or SUBSCRIBE after an accepted CONNECT; an acknowledgement in answer to a real flow (as the
Reason-Code family of :mod:`.v5_forbidden`); a DISCONNECT on a connection whose Will another connection watches (a
broker that takes it for a normal DISCONNECT discards the Will, one that closes on it publishes it, as for every
malformed DISCONNECT of :mod:`.v5_ported`); an AUTH as the re-authentication of the profile's scripted exchange
(:mod:`.v5_auth`; not applicable without one). The statements a case targets are the ones the judge decides on a
broker that accepts the packet (:func:`.v5_malformed.targeted`): the duty to close [MQTT-4.13.1-1] (for CONNECT,
without accepting it [MQTT-3.1.4-1]) and the rule the packet breaks, which the receiver upholds by closing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from ...codec import (
    Auth,
    Connack,
    Connect,
    Direction,
    Disconnect,
    Frame,
    Packet,
    PacketType,
    Property,
    ProtocolVersion,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    StreamDecoder,
    Subscribe,
    Subscription,
    Unsubscribe,
    Will,
    encode,
)
from ...codec import properties as props
from ...codec import rules as codec_rules
from ...codec.packets import Properties, PropertyValue
from ...judge import Event, JudgeConfig, Quiet, Sent, judge
from ..case import CaseContext, Script, case
from ..connection import client_frames
from .malformed import EXAMPLE_CLIENT_ID, EXAMPLE_PREFIX, charged, stimulus_script
from .v5_auth import REAUTHENTICATE, authenticated, exchange_script
from .v5_forbidden import DELIVERY_PUBREL, DELIVERY_QOS1, DELIVERY_QOS2, FLOW_WORDS, OWN_QOS2, answered_flow
from .v5_malformed import SENDER_BOUND, PropertyStimulus, valid_value
from .v5_ported import targeted

V5: Final = ProtocolVersion.V5
#: The packets (and the Will Properties) a client puts properties in, each with the flow an acknowledgement answers
#: there ("" for the others): (id word, name, place).
PLACES: Final[tuple[tuple[str, str, int, str], ...]] = (
    ("connect", "CONNECT", PacketType.CONNECT, ""),
    ("will", "CONNECT Will Properties", props.WILL, ""),
    ("publish", "PUBLISH", PacketType.PUBLISH, ""),
    ("puback", "PUBACK", PacketType.PUBACK, DELIVERY_QOS1),
    ("pubrec", "PUBREC", PacketType.PUBREC, DELIVERY_QOS2),
    ("pubrel", "PUBREL", PacketType.PUBREL, OWN_QOS2),
    ("pubcomp", "PUBCOMP", PacketType.PUBCOMP, DELIVERY_PUBREL),
    ("subscribe", "SUBSCRIBE", PacketType.SUBSCRIBE, ""),
    ("unsubscribe", "UNSUBSCRIBE", PacketType.UNSUBSCRIBE, ""),
    ("disconnect", "DISCONNECT", PacketType.DISCONNECT, ""),
    ("auth", "AUTH", PacketType.AUTH, ""),
)
#: Values for the repeated property where the smallest allowed one would change the conversation besides the repeat:
#: a Maximum Packet Size of 1 would bar every packet of the server, and a non-zero Session Expiry Interval in a
#: DISCONNECT after a CONNECT without one is a Protocol Error of its own [MQTT-3.14.2-2].
VALUES: Final[dict[int, PropertyValue]] = {
    props.MAXIMUM_PACKET_SIZE: props.BY_ID[props.MAXIMUM_PACKET_SIZE].maximum or 268_435_455,
    props.SESSION_EXPIRY_INTERVAL: 0,
}
#: The Authentication Method and Data the case list shows an AUTH (and a CONNECT with Authentication Data) with;
#: an AUTH is sent with the profile's scripted method and first data.
EXAMPLE_METHOD: Final = "X-MQTTAUDIT-EXAMPLE"
EXAMPLE_DATA: Final = b"\x00\x01"


@dataclass(frozen=True)
class DuplicateStimulus(PropertyStimulus):
    #: Where the repeated property is (a packet type, or :data:`mqttaudit.codec.properties.WILL`).
    place: int = 0
    #: The repeated property's identifier.
    identifier: int = 0
    #: The flow an acknowledgement answers (:data:`.v5_forbidden.ANSWERED_FLOW`), "" for any other packet.
    answers: str = ""


def _repeated(identifier: int) -> Property:
    definition = props.BY_ID[identifier]
    return Property(identifier, VALUES.get(identifier, valid_value(definition)))


def _authentication(identifier: int, method: str, data: bytes) -> Properties:
    """An AUTH 0x19's properties with ``identifier`` twice: the method once (it is required, 3.15.2.2.2), the data
    once, and whichever of them or the Reason String is repeated, twice."""
    method_once, data_once = Property(props.AUTHENTICATION_METHOD, method), Property(props.AUTHENTICATION_DATA, data)
    if identifier == props.AUTHENTICATION_METHOD:
        return (method_once, method_once, data_once)
    if identifier == props.AUTHENTICATION_DATA:
        return (method_once, data_once, data_once)
    return (method_once, data_once, _repeated(identifier), _repeated(identifier))


def build(
    stimulus: DuplicateStimulus, client_id: str, prefix: str, packet_id: int = 1, *, method: str = EXAMPLE_METHOD
) -> Packet:
    """The packet of the stimulus with the case's Client Identifier and topic prefix, an acknowledgement with the
    flow's ``packet_id``, an AUTH under ``method`` (the profile's, at run time)."""
    twice = (_repeated(stimulus.identifier),) * 2
    place = stimulus.place
    if place == PacketType.CONNECT:
        # Authentication Data needs an Authentication Method beside it (3.1.2.11.10): the repeat stays the defect.
        beside = (
            (Property(props.AUTHENTICATION_METHOD, method),) if stimulus.identifier == props.AUTHENTICATION_DATA else ()
        )
        return Connect(protocol_level=V5.level, client_id=client_id, properties=(*beside, *twice))
    if place == props.WILL:
        will = Will(topic=f"{prefix}/will", message=b"will", properties=twice)
        return Connect(protocol_level=V5.level, client_id=client_id, will=will)
    if place == PacketType.PUBLISH:
        return Publish(topic=f"{prefix}/v5", payload=b"x", properties=twice)
    if place == PacketType.SUBSCRIBE:
        return Subscribe(packet_id=1, subscriptions=(Subscription(topic_filter=f"{prefix}/v5"),), properties=twice)
    if place == PacketType.UNSUBSCRIBE:
        return Unsubscribe(packet_id=1, topic_filters=(f"{prefix}/v5",), properties=twice)
    if place == PacketType.DISCONNECT:
        return Disconnect(reason_code=0x00, properties=twice)
    if place == PacketType.AUTH:
        return Auth(reason_code=REAUTHENTICATE, properties=_authentication(stimulus.identifier, method, EXAMPLE_DATA))
    acknowledgement: type[Puback | Pubrec | Pubrel | Pubcomp] = _ACKNOWLEDGEMENTS[PacketType(place)]
    return acknowledgement(packet_id=packet_id, reason_code=0x00, properties=twice)


_ACKNOWLEDGEMENTS: Final[dict[PacketType, type[Puback | Pubrec | Pubrel | Pubcomp]]] = {
    PacketType.PUBACK: Puback,
    PacketType.PUBREC: Pubrec,
    PacketType.PUBREL: Pubrel,
    PacketType.PUBCOMP: Pubcomp,
}


def _bytes(packet: Packet) -> bytes:
    return encode(packet, version="5", validate=False)


def _shape(row: DuplicateStimulus) -> Callable[[str, str], bytes]:
    return lambda client_id, prefix: _bytes(build(row, client_id, prefix))


def stimuli() -> tuple[DuplicateStimulus, ...]:
    """Every property each place may hold once, held twice, each as its own stimulus."""
    rows = []
    for word, name, place, answers in PLACES:
        for definition in props.PROPERTIES:
            if (
                place not in definition.packets
                or place in definition.repeatable
                or (definition.identifier, place) in SENDER_BOUND
            ):
                continue
            row = DuplicateStimulus(
                f"{word}-two-{definition.keyword.replace('_', '-')}",
                f"{name} carrying {definition.name} (0x{definition.identifier:02x}) twice",
                b"",
                as_connect=place in (PacketType.CONNECT, props.WILL),
                family="property-duplicate",
                breaks=codec_rules.PROPERTY_DUPLICATE,
                place=place,
                identifier=definition.identifier,
                answers=answers,
            )
            rows.append(DuplicateStimulus(**{**vars(row), "shape": _shape(row)}))
    return tuple(rows)


STIMULI: Final = stimuli()

#: How the judge takes a 5.0 case (as :func:`mqttaudit.probe.runner.judge_config` does): 5.0 CONNECTs accepted.
_JUDGE_CONFIG: Final = JudgeConfig(supported_protocol_levels=frozenset({4, 5}))
_LONG_AFTER = 3600.0


def _sent(sender: Direction, packet: Packet) -> Sent:
    return Sent(0.0, sender, Frame(0, 0, encode(packet, version=V5), packet))


def targeted_auth(stimulus: DuplicateStimulus) -> tuple[str, ...]:
    """The statements a broker that takes the re-authenticating AUTH breaks, as the judge decides them: a CONNECT
    and a CONNACK under the method, the AUTH, then silence far past any grace."""
    method = props.make(authentication_method=EXAMPLE_METHOD)
    events: list[Event] = [
        _sent(Direction.FROM_CLIENT, Connect(protocol_level=V5.level, client_id=EXAMPLE_CLIENT_ID, properties=method)),
        _sent(Direction.FROM_SERVER, Connack(properties=method)),
    ]
    frames, _begun = client_frames(StreamDecoder(Direction.FROM_CLIENT, version=V5), stimulus.data)
    events += [Sent(0.0, Direction.FROM_CLIENT, frame) for frame in frames]
    events.append(Quiet(_LONG_AFTER))
    return charged(judge(events, _JUDGE_CONFIG))


def _script(stimulus: DuplicateStimulus) -> Script:
    """An acknowledgement answers its flow and an AUTH re-authenticates (both built at run time); any other
    stimulus goes as a malformed shape of :mod:`.malformed` does (a DISCONNECT with a watched Will)."""
    if stimulus.answers:

        async def answer(context: CaseContext) -> None:
            context.require("qos1" if stimulus.answers == DELIVERY_QOS1 else "qos2", stimulus.title)
            connection, packet_id = await answered_flow(context, stimulus.answers)
            await connection.send(_bytes(build(stimulus, connection.client_id, context.topic(), packet_id)))
            await connection.wait_close()

        return answer
    if stimulus.place == PacketType.AUTH:

        async def reauthenticate(context: CaseContext) -> None:
            script = exchange_script(context)
            connection = await authenticated(context, script)
            properties = _authentication(stimulus.identifier, script.method, script.first)
            await connection.send(_bytes(Auth(reason_code=REAUTHENTICATE, properties=properties)))
            await connection.wait_close()

        return reauthenticate
    return stimulus_script(stimulus)


_SHOWN_WITH = (
    f" (shown with Client Identifier {EXAMPLE_CLIENT_ID}, topic prefix <p> = {EXAMPLE_PREFIX}, Packet Identifier 1"
    f" and Authentication Method {EXAMPLE_METHOD!r}: each run and case has its own)"
)


def _where(stimulus: DuplicateStimulus) -> str:
    if stimulus.as_connect:
        return "as the first packet of a connection"
    if stimulus.answers:
        return FLOW_WORDS[stimulus.answers]
    if stimulus.place == PacketType.AUTH:
        return (
            "as the AUTH 0x19 re-authentication after the profile's scripted authentication, with its method and "
            "first data"
        )
    if stimulus.with_will:
        return "after a 5.0 CONNECT with a Will (QoS 1) whose topic another connection watches"
    return "after an accepted 5.0 CONNECT"


def _register(stimulus: DuplicateStimulus) -> None:
    expected = "close the connection" + (" without accepting it" if stimulus.as_connect else "")
    if stimulus.with_will:
        expected += " and publish the Will, since no valid DISCONNECT was received"
    if stimulus.place == PacketType.AUTH:
        expected += "; without an authentication script in the profile the case is not applicable"
    case(
        f"v5/malformed/{stimulus.case_id}",
        targeted_auth(stimulus) if stimulus.place == PacketType.AUTH else targeted(stimulus),
        stimulus.title,
        stimulus=f"{stimulus.title} (breaks {stimulus.breaks}), {_where(stimulus)}: {stimulus.data.hex(' ')}"
        f"{_SHOWN_WITH}",
        expected=f"{expected} (a DISCONNECT, or for a CONNECT a CONNACK, with a Reason Code of 0x80 or more may "
        "come first); act on nothing in it",
        timing=stimulus.with_will,
        family=f"v5/malformed-{stimulus.family}",
        protocol=V5,
    )(_script(stimulus))


for _stimulus in STIMULI:
    _register(_stimulus)

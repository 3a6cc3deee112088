"""What scapy's MQTT layer (``scapy.contrib.mqtt``) reads right of a packet, judged field by field.

scapy's layer models the 3.1.1 fields only (it names Protocol Level 5 but reads no property and no Reason Code),
so a 5.0 packet is counted as read right only when every field scapy's layer has equals the encoded packet's and
nothing is left over (no ``Raw`` bytes, no phantom MQTT layer made of the properties that follow).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from mqttaudit import codec


def mqtt_layer() -> type[Any]:
    logging.getLogger("scapy").setLevel(logging.ERROR)
    from scapy.contrib.mqtt import MQTT

    return MQTT


def _connect(layer: Any, packet: codec.Connect) -> bool:
    fields = (
        layer.protolevel == packet.protocol_level
        and layer.protoname == packet.protocol_name.encode()
        and layer.cleansess == int(packet.clean_session)
        and layer.klive == packet.keep_alive
        and layer.clientId == packet.client_id.encode()
        and layer.usernameflag == int(packet.username is not None)
        and layer.passwordflag == int(packet.password is not None)
        and layer.willflag == int(packet.will is not None)
    )
    if not fields:
        return False
    if packet.will is not None and (
        layer.willtopic != packet.will.topic.encode() or layer.willmsg != packet.will.message
    ):
        return False
    if packet.username is not None and layer.username != packet.username.encode():
        return False
    return packet.password is None or layer.password == packet.password


def _publish(layer: Any, packet: codec.Publish) -> bool:
    if packet.qos and layer.msgid != packet.packet_id:
        return False
    return bool(layer.topic == packet.topic.encode() and layer.value == packet.payload)


def _subscribe(layer: Any, packet: codec.Subscribe) -> bool:
    topics = [(topic.topic, topic.QOS) for topic in layer.topics]
    expected = [(sub.topic_filter.encode(), sub.qos) for sub in packet.subscriptions]
    return bool(layer.msgid == packet.packet_id and topics == expected)


def _unsubscribe(layer: Any, packet: codec.Unsubscribe) -> bool:
    topics = [topic.topic for topic in layer.topics]
    return bool(layer.msgid == packet.packet_id and topics == [name.encode() for name in packet.topic_filters])


def _suback(layer: Any, packet: codec.Suback) -> bool:
    return bool(layer.msgid == packet.packet_id and list(layer.retcodes or ()) == list(packet.return_codes))


def _packet_id(layer: Any, packet: Any) -> bool:
    return bool(layer.msgid == packet.packet_id)


def _connack(layer: Any, packet: codec.Connack) -> bool:
    return bool(layer.sessPresentFlag == int(packet.session_present) and layer.retcode == packet.return_code)


def _nothing(layer: Any, packet: Any) -> bool:
    return True


#: Packet class -> (scapy layer class name, or None where scapy has no layer; the fields that layer must hold).
_CHECKS: dict[type[Any], tuple[str | None, Callable[[Any, Any], bool]]] = {
    codec.Connect: ("MQTTConnect", _connect),
    codec.Connack: ("MQTTConnack", _connack),
    codec.Publish: ("MQTTPublish", _publish),
    codec.Puback: ("MQTTPuback", _packet_id),
    codec.Pubrec: ("MQTTPubrec", _packet_id),
    codec.Pubrel: ("MQTTPubrel", _packet_id),
    codec.Pubcomp: ("MQTTPubcomp", _packet_id),
    codec.Subscribe: ("MQTTSubscribe", _subscribe),
    codec.Suback: ("MQTTSuback", _suback),
    codec.Unsubscribe: ("MQTTUnsubscribe", _unsubscribe),
    codec.Unsuback: ("MQTTUnsuback", _packet_id),
    codec.Pingreq: (None, _nothing),
    codec.Pingresp: (None, _nothing),
    codec.Disconnect: ("MQTTDisconnect", _nothing),
}


def reads_right(result: Any, packet: codec.Packet) -> bool:
    """scapy's dissection ``result`` of ``packet``'s bytes has its type and fields, and nothing left over."""
    if result.type != int(packet.packet_type):
        return False
    layer_name, check = _CHECKS[type(packet)]
    if check is _nothing and type(result.payload).__name__ == "NoPayload":
        return True  # an empty body (PINGREQ, PINGRESP, a DISCONNECT of two bytes): nothing to read
    layer = result if layer_name is None else result.payload
    if layer_name is not None and type(layer).__name__ != layer_name:
        return False  # scapy fell back to Raw: the layer could not be dissected
    if type(layer.payload).__name__ != "NoPayload":
        return False  # bytes left over: Raw, or a phantom MQTT packet made of what scapy did not read
    try:
        return check(layer, packet)
    except (AttributeError, ValueError):  # a list element scapy left as Raw has none of the fields
        return False


def agreement(results: Sequence[Any], sample: Sequence[tuple[str, codec.Packet, bytes]]) -> dict[str, Any]:
    """How many packets of ``sample`` scapy read right, in all and per packet type, and how many phantom MQTT
    layers (made of bytes it did not read) its dissections hold."""
    mqtt = mqtt_layer()
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    phantoms = 0
    for result, (_, packet, _) in zip(results, sample, strict=True):
        name = packet.packet_type.name
        total[name] += 1
        right[name] += reads_right(result, packet)
        phantoms += sum(1 for layer in result.iterpayloads() if isinstance(layer, mqtt)) - 1
    return {
        "packets": len(sample),
        "read_right": sum(right.values()),
        "phantom_mqtt_layers": phantoms,
        "by_type": {name: {"read_right": right[name], "packets": count} for name, count in total.most_common()},
    }

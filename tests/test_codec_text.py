"""One rule for the ill-formed bytes of a string, wherever it is shown: each as ``\\xNN``."""

from __future__ import annotations

from mqttaudit import codec
from mqttaudit.codec.describe import describe_packet, quoted, wire_text

ILL_FORMED_TOPIC = bytes.fromhex("30 06 00 03 61 2f ff 78")


def test_wire_text_shows_each_ill_formed_byte_as_a_hex_escape() -> None:
    assert wire_text("a/\udcff\udc80") == "a/\\xff\\x80"
    assert wire_text("plain/topic") == "plain/topic"
    assert wire_text("caf\u00e9") == "caf\u00e9"


def test_quoted_is_repr_with_the_same_rule() -> None:
    assert quoted("a/\udcff") == "'a/\\xff'"
    assert quoted("it's\n") == repr("it's\n")
    # A backslash the text really holds stays escaped, and is not taken for an ill-formed byte.
    assert quoted("a\\udcff") == repr("a\\udcff")


def test_a_decoded_ill_formed_topic_is_shown_by_the_rule() -> None:
    [frame] = codec.decode(ILL_FORMED_TOPIC, "client").frames
    assert frame.packet is not None
    assert "'a/\\xff'" in describe_packet(frame.packet)
    assert any(v.rule == "MQTT-1.5.3-1" for v in frame.violations)

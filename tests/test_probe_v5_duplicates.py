"""The MQTT 5.0 duplicate-property family (probe/cases/v5_duplicates.py): generated from the property table, one shape
for every property each packet a client sends (and the Will Properties) may hold but not repeat; each shape breaks
exactly that rule, goes where a client may send it, and its case targets what the judge decides of it (pure). The
verdicts against a broker are pinned in test_probe_scripted_deviations.py."""

from __future__ import annotations

from mqttaudit.codec import Direction, PacketType, ProtocolVersion, StreamDecoder, decode
from mqttaudit.codec import properties as props
from mqttaudit.codec import rules as codec_rules
from mqttaudit.probe.case import CASES
from mqttaudit.probe.cases import v5_duplicates, v5_malformed, v5_ported
from mqttaudit.probe.cases.v5_duplicates import PLACES, STIMULI, VALUES, DuplicateStimulus, build, targeted_auth
from mqttaudit.probe.connection import client_frames

BY_ID = {stimulus.case_id: stimulus for stimulus in STIMULI}
#: The duty to close on a Malformed Packet or Protocol Error; for CONNECT, to close without accepting it.
CLOSE_DUTIES = {"MQTT-4.13.1-1", "MQTT-3.1.4-1"}


def decoded(stimulus: DuplicateStimulus) -> list[str]:
    frames, _begun = client_frames(StreamDecoder(Direction.FROM_CLIENT, version=ProtocolVersion.V5), stimulus.data)
    return [v.rule for frame in frames for v in frame.violations]


def test_every_property_a_place_holds_once_has_its_shape_and_nothing_else_does() -> None:
    expected = {
        (place, definition.identifier)
        for _word, _name, place, _answers in PLACES
        for definition in props.PROPERTIES
        if place in definition.packets
        and place not in definition.repeatable
        and (definition.identifier, place) not in v5_malformed.SENDER_BOUND
    }
    assert {(s.place, s.identifier) for s in STIMULI} == expected
    assert len(STIMULI) == len(expected) == len(BY_ID)
    # every place a client puts properties in, and only those (no CONNACK, SUBACK, UNSUBACK)
    sent = (PacketType.CONNECT, PacketType.PUBLISH, PacketType.SUBSCRIBE, PacketType.UNSUBSCRIBE)
    sent += (PacketType.PUBACK, PacketType.PUBREC, PacketType.PUBREL, PacketType.PUBCOMP)
    sent += (PacketType.DISCONNECT, PacketType.AUTH)
    assert {place for _w, _n, place, _a in PLACES} == {*sent, props.WILL}
    # UNSUBSCRIBE holds only User Properties, which may repeat; a client's PUBLISH no Subscription Identifier
    assert not [s for s in STIMULI if s.place == PacketType.UNSUBSCRIBE]
    assert "publish-two-subscription-identifier" not in BY_ID


def test_the_connect_shapes_of_the_public_bugs_are_there_and_the_moved_ids_are_kept() -> None:
    # Maximum Packet Size, Request Response Information, Topic Alias Maximum twice in CONNECT (a family of public
    # bugs); the PUBLISH and SUBSCRIBE shapes keep the ids they had in v5_malformed
    assert (
        BY_ID["connect-two-maximum-packet-size"]
        .data.hex(" ")
        .startswith("10 2e 00 04 4d 51 54 54 05 02 00 00 0a 27 0f ff ff ff 27 0f ff ff ff")
    )
    assert "19 00 19 00" in BY_ID["connect-two-request-response-information"].data.hex(" ")
    assert "22 00 01 22 00 01" in BY_ID["connect-two-topic-alias-maximum"].data.hex(" ")
    for kept in (
        *(f"publish-two-{p}" for p in ("payload-format-indicator", "topic-alias")),
        "subscribe-two-subscription-identifier",
    ):
        assert f"v5/malformed/{kept}" in CASES
    assert {"will-two-will-delay-interval", "puback-two-reason-string", "disconnect-two-server-reference"} <= set(BY_ID)
    assert {"auth-two-authentication-method", "auth-two-authentication-data", "auth-two-reason-string"} <= set(BY_ID)


def test_every_shape_breaks_only_the_repeat() -> None:
    for stimulus in STIMULI:
        assert decoded(stimulus) == [codec_rules.PROPERTY_DUPLICATE], stimulus.case_id
        rules = {v.rule for v in decode(stimulus.data, "client", version="5").violations}
        assert rules == {codec_rules.PROPERTY_DUPLICATE}, stimulus.case_id


def test_a_value_that_would_change_the_conversation_is_replaced() -> None:
    # Maximum Packet Size 1 would bar the CONNACK; a Session Expiry Interval in a DISCONNECT after a CONNECT
    # without one is a Protocol Error of its own [MQTT-3.14.2-2]
    assert VALUES[props.MAXIMUM_PACKET_SIZE] == 268_435_455
    assert BY_ID["disconnect-two-session-expiry-interval"].data == bytes.fromhex("e0 0c 00 0a 11 00000000 11 00000000")


def test_each_packet_goes_where_a_client_may_send_it() -> None:
    for stimulus in STIMULI:
        assert stimulus.as_connect is (stimulus.place in (PacketType.CONNECT, props.WILL)), stimulus.case_id
        acknowledgement = stimulus.place in (
            PacketType.PUBACK,
            PacketType.PUBREC,
            PacketType.PUBREL,
            PacketType.PUBCOMP,
        )
        assert bool(stimulus.answers) is acknowledgement, stimulus.case_id
        assert stimulus.with_will is (stimulus.place == PacketType.DISCONNECT), stimulus.case_id
    # an acknowledgement is built with the Packet Identifier of the flow it answers
    packet = build(BY_ID["pubcomp-two-reason-string"], "c", "p", 513)
    assert getattr(packet, "packet_id", None) == 513
    # Authentication Data in a CONNECT has its Authentication Method beside it, once
    connect = decode(BY_ID["connect-two-authentication-data"].data, "client", version="5").packets[0]
    assert [p.identifier for p in connect.properties] == [0x15, 0x16, 0x16]  # type: ignore[attr-defined]


def test_every_case_targets_what_the_judge_decides_of_it() -> None:
    for stimulus in STIMULI:
        case = CASES[f"v5/malformed/{stimulus.case_id}"]
        assert case.protocol is ProtocolVersion.V5 and case.family == "v5/malformed-property-duplicate"
        expected = targeted_auth(stimulus) if stimulus.place == PacketType.AUTH else v5_ported.targeted(stimulus)
        assert case.statements == expected, stimulus.case_id
        assert "MQTT-2.2.2-property-duplicate" in case.statements, stimulus.case_id
        assert CLOSE_DUTIES & set(case.statements), stimulus.case_id
        # a DISCONNECT the broker takes for one discards the Will the close owes [MQTT-3.1.2-8]: a timing case
        assert ("MQTT-3.1.2-8" in case.statements) is stimulus.with_will is case.timing, stimulus.case_id
        assert stimulus.breaks in case.stimulus


def test_the_family_is_no_other_familys_bytes() -> None:
    others = {s.data for family in (v5_malformed, v5_ported) for s in family.STIMULI}
    assert not [s.case_id for s in v5_duplicates.STIMULI if s.data in others]

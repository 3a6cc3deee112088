"""The connection lifecycle table: total over every (phase, sender, input) a version allows, every forbidden step
names a statement of that version, and walks through it keep the invariants of sections 3.1, 3.2 and 3.14."""

from __future__ import annotations

import enum
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqttaudit.codec import Auth, Connack, Connect, Direction, Pingreq, Property
from mqttaudit.judge import rules
from mqttaudit.judge.lifecycle import (
    AUTHENTICATION_METHOD,
    PHASES,
    SENT_BY,
    TRANSITIONS,
    VERSIONS,
    Input,
    Phase,
    forbidden,
    input_of,
    step,
)
from mqttaudit.judge.pairing import Stage
from mqttaudit.spec import identity, load_catalogue

CLIENT = Direction.FROM_CLIENT
SERVER = Direction.FROM_SERVER
CATALOGUES = {version: load_catalogue(version) for version in VERSIONS}

versions = st.sampled_from(VERSIONS)
phases = st.sampled_from(list(Phase))
senders = st.sampled_from([CLIENT, SERVER])
inputs = st.sampled_from(list(Input))


@given(versions, phases, senders, inputs)
def test_every_pair_is_a_transition_or_a_packet_the_sender_never_sends(version, phase, sender, packet) -> None:
    transition = step(version, phase, sender, packet)
    assert (transition is None) == (packet not in SENT_BY[version, sender] or phase not in PHASES[version])
    if transition is not None and transition.rule is not None:
        named = identity.statement_id(transition.rule, version)
        assert named is not None and named in CATALOGUES[version], (version, phase, sender, packet)


def test_the_table_holds_every_allowed_input_of_every_phase() -> None:
    expected = sum(
        len(SENT_BY[version, side]) * len(PHASES[version]) for version in VERSIONS for side in (CLIENT, SERVER)
    )
    assert len(TRANSITIONS) == expected


def test_3_1_1_has_no_auth_and_no_server_disconnect() -> None:
    assert step("3.1.1", Phase.CONNECTED, SERVER, Input.DISCONNECT) is None
    assert step("3.1.1", Phase.CONNECTED, CLIENT, Input.AUTH) is None
    assert step("3.1", Phase.CONNECTED, SERVER, Input.DISCONNECT) is None  # 3.1 follows the 3.1.1 table


@given(versions, st.lists(st.tuples(senders, inputs), max_size=30))
def test_walks_keep_the_invariants(version, walk) -> None:
    phase = Phase.AWAITING_CONNECT
    connacks = 0
    for sender, packet in walk:
        transition = step(version, phase, sender, packet)
        if transition is None:
            continue
        if phase is Phase.CLIENT_DISCONNECTED and sender is CLIENT:
            assert transition.rule == rules.NOTHING_AFTER_DISCONNECT  # [MQTT-3.14.4-2]
        if phase is Phase.SERVER_DISCONNECTED and sender is SERVER:
            assert transition.rule == rules.NOTHING_AFTER_DISCONNECT
        if packet in (Input.CONNACK_ACCEPTING, Input.CONNACK_REFUSING) and transition.rule is None:
            connacks += 1
        if sender is SERVER and phase in (Phase.AWAITING_CONNECT, Phase.CONNECTING):
            # [MQTT-3.2.0-1]: nothing but CONNACK (or, 5.0, AUTH) before the CONNACK
            allowed = packet in (Input.CONNACK_ACCEPTING, Input.CONNACK_REFUSING)
            assert (transition.rule is None) == allowed or packet is Input.AUTH
        phase = transition.next
    if version == "5.0":
        assert connacks <= 1  # [MQTT-3.2.0-2]


def test_a_second_connect_is_a_protocol_violation_in_every_later_phase() -> None:
    for version in VERSIONS:
        for phase in (Phase.CONNECTING, Phase.CONNECTED, Phase.REFUSED):
            transition = step(version, phase, CLIENT, Input.CONNECT)
            assert transition is not None and transition.rule == rules.SECOND_CONNECT


def test_authenticating_clients_send_only_auth_or_disconnect() -> None:
    rows = {(phase, sender, packet) for phase, sender, packet, _ in forbidden("5.0")}
    assert (Phase.AUTHENTICATING, CLIENT, Input.PUBLISH) in rows
    assert (Phase.AUTHENTICATING, CLIENT, Input.AUTH) not in rows
    assert (Phase.AUTHENTICATING, CLIENT, Input.DISCONNECT) not in rows
    assert (Phase.CONNECTING, CLIENT, Input.PUBLISH) not in rows  # without a method the client need not wait


def test_a_refusal_ends_in_a_close_in_5_0_not_in_more_packets() -> None:
    transition = step("5.0", Phase.REFUSED, SERVER, Input.PUBLISH)
    assert transition is not None and transition.rule == rules.CONNACK_FIRST
    transition = step("3.1.1", Phase.REFUSED, SERVER, Input.PUBLISH)
    assert transition is not None and transition.rule is None  # 3.1.1 states only the close [MQTT-3.2.2-5]


def test_inputs_of_packets() -> None:
    method = Property(AUTHENTICATION_METHOD, "SCRAM-SHA-1")
    assert input_of(Connect(client_id="a", properties=(method,)), "5.0") is Input.CONNECT_AUTHENTICATING
    assert input_of(Connect(client_id="a"), "5.0") is Input.CONNECT
    assert input_of(Connack(return_code=0x87), "5.0") is Input.CONNACK_REFUSING
    assert input_of(Connack(), "3.1.1") is Input.CONNACK_ACCEPTING
    assert input_of(Auth(reason_code=0x18), "5.0") is Input.AUTH
    assert input_of(Pingreq(), "3.1.1") is Input.PINGREQ


@pytest.mark.parametrize("enum_type", [Direction, Stage, Phase, Input], ids=lambda t: t.__name__)
def test_the_enums_looked_up_per_packet_hash_by_identity_and_survive_pickling(enum_type: type[enum.Enum]) -> None:
    """The members of the enums the judge looks up per packet (the lifecycle's table, the pairing's steps) hash by
    identity, in C (Enum's own __hash__ is Python code): consistent with their equality, which is identity, and
    with pickling, which gives back the same member."""
    assert enum_type.__hash__ is object.__hash__
    members = list(enum_type)
    table = {member: index for index, member in enumerate(members)}
    for index, member in enumerate(members):
        assert hash(member) == object.__hash__(member)
        assert table[member] == index
        assert pickle.loads(pickle.dumps(member)) is member
    assert len(set(members)) == len(members)

"""The 3.1.1 case families in MQTT 5.0: the same shapes and flows, sent after a 5.0 CONNECT.

Most byte-level rules of 3.1.1 hold in 5.0 under other ids (UTF-8, Remaining Length, reserved flags, Packet
Identifier 0, wildcard placement, empty topics, the CONNECT field rules). Each malformed shape of :mod:`.malformed`
is built again as a 5.0 packet (:func:`.malformed.families` with ``protocol=V5``: a Property Length where 5.0 has
one, Protocol Level 5 and empty Will Properties in a CONNECT) and becomes the case ``v5/malformed/<3.1.1 id>``
when 5.0 still states its rule: the 5.0 decoder must read in the twin exactly the 5.0 statements of the rules the
3.1.1 shape breaks (:func:`mqttaudit.spec.identity.statement_id`). A shape whose rule 5.0 does not state (a
Password without a User Name, option bits 2 to 5, a fixed-length acknowledgement) or that 5.0 reads as another
rule is left out, except where 5.0 restates the same defect in a rule of its own (:data:`RESTATED`); so is a shape
another 5.0 family sends byte for byte (:data:`SENT_ELSEWHERE`). The statements a case targets are the ones the
judge decides on a 5.0 connection that accepts the stimulus, as in :mod:`.v5_malformed`: a DISCONNECT or a CONNACK
with a Reason Code of 0x80 or more before the close is allowed (section 4.13).

The routing table of :mod:`.routing` and the negative controls of :mod:`.accepted` run in 5.0 as they are
(``v5/routing/<name>``, ``v5/accepted/<name>``), with one 5.0 control more: a Password without a User Name. Some
flows of :mod:`.delivery` and :mod:`.session` run in 5.0 under case ids and statements of their own (a resent PUBREL
of a Packet Identifier not in use, requests sent before the CONNACK).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mqttaudit.spec.ids import R5

from ...codec import (
    Connack,
    Connect,
    Direction,
    Frame,
    Packet,
    ProtocolVersion,
    StreamDecoder,
    Suback,
    Subscribe,
    Subscription,
    Will,
    encode,
)
from ...judge import Closed, Event, JudgeConfig, Quiet, Sent, judge_scenario
from ...spec.identity import statement_id
from ..case import CASES, case
from ..connection import client_frames
from . import accepted, delivery, malformed, routing, session, v5_forbidden, v5_malformed
from .malformed import (
    EXAMPLE_CLIENT_ID,
    EXAMPLE_PREFIX,
    WILL_LEVEL,
    Stimulus,
    charged,
    field,
    provoked,
    stimulus_script,
)
from .v5_connect import v5_case
from .v5_malformed import targeted as targeted_5

V3: Final = ProtocolVersion.V3_1_1
V5: Final = ProtocolVersion.V5

#: Shapes whose defect 5.0 states in a rule of its own rather than under the 3.1.1 rule's 5.0 id: (3.1.1 id, the
#: 5.0 rule). A SUBSCRIBE requesting QoS 3: 3.1.1 counts bits 0 and 1 among the bits that must be valid
#: [MQTT-3.8.3-4]; 5.0 calls a Maximum QoS of 3 a Protocol Error (section 3.8.3.1).
RESTATED: Final = {"subscribe-qos-3": (R5.MQTT_3_8_3_QOS,)}


@dataclass(frozen=True)
class PortedStimulus(Stimulus):
    #: The 5.0 statements the 5.0 decoder reads in the shape: those of the rules its 3.1.1 twin breaks.
    breaks: tuple[str, ...] = ()


def decoded(data: bytes, protocol: ProtocolVersion) -> tuple[str, ...]:
    """The rules a ``protocol`` decoder reads in ``data`` as a client sends it (keys in 3.1.1, ids in 5.0)."""
    frames, _begun = client_frames(StreamDecoder(Direction.FROM_CLIENT, version=protocol), data)
    return tuple(dict.fromkeys(v.rule for frame in frames for v in frame.violations))


def intended(twin: Stimulus) -> tuple[str, ...]:
    """The 5.0 statements of the rules the 3.1.1 shape ``twin`` breaks (those 5.0 states)."""
    if twin.case_id in RESTATED:
        return RESTATED[twin.case_id]
    ids = (statement_id(key, "5.0") for key in decoded(twin.data, V3))
    return tuple(sorted({rule for rule in ids if rule is not None}))


#: The bytes the other 5.0 families send already (shown with the example identifier and prefix).
_SENT_BY_5_0_FAMILIES: Final = frozenset(s.data for s in (*v5_forbidden.STIMULI, *v5_malformed.STIMULI))


def _ported() -> tuple[tuple[PortedStimulus, ...], tuple[str, ...]]:
    """The 5.0 shapes that break in 5.0 what their 3.1.1 twins break in 3.1.1, each with its family; and the ids
    of those another 5.0 family sends byte for byte (not the DISCONNECTs: only here does a watched Will show
    whether the broker took one for a DISCONNECT)."""
    twins = {stimulus.case_id: stimulus for stimulus in malformed.STIMULI}
    rows, elsewhere = [], []
    for stimulus in malformed.stimuli(V5):
        rules = intended(twins[stimulus.case_id])
        if not rules or tuple(sorted(decoded(stimulus.data, V5))) != rules:
            continue
        if stimulus.data in _SENT_BY_5_0_FAMILIES and not stimulus.with_will:
            elsewhere.append(stimulus.case_id)
        else:
            rows.append(PortedStimulus(**{**vars(stimulus), "breaks": rules}))
    return tuple(rows), tuple(elsewhere)


#: Every 5.0 twin of a malformed shape; and the 5.0 twins another 5.0 family sends already (the reserved flag bits
#: of :mod:`.v5_forbidden`).
STIMULI, SENT_ELSEWHERE = _ported()
#: The 3.1.1 shapes with no case here: no 5.0 CONNECT carries them, 5.0 does not state their rule, or another 5.0
#: family sends them.
LEFT_OUT: Final = tuple(s.case_id for s in malformed.STIMULI if s.case_id not in {twin.case_id for twin in STIMULI})

#: How the judge takes a 5.0 case (as :func:`mqttaudit.probe.runner.judge_config` does).
_JUDGE_CONFIG: Final = JudgeConfig(supported_protocol_levels=frozenset({4, 5}), opening_version="5.0")
_LONG_AFTER = 3600.0


def _sent(time: float, sender: Direction, packet: Packet) -> Sent:
    return Sent(time, sender, Frame(0, 0, encode(packet, version=V5), packet))


def _will_kept(stimulus: Stimulus) -> tuple[str, ...]:
    """The statements the judge finds broken when a broker takes a malformed DISCONNECT for a DISCONNECT: it
    closes without publishing the Will another connection watches."""
    topic = f"{EXAMPLE_PREFIX}/{WILL_LEVEL}"
    subscribe = Subscribe(packet_id=1, subscriptions=(Subscription(topic_filter=topic, qos=1),))
    watcher: list[Event] = [
        _sent(0.0, Direction.FROM_CLIENT, Connect(protocol_level=V5.level, client_id="watcher")),
        _sent(0.0, Direction.FROM_SERVER, Connack()),
        _sent(0.1, Direction.FROM_CLIENT, subscribe),
        _sent(0.1, Direction.FROM_SERVER, Suback(packet_id=1, return_codes=(1,))),
        Quiet(_LONG_AFTER),
    ]
    will = Will(topic=topic, message=b"will", qos=1)
    dying: list[Event] = [
        _sent(1.0, Direction.FROM_CLIENT, Connect(protocol_level=V5.level, client_id=EXAMPLE_CLIENT_ID, will=will)),
        _sent(1.0, Direction.FROM_SERVER, Connack()),
    ]
    frames, _begun = client_frames(StreamDecoder(Direction.FROM_CLIENT, version=V5), stimulus.data)
    dying += [Sent(1.1, Direction.FROM_CLIENT, frame) for frame in frames]
    dying.append(Closed(1.2, Direction.FROM_SERVER, False))
    return charged(judge_scenario({"watcher": watcher, "dying": dying}, _JUDGE_CONFIG))


def targeted(stimulus: Stimulus) -> tuple[str, ...]:
    """The statements a 5.0 broker that accepts the stimulus breaks, as the judge decides them; for a malformed
    DISCONNECT also those of the Will it then owes the watcher (see :attr:`Stimulus.with_will`)."""
    statements = targeted_5(stimulus)
    if stimulus.with_will:
        statements += tuple(rule for rule in _will_kept(stimulus) if rule not in statements)
    return statements


_SHOWN_WITH = (
    f" (shown with Client Identifier {EXAMPLE_CLIENT_ID} and topic prefix <p> = {EXAMPLE_PREFIX}: each run and"
    " case has its own)"
)


def _register(stimulus: PortedStimulus) -> None:
    where = "as the first packet of a connection" if stimulus.as_connect else "after an accepted 5.0 CONNECT"
    expected = "close the connection without accepting it" if stimulus.as_connect else "close the connection"
    if stimulus.with_will:
        where = "after a 5.0 CONNECT with a Will (QoS 1) whose topic another connection watches"
        expected += " and publish the Will, since no DISCONNECT was received"
    case(
        f"v5/malformed/{stimulus.case_id}",
        targeted(stimulus),
        stimulus.title,
        stimulus=f"{stimulus.title} (breaks {', '.join(stimulus.breaks)}), {where}: {stimulus.data.hex(' ')}"
        f"{_SHOWN_WITH if stimulus.personal else ''}",
        expected=f"{expected} (a DISCONNECT, or for a CONNECT a CONNACK, with a Reason Code of 0x80 or more may "
        "come first); act on nothing in it",
        timing=stimulus.with_will,
        family=f"v5/malformed-{stimulus.family}",
        protocol=V5,
        provokes=provoked(stimulus, V5),
    )(stimulus_script(stimulus))


for _stimulus in STIMULI:
    _register(_stimulus)


# --- flows: routing and the negative controls ----------------------------------------------------------------
# The scripts speak the version of their case (CaseContext connects, subscribes and publishes in 5.0 form), so a
# 5.0 twin is the same row registered with protocol V5. Their statements are rule keys the judge records; on a 5.0
# connection its ledger names each by its 5.0 id (:func:`mqttaudit.spec.identity.statement_id`), as here.


def named_in_5_0(keys: tuple[str, ...]) -> tuple[str, ...]:
    """The 5.0 ids of the rule keys ``keys``; a rule 5.0 does not state is dropped."""
    ids = (statement_id(key, "5.0") for key in keys)
    return tuple(dict.fromkeys(rule for rule in ids if rule is not None))


#: CONNECTs 5.0 allows and 3.1.1 does not: a Password without a User Name (section 3.1.2.9), beside the 3.1.1
#: shape ``malformed/connect-password-without-username``; a zero-length Client Identifier with Clean Start 0 (the
#: server assigns one [MQTT-3.1.3-6], or refuses it with CONNACK 0x85 [MQTT-3.1.3-8]), beside the 3.1.1 case
#: ``connect/empty-client-id-persistent-session``.
CONNECT_ROWS_5: Final = (
    accepted.ConnectRow("password-without-user-name", "a Password but no User Name", 0x42, 0, lambda _p: field(b"p")),
    accepted.ConnectRow(
        "empty-client-id-clean-start-0",
        "a zero-length Client Identifier and Clean Start 0",
        0x00,
        0,
        lambda _p: b"",
        client_id=b"",
    ),
)

#: The cases of :mod:`.delivery` and :mod:`.routing` whose scripts hold in 5.0 as they are, by family: no retained
#: message (those run alone, and :mod:`.v5_routing` has 5.0 cases of their own) and no rule 5.0 words otherwise
#: (sessions, Wills, Keep Alive, the second CONNECT: :mod:`.v5_routing`, :mod:`.v5_forbidden`). Not
#: ``publish/qos2-no-duplicate-delivery``: its DUP re-send on the same connection is one a 5.0 client may not make
#: [MQTT-4.4.0-1].
FLOWS: Final = {
    "v5/routing": ("routing/overlapping-three-filters", "routing/qos-downgrade"),
    "v5/delivery": (
        "publish/dup-not-propagated",
        "subscribe/suback",
        "subscribe/multiple-filters",
        "subscribe/granted-qos-caps-delivery",
        "subscribe/resubscribe-replaces",
        "unsubscribe/unsuback",
        "unsubscribe/multiple-filters",
        "unsubscribe/exact-filter-only",
        "topics/dollar-not-matched-by-wildcards",
        "topics/no-normalisation",
        *(f"topics/normal-after-dollar-{word}" for word, _before, _qos in delivery.DOLLAR_FIRST),
    ),
}


def _port(case_id: str, family: str) -> None:
    """Registers the 3.1.1 case ``case_id`` again as ``v5/<case_id>``: its script in 5.0, its statements' 5.0 ids."""
    original = CASES[case_id]
    case(
        f"v5/{case_id}",
        named_in_5_0(original.statements),
        original.title,
        stimulus=original.stimulus,
        expected=original.expected,
        timing=original.timing,
        family=family,
        protocol=V5,
    )(original.script)


for _row in routing.TABLE:
    routing.register(_row, V5, named_in_5_0(_row.statements))
for _case_id in FLOWS["v5/routing"]:
    _port(_case_id, "v5/routing")
for _filter_row in accepted.FILTER_ROWS:
    accepted.register_filter(_filter_row, V5, named_in_5_0(accepted.FILTER_STATEMENTS))
for _connect_row in (*accepted.CONNECT_ROWS, *CONNECT_ROWS_5):
    accepted.register_connect(_connect_row, V5, named_in_5_0((accepted.PINGRESP_SENT,)))
for _case_id in FLOWS["v5/delivery"]:
    _port(_case_id, "v5/delivery")


# --- twins whose 5.0 statements are their own ----------------------------------------------------------------
# 3.1.1 scripts that hold in 5.0 as they are, registered under 5.0 case ids with the statements 5.0 states for them.

#: The forms of a 5.0 acknowledgement: (id word, in words, whether the Reason Code is left out).
ACK_FORMS: Final = (("", "Reason Code 0x00 written out", False), ("-short", "the Reason Code left out", True))
for _form, _words, _short in ACK_FORMS:
    v5_case(
        f"v5/flows/pubrel-unknown-id{_form}-then-pingreq",
        [R5.MQTT_4_3_3_11, R5.MQTT_3_12_4_1],
        f"A resent PUBREL ({_words}) the server no longer knows is answered, and so is the PINGREQ after it",
        stimulus="CONNECT with Clean Start 0 and Session Expiry Interval 60, SUBSCRIBE, DISCONNECT; CONNECT again the "
        f"same way (Session Present 1); a PUBREL ({_words}) of a Packet Identifier never used, as a client resends one "
        "whose PUBCOMP it lost [MQTT-4.4.0-1], then PINGREQ at once",
        expected="PUBCOMP with the PUBREL's Packet Identifier (0x92 Packet Identifier not found, or 0x00) and "
        "PINGRESP; the connection stays open. A broker that declares no QoS 2 makes the case not applicable",
    )(delivery.pubrel_unknown_id(short=_short))
for _word, _name, _request, _answer, _rule in session.PIPELINED:
    v5_case(
        f"v5/connect/pipelined-{_word}",
        [R5.MQTT_3_2_0_1, statement_id(_rule, V5.value) or ""],
        f"A {_name} sent right after a 5.0 CONNECT is answered after the CONNACK",
        stimulus=f"5.0 CONNECT and, without waiting for the CONNACK (section 3.1.4), a {_name} on a topic of the case",
        expected=f"CONNACK 0x00 first, then the {_answer.__name__.upper()}: no packet but AUTH before a CONNACK 0x00",
    )(session.pipelined(_request, _answer))

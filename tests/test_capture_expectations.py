"""What other projects' suites expect of the shared captures, against what mqttaudit reports on them.

Every capture of the third-party corpus (:mod:`tests.corpus` finds it) goes through the pure path of an audit (no
Spark): the capture layer reassembles and frames each connection, and ``judge_flow`` judges it as the pipeline's
per-flow stage does. ``EXPECTED`` holds, per connection, the statements mqttaudit must report against each side and
those it must leave not assessable, each justified by a reading of the bytes. Where a suite expects an anomaly
mqttaudit does not report, the entry says why. Suricata's ``*.test.yaml``, Zeek's baselines and Arkime's session
JSON then serve as a second opinion wherever versions and the tools' own limits make them comparable.

``EXPECTED`` is exact: every finding the audit reports on a connection is listed there with its justification, and
every statement it leaves not assessable with the tag of the reason. Each connection is decoded with the version its
CONNECT names and judged with the audit's own configuration (a broker seen accepting MQTT 5.0 supports it): MQTT 5.0
connections get every byte-level 5.0 check and the judge's 5.0 reading of their behaviour, connection by connection
(findings by their 5.0 statement ids); MQTT 3.1 connections the 3.1.1 rules 3.1 shares, and their behaviour is not
judged, which their connection row says.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

import pytest

from mqttaudit.capture import FlowAudit, FlowOptions, audit_records, flow_key, frame_number, read_records, segments
from mqttaudit.capture.conversation import INFERRED_5, handling
from mqttaudit.capture.writer import pcap_bytes
from mqttaudit.codec import Connack, Connect, Frame, PacketType, Publish, Suback, Subscribe, Unsubscribe, properties
from mqttaudit.judge import JudgeConfig
from mqttaudit.judge.reasons import (
    CAPTURE_ENDS,
    NO_ACTIVITY,
    NO_ANSWER,
    NOT_ACCEPTED,
    PEER_CLOSED,
)
from mqttaudit.judge.reasons import MID_STREAM as MID_STREAM_TAG
from mqttaudit.pipeline.conversations import Flow, FlowResult, connection_flow, judge_flow, rule_level
from mqttaudit.pipeline.options import AuditOptions

from . import corpus

pytestmark = pytest.mark.captures

#: The judge configuration of an audit (MQTT 5.0 among the supported Protocol Levels).
CONFIG = AuditOptions().judge_config
#: What Suricata, Zeek and Arkime call the Protocol Levels mqttaudit reads.
VERSIONS = {3: "3.1", 4: "3.1.1", 5: "5.0"}

# The statements of the table, by the names the codec and the judge give them.
RESERVED_TYPE = "MQTT-2.2.1-reserved-type"
OVERRUN = "MQTT-2.2.3-overrun"
PROTOCOL_NAME = "MQTT-3.1.2-protocol-name"
PROTOCOL_LEVEL = "MQTT-3.1.2-protocol-level"
CONNECT_FIRST = "MQTT-3.1.0-1"
UNSUPPORTED_LEVEL = "MQTT-3.1.2-2"
CLIENT_KEEP_ALIVE = "MQTT-3.1.2-23"
SERVER_DROPS_SILENT_CLIENT = "MQTT-3.1.2-24"
CONNACK_FOR_VALID_CONNECT = "MQTT-3.1.4-4"
CONNACK_FIRST = "MQTT-3.2.0-1"
CONNACK_LENGTH = "MQTT-3.2.1-remaining-length"
DELIVERY_MATCHES_SUBSCRIPTION = "MQTT-3.3.2-3"
PUBACK_LENGTH = "MQTT-3.4.1-remaining-length"
SUBSCRIBE_OPTIONS = "MQTT-3.8.3-4"
SUBACK_SENT = "MQTT-3.8.4-1"
DELIVERY_QOS = "MQTT-3.8.4-6"
UNSUBACK_SENT = "MQTT-3.10.4-4"
UNSUBACK_WITHOUT_DELETION = "MQTT-3.10.4-5"
UNSUBACK_LENGTH = "MQTT-3.11.1-remaining-length"
DISCONNECT_LENGTH = "MQTT-3.14.1-remaining-length"
QOS1_RECEIVER_PUBACK = "MQTT-4.3.2-2"
TOPIC_NOT_EMPTY = "MQTT-4.7.3-1"
CLOSE_ON_VIOLATION = "MQTT-4.8.0-1"
SESSION_PRESENT_0 = "MQTT-3.2.2-1"
SUBACK_ID = "MQTT-3.8.4-2"
#: [MQTT-2.3.1-7] SUBACK and UNSUBACK carry the Packet Identifier of their request (5.0: MQTT-2.2.1-6).
ACK_ID = "MQTT-2.3.1-7"
SUBACK_CODES = "MQTT-3.8.4-5"
SUBACK_ORDER = "MQTT-3.9.3-1"
PUBACK_ID = "MQTT-2.3.1-6"
PUBACK_TYPE = "MQTT-3.3.4-1"
NON_RETAINED_KEEPS_RETAINED = "MQTT-3.3.1-12"
CLEAN_SESSION_DISCARDED = "MQTT-3.1.2-6"
# MQTT 5.0 statements the codec checks in 5.0 bytes, by their 5.0 ids.
V5_PROPERTY_LENGTH = "MQTT-2.2.2-property-length"
V5_PAYLOAD_FORMAT = "MQTT-3.3.2-payload-format"
# MQTT 5.0 statements the judge decides on 5.0 connections, by their 5.0 ids.
V5_MALFORMED_CONNECT = "MQTT-3.1.4-1"
V5_CONNACK_FOR_VALID_CONNECT = "MQTT-3.1.4-5"
V5_SESSION_PRESENT_0 = "MQTT-3.2.2-2"
V5_CLIENT_KEEP_ALIVE = "MQTT-3.1.2-20"
V5_SERVER_DROPS_SILENT_CLIENT = "MQTT-3.1.2-22"
V5_CLIENT_RECEIVE_MAXIMUM = "MQTT-3.3.4-7"
V5_SEND_QUOTA = "MQTT-4.9.0-2"
#: [MQTT-3.2.2-11] No PUBLISH above the Server's Maximum QoS; [MQTT-3.2.2-14] no RETAIN after Retain Available 0.
V5_WITHIN_MAXIMUM_QOS = "MQTT-3.2.2-11"
V5_NO_RETAIN_UNAVAILABLE = "MQTT-3.2.2-14"
V5_SUBACK_SENT = "MQTT-3.8.4-1"
V5_SUBACK_ID = "MQTT-3.8.4-2"
V5_ACK_ID = "MQTT-2.2.1-6"
#: [MQTT-3.2.2-22] Without a Server Keep Alive in CONNACK the server applies the client's Keep Alive.
V5_CLIENT_KEEP_ALIVE_APPLIES = "MQTT-3.2.2-22"
V5_SUBACK_CODES = "MQTT-3.8.4-6"
V5_SUBACK_ORDER = "MQTT-3.9.3-1"
V5_QOS1_RECEIVER_PUBACK = "MQTT-4.3.2-4"
V5_PUBACK_ID = "MQTT-2.2.1-5"
V5_PUBACK_TYPE = "MQTT-3.3.4-1"
V5_NON_RETAINED_KEEPS_RETAINED = "MQTT-3.3.1-8"


# -- the shared captures, audited ----------------------------------------------------------------------------------


INVENTORY = corpus.inventory()
FILES = corpus.capture_names()


def broker_ports(name: str) -> frozenset[int]:
    """The MQTT ports tshark decoded in the capture (every capture of the set uses 1883)."""
    listed = INVENTORY.get(name, {}).get("mqtt_ports", "")
    return frozenset(int(port) for port in listed.split(",") if port) or frozenset({1883})


@dataclass(frozen=True)
class Judged:
    """One connection of a capture: the capture layer's audit and judge_flow's rows."""

    audit: FlowAudit
    result: FlowResult

    @property
    def client_port(self) -> int:
        assert self.audit.client is not None
        return self.audit.endpoints[self.audit.client][1]

    @property
    def reported(self) -> set[tuple[str, str]]:
        """(side, statement) of every violation row, the codec's and the judge's."""
        rows = self.result.violations.data
        return set(zip(rows["actor"], rows["rule"], strict=True))

    @property
    def undecided(self) -> set[tuple[str, str, str]]:
        """(side, statement, reason tag) of every not-assessable row."""
        rows = self.result.not_assessable.data
        return set(zip(rows["actor"], rows["rule"], rows["tag"], strict=True))

    @property
    def row(self) -> dict[str, object]:
        """The connection's row of the connections table."""
        data = self.result.connection.data
        return {name: values[0] for name, values in data.items()}

    def types(self, side: str | None = None) -> list[str | None]:
        """The packet type of each frame, as the packets table names it (from the fixed header when the
        connection is framed only)."""
        rows = self.result.packets.data
        return [
            kind for kind, direction in zip(rows["type"], rows["direction"], strict=True) if side in (None, direction)
        ]

    def frames(self, side: str | None = None) -> list[Frame]:
        """The frames of one side ("client" or "server") or of both, in order."""
        wanted = {"client": self.audit.client, "server": None if self.audit.client is None else 1 - self.audit.client}
        return [frame for s, _time, frame in self.audit.frames if side is None or s == wanted[side]]

    def packets(self, kind: type, side: str | None = None) -> list:
        return [frame.packet for frame in self.frames(side) if isinstance(frame.packet, kind)]

    @property
    def connect(self) -> Connect | None:
        return next(iter(self.packets(Connect, "client")), None)


def as_flow(name: str, audit: FlowAudit, record_at: dict[int, int]) -> Flow:
    """The Flow the pipeline builds from a FlowAudit, frame numbers included."""
    return connection_flow(name, audit, record_at.get)


@cache
def judged(name: str, config: JudgeConfig = CONFIG) -> tuple[Judged, ...]:
    path = corpus.capture(name)
    # The frame that carried each segment, by flow and time (first wins), as the pipeline names frames.
    record_at: dict[tuple[object, int], int] = {}
    for index, segment in segments(read_records(path)):
        record_at.setdefault((flow_key(segment), segment[0]), frame_number(index))
    found = []
    for audit in audit_records(read_records(path), options=FlowOptions(broker_ports=broker_ports(name))):
        key = tuple(sorted(audit.endpoints))
        flow = as_flow(name, audit, {time: index for (k, time), index in record_at.items() if k == key})
        found.append(Judged(audit, judge_flow(flow, config)))
    return tuple(found)


def flow_of(name: str, client_port: int) -> Judged:
    [flow] = [flow for flow in judged(name) if flow.client_port == client_port]
    return flow


@pytest.mark.parametrize("name", FILES)
def test_every_connection_is_judged_and_every_byte_of_it_is_accounted_for(name: str) -> None:
    flows = judged(name)
    assert flows, "no MQTT connection in a capture tshark decodes MQTT in"
    for flow in flows:
        assert flow.audit.total.reconciles, flow.audit.total
        assert all(counts.reconciles for counts in flow.audit.counts)
        [row] = [
            dict(zip(flow.result.connection.names, values, strict=True))
            for values in zip(*flow.result.connection.data.values(), strict=True)
        ]
        assert row["packets"] == len(flow.audit.frames)
        assert row["not_assessable"] == len(flow.result.not_assessable)
        assert row["violations"] == len(flow.result.violations)
        # Every decoded packet was completed by a captured record the packets table names.
        assert None not in flow.result.packets.data["frame"]


# -- the table -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    """What mqttaudit reports on one connection, and why that is right for its bytes."""

    #: What the source suite expects of the capture and how it maps onto MQTT 3.1.1 statements (or why it does not).
    suite: str
    #: The version the connection's CONNECT names ("unknown" without one).
    version: str
    client: frozenset[str] = frozenset()
    server: frozenset[str] = frozenset()
    #: (side, statement, reason tag) of every not-assessable row of the connection, exactly.
    not_assessable: frozenset[tuple[str, str, str]] = frozenset()
    #: Suricata anomaly events the suite's test.yaml files expect on the capture, with their counts.
    anomalies: tuple[tuple[str, int], ...] = ()


def expected(
    suite: str,
    version: str = "3.1.1",
    *,
    client: Iterable[str] = (),
    server: Iterable[str] = (),
    not_assessable: Iterable[tuple[str, str, str]] = (),
    anomalies: Iterable[tuple[str, int]] = (),
) -> Expected:
    return Expected(suite, version, frozenset(client), frozenset(server), frozenset(not_assessable), tuple(anomalies))


# A mosquitto session in MQTT 3.1.1 (CONNECT "MQTT" level 4, every packet in its 3.1.1 shape): nothing to report.
MQTT311 = expected("no anomaly; a conforming MQTT 3.1.1 session, every byte decoded as a packet")
# A session in MQTT 3.1: its CONNECT starts 00 06 "MQIsdp" 03, another specification [MQTT-3.1.2-1]. The
# connection is labelled 3.1 and decoded with the 3.1.1 rules 3.1 shares; every packet keeps them, and its behaviour
# is not judged, so nothing is owed.
MQTT31 = expected("no anomaly; MQTT 3.1, decoded, every packet well formed", "3.1")
# A session in MQTT 5.0 (CONNECT "MQTT" level 5), decoded as 5.0: properties, reason codes and every byte-level
# 5.0 rule; every packet keeps them. Judged against 5.0 connection by connection: CONNACK 0x00 to a valid CONNECT,
# each request answered with its Packet Identifier and an allowed reason code, the client's DISCONNECT then its
# close: nothing owed, nothing left open.
MQTT5 = expected("no anomaly; MQTT 5.0, decoded and judged, every packet well formed, every answer given", "5.0")


def mqtt5(
    suite: str,
    *,
    anomalies: Iterable[tuple[str, int]] = (),
    client: Iterable[str] = (),
    server: Iterable[str] = (),
    not_assessable: Iterable[tuple[str, str, str]] = (),
) -> Expected:
    """MQTT5 with another account of the suite (and the 5.0 findings and open questions its bytes call for)."""
    return replace(
        MQTT5,
        suite=suite,
        anomalies=tuple(anomalies),
        client=frozenset(client),
        server=frozenset(server),
        not_assessable=frozenset(not_assessable),
    )


def keep_alive_5(client: str, server: str) -> set[tuple[str, str, str]]:
    """The Keep Alive rows of a 5.0 connection left open, by the tags of the client's and the server's reasons."""
    return {("client", V5_CLIENT_KEEP_ALIVE, client), ("server", V5_SERVER_DROPS_SILENT_CLIENT, server)}


def mqtt31(suite: str, *, anomalies: Iterable[tuple[str, int]] = ()) -> Expected:
    """MQTT31 with another account of the suite."""
    return replace(MQTT31, suite=suite, anomalies=tuple(anomalies))


SV = "suricata-verify/"
EXPECTED: dict[tuple[str, int], Expected] = {
    (SV + "mqtt311-pub-qos1.pcap", 38500): MQTT311,  # PUBLISH 32 QoS 1 id 1, PUBACK 40 02 00 01
    (SV + "mqtt311-pub-qos2.pcap", 38546): MQTT311,  # PUBLISH QoS 2, PUBREC, PUBREL 62 02 (flags 0010), PUBCOMP
    (SV + "mqtt311-pub-userpass.pcap", 38458): MQTT311,  # CONNECT flags c2: user name, password, clean session
    (SV + "mqtt311-sub-userpass.pcap", 38588): MQTT311,  # SUBSCRIBE 82 (flags 0010) topicX, topicY; SUBACK 00 00
    (SV + "mqtt311-unsub-qos1.pcap", 38676): MQTT311,  # UNSUBACK even for topicY, never subscribed [MQTT-3.10.4-5]
    (SV + "mqtt311-unsub-qos2.pcap", 38718): MQTT311,  # SUBSCRIBE QoS 2 granted 02; two UNSUBSCRIBEs in one segment
    (SV + "mqtt311-unsub-userpass.pcap", 38634): MQTT311,
    (SV + "mqtt-limit-2.pcap", 44659): expected(
        "no anomaly; mqtt-limit-* truncate PUBLISH messages above Suricata's max-msg-length and string-log-limit "
        "settings: limits of Suricata, not MQTT rules (mqttaudit decodes all four PUBLISHes whole)",
    ),  # PUBLISH 32 a7 8d 06: Remaining Length 100007 in three bytes, the shortest form; QoS 0 copy to the subscriber
    (SV + "mqtt31-pub-qos1.pcap", 38154): MQTT31,
    (SV + "mqtt31-pub-qos2.pcap", 38196): MQTT31,
    (SV + "mqtt31-pub-userpass.pcap", 38108): MQTT31,
    (SV + "mqtt31-pub-userpass-auto-clientid.pcap", 38066): MQTT31,  # client id mosq-dRkAMvJQvimi16jz72 (23 bytes)
    (SV + "mqtt31-sub-userpass.pcap", 38238): MQTT31,
    (SV + "mqtt31-unsub-qos1.pcap", 38326): MQTT31,
    (SV + "mqtt31-unsub-userpass.pcap", 38280): MQTT31,
    (SV + "mqtt-events-unassigned-msgtype.pcap", 38458): expected(
        "unassigned_msg_type: a packet of type 0, reserved and forbidden by Table 2.1, breaks the codec's rule; "
        "the client closed 22 us later, before the server had to close [MQTT-4.8.0-1]",
        client={RESERVED_TYPE},  # the third client packet starts 00 18: the PUBLISH's 0x30 edited to 0x00
        not_assessable={("server", CLOSE_ON_VIOLATION, PEER_CLOSED), ("server", RESERVED_TYPE, PEER_CLOSED)},
        anomalies=[("unassigned_msg_type", 1)],
    ),
    (SV + "mqtt-events-unintroduced.pcap", 38108): mqtt31(
        "unintroduced_message is Suricata's own state (no CONNACK seen before the PUBLISH), not an MQTT rule: "
        "3.1.4 lets a client send packets right after CONNECT without waiting for CONNACK; and the behaviour of "
        "MQTT 3.1 (MQIsdp 3, as in mqtt31-pub-userpass.pcap) is not judged",
        anomalies=[("unintroduced_message", 1)],
    ),
    (SV + "mqtt-ping.pcap", 49327): expected(
        "unintroduced_message x2 (PINGREQ and PINGRESP without a CONNECT seen) maps to MQTT-3.1.0-1 and "
        "MQTT-3.2.0-1, not assessable: no SYN, the capture starts inside the connection (2 frames cut from "
        "zeek/mqtt.pcap), so its CONNECT and CONNACK were sent before it",
        "unknown",
        not_assessable={("client", CONNECT_FIRST, MID_STREAM_TAG), ("server", CONNACK_FIRST, MID_STREAM_TAG)},
        anomalies=[("unintroduced_message", 2)],
    ),
    (SV + "mqtt5-excessiveproplen.pcap", 37758): mqtt5(
        "malformed_traffic: the CONNECT 10 2f 00 04 'MQTT' 05 c2 00 3c ff 21 ... has the Property Length ff 21, a "
        "Variable Byte Integer of 127 + 33 * 128 = 4351, where 35 bytes of the packet follow it: the Property Length "
        "runs past the packet [MQTT-2.2.2-property-length]. The properties took the rest of the packet, so the "
        "Client Identifier (00 13 'myvoiceismypassport', inside the span the Property Length claims) is not held "
        "missing on its own account: one defect, one finding. A separate test shows the byte. The server answers "
        "this Malformed Packet with CONNACK 20 06 00 00 (0x00 Success): 3.1.4 lets it send a CONNACK of 0x80 or "
        "above before closing, never accept [MQTT-3.1.4-1]. One act, one finding: the acceptance cites MQTT-3.1.4-1, "
        "the server's own duty for a CONNECT, and the property rule it upholds is failed by the same act, not "
        "reported again; the close itself is not assessable, the client closed 0.5 ms after its CONNECT",
        client={V5_PROPERTY_LENGTH},
        server={V5_MALFORMED_CONNECT},
        not_assessable={("server", V5_PROPERTY_LENGTH, PEER_CLOSED), ("server", V5_MALFORMED_CONNECT, PEER_CLOSED)},
        anomalies=[("malformed_traffic", 1)],
    ),
    (SV + "mqtt5-pub-userpass.pcap", 37758): MQTT5,
    (SV + "mqtt5-pub-userpass-auto-clientid.pcap", 37716): MQTT5,  # CONNACK property 12: assigned client id
    (SV + "mqtt-connect-rules.pcap", 53654): MQTT5,  # PUBLISH of 35771 bytes over two segments (JPEG payload)
    (SV + "mqtt-frames-truncated.pcap", 53048): mqtt5(
        "no anomaly: its frame alerts depend on Suricata's max-msg-length 60 and on a PUBLISH these bytes lack "
        "(a separate test). CONNECT (Keep Alive 60) and CONNACK 0x00 (no Server Keep Alive) end the capture 0.5 ms "
        "apart with the connection open: the client's PINGREQ (due 61 s on) and the server's close of a silent "
        "client (91 s on) fall after the end of the capture [MQTT-3.1.2-20, MQTT-3.1.2-22], by the client's Keep "
        "Alive, which applies without a Server Keep Alive [MQTT-3.2.2-22]",
        not_assessable=keep_alive_5(CAPTURE_ENDS, CAPTURE_ENDS)
        | {("server", V5_CLIENT_KEEP_ALIVE_APPLIES, CAPTURE_ENDS)},
    ),
    (SV + "mqtt5-pub-qos1.pcap", 37802): MQTT5,  # PUBACK 40 03 00 01 10: a reason code, 5.0's shape
    (SV + "mqtt5-sub-userpass.pcap", 37890): MQTT5,
    (SV + "mqtt5-sub-mosquittoprops.pcap", 38848): mqtt5(
        "no anomaly (Suricata logs the Will's payload_format_indicator 144 and checks no property value); the "
        "CONNECT's Will Properties (4b: 75 bytes) hold 01 90, Payload Format Indicator 0x90 = 144, where 3.1.3.2.3 "
        "defines 0 and 1 only [MQTT-3.3.2-payload-format]. It names no error for another value (unlike Request "
        "Response Information, 3.1.2.11.6), so the broker owes no close: accepting it (CONNACK 00) and the SUBACK "
        "after it are no finding. The client left with DISCONNECT e0 1d 04 + properties and closed",
        client={V5_PAYLOAD_FORMAT},
    ),
    (SV + "mqtt5-unsub-qos2.pcap", 38020): MQTT5,
    (SV + "mqtt5-unsub-userpass.pcap", 37932): MQTT5,
}
# Zeek's trace (and peafowl's pcapng copy of it): two MQTT 3.1 connections seen from their middle, no SYN. The first
# client bytes are a CONNECT (MQIsdp 3), whose shape proves the packet boundary: both connections are labelled 3.1
# and decoded, not judged.
for capture in ("zeek/mqtt.pcap", "peafowl/mqtt-1.pcapng"):
    EXPECTED[capture, 49327] = mqtt31("no anomaly (Zeek and peafowl only log); MQTT 3.1 seen from its CONNECT")
    EXPECTED[capture, 49330] = mqtt31("no anomaly; PUBLISH and DISCONNECT before the CONNACK arrives, which 3.1 allows")
# Arkime's synthetic capture: seven connections whose server sends TCP acknowledgements and no byte of payload
# (Arkime: server bytes 0). Each connection's last segment comes within 3.2 s of its CONNECT and nothing of it is
# captured afterwards, although the capture goes on to 1700000100.4 s: a missing CONNACK (due 5 s after the CONNECT)
# cannot be told from a connection the capture stopped seeing, so it is not assessable ("no activity captured
# after"); and a server that never accepted the connection owed no SUBACK, PUBACK or UNSUBACK ("connection never
# accepted"). Keep Alive (60 s) is not seen past the connection's last segment either: the client's next packet
# (due 61 s after its last) and the server's close (due 91 s after it) fall after that, and after the end of the
# capture for the connections that began late in it.
ARKIME = "arkime/mqtt_synthetic.pcap"
NO_SERVER = "no anomaly (Arkime only logs); the generator wrote no byte from the server"
NO_CONNACK = {("server", CONNACK_FOR_VALID_CONNECT, NO_ACTIVITY), ("server", SESSION_PRESENT_0, NO_ANSWER)}


def keep_alive(client: str, server: str) -> set[tuple[str, str, str]]:
    """The Keep Alive rows of a connection left open, by the tags of the client's and the server's reasons."""
    return {("client", CLIENT_KEEP_ALIVE, client), ("server", SERVER_DROPS_SILENT_CLIENT, server)}


SUBACK_UNOWED = {
    ("server", rule, NOT_ACCEPTED) for rule in (SUBACK_SENT, SUBACK_ID, SUBACK_CODES, SUBACK_ORDER, ACK_ID)
}
PUBACK_UNOWED = {("server", rule, NOT_ACCEPTED) for rule in (QOS1_RECEIVER_PUBACK, PUBACK_ID, PUBACK_TYPE)}
EXPECTED |= {
    (ARKIME, 54321): expected(
        NO_SERVER,
        not_assessable=NO_CONNACK | SUBACK_UNOWED | PUBACK_UNOWED | keep_alive(NO_ACTIVITY, NO_ACTIVITY),
    ),  # SUBSCRIBE id 1, PUBLISH QoS 1 id 2, silent after 3.2 s; the capture goes on 96.1 s
    (ARKIME, 44444): mqtt31(NO_SERVER + "; MQTT 3.1 CONNECT (MQIsdp 3, Will QoS 2), decoded, not judged"),
    (ARKIME, 33333): expected(
        NO_SERVER,
        not_assessable=NO_CONNACK
        | SUBACK_UNOWED
        | {("server", UNSUBACK_SENT, NOT_ACCEPTED)}
        | keep_alive(NO_ACTIVITY, CAPTURE_ENDS),
    ),  # alerts/+ was in its SUBSCRIBE; the capture goes on 77.2 s
    (ARKIME, 22222): expected(
        NO_SERVER, not_assessable=NO_CONNACK | PUBACK_UNOWED | keep_alive(NO_ACTIVITY, CAPTURE_ENDS)
    ),  # public/stocks QoS 1 id 1; the capture goes on 66.2 s
    (ARKIME, 11111): mqtt5(
        NO_SERVER + "; an MQTT 5.0 session judged as 54321 (SUBSCRIBE id 1, PUBLISH QoS 1 id 2, silent after 2.1 s), "
        "under its 5.0 ids; the capture goes on 57.2 s, short of the Keep Alive deadlines. No CONNACK declared the "
        "server's Receive Maximum; one QoS 1 PUBLISH in flight keeps any (it is never 0) [MQTT-3.3.4-7], but the "
        "send quota it starts is not judged [MQTT-4.9.0-2], nor its QoS and RETAIN against the Maximum QoS and "
        "Retain Available no CONNACK declared [MQTT-3.2.2-11, MQTT-3.2.2-14]",
        not_assessable={
            ("server", V5_CONNACK_FOR_VALID_CONNECT, NO_ACTIVITY),
            ("server", V5_SESSION_PRESENT_0, NO_ANSWER),
            ("client", V5_SEND_QUOTA, NO_ANSWER),
            ("client", V5_WITHIN_MAXIMUM_QOS, NO_ANSWER),
            ("client", V5_NO_RETAIN_UNAVAILABLE, NO_ANSWER),
        }
        | {
            ("server", rule, NOT_ACCEPTED)
            for rule in (V5_SUBACK_SENT, V5_SUBACK_ID, V5_SUBACK_CODES, V5_SUBACK_ORDER, V5_ACK_ID)
        }
        | {("server", rule, NOT_ACCEPTED) for rule in (V5_QOS1_RECEIVER_PUBACK, V5_PUBACK_ID, V5_PUBACK_TYPE)}
        | keep_alive_5(CAPTURE_ENDS, CAPTURE_ENDS),
    ),
    (ARKIME, 55556): expected(
        NO_SERVER,  # UNSUBSCRIBE of filters never subscribed: UNSUBACK owed [MQTT-3.10.4-5], but not by this server
        not_assessable=NO_CONNACK
        | {("server", UNSUBACK_SENT, NOT_ACCEPTED), ("server", UNSUBACK_WITHOUT_DELETION, NOT_ACCEPTED)}
        | {("server", ACK_ID, NOT_ACCEPTED)}
        | keep_alive(CAPTURE_ENDS, CAPTURE_ENDS),
    ),  # the capture goes on 50.2 s
    (ARKIME, 55557): expected(
        NO_SERVER + "; the capture ends 0.25 s after this CONNECT, before a CONNACK was due",
        not_assessable={("server", CONNACK_FOR_VALID_CONNECT, CAPTURE_ENDS), ("server", SESSION_PRESENT_0, NO_ANSWER)}
        | keep_alive(CAPTURE_ENDS, CAPTURE_ENDS),
    ),  # PUBLISH with an 8190-byte topic, Remaining Length 8192
}


def test_the_table_names_every_connection_of_every_capture() -> None:
    found = {(name, flow.client_port) for name in FILES for flow in judged(name)}
    assert found == set(EXPECTED)


@pytest.mark.parametrize(("name", "port"), sorted(EXPECTED), ids=[f"{n}:{p}" for n, p in sorted(EXPECTED)])
def test_mqttaudit_reports_what_the_bytes_of_each_connection_call_for(name: str, port: int) -> None:
    want = EXPECTED[name, port]
    flow = flow_of(name, port)
    required = {("client", rule) for rule in want.client} | {("server", rule) for rule in want.server}
    assert flow.reported == required, want.suite  # every finding is in the table, with its justification
    assert flow.undecided == want.not_assessable, want.suite
    assert flow.row["version"] == want.version
    assert flow.row["handling"] == handling(want.version)
    if want.version in ("5.0", "3.1"):
        # Decoded with their own version (judged in 5.0, not in 3.1): the bytes of a packet breaking a MUST of the
        # connection's version are malformed, all other bytes packets (no framing doubt in these captures).
        assert flow.audit.events and flow.audit.judged == (want.version == "5.0")
        total = flow.audit.total
        malformed = sum(
            f.length for f in flow.frames() if any(rule_level(v.rule, want.version)[0] == "MUST" for v in f.violations)
        )
        assert total.unassessable == 0 and (total.malformed, total.packets + total.gaps) == (
            malformed,
            total.stream - malformed,
        )
        assert (malformed > 0) == bool(want.client)
        # Every row is named, levelled and sectioned in the connection's version, the judge's included.
        rows = flow.result.violations.data
        assert set(rows["rule_version"]) <= {want.version if want.version == "5.0" else "3.1.1"}
        for rule, level, section in zip(rows["rule"], rows["level"], rows["section"], strict=True):
            assert (level, section) == rule_level(rule, want.version)
        # The packets table names the version on every row.
        assert set(flow.result.packets.data["version"]) == {want.version}


def suricata_expectations() -> Iterator[tuple[str, str]]:
    """(capture, text of a test.yaml run on it), by the file each SOURCES.tsv row names."""
    with corpus.capture("SOURCES.tsv").open(newline="") as table:
        for row in csv.DictReader(table, delimiter="\t"):
            if row["file"].endswith(".test.yaml"):
                pcap = re.search(r"(?:uses|expectations for) (\S+\.pcap)", row["notes"])
                assert pcap is not None, row["notes"]
                yield f"{SV}{pcap.group(1)}", corpus.capture(row["file"]).read_text()


def anomalies_in(text: str) -> Counter[str]:
    """The anomaly events of a test.yaml, each weighted by the count of the filter it sits in."""
    found: Counter[str] = Counter()
    count = 0
    for line in text.splitlines():
        if match := re.match(r"\s*count:\s*(\d+)", line):
            count = int(match.group(1))
        elif match := re.match(r"\s*anomaly\.event:\s*(\w+)", line):
            found[match.group(1)] += count
    return found


def test_the_table_answers_every_anomaly_the_suricata_suite_expects() -> None:
    theirs: Counter[tuple[str, str]] = Counter()
    for capture, text in suricata_expectations():
        theirs.update({(capture, event): n for event, n in anomalies_in(text).items()})
    ours = Counter({(name, event): n for (name, _port), want in EXPECTED.items() for event, n in want.anomalies})
    assert ours == theirs


def inventory_versions(name: str) -> Counter[str]:
    """The versions tshark names in a capture ("3.1(x1),3.1.1(x5),5.0(x1)"), with their connection counts."""
    found: Counter[str] = Counter()
    for part in INVENTORY[name]["mqtt_versions"].split(","):
        match = re.fullmatch(r"([\d.]+)\(x(\d+)\)", part)
        found["unknown" if match is None else match.group(1)] += 1 if match is None else int(match.group(2))
    return found


@pytest.mark.parametrize("name", FILES)
def test_each_connection_is_labelled_with_the_version_tshark_reads_and_its_packet_types_are_tshark_s(
    name: str,
) -> None:
    flows = judged(name)
    assert Counter(str(flow.row["version"]) for flow in flows) == inventory_versions(name)
    # The packets table names every frame's type, framed-only connections included (from the fixed header).
    ours = Counter(str(kind).replace("_", "") for flow in flows for kind in flow.types())
    theirs = Counter(
        {kind: int(n) for kind, n in (item.split(":") for item in INVENTORY[name]["mqtt_msgtypes"].split(","))}
    )
    assert ours == theirs
    for flow in flows:
        if flow.row["version"] in ("5.0", "3.1"):
            # Decoded with their version: a whole packet for every frame; only the codec speaks of a 3.1 connection.
            assert all(frame.packet is not None for frame in flow.frames())
            assert flow.row["version"] == "5.0" or set(flow.result.violations.data["origin"]) <= {"codec"}
            assert flow.row["protocol_level"] == {"5.0": 5, "3.1": 3}[str(flow.row["version"])]
    # tshark flags a frame "[Malformed Packet]" when its dissector runs out of bytes; each such packet is one that
    # mqttaudit finds breaking a MUST. mqttaudit finds more where tshark checks no property value (mosquittoprops:
    # the Will's Payload Format Indicator 144, see EXPECTED).
    ours = [
        PacketType(frame.raw[0] >> 4).name
        for flow in flows
        for frame in flow.frames()
        if any(rule_level(v.rule, str(flow.row["version"]))[0] == "MUST" for v in frame.violations)
    ]
    tshark = re.findall(r"MQTT: (\w+) Command\[Malformed Packet\]", INVENTORY[name]["malformed_detail"])
    beyond_tshark = {
        SV + "mqtt5-sub-mosquittoprops.pcap": ["CONNECT"],
        SV + "mqtt-events-unassigned-msgtype.pcap": ["RESERVED_0"],  # tshark names type 0 "Reserved", no error
    }
    assert ours == [kind.upper() for kind in tshark] + beyond_tshark.get(name, [])


def test_the_v5_property_length_suricata_calls_malformed_is_found_where_it_runs_past_the_connect() -> None:
    # The capture is mqtt5-pub-userpass.pcap with one byte edited: the CONNECT's property length 03 -> ff.
    [edited], [intact] = judged(SV + "mqtt5-excessiveproplen.pcap"), judged(SV + "mqtt5-pub-userpass.pcap")
    edited_raw, intact_raw = edited.frames("client")[0].raw, intact.frames("client")[0].raw
    assert [(i, a, b) for i, (a, b) in enumerate(zip(edited_raw, intact_raw, strict=True)) if a != b] == [
        (12, 0xFF, 0x03)
    ]
    assert edited_raw.hex(" ").startswith("10 2f 00 04 4d 51 54 54 05 c2 00 3c ff 21 00 14")
    assert edited.row["version"] == intact.row["version"] == "5.0"
    assert edited.types() == intact.types() == ["CONNECT", "CONNACK", "PUBLISH", "DISCONNECT"]
    # Intact, the Property Length 03 covers Receive Maximum 21 00 14 (20), as Suricata logs it; edited, ff 21 is a
    # Variable Byte Integer of 4351 with 35 bytes of the 49-byte packet after it: found at the byte edited.
    assert intact.reported == set() and intact.packets(Connect)[0].properties == properties.make(receive_maximum=20)
    rows = edited.result.violations.data
    found = {
        (rule, offset, level) for rule, offset, level in zip(rows["rule"], rows["offset"], rows["level"], strict=True)
    }
    assert (V5_PROPERTY_LENGTH, 12, "MUST") in found
    [overrun] = [v for v in edited.frames("client")[0].violations if v.rule == V5_PROPERTY_LENGTH]
    assert "4351" in overrun.detail and "35 byte(s)" in overrun.detail
    # The other packets read as in the intact capture; only the CONNECT's 49 bytes are malformed.
    assert [f.packet for f in edited.frames()[1:]] == [f.packet for f in intact.frames()[1:]]
    assert (edited.audit.total.malformed, intact.audit.total.malformed) == (49, 0)


def test_the_server_accepting_the_bad_property_length_is_one_finding_citing_its_connect_duty() -> None:
    # CONNACK 20 06 00 00 (0x00 Success) to the CONNECT whose Property Length runs past it: one act, one row, citing
    # MQTT-3.1.4-1 (the server's duty for a CONNECT); the property rule it upholds is failed by the same act.
    flow = flow_of(SV + "mqtt5-excessiveproplen.pcap", 37758)
    rows = flow.result.violations.data
    server = [
        (rule, also, event, frame)
        for rule, also, event, frame, actor in zip(
            rows["rule"], rows["also"], rows["event"], rows["frame"], rows["actor"], strict=True
        )
        if actor == "server"
    ]
    assert flow.frames("server")[0].raw.hex(" ").startswith("20 06 00 00")
    assert server == [(V5_MALFORMED_CONNECT, [V5_PROPERTY_LENGTH], 1, server[0][3])]


@pytest.mark.parametrize("name", FILES)
def test_one_act_is_one_finding_in_every_connection_of_the_shared_captures(name: str) -> None:
    """No two violation rows, the codec's or the judge's, name the same event of a connection and the same side."""
    for flow in judged(name):
        rows = flow.result.violations.data
        acts = Counter(zip(rows["flow"], rows["event"], rows["actor"], strict=True))
        assert [act for act, rows_of_act in acts.items() if rows_of_act > 1] == [], flow.result.violations.data


def test_the_frame_alerts_of_mqtt_frames_truncated_cannot_come_from_its_bytes() -> None:
    # Its rules match a PUBLISH starting 32 a7 8d and ending "XXX" (as in mqtt-limit-2.pcap); this copy holds a
    # CONNECT (flags c2: no Will, whatever INVENTORY.tsv says) and a CONNACK, 85 bytes in all.
    [flow] = judged(SV + "mqtt-frames-truncated.pcap")
    assert flow.types() == ["CONNECT", "CONNACK"]
    assert flow.frames("client")[0].raw[9] == 0xC2
    [publish] = [f.raw for f in flow_of(SV + "mqtt-limit-2.pcap", 44659).frames("client") if f.length == 100_011]
    assert publish.startswith(bytes.fromhex("32a78d")) and publish.endswith(b"XXX")


# -- Suricata's logs: the same packets, read by another decoder --------------------------------------------------


def logged_fields(text: str) -> list[tuple[str, str]]:
    """(key, value) of every ``mqtt.*`` match line of a test.yaml, quotes removed."""
    fields = []
    for line in text.splitlines():
        if match := re.match(r"\s*(mqtt\.[\w.]+):\s*(.*?)\s*$", line):
            fields.append((match.group(1), match.group(2).strip('"')))
        elif match := re.match(r"\s*has-key:\s*(mqtt\.\w+)", line):
            fields.append((match.group(1), ""))
    return fields


def test_suricata_logs_the_packet_types_and_the_fields_mqttaudit_decodes() -> None:
    for capture, text in suricata_expectations():
        flows = judged(capture)
        types = {str(kind).lower() for flow in flows for kind in flow.types()}
        publishes = [p for flow in flows for p in flow.packets(Publish)]
        level = {flow.row["protocol_level"] for flow in flows}
        for key, value in logged_fields(text):
            kind = key.split(".")[1]
            assert kind in types, (capture, key)  # the fixed header is the same in every version
            if key == "mqtt.connect.protocol_version":
                assert level == {int(value)}, capture
            elif key == "mqtt.connect.client_id":
                assert [flow.connect.client_id for flow in flows if flow.connect] == [value], capture
            elif key == "mqtt.publish.topic":
                assert value in {p.topic for p in publishes}, capture
            elif key == "mqtt.publish.message" and "[truncated" not in value:
                assert value.encode() in {p.payload for p in publishes}, capture


def packet_rows(flows: Iterable[Judged]) -> list[dict[str, object]]:
    """The packets table's rows of some connections."""
    return [
        dict(zip(flow.result.packets.names, values, strict=True))
        for flow in flows
        for values in zip(*flow.result.packets.data.values(), strict=True)
    ]


def test_suricata_logs_the_v5_properties_and_reason_codes_the_packets_table_holds() -> None:
    # Suricata logs MQTT 5.0 properties by name (a User Property by its own name) and each reason code; the packets
    # table holds the same values in its columns (the Will's properties in the decoded CONNECT: no column is
    # about a Will). A reason code the bytes leave out is null in the table: it means 0x00, as Suricata logs it.
    compared = Counter[str]()
    for capture, text in suricata_expectations():
        flows = judged(capture)
        if {flow.row["version"] for flow in flows} != {"5.0"}:
            continue
        rows = packet_rows(flows)
        for key, value in logged_fields(text):
            kind, *rest = key.split(".")[1:]
            of_kind = [row for row in rows if str(row["type"]).lower() == kind]
            if rest[:1] == ["properties"]:
                name = rest[1]
                if name.startswith("userprop"):
                    assert any(f"{name}={value}" in (row["user_properties"] or []) for row in of_kind), (capture, key)
                else:
                    assert str(value) in {str(row[name]) for row in of_kind}, (capture, key)
            elif rest[:2] == ["will", "properties"]:
                [connect] = [flow.connect for flow in flows if flow.connect and flow.connect.will]
                assert connect.will is not None
                will = properties.as_mapping(connect.will.properties)
                name = rest[2]
                if name.startswith("userprop"):
                    assert (name, value) in will["user_property"], (capture, key)  # type: ignore[operator]
                else:
                    logged = will[name].decode() if isinstance(will[name], bytes) else will[name]  # type: ignore[union-attr]
                    assert str(logged) == value, (capture, key)
            elif rest in (["reason_code"], ["return_code"], ["reason_codes"]):
                codes = [int(code) for code in re.findall(r"\d+", value)]
                # e0 01 04: Suricata drops a Reason Code no properties follow (the test below), so it logs 0.
                ours = [
                    0
                    if row["reason_code"] is None or (kind, row["length"]) == ("disconnect", 3)
                    else row["reason_code"]
                    for row in of_kind
                ]
                assert len(codes) == 1 and codes[0] in ours, (capture, key)
            else:
                continue
            compared[rest[0]] += 1
    assert set(compared) == {"properties", "will", "reason_code", "return_code", "reason_codes"}


def test_suricata_reads_a_v5_reason_code_without_properties_as_0() -> None:
    # MQTT 5.0 3.14.2: with a Remaining Length of 1 the byte is the Reason Code (and the Property Length is 0).
    # These DISCONNECTs are e0 01 04, "Disconnect with Will Message", yet the suite expects reason_code 0: its
    # parser drops a Reason Code that no properties follow. The suite disagrees with the bytes, not with mqttaudit.
    for name in ("mqtt5-sub-userpass.pcap", "mqtt5-unsub-qos2.pcap", "mqtt5-unsub-userpass.pcap"):
        [flow] = judged(SV + name)
        assert flow.frames("client")[-1].raw == bytes.fromhex("e00104")
        assert "mqtt.disconnect.reason_code: 0" in corpus.capture(SV + name.replace(".pcap", ".test.yaml")).read_text()


def test_suricata_frames_and_truncated_lengths_are_mqttaudit_frames() -> None:
    # mqtt-frames-xpdu: two UNSUBSCRIBE PDUs of 13 bytes (header 2, data 11) in one TCP segment, frame 10.
    # Suricata reports them at pcap_cnt 12, a bare ACK: where it inspected the stream, not what carried the bytes.
    [unsub] = judged(SV + "mqtt5-unsub-userpass.pcap")
    pdus = [
        (record, frame.length, frame.raw[1])
        for frame, record, kind in zip(unsub.frames(), frame_records(unsub), unsub.types(), strict=True)
        if kind == "UNSUBSCRIBE"
    ]
    assert pdus == [(10, 13, 11), (10, 13, 11)]
    # mqtt-limit-*: skipped_length is the whole PUBLISH Suricata passed over, fixed header included.
    [limit] = judged(SV + "mqtt-limit-2.pcap")
    lengths = {frame.length for frame in limit.frames() if isinstance(frame.packet, Publish)}
    payloads = {p.payload for p in limit.packets(Publish)}
    for capture, text in suricata_expectations():
        if capture == SV + "mqtt-limit-2.pcap":
            assert {int(n) for n in re.findall(r"skipped_length: (\d+)", text)} <= lengths
            for letters, more in re.findall(r"message: (\w+)\[truncated (\d+) additional bytes\]", text):
                assert letters[0].encode() * (len(letters) + int(more)) in payloads
    assert lengths == {100_011, 100_009, 1010, 109}


def frame_records(flow: Judged) -> list[int | None]:
    """The frame number of each packet of a flow, as the packets table names it."""
    rows = flow.result.packets.data
    by_offset = {
        (side, offset): frame
        for side, offset, frame in zip(rows["direction"], rows["offset"], rows["frame"], strict=True)
    }
    sides = {flow.audit.client: "client", 1 - (flow.audit.client or 0): "server"}
    return [by_offset[sides[side], frame.offset] for side, _time, frame in flow.audit.frames]


# -- Zeek's logs and peafowl's count ---------------------------------------------------------------------------


def zeek_log(name: str) -> list[dict[str, str]]:
    lines = corpus.capture(f"zeek/{name}").read_text().splitlines()
    [fields] = [line.split("\t")[1:] for line in lines if line.startswith("#fields")]
    return [dict(zip(fields, line.split("\t"), strict=True)) for line in lines if line and not line.startswith("#")]


ZEEK_TRACES = ["zeek/mqtt.pcap", "peafowl/mqtt-1.pcapng"]  # the same packets, as pcap and as pcapng
ZEEK_QOS = {"at most once": 0, "at least once": 1, "exactly once": 2}


def timed_publishes(name: str) -> list[tuple[int, bool, Publish]]:
    """(client port, sent by the client, packet) of every PUBLISH of a capture, in capture order."""
    found = [
        (time, flow.client_port, side == flow.audit.client, frame.packet)
        for flow in judged(name)
        for side, time, frame in flow.audit.frames
        if isinstance(frame.packet, Publish)
    ]
    return [(port, by_client, packet) for _time, port, by_client, packet in sorted(found, key=lambda item: item[0])]


@pytest.mark.parametrize("name", ZEEK_TRACES)
def test_zeek_logs_the_publishes_mqttaudit_decodes(name: str) -> None:
    ours = [
        (port, by_client, p.retain, p.qos, p.topic, p.payload.decode(), len(p.payload))
        for port, by_client, p in timed_publishes(name)
    ]
    theirs = [
        (
            int(row["id.orig_p"]),
            row["from_client"] == "T",
            row["retain"] == "T",
            ZEEK_QOS[row["qos"]],
            row["topic"],
            row["payload"],
            int(row["payload_len"]),
        )
        for row in zeek_log("mqtt.baseline.mqtt.mqtt_publish.log")
    ]
    assert ours == theirs
    # Under MQTT::max_payload_size Zeek logs a prefix of the payload and its whole length: Zeek's limit, not MQTT's.
    capped = zeek_log("mqtt.baseline.mqtt-payload-cap.mqtt_publish.log")
    assert [(row["payload"], int(row["payload_len"])) for row in capped] == [
        (payload[:8], length) for *_, payload, length in ours
    ]
    printed = corpus.capture("zeek/mqtt.baseline.mqtt-payload-cap-dynamic.out").read_text().splitlines()[1:]
    for line, (*_, payload, length) in zip(printed, ours, strict=True):
        _event, prefix, shown, whole = line.split(", ")
        assert payload.startswith(prefix) and len(prefix) == int(shown) and int(whole) == length


@pytest.mark.parametrize("name", ZEEK_TRACES)
def test_zeek_logs_the_subscription_and_the_connects_mqttaudit_frames(name: str) -> None:
    [row] = zeek_log("mqtt.baseline.mqtt.mqtt_subscribe.log")
    flow = flow_of(name, int(row["id.orig_p"]))
    [subscribe], [suback] = flow.packets(Subscribe), flow.packets(Suback)
    assert [(s.topic_filter, str(s.qos)) for s in subscribe.subscriptions] == [(row["topics"], row["qos_levels"])]
    assert suback.packet_id == subscribe.packet_id and suback.return_codes == (int(row["granted_qos_level"]),)
    # Zeek decodes the CONNECT that opens each client stream; so does mqttaudit: without the SYN, the shape of a
    # CONNECT at the first captured byte proves the packet boundary, and it names the version (3.1).
    for row in zeek_log("mqtt.baseline.mqtt.mqtt_connect.log"):
        flow = flow_of(name, int(row["id.orig_p"]))
        assert flow.audit.mid_stream and not flow.audit.unassessable
        connect = flow.frames("client")[0].packet
        assert isinstance(connect, Connect) and flow.frames("client")[0].offset == 0
        assert (connect.protocol_name, VERSIONS[connect.protocol_level], connect.client_id) == (
            row["proto_name"],
            row["proto_version"],
            row["client_id"],
        )
        assert flow.row["version"] == row["proto_version"] and flow.row["client_id"] == row["client_id"]
        [connack] = flow.packets(Connack, "server")
        assert (connack.return_code, row["connect_status"]) == (0, "Connection Accepted")


def test_peafowl_counts_as_mqtt_every_frame_that_carries_payload() -> None:
    # test/testMQTT.cpp expects 19 MQTT packets with TCP reordering disabled (14 with it, peafowl's own
    # reassembly of a trace without handshake): 19 frames carry payload, every byte of it MQTT.
    records = read_records(corpus.capture("peafowl/mqtt-1.pcapng"))
    carrying = [index for index, segment in segments(records) if segment[8]]
    assert len(carrying) == 19
    for flow in judged("peafowl/mqtt-1.pcapng"):
        total = flow.audit.total
        assert total.malformed == total.gaps == 0 and total.packets + total.unassessable == total.stream


# -- Arkime's sessions ---------------------------------------------------------------------------------------------


def arkime_sessions() -> dict[int, dict]:
    sessions = json.loads(corpus.capture("arkime/mqtt_synthetic.arkime-test.json").read_text())["sessions3"]
    return {session["body"]["source"]["port"]: session["body"] for session in sessions}


@dataclass
class Session:
    """What Arkime's MQTT parser records of a session, computed from mqttaudit's decode."""

    client_bytes: int
    type: set[str]
    version: set[str]
    topic: set[str] = field(default_factory=set)
    client_id: set[str] = field(default_factory=set)
    user: set[str] = field(default_factory=set)
    flags: set[str] = field(default_factory=set)
    will_topic: set[str] = field(default_factory=set)
    qos: set[int] = field(default_factory=set)


def as_arkime_session(flow: Judged) -> Session:
    connect = flow.connect
    assert flow.audit.client is not None
    session = Session(
        flow.audit.counts[flow.audit.client].stream, {str(kind) for kind in flow.types()}, {str(flow.row["version"])}
    )
    assert connect is not None, "every Arkime session opens with a CONNECT, 5.0 included"
    for p in flow.packets(Publish):
        session.topic.add(p.topic)
        session.qos.add(p.qos)
    for s in flow.packets(Subscribe):
        session.topic |= {subscription.topic_filter for subscription in s.subscriptions}
    for u in flow.packets(Unsubscribe):
        session.topic |= set(u.topic_filters)
    session.client_id = {connect.client_id} - {""}
    session.user = {connect.username} - {None, ""}
    flags = {"cleanSession": connect.clean_session, "hasPassword": connect.password is not None}
    session.flags = {name for name, on in (*flags.items(), ("hasWill", connect.will is not None)) if on}
    if connect.will is not None:
        session.will_topic, session.qos = {connect.will.topic}, session.qos | {connect.will.qos}
    return session


def test_arkime_records_the_sessions_mqttaudit_decodes() -> None:
    theirs = arkime_sessions()
    flows = {flow.client_port: flow for flow in judged(ARKIME)}
    assert set(flows) == set(theirs)
    for port, flow in flows.items():
        body, ours = theirs[port], as_arkime_session(flow)
        mqtt = body["mqtt"]
        # Framing and byte counts do not depend on the version.
        assert (ours.client_bytes, body["server"]["bytes"], flow.audit.counts[1 - flow.audit.client].stream) == (
            body["client"]["bytes"],
            0,
            0,
        )
        assert (ours.type, ours.version) == (set(mqtt["type"]), set(mqtt["version"])), port
        if port == 55557:
            # Arkime's parser reads each TCP segment on its own and passes over a packet longer than the segment;
            # this PUBLISH spans two (4096 + 4099 bytes), so Arkime has neither its 8190-byte topic nor its QoS.
            assert "topic" not in mqtt and "qos" not in mqtt and [len(t) for t in ours.topic] == [8190]
            ours.topic, ours.qos = set(), set()
        assert ours.topic == set(mqtt.get("topic", [])), port
        assert ours.qos == {int(q) for q in mqtt.get("qos", [])}, port
        assert (ours.client_id, ours.user) == (set(mqtt["clientId"]), set(body.get("user", []))), port
        assert (ours.flags, ours.will_topic) == (set(mqtt["flags"]), set(mqtt.get("willTopic", []))), port


# -- an MQTT 5.0 session seen from its middle ---------------------------------------------------------------------


def test_an_mqtt_5_session_seen_from_its_middle_is_decoded_as_the_5_0_its_packets_are(tmp_path: Path) -> None:
    # mqtt5-pub-qos1.pcap without its handshake and CONNECT. No CONNECT names the version, so the boundary hunt reads
    # the server's bytes in every version: its CONNACK 20 06 00 00 03 22 00 0a (Topic Alias Maximum 10) and PUBACK
    # 40 03 00 01 10 are no 3.1.1 packets but well-formed 5.0 ones, and prove their framing. Every packet of the
    # connection reads as 5.0: it is decoded as MQTT 5.0, inferred, and its behaviour is not judged (no CONNECT:
    # the session and what was negotiated are unknown). No 3.1.1 finding, no byte left unframed.
    source = corpus.capture(SV + "mqtt5-pub-qos1.pcap")
    records = list(read_records(source))
    carrying = [index for index, segment in segments(records) if segment[8]]
    kept = [(record[0], record[2]) for record in records if record[4] > carrying[0]]  # from the CONNACK on
    edited = tmp_path / "mqtt5-mid-stream.pcap"
    edited.write_bytes(pcap_bytes(kept, records[0][1]))
    [audit] = audit_records(read_records(edited))
    assert audit.mid_stream and audit.version == INFERRED_5 and not audit.judged
    assert audit.unassessable == () and audit.total.packets == audit.total.stream
    result = judge_flow(as_flow(edited.name, audit, {}), CONFIG)
    packets = result.packets.data
    assert list(zip(packets["type"], packets["reason_code"], packets["topic_alias_maximum"], strict=True)) == [
        ("CONNACK", 0, 10),
        ("PUBLISH", None, None),
        ("PUBACK", 0x10, None),
        ("DISCONNECT", None, None),
    ]
    assert result.violations.data["rule"] == [] and result.not_assessable.data["rule"] == []


# -- the whole audit ---------------------------------------------------------------------------------------------


#: Captures that hold another capture's connection (a copy, a cut or a byte-edited copy): audited together with it,
#: they would be one connection, as rotated captures are. Each group holds no two copies of one connection.
COPIES = (
    SV + "mqtt-events-unassigned-msgtype.pcap",  # mqtt311-pub-userpass.pcap, one byte edited
    SV + "mqtt-events-unintroduced.pcap",  # mqtt31-pub-userpass.pcap, cut
    SV + "mqtt5-excessiveproplen.pcap",  # mqtt5-pub-userpass.pcap, one byte edited
    "peafowl/mqtt-1.pcapng",  # zeek/mqtt.pcap as pcapng
)
GROUPS = {
    "originals": [name for name in FILES if name not in (*COPIES, SV + "mqtt-ping.pcap")],
    "copies": list(COPIES),
    "cut": [SV + "mqtt-ping.pcap"],  # two frames of zeek/mqtt.pcap
}


# The suricata captures were all recorded against one broker endpoint, so the replay holds them as one broker on one
# clock: mqtt311-pub-userpass.pcap (and its siblings) published to topicX with RETAIN 0, which leaves any retained
# message of topicX in place [MQTT-3.3.1-12]; each later subscriber of topicX closed (DISCONNECT) before such a
# message would have had to arrive, so whether one remained cannot be seen.
ROUTING_UNDECIDED = {
    (SV + "mqtt311-sub-userpass.pcap", 38588, NON_RETAINED_KEEPS_RETAINED),
    (SV + "mqtt311-unsub-qos1.pcap", 38676, NON_RETAINED_KEEPS_RETAINED),
    (SV + "mqtt311-unsub-qos2.pcap", 38718, NON_RETAINED_KEEPS_RETAINED),
    (SV + "mqtt311-unsub-userpass.pcap", 38634, NON_RETAINED_KEEPS_RETAINED),
}
# The 5.0 connections to that broker are replayed with them. Their subscribers of topicX meet the same question under
# the 5.0 id of that rule [MQTT-3.3.1-8]: the 5.0 and 3.1.1 publishers before them sent RETAIN 0.
ROUTING_UNDECIDED |= {
    (SV + "mqtt5-sub-userpass.pcap", 37890, V5_NON_RETAINED_KEEPS_RETAINED),
    (SV + "mqtt5-unsub-userpass.pcap", 37932, V5_NON_RETAINED_KEEPS_RETAINED),
    (SV + "mqtt5-unsub-qos2.pcap", 38020, V5_NON_RETAINED_KEEPS_RETAINED),
    (SV + "mqtt5-sub-mosquittoprops.pcap", 38848, V5_NON_RETAINED_KEEPS_RETAINED),
}
# The same ClientId (myvoiceismypassport) subscribed to topicX on three 5.0 connections 33 to 45 s before the 3.1.1
# publishers of topicX connected with CleanSession 1, which discards any earlier session [MQTT-3.1.2-6]: their own
# message must not come back to them through its subscription, and each closed (DISCONNECT) within a millisecond of
# publishing, before such a copy would have had to arrive.
ROUTING_UNDECIDED |= {
    (SV + "mqtt311-pub-qos1.pcap", 38500, CLEAN_SESSION_DISCARDED),
    (SV + "mqtt311-pub-qos2.pcap", 38546, CLEAN_SESSION_DISCARDED),
}


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_the_audit_of_the_shared_captures_reports_exactly_the_table(spark: object, tmp_path: Path, group: str) -> None:
    """The Spark audit of the captures (a group at a time): its violations are the table's findings, its
    not-assessable rows the table's, its versions the table's, and the routing replay finds nothing."""
    import pyarrow.parquet as pq

    from mqttaudit.pipeline.audit import run_audit

    members = GROUPS[group]
    paths = [corpus.capture(name) for name in members]
    table = {key: want for key, want in EXPECTED.items() if key[0] in members}
    result = run_audit([str(path) for path in paths], tmp_path / "out", spark=spark)
    out = result.out_dir
    names = {str(path): name for path, name in zip(paths, members, strict=True)}
    names |= {path.name: name for path, name in zip(paths, members, strict=True)}
    connections = pq.read_table(out / "connections").to_pylist()
    key = {row["flow"]: (names[row["capture"]], int(row["client"].rsplit(":", 1)[1])) for row in connections}
    assert sorted(key.values()) == sorted(table)
    assert {key[row["flow"]]: row["version"] for row in connections} == {k: w.version for k, w in table.items()}
    violations = pq.read_table(out / "violations").to_pylist()
    # One act, one finding: no two rows name the same event of a connection and the same side.
    acts = Counter((row["flow"], row["event"], row["actor"]) for row in violations)
    assert [act for act, rows_of_act in acts.items() if rows_of_act > 1] == []
    reported = {(*key[row["flow"]], row["actor"], row["rule"]) for row in violations}
    wanted = {
        (*k, side, rule)
        for k, w in table.items()
        for side, rules in (("client", w.client), ("server", w.server))
        for rule in rules
    }
    assert reported == wanted
    rows = pq.read_table(out / "not_assessable").to_pylist()
    undecided = {(*key[row["flow"]], row["actor"], row["rule"], row["tag"]) for row in rows if row["origin"] == "judge"}
    assert undecided == {(*k, *row) for k, w in table.items() for row in w.not_assessable}
    routing = {(*key[row["flow"]], row["rule"]) for row in rows if row["origin"] == "routing"}
    ends = {row["flow"]: (row["client"], row["server"]) for row in connections}
    assert all((row["client"], row["server"]) == ends[row["flow"]] for row in rows)
    assert routing == {row for row in ROUTING_UNDECIDED if row[0] in members}
    assert pq.read_table(out / "routing_findings").num_rows == 0
    packets = Counter[str]()
    for row in connections:
        packets[row["version"]] += row["packets"]
    assert result.summary["versions"] == {
        version: {"connections": count, "handling": handling(version), "packets": packets[version]}
        for version, count in Counter(w.version for w in table.values()).items()
    }
    assert sum(packets.values()) == result.summary["counts"]["packets"]
    assert result.summary["not_assessable"]["rows"] == len(rows)

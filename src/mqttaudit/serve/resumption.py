"""A client's QoS flows across its connections: what it left unacknowledged when one connection ended, and what it
did about it on the next one — the part of client conformance no single connection shows.

- Session Present 1: the client must send every unacknowledged PUBLISH again, with its original Packet Identifier
  [MQTT-4.4.0-1] and DUP set [MQTT-3.3.1-1], and every unacknowledged PUBREL; a connection that stays open past
  the judge's answer timeout without it is a finding, one that ends earlier decides nothing.
- Session Present 0 after a connection with flows in flight (MQTT 5.0): the client must discard its session state
  [MQTT-3.2.2-5]; sending one of those messages again as a re-delivery (DUP set, its old Packet Identifier) or a
  PUBREL of an old flow keeps state it had to discard.

Sans-I/O: fed the packets of one connection in order, with their event indexes and times.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from ..codec import Connack, Connect, Direction, Packet, Puback, Pubcomp, Publish, Pubrec, Pubrel
from ..judge import Finding
from ..spec.ids import R5, R311

CLIENT: Final = Direction.FROM_CLIENT
PUBLISH: Final = "PUBLISH"
PUBREL: Final = "PUBREL"


@dataclass(frozen=True)
class Owed:
    """A flow the client left open: its PUBLISH (unacknowledged) or its PUBREL (no PUBCOMP yet)."""

    kind: str
    packet_id: int
    qos: int


@dataclass
class ClientFlows:
    """One connection's view of the client's outgoing QoS 1 and 2 flows, and of those it inherited."""

    conversation: str
    v5: bool
    #: Called at CONNACK for the flows the ClientId's previous connection left open.
    inherit: Callable[[], list[Owed]]
    #: How long the client has to send its flows again after CONNACK before their absence is a finding.
    timeout: float
    inherited: dict[tuple[str, int], Owed] = field(default_factory=dict)
    open: dict[int, Owed] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    clean_start: bool = True
    session_present: bool | None = None
    connack: tuple[int, float] | None = None

    def on(self, event: int, time: float, sender: Direction, packet: Packet) -> None:
        if sender is CLIENT:
            self._client(event, time, packet)
        elif isinstance(packet, Connack):
            self._connack(event, time, packet)
        elif isinstance(packet, Puback) and packet.packet_id in self.open:
            if self.open[packet.packet_id].kind == PUBLISH:
                del self.open[packet.packet_id]
        elif isinstance(packet, Pubrec) and packet.packet_id is not None:
            owed = self.open.get(packet.packet_id)
            if owed is not None and owed.qos == 2 and owed.kind == PUBLISH:
                if (packet.reason_code or 0) >= 0x80:
                    del self.open[packet.packet_id]  # acknowledged, not to be sent again [MQTT-4.4.0-2]
                else:
                    self.open[packet.packet_id] = Owed(PUBREL, packet.packet_id, 2)
        elif isinstance(packet, Pubcomp) and packet.packet_id in self.open:
            del self.open[packet.packet_id]

    def _connack(self, event: int, time: float, packet: Connack) -> None:
        if packet.return_code != 0:
            return  # refused: the flows stay where they were
        inherited = self.inherit()
        self.session_present, self.connack = packet.session_present, (event, time)
        if not self.clean_start:  # a clean start discards them on purpose
            self.inherited = {(owed.kind, owed.packet_id): owed for owed in inherited}

    def _client(self, event: int, time: float, packet: Packet) -> None:
        if isinstance(packet, Connect):
            self.clean_start = packet.clean_session
            return
        if isinstance(packet, Publish) and packet.qos > 0 and packet.packet_id is not None:
            old = self.inherited.pop((PUBLISH, packet.packet_id), None)
            if old is not None and self.session_present and not packet.dup:
                rule = R5.MQTT_3_3_1_1 if self.v5 else R311.MQTT_3_3_1_1
                self._fail(
                    rule, event, time,
                    f"the client sent again the QoS {old.qos} PUBLISH (Packet Identifier {packet.packet_id}) it left "
                    "unacknowledged on its previous connection, with DUP 0",
                    "a PUBLISH sent again on a resumed session has DUP set",
                )  # fmt: skip
            elif old is not None and self.session_present is False and self.v5 and packet.dup:
                self._discarded(event, time, f"a PUBLISH with DUP set and Packet Identifier {packet.packet_id}")
            self.open[packet.packet_id] = Owed(PUBLISH, packet.packet_id, packet.qos)
        elif isinstance(packet, Pubrel) and packet.packet_id is not None:
            old = self.inherited.pop((PUBREL, packet.packet_id), None)
            if old is not None and self.session_present is False and self.v5:
                self._discarded(event, time, f"a PUBREL for Packet Identifier {packet.packet_id}")

    def _discarded(self, event: int, time: float, what: str) -> None:
        self._fail(
            R5.MQTT_3_2_2_5, event, time,
            f"told Session Present 0, the client sent {what}, a flow of its previous connection's session",
            "a client told Session Present 0 discards its session state and resumes none of its flows",
        )  # fmt: skip

    def finish(self, end: float) -> list[Owed]:
        """Judges the flows the client owed a resumed session, and returns what it leaves open for the next
        connection."""
        left = list(self.open.values())
        if self.session_present and self.connack is not None:
            event, at = self.connack
            for owed in self.inherited.values():
                left.append(owed)
                if end >= at + self.timeout:
                    rule = R5.MQTT_4_4_0_1 if self.v5 else R311.MQTT_4_4_0_1
                    self._fail(
                        rule, event, at,
                        f"told Session Present 1, the client did not send again its {owed.kind} (Packet Identifier "
                        f"{owed.packet_id}) left unacknowledged on its previous connection, within {self.timeout:g} s",
                        "on a resumed session the client sends every unacknowledged PUBLISH and PUBREL again, with "
                        "their original Packet Identifiers",
                    )  # fmt: skip
        return left

    def _fail(self, rule: str, event: int, time: float, detail: str, expected: str) -> None:
        self.findings.append(Finding(rule, CLIENT, time, event, detail, expected, self.conversation))

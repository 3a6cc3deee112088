"""Receiver duties: for each rule a received packet can break, whether a statement binds its receiver (the server, the
client) to detect the defect and close the connection, which statement, and why.

MQTT 3.1.1 and 5.0 differ here. 3.1.1 section 4.8 has a Client or Server that *encounters* a protocol violation close
the connection [MQTT-4.8.0-1] (mqttaudit reads receiving the packet as encountering it), and several statements
repeat the duty for one defect (ill-formed UTF-8 [MQTT-1.5.3-1], invalid flags [MQTT-2.2.2-2]). 5.0 section 4.13.1
calls the rigour of a receiver's checks a compromise (size, capabilities, trust in the sender and the network) and
binds a Server to close only *when it detects* a Malformed Packet or Protocol Error [MQTT-4.13.1-1] (a Client
SHOULD): a 5.0 receiver is bound to detect only what a statement names for it (the Server must treat a SUBSCRIBE
with reserved option bits as malformed [MQTT-3.8.3-5], must validate the whole CONNECT [MQTT-3.1.4-1]). Accepting a
defect nothing binds the receiver to detect is leniency, not a failure of the receiver.

The tables (``data/mqtt-<version>-receiver-duties.tsv``) hold one row per rule and receiver, plus two kinds of rows
whose ``rule`` is ``*``: the version's general duty (``packet`` ``*``), and the duty that covers any defect of one
packet type (the Server's check of a whole CONNECT). A rule's own binding (one that differs from the general one)
comes first; then the packet's; then the general one. Rows that name a binding of their own come first in the file,
most specific first: when one packet breaks several rules, the first such row names the statement the receiver
upholds by closing.
"""

from __future__ import annotations

import csv
import functools
import importlib.resources
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Final

from . import identity
from .catalogue import parse_version
from .registry import StatementId, statement

SERVER: Final = "server"
CLIENT: Final = "client"
RECEIVERS: Final = (SERVER, CLIENT)
#: ``rule`` and ``packet`` of a row that covers any rule (the general duty) or any packet type.
ANY: Final = "*"
#: The packet types a row may be limited to (the names of Table 2.1 / 2-1).
PACKETS: Final = frozenset(
    {
        "CONNECT",
        "CONNACK",
        "PUBLISH",
        "PUBACK",
        "PUBREC",
        "PUBREL",
        "PUBCOMP",
        "SUBSCRIBE",
        "SUBACK",
        "UNSUBSCRIBE",
        "UNSUBACK",
        "PINGREQ",
        "PINGRESP",
        "DISCONNECT",
        "AUTH",
    }
)
#: ``binding`` of a row whose receiver no statement binds.
UNBOUND: Final = "-"


@dataclass(frozen=True, slots=True)
class Duty:
    """What the receiver of a packet breaking ``rule`` owes: the statement that binds it to detect the defect and
    close the connection (None: nothing binds it, so accepting the packet is leniency), and the basis, in words."""

    #: The rule the packet breaks (its sender's), in the version's ids; None for the general and per-packet rows.
    rule: StatementId | None
    receiver: str
    binding: StatementId | None
    basis: str
    #: The packet type the row is limited to, ``*`` for any.
    packet: str = ANY

    @property
    def bound(self) -> bool:
        """A statement binds the receiver to detect the defect (and to close on it)."""
        return self.binding is not None

    @property
    def binding_key(self) -> str | None:
        """The binding statement as the judge names rules (see :mod:`mqttaudit.spec.identity`): the 3.1.1 key whose
        5.0 statement it is, where 3.1.1 states the rule; else the id's own key."""
        binding = self.binding
        if binding is None:
            return None
        if binding.version == identity.V5:
            return _keys_of_5_0().get(str(binding), binding.key)
        return binding


class DutyTable:
    """The receiver duties of one MQTT version."""

    def __init__(
        self, version: str, rows: list[Duty], general: dict[str, Duty], per_packet: dict[tuple[str, str], Duty]
    ):
        self.version = version
        self._rows = rows
        self._by_rule = {(str(row.rule), row.receiver): row for row in rows}
        if len(self._by_rule) != len(rows):
            raise ValueError(f"MQTT {version} receiver duties: a rule has two rows for one receiver")
        self._general = general
        self._per_packet = per_packet

    def __iter__(self) -> Iterator[Duty]:
        return iter(self._rows)

    @property
    def rows(self) -> tuple[Duty, ...]:
        """Every rule's rows, in the table's order (those with a binding of their own first)."""
        return tuple(self._rows)

    @property
    def rules(self) -> frozenset[str]:
        """The ids of the rules that have rows."""
        return frozenset(str(row.rule) for row in self._rows)

    @property
    def bindings(self) -> tuple[Duty, ...]:
        """Every row that binds its receiver: the rules', the packets' and the general ones."""
        every = (*self._rows, *self._per_packet.values(), *self._general.values())
        return tuple(row for row in every if row.binding is not None)

    def general(self, receiver: str) -> Duty:
        """The duty the version puts on ``receiver`` for a defect no statement of its own names."""
        return self._general[_receiver(receiver)]

    def per_packet(self, receiver: str, packet: str) -> Duty | None:
        """The duty that covers any defect of a ``packet`` (a type name) its ``receiver`` gets, if one does."""
        return self._per_packet.get((_receiver(receiver), packet))

    def own(self, rule_id: str, receiver: str) -> Duty | None:
        """The row of the rule ``rule_id`` (an id of this version) for ``receiver``, None when it has none."""
        return self._by_rule.get((str(rule_id), _receiver(receiver)))

    def specific(self, row: Duty) -> bool:
        """The row names a binding of its own: not the version's general one."""
        return row.binding is not None and row.binding != self.general(row.receiver).binding

    def duty(self, rule_id: str, receiver: str, packet: str | None = None) -> Duty | None:
        """The duty of ``receiver`` for a packet (of type ``packet``, when known) breaking the rule ``rule_id`` (an
        id of this version): the rule's own binding, else the packet's, else the general one. None when the rule has
        no row (no received packet breaks it, or its breach is no error to close on)."""
        row = self.own(rule_id, receiver)
        if row is None:
            return None
        if not self.specific(row) and packet is not None:
            wide = self.per_packet(receiver, packet)
            if wide is not None:
                return replace(wide, rule=row.rule)
        return row


def load_duties(version: str) -> DutyTable:
    """The receiver-duty table of ``version`` ("3.1.1", "5.0" or "5")."""
    return _load(parse_version(version))


@functools.cache
def _load(version: str) -> DutyTable:
    name = f"mqtt-{version}-receiver-duties.tsv"
    return parse_duties(version, importlib.resources.files(__package__).joinpath("data", name).read_text("utf-8"), name)


def parse_duties(version: str, text: str, source: str) -> DutyTable:
    """The table of ``version`` written in ``text`` (tab-separated: rule, packet, receiver, binding, basis). Raises
    ``ValueError`` naming ``source`` and the line of a row that names an unknown rule, statement, receiver or packet
    type, or gives no basis."""
    reader = csv.DictReader(text.splitlines(), delimiter="\t", quoting=csv.QUOTE_NONE)
    rows: list[Duty] = []
    general: dict[str, Duty] = {}
    per_packet: dict[tuple[str, str], Duty] = {}
    for line, row in enumerate(reader, start=2):
        rule_text, packet, receiver = row["rule"], row["packet"], row["receiver"]
        where = f"{source} line {line}"
        if receiver not in RECEIVERS:
            raise ValueError(f"{where}: receiver {receiver!r}, not one of {', '.join(RECEIVERS)}")
        if packet != ANY and packet not in PACKETS:
            raise ValueError(f"{where}: packet {packet!r}, not a packet type")
        if not (row["basis"] or "").strip():
            raise ValueError(f"{where}: no basis")
        try:
            binding = None if row["binding"] == UNBOUND else statement(row["binding"], version)
            rule = None if rule_text == ANY else statement(rule_text, version)
        except KeyError as exc:
            raise ValueError(f"{where}: {exc.args[0]}") from None
        duty = Duty(rule, receiver, binding, row["basis"], packet)
        if rule is None and packet == ANY:
            general[receiver] = duty
        elif rule is None:
            per_packet[(receiver, packet)] = duty
        elif packet != ANY:
            raise ValueError(f"{where}: a rule's row covers every packet type (packet '*')")
        else:
            rows.append(duty)
    missing = [receiver for receiver in RECEIVERS if receiver not in general]
    if missing:
        raise ValueError(f"{source}: no general duty for {', '.join(missing)}")
    return DutyTable(version, rows, general, per_packet)


def _receiver(receiver: str) -> str:
    if receiver not in RECEIVERS:
        raise ValueError(f"no receiver {receiver!r}: one of {', '.join(RECEIVERS)}")
    return receiver


def _id_in(rule: str, version: str) -> StatementId | None:
    """The id of ``version`` a key or id names: a registry id of that version names itself; a key (or an id of the
    other version, or plain text) goes through :func:`mqttaudit.spec.identity.statement_id`."""
    if isinstance(rule, StatementId) and rule.version == version:
        return rule
    return identity.statement_id(rule, version)


def receiver_duty(rule: str, version: str, receiver: str, packet: str | None = None) -> Duty | None:
    """The duty of ``receiver`` ("server" or "client") for a packet breaking ``rule`` (a key or an id) in
    ``version``; ``packet`` (a type name such as "CONNECT") lets a duty that covers that whole packet apply. None
    when the rule has no row in that version."""
    version = parse_version(version)
    named = _id_in(rule, version)
    return None if named is None else load_duties(version).duty(named, receiver, packet)


def governing(rules: Iterable[str], version: str, receiver: str, packet: str | None = None) -> Duty:
    """The duty that governs a packet breaking all of ``rules`` (keys or ids): the first, in the table's order, of
    the rules' own bindings; else the packet's; else the general one, for the first of ``rules`` that has a row
    (its row's basis says why the receiver is not bound, where it is not)."""
    version = parse_version(version)
    table = load_duties(version)
    named = [rule for rule in (_id_in(rule, version) for rule in rules) if rule is not None]
    own = [row for row in (table.own(rule, receiver) for rule in named) if row is not None]
    bound = [row for row in own if table.specific(row)]
    if bound:
        return min(bound, key=table.rows.index)
    if packet is not None:
        wide = table.per_packet(receiver, packet)
        if wide is not None:
            return replace(wide, rule=own[0].rule if own else None)
    return own[0] if own else table.general(receiver)


def duties_of(rule_id: str, version: str) -> tuple[Duty, ...]:
    """The rows of the rule ``rule_id`` (an id of ``version``), one per receiver that has one."""
    table = load_duties(version)
    found = (table.own(rule_id, receiver) for receiver in RECEIVERS)
    return tuple(row for row in found if row is not None)


@functools.cache
def _keys_of_5_0() -> Mapping[str, str]:
    """5.0 statement -> the 3.1.1 key the judge names it by, for the 5.0 statements 3.1.1 states under a key of its
    own (the first such key, as :data:`mqttaudit.spec.identity.IN_5_0` lists them)."""
    keys: dict[str, str] = {}
    for key, named in identity.IN_5_0.items():
        if named is not None and not key.endswith("@5.0"):
            keys.setdefault(named, StatementId(key, identity.V3_1_1))
    return MappingProxyType(keys)

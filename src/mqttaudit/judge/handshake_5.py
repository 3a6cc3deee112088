"""MQTT 5.0 duties a server takes on from the CONNECT and its own CONNACK: no DISCONNECT before a CONNACK that
accepts [MQTT-3.14.0-1], no Reason String or User Property outside PUBLISH, CONNACK and DISCONNECT when the client
asked for no problem information [MQTT-3.1.2-29], the Authentication Method repeated in every AUTH and the
authentication continued with 0x18 by either side [MQTT-4.12.0-2, -3, -5], the close after refusing an
authentication [MQTT-4.12.0-1, -4], a re-authentication under the CONNECT's method and the close after one fails
[MQTT-4.12.1-1, -2] (the client's breaches of these are offences its server closes on), a Will within the declared
Maximum QoS and Retain Available [MQTT-3.2.2-12, -13], the close after any CONNACK or DISCONNECT of 0x80 or above
[MQTT-4.13.2-1], and every Topic Alias from 1 to the declared maximum accepted [MQTT-3.3.2-12]."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations
from typing import Final

from mqttaudit.codec import (
    Auth,
    Connack,
    Connect,
    Direction,
    Disconnect,
    Packet,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Unsuback,
)
from mqttaudit.codec import rules as codec_rules
from mqttaudit.codec.properties import first
from mqttaudit.spec import identity

from . import lifecycle, reasons
from .context import Context, Seen
from .events import Closed
from .lifecycle import Phase
from .obligations import Obligation, OnClose
from .transcript import Transcript
from .verdict import Judgement, Ledger
from .violations import Offence, Offences

SERVER: Final = Direction.FROM_SERVER
CLIENT: Final = Direction.FROM_CLIENT
#: Request Problem Information, Reason String, User Property (Table 2.4).
REQUEST_PROBLEM_INFORMATION: Final = 0x17
REASON_STRING: Final = 0x1F
USER_PROPERTY: Final = 0x26
#: Session Expiry Interval (property 0x11), which a server DISCONNECT never carries [MQTT-3.14.2-2].
SESSION_EXPIRY_INTERVAL: Final = 0x11
#: [MQTT-3.14.2-2] The codec's rule, held here on each server DISCONNECT without it.
SERVER_DISCONNECT_NO_EXPIRY: Final = codec_rules.SESSION_EXPIRY_FROM_SERVER
#: Maximum QoS and Retain Available (in CONNACK; absent: 2 and 1).
MAXIMUM_QOS: Final = 0x24
RETAIN_AVAILABLE: Final = 0x25
#: Topic Alias Maximum (in CONNACK) and Topic Alias (in PUBLISH).
TOPIC_ALIAS_MAXIMUM: Final = 0x22
TOPIC_ALIAS: Final = 0x23
#: Assigned Client Identifier (property 0x12 of a CONNACK).
ASSIGNED_CLIENT_IDENTIFIER: Final = 0x12
#: Reason Codes: Continue authentication (AUTH), Not authorized and Bad authentication method (CONNACK), Topic
#: Alias invalid (DISCONNECT).
CONTINUE_AUTHENTICATION: Final = 0x18
#: AUTH Reason Codes: Success, Re-authenticate (Table 3-11).
AUTH_SUCCESS: Final = 0x00
REAUTHENTICATE: Final = 0x19
NOT_AUTHORIZED: Final = 0x87
BAD_AUTHENTICATION_METHOD: Final = 0x8C
TOPIC_ALIAS_INVALID: Final = 0x94
#: CONNACK Reason Codes: Retain not supported, QoS not supported.
RETAIN_NOT_SUPPORTED: Final = 0x9A
QOS_NOT_SUPPORTED: Final = 0x9B
#: Request Response Information (CONNECT) and Response Information (CONNACK), Table 2.4.
REQUEST_RESPONSE_INFORMATION: Final = 0x19
RESPONSE_INFORMATION: Final = 0x1A
#: CONNACK Reason Code 0x85 (Client Identifier not valid) [MQTT-3.1.3-8].
CLIENT_ID_NOT_VALID: Final = 0x85
#: CONNACK Reason Codes that say a further check on the CONNECT failed (section 3.1.4 step 2: its content, the
#: authentication, the authorization) [MQTT-3.1.4-2]: Client Identifier not valid, Bad User Name or Password, Not
#: authorized, Banned, Bad authentication method, Topic Name invalid, Packet too large, Payload format invalid, Retain
#: not supported, QoS not supported. The others name the server's own state (busy, unavailable, quota, moved).
FAILED_CHECKS: Final = frozenset({0x85, 0x86, 0x87, 0x8A, 0x8C, 0x90, 0x95, 0x99, 0x9A, 0x9B})
#: The codec rules of a CONNACK's own bytes a 5.0 server keeps in every CONNACK: bits 7-1 of the Acknowledge Flags
#: 0 [MQTT-3.2.2-1], a Reason Code of Table 3.1 [MQTT-3.2.2-8]; and, in one with a non-zero Reason Code, Session
#: Present 0 [MQTT-3.2.2-6]. A CONNACK that breaks one is the codec's finding.
CONNACK_BYTES: Final = (codec_rules.CONNACK_RESERVED_FLAGS, codec_rules.CONNACK_RETURN_CODE)
#: 3.1.2.11.7: the packets that may still carry a Reason String or User Property under Request Problem Information 0.
PROBLEM_INFORMATION_ALLOWED_IN: Final = (Publish, Connack, Disconnect)
#: The other server packets that have properties.
WITH_PROPERTIES: Final = (Puback, Pubrec, Pubrel, Pubcomp, Suback, Unsuback, Auth)


def withholds_problem_information(connect: Connect) -> bool:
    """The CONNECT set Request Problem Information to 0 (absent means 1)."""
    return first(connect.properties, REQUEST_PROBLEM_INFORMATION) == 0


class Handshake5:
    """The checks above on one 5.0 connection; :class:`~.connection.Connection` feeds it what it has read."""

    def __init__(self, ctx: Context, offences: Offences) -> None:
        self._ctx = ctx
        self._offences = offences
        #: The server's AUTH 0x18 the client has not answered yet.
        self._server_continued: Seen | None = None
        #: The client's AUTH 0x19 of a re-authentication under way (until the server's AUTH 0x00), and whether the
        #: server has said it failed (a DISCONNECT or CONNACK in its course).
        self._reauthenticating: Seen | None = None
        self._reauthentication_failed = False
        #: The client's AUTH that broke a rule of the exchange before the CONNACK: accepting the authentication
        #: after it is acting on it.
        self._offending_auth: Offence | None = None
        self._early_disconnect: Seen | None = None
        self._server_disconnect: Seen | None = None
        self._client_disconnected = False
        self._problem_failed = False
        self._auth_seen = False
        #: The first client PUBLISH with a Topic Alias from 1 to the server's maximum, and whether any was outside.
        self._alias_in_range: Seen | None = None
        self._alias_out_of_range = False
        self._alias_refused = False

    # Client packets -----------------------------------------------------------------------------------------

    def on_client(self, seen: Seen, connect: Connect, connack: Connack | None) -> None:
        packet = seen.packet
        if isinstance(packet, Disconnect):
            self._client_disconnected = True
            self._error_code_closes(seen, packet.reason_code)
        elif isinstance(packet, Auth):
            self._auth_seen = True
            self._client_auth(seen, connect, packet, connack)
        elif isinstance(packet, Publish) and connack is not None and connack.return_code == 0:
            self._topic_alias(seen, packet, connack)

    def _client_auth(self, seen: Seen, connect: Connect, auth: Auth, connack: Connack | None) -> None:
        """A client AUTH: the rules it breaks are an offence the server must close on, not act on (4.13.1)."""
        code = AUTH_SUCCESS if auth.reason_code is None else auth.reason_code
        broken: list[str] = []
        answered, self._server_continued = self._server_continued, None
        if answered is not None and not self._answers_with_continue(seen, code, answered):
            broken.append(lifecycle.CLIENT_AUTH_CONTINUES)
        accepted = connack is not None and connack.return_code == 0
        if code == REAUTHENTICATE and accepted and not self._reauthenticates(seen, connect, auth):
            broken.append(lifecycle.REAUTHENTICATION_SAME_METHOD)
        if not self._same_method(seen, connect, auth, CLIENT):
            broken.append(lifecycle.SAME_AUTHENTICATION_METHOD)
        if not broken:
            return
        what = f"{seen.describe()} breaking {', '.join(broken)}"
        offence = self._offences.offend(seen, broken, what)
        if connack is None and self._offending_auth is None:
            self._offending_auth = offence

    def _answers_with_continue(self, seen: Seen, code: int, answered: Seen) -> bool:
        """[MQTT-4.12.0-3] The client's AUTH answering the server's AUTH 0x18 has Reason Code 0x18."""
        if code == CONTINUE_AUTHENTICATION:
            self._ctx.ledger.held(lifecycle.CLIENT_AUTH_CONTINUES)
            return True
        self._ctx.ledger.fail(
            lifecycle.CLIENT_AUTH_CONTINUES,
            CLIENT,
            seen.time,
            seen.event,
            f"{seen.describe()} answers the server's AUTH 0x18 (event {answered.event}) with Reason Code 0x{code:02x}",
            "the client's AUTH answering the server's AUTH 0x18 has Reason Code 0x18 (Continue authentication)",
        )
        return False

    def _reauthenticates(self, seen: Seen, connect: Connect, auth: Auth) -> bool:
        """[MQTT-4.12.1-1] A re-authentication (AUTH 0x19 after CONNACK 0x00) names the CONNECT's Authentication
        Method; one that does starts the exchange whose failure the server ends by closing [MQTT-4.12.1-2]."""
        method = first(connect.properties, lifecycle.AUTHENTICATION_METHOD)
        if method is None:
            return True  # an AUTH without a method asked for is judged as such [MQTT-4.12.0-7]
        carried = first(auth.properties or (), lifecycle.AUTHENTICATION_METHOD)
        if carried == method:
            self._ctx.ledger.held(lifecycle.REAUTHENTICATION_SAME_METHOD)
            if self._reauthenticating is None:
                self._reauthenticating, self._reauthentication_failed = seen, False
            return True
        what = "no Authentication Method" if carried is None else f"the Authentication Method {carried!r}"
        self._ctx.ledger.fail(
            lifecycle.REAUTHENTICATION_SAME_METHOD,
            CLIENT,
            seen.time,
            seen.event,
            f"{seen.describe()} re-authenticates with {what}; the CONNECT named {method!r}",
            "a re-authentication (AUTH 0x19) names the Authentication Method the connection was authenticated with",
        )
        return False

    def _topic_alias(self, seen: Seen, publish: Publish, connack: Connack) -> None:
        alias = first(publish.properties, TOPIC_ALIAS)
        if not isinstance(alias, int):
            return
        maximum = first(connack.properties, TOPIC_ALIAS_MAXIMUM)
        if isinstance(maximum, int) and 1 <= alias <= maximum:
            self._alias_in_range = self._alias_in_range or seen
        else:
            self._alias_out_of_range = True  # the server may rightly close with 0x94 from here on

    # Server packets -----------------------------------------------------------------------------------------

    def on_server(self, seen: Seen, before: Phase, connect: Connect, connack: Connack | None) -> None:
        """A server packet; ``before`` is the phase it arrived in, ``connack`` the CONNACK already seen."""
        packet = seen.packet
        if isinstance(packet, Disconnect | Connack) and self._reauthenticating is not None:
            self._reauthentication_fails(seen)
        if isinstance(packet, Disconnect):
            self._on_disconnect(seen, packet, before)
        elif isinstance(packet, Connack):
            self._connack_bytes(seen, packet)
        elif isinstance(packet, Auth):
            self._auth_seen = True
            self._same_method(seen, connect, packet, SERVER)
            if connack is None:
                self._continues(seen, packet)
            code = AUTH_SUCCESS if packet.reason_code is None else packet.reason_code
            self._server_continued = seen if code == CONTINUE_AUTHENTICATION else None
            if code == AUTH_SUCCESS and connack is not None:
                self._reauthenticating = None  # the re-authentication succeeded
        if packet is not None and withholds_problem_information(connect):
            self._problem_information(seen, packet)

    def _on_disconnect(self, seen: Seen, disconnect: Disconnect, before: Phase) -> None:
        self._server_disconnect = self._server_disconnect or seen
        self._error_code_closes(seen, disconnect.reason_code)
        if first(disconnect.properties, SESSION_EXPIRY_INTERVAL) is None:
            # [MQTT-3.14.2-2] A server DISCONNECT carries no Session Expiry Interval (one that does is the codec's
            # finding, held against the server on its bytes).
            self._ctx.ledger.held(SERVER_DISCONNECT_NO_EXPIRY)
        if before in lifecycle.BEFORE_ACCEPTANCE and self._early_disconnect is None:
            self._early_disconnect = seen
            self._ctx.ledger.fail(
                lifecycle.NO_SERVER_DISCONNECT_BEFORE_ACCEPT,
                SERVER,
                seen.time,
                seen.event,
                f"{seen.describe()} while the connection is {before.value}",
                "the server sends no DISCONNECT before it has sent a CONNACK with a Reason Code below 0x80",
            )
        elif before is Phase.CONNECTED and self._early_disconnect is None:
            self._ctx.ledger.held(lifecycle.NO_SERVER_DISCONNECT_BEFORE_ACCEPT)
        if disconnect.reason_code == TOPIC_ALIAS_INVALID and self._alias_in_range and not self._alias_out_of_range:
            self._alias_refused = True
            self._ctx.ledger.fail(
                lifecycle.ALIASES_IN_RANGE_ACCEPTED,
                SERVER,
                seen.time,
                seen.event,
                f"{seen.describe()} (Topic Alias invalid) although every Topic Alias the client sent was within 1 "
                f"and the server's Topic Alias Maximum (the first at event {self._alias_in_range.event})",
                "the server accepts every Topic Alias from 1 to the Topic Alias Maximum of its CONNACK",
            )

    def _connack_bytes(self, seen: Seen, connack: Connack) -> None:
        """[MQTT-3.2.2-1, -6, -8] A CONNACK whose bytes keep them holds them (one that breaks one is the codec's
        finding)."""
        broken = {violation.rule_key for violation in seen.errors}
        kept = [rule for rule in CONNACK_BYTES if rule not in broken]
        if connack.return_code != 0 and codec_rules.CONNACK_SESSION_PRESENT_ON_FAILURE not in broken:
            kept.append(codec_rules.CONNACK_SESSION_PRESENT_ON_FAILURE)
        for rule in kept:
            self._ctx.ledger.held(rule)

    def _reauthentication_fails(self, seen: Seen) -> None:
        """[MQTT-4.12.1-2] A DISCONNECT (or a CONNACK) in the course of a re-authentication says it failed: the
        server closes the connection."""
        if self._reauthentication_failed:
            return
        self._reauthentication_failed = True
        started = self._reauthenticating
        grace = self._ctx.config.close_grace
        self._ctx.obligations.open(
            Obligation(
                lifecycle.CLOSE_ON_FAILED_REAUTHENTICATION,
                SERVER,
                seen.event,
                seen.time,
                seen.time + grace,
                (
                    "close the connection after the re-authentication failed",
                    f"after {seen.describe()} ends the re-authentication of event "
                    f"{started.event if started else '?'} as failed, the server closes the connection (within "
                    f"{grace:g} s)",
                ),
                OnClose.FULFILS,
            )
        )

    def _problem_information(self, seen: Seen, packet: Packet) -> None:
        """[MQTT-3.1.2-29] Request Problem Information 0: Reason String and User Property only in PUBLISH,
        CONNACK and DISCONNECT."""
        if self._problem_failed or isinstance(packet, PROBLEM_INFORMATION_ALLOWED_IN):
            return
        if not isinstance(packet, WITH_PROPERTIES):
            return  # PINGRESP: nowhere to put either
        found = [p for p in packet.properties or () if p.identifier in (REASON_STRING, USER_PROPERTY)]
        if not found:
            self._ctx.ledger.held(lifecycle.PROBLEM_INFORMATION_WITHHELD)
            return
        self._problem_failed = True
        names = sorted({"Reason String" if p.identifier == REASON_STRING else "User Property" for p in found})
        self._ctx.ledger.fail(
            lifecycle.PROBLEM_INFORMATION_WITHHELD,
            SERVER,
            seen.time,
            seen.event,
            f"{seen.describe()} carries a {' and a '.join(names)} although the CONNECT set Request Problem "
            "Information to 0",
            "with Request Problem Information 0 the server sends a Reason String or User Property only in PUBLISH, "
            "CONNACK or DISCONNECT",
        )

    def _continues(self, seen: Seen, auth: Auth) -> None:
        """[MQTT-4.12.0-2] An AUTH of the server before the CONNACK continues the authentication: 0x18."""
        code = 0 if auth.reason_code is None else auth.reason_code
        if code == CONTINUE_AUTHENTICATION:
            self._ctx.ledger.held(lifecycle.SERVER_AUTH_CONTINUES)
            return
        self._ctx.ledger.fail(
            lifecycle.SERVER_AUTH_CONTINUES,
            SERVER,
            seen.time,
            seen.event,
            f"{seen.describe()} before the CONNACK has Reason Code 0x{code:02x}",
            "an AUTH the server sends to continue the authentication has Reason Code 0x18 (Continue authentication)",
        )

    def _same_method(self, seen: Seen, connect: Connect, packet: Auth | Connack, side: Direction) -> bool:
        """[MQTT-4.12.0-5] Every AUTH, and a CONNACK that accepts, carries the CONNECT's Authentication Method;
        False when this one does not."""
        method = first(connect.properties, lifecycle.AUTHENTICATION_METHOD)
        if method is None:
            return True  # an AUTH without a method asked for is judged as such [MQTT-4.12.0-6, -7]
        carried = first(packet.properties or (), lifecycle.AUTHENTICATION_METHOD)
        if carried == method:
            self._ctx.ledger.held(lifecycle.SAME_AUTHENTICATION_METHOD)
            return True
        what = "no Authentication Method" if carried is None else f"the Authentication Method {carried!r}"
        self._ctx.ledger.fail(
            lifecycle.SAME_AUTHENTICATION_METHOD,
            side,
            seen.time,
            seen.event,
            f"{seen.describe()} carries {what}; the CONNECT named {method!r}",
            "every AUTH carries the Authentication Method of the CONNECT",
        )
        return False

    def _method_ignored(self, seen: Seen, connect: Connect, connack: Connack) -> bool:
        """[MQTT-4.12.0-1] "If the Server does not support the Authentication Method supplied by the Client, it MAY
        send a CONNACK with a Reason Code of 0x8C (Bad authentication method) or 0x87 (Not Authorized) ... and MUST
        close the Network Connection." A CONNACK 0x00 naming no Authentication Method, after a CONNECT that named one
        and without any AUTH, accepts the connection without taking the method up: what a server that does not
        support it sends (one that supports it names it in that CONNACK [MQTT-4.12.0-5]), where it must close
        instead. One act, one finding: this, rather than MQTT-4.12.0-5 as well. True when so."""
        method = first(connect.properties, lifecycle.AUTHENTICATION_METHOD)
        if method is None or self._auth_seen or first(connack.properties, lifecycle.AUTHENTICATION_METHOD) is not None:
            return False
        self._ctx.ledger.fail(
            lifecycle.CLOSE_ON_UNSUPPORTED_METHOD,
            SERVER,
            seen.time,
            seen.event,
            f"{seen.describe()} accepts the connection without taking up the CONNECT's Authentication Method "
            f"{method!r}: no AUTH, and none in the CONNACK, where a server that supports it names it (MQTT-4.12.0-5)",
            "a server that does not support the CONNECT's Authentication Method closes the connection (a CONNACK 0x8C "
            "or 0x87 may come first); it never accepts it",
        )
        return True

    def on_connack(self, seen: Seen, connect: Connect, connack: Connack, *, valid: bool = True) -> None:
        """The CONNACK that answers the CONNECT (``valid``: one the server may accept, whose fields were read)."""
        code = connack.return_code
        self._response_information(seen, connect, connack)
        self._no_method_declared(seen, connect, connack)
        if code == 0 and self._offending_auth is not None:
            self._accepts_offence(seen, self._offending_auth)
        if code == 0:
            if self._early_disconnect is None:
                self._ctx.ledger.held(lifecycle.NO_SERVER_DISCONNECT_BEFORE_ACCEPT)
            self._will_accepted(seen, connect, connack)
            if not self._method_ignored(seen, connect, connack):
                self._same_method(seen, connect, connack, seen.sender)
            if valid:  # a malformed CONNECT's Client Identifier may never have been read
                self._assigned_identifier(seen, connect, connack)
            return
        if code < 0x80:
            return
        self._error_code_closes(seen, code)
        if valid and code in FAILED_CHECKS:
            self._close_after(seen, lifecycle.CLOSE_ON_FAILED_CHECK, "a CONNECT that failed a further check")
        if valid and code == CLIENT_ID_NOT_VALID:
            self._close_after(seen, lifecycle.CLOSE_ON_REJECTED_CLIENT_IDENTIFIER, "its Client Identifier")
        will = connect.will
        if will is not None and will.qos > 0 and code == QOS_NOT_SUPPORTED:
            self._close_after(seen, lifecycle.WILL_QOS_WITHIN_MAXIMUM, f"a Will of QoS {will.qos}")
        if will is not None and will.retain and code == RETAIN_NOT_SUPPORTED:
            self._close_after(seen, lifecycle.WILL_RETAIN_AVAILABLE, "a retained Will")
        if first(connect.properties, lifecycle.AUTHENTICATION_METHOD) is None:
            return
        if self._auth_seen:
            rule = lifecycle.CLOSE_ON_REJECTED_AUTHENTICATION  # the method was taken up, the exchange refused
        elif code in (BAD_AUTHENTICATION_METHOD, NOT_AUTHORIZED):
            rule = lifecycle.CLOSE_ON_UNSUPPORTED_METHOD
        else:
            return  # refused for another reason: the close is owed all the same [MQTT-3.2.2-7]
        self._close_after(seen, rule, "an Authentication Method")

    def _response_information(self, seen: Seen, connect: Connect, connack: Connack) -> None:
        """[MQTT-3.1.2-28] Request Response Information 0, or absent (which means 0): no Response Information."""
        if first(connect.properties, REQUEST_RESPONSE_INFORMATION) not in (None, 0):
            return
        if first(connack.properties, RESPONSE_INFORMATION) is None:
            self._ctx.ledger.held(lifecycle.NO_RESPONSE_INFORMATION)
            return
        self._ctx.ledger.fail(
            lifecycle.NO_RESPONSE_INFORMATION,
            SERVER,
            seen.time,
            seen.event,
            f"{seen.describe()} carries Response Information although the CONNECT did not request it",
            "without Request Response Information 1 in the CONNECT the CONNACK carries no Response Information",
        )

    def _no_method_declared(self, seen: Seen, connect: Connect, connack: Connack) -> None:
        """[MQTT-4.12.0-6] Without an Authentication Method in the CONNECT, none in the CONNACK either."""
        if first(connect.properties, lifecycle.AUTHENTICATION_METHOD) is not None:
            return
        carried = first(connack.properties, lifecycle.AUTHENTICATION_METHOD)
        if carried is None:
            return  # held with the lifecycle's check (no AUTH before the CONNACK)
        self._ctx.ledger.fail(
            lifecycle.NO_AUTH_WITHOUT_METHOD,
            SERVER,
            seen.time,
            seen.event,
            f"{seen.describe()} carries the Authentication Method {carried!r}; the CONNECT named none",
            "without an Authentication Method in the CONNECT the server sends no AUTH and no Authentication Method "
            "in the CONNACK",
        )

    def _accepts_offence(self, seen: Seen, offence: Offence) -> None:
        """CONNACK 0x00 after an AUTH of the client that broke the exchange accepts it: acting on the offence (see
        :mod:`.violations`)."""
        detail = f"{seen.describe()} accepts the authentication after {offence.what} (event {offence.seen.event})"
        expected = "the server closes the connection on a client AUTH that breaks the exchange, without accepting it"
        self._offences.acted_on(offence, seen, detail, expected)

    def _error_code_closes(self, seen: Seen, code: int | None) -> None:
        """[MQTT-4.13.2-1] A CONNACK or DISCONNECT of 0x80 or above is followed by the close, whoever sent it."""
        if code is None or code < 0x80:
            return
        grace = self._ctx.config.close_grace
        kind = "CONNACK" if isinstance(seen.packet, Connack) else "DISCONNECT"
        self._ctx.obligations.open(
            Obligation(
                lifecycle.CLOSE_AFTER_ERROR_CODE,
                seen.sender,
                seen.event,
                seen.time,
                seen.time + grace,
                (
                    f"close the connection after {kind} 0x{code:02x}",
                    f"after a {kind} with a Reason Code of 0x80 or above the connection is closed (within {grace:g} s)",
                ),
                OnClose.FULFILS,
            )
        )

    def _close_after(self, seen: Seen, rule: str, what: str) -> None:
        """The server refused the CONNECT for ``what`` it carried: ``rule`` binds it to close."""
        code = seen.packet.return_code if isinstance(seen.packet, Connack) else 0
        grace = self._ctx.config.close_grace
        self._ctx.obligations.open(
            Obligation(
                rule,
                SERVER,
                seen.event,
                seen.time,
                seen.time + grace,
                (
                    f"close the connection after refusing {what}",
                    f"after CONNACK 0x{code:02x} to a CONNECT with {what} the server closes the connection (within "
                    f"{grace:g} s)",
                ),
                OnClose.FULFILS,
            )
        )

    def _assigned_identifier(self, seen: Seen, connect: Connect, connack: Connack) -> None:
        """[MQTT-3.2.2-16, MQTT-3.1.3-7] A CONNACK accepting a zero-length Client Identifier names the identifier
        the server assigned."""
        if connect.client_id:
            return
        assigned = first(connack.properties, ASSIGNED_CLIENT_IDENTIFIER)
        rules_ = (lifecycle.ASSIGNED_CLIENT_IDENTIFIER, lifecycle.ASSIGNED_CLIENT_IDENTIFIER_RETURNED)
        if isinstance(assigned, str) and assigned:
            for rule in rules_:
                self._ctx.ledger.held(rule)
            return
        self._ctx.ledger.fail(
            rules_[0],
            SERVER,
            seen.time,
            seen.event,
            f"{seen.describe()} accepts a zero-length Client Identifier without an Assigned Client Identifier",
            "a server that accepts a zero-length Client Identifier returns the one it assigned in its CONNACK",
            also=rules_[1:],
        )

    def _will_accepted(self, seen: Seen, connect: Connect, connack: Connack) -> None:
        """[MQTT-3.2.2-12, -13] A Will beyond what the accepting CONNACK itself declares (Maximum QoS, Retain
        Available) is one the server had to refuse."""
        will = connect.will
        if will is None:
            return
        maximum = first(connack.properties, MAXIMUM_QOS)
        if isinstance(maximum, int) and will.qos > maximum:
            self._ctx.ledger.fail(
                lifecycle.WILL_QOS_WITHIN_MAXIMUM,
                SERVER,
                seen.time,
                seen.event,
                f"CONNACK 0x00 with Maximum QoS {maximum} accepts a CONNECT whose Will has QoS {will.qos}",
                "a Will QoS beyond the server's Maximum QoS is refused (CONNACK 0x9B), then the connection closed",
            )
        if will.retain and first(connack.properties, RETAIN_AVAILABLE) == 0:
            self._ctx.ledger.fail(
                lifecycle.WILL_RETAIN_AVAILABLE,
                SERVER,
                seen.time,
                seen.event,
                "CONNACK 0x00 with Retain Available 0 accepts a CONNECT whose Will has Will Retain 1",
                "a retained Will on a server without retained messages is refused (CONNACK 0x9A), then the "
                "connection closed",
            )

    # The end ------------------------------------------------------------------------------------------------

    def on_end(self, closed: Closed | None, connack: Connack | None) -> None:
        ledger = self._ctx.ledger
        under_way = self._reauthenticating is not None and not self._reauthentication_failed
        if under_way and closed is not None and closed.by is SERVER:
            ledger.held(lifecycle.CLOSE_ON_FAILED_REAUTHENTICATION)  # it ended the re-authentication by closing
        refused_or_silent = connack is None or connack.return_code != 0
        if self._early_disconnect is None and refused_or_silent and closed is not None:
            ledger.held(lifecycle.NO_SERVER_DISCONNECT_BEFORE_ACCEPT)  # it closed without one
        in_range = self._alias_in_range
        if in_range is None or self._alias_out_of_range or self._alias_refused:
            return
        server_closed = closed is not None and closed.by is SERVER
        if server_closed and not self._client_disconnected and self._server_disconnect is None:
            ledger.undecided(
                lifecycle.ALIASES_IN_RANGE_ACCEPTED,
                reasons.reason(
                    reasons.CLOSED_INSTEAD,
                    "the server closed the connection without a DISCONNECT naming why, after a PUBLISH with a Topic "
                    f"Alias within its maximum (event {in_range.event})",
                ),
                side=SERVER,
                event=in_range.event,
                time=in_range.time,
            )
            return
        ledger.held(lifecycle.ALIASES_IN_RANGE_ACCEPTED)


def unique_assigned_identifiers(transcripts: Mapping[str, Transcript]) -> Judgement:
    """[MQTT-3.1.3-6] Two 5.0 connections with a zero-length Client Identifier, accepted and open at the same time,
    were assigned different Client Identifiers (an identifier may come back once the other's connection ended)."""
    ledger = Ledger(version=identity.V5)
    assigned: list[tuple[str, Transcript, str]] = []
    for name, transcript in transcripts.items():
        connect, connack = transcript.connect, transcript.connack
        if connect is None or connack is None or not transcript.speaks_5_0 or connect.client_id or connack.return_code:
            continue
        identifier = first(connack.properties, ASSIGNED_CLIENT_IDENTIFIER)
        if isinstance(identifier, str) and identifier:  # none at all is [MQTT-3.2.2-16]'s
            assigned.append((name, transcript, identifier))
    for (name, one, first_id), (other_name, other, second_id) in combinations(assigned, 2):
        if not (one.connack_time < other.end and other.connack_time < one.end):
            continue  # not open at once
        if first_id != second_id:
            ledger.held(lifecycle.UNIQUE_ASSIGNED_CLIENT_IDENTIFIER)
            continue
        later, time, event = (
            (other_name, other.connack_time, other.connack_event)
            if other.connack_time >= one.connack_time
            else (name, one.connack_time, one.connack_event)
        )
        ledger.conversation = later
        ledger.fail(
            lifecycle.UNIQUE_ASSIGNED_CLIENT_IDENTIFIER,
            SERVER,
            time,
            event,
            f"connections {name} and {other_name}, open at once, were both assigned the Client Identifier {first_id!r}",
            "a server that accepts zero-length Client Identifiers assigns each client a unique one",
        )
    return ledger.judgement()

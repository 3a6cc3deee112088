"""Before any case runs: can the prober reach the target and log in? One connection and one CONNECT (or AMQP
login), so an unreachable target costs one timeout rather than one per case."""

from __future__ import annotations

import contextlib
import secrets
import socket
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..codec import Connack, Connect, Direction, Packet, ProtocolVersion
from ..judge.events import Closed, Sent
from .case import Target, login, os_error_text
from .connection import ProbeConnection
from .transport import ByteStream, open_stream

if TYPE_CHECKING:
    from .amqp import AmqpTarget

#: CONNACK return codes that refuse the prober itself, so that no case can run: code -> (what, meaning).
#: A refusal not listed here (0x02, identifier rejected, for a valid client id) is the case library's to judge.
REFUSALS: dict[int, tuple[str, str]] = {
    0x01: ("the broker refused us", "unacceptable protocol version"),
    0x03: ("the broker refused us", "server unavailable"),
    0x04: ("authentication refused", "bad user name or password"),
    0x05: ("authentication refused", "not authorised"),
}
#: The same, answering a 5.0 CONNECT (Connect Reason Codes, Table 3.1).
#: (0x84, Unsupported Protocol Version, refuses the version, not the prober: see :func:`greet`.)
REFUSALS_5_0: dict[int, tuple[str, str]] = {
    0x86: ("authentication refused", "bad user name or password"),
    0x87: ("authentication refused", "not authorized"),
    0x88: ("the broker refused us", "server unavailable"),
}


@dataclass(frozen=True)
class Refusal:
    """Why nothing was probed: ``message`` is one line, ``kind`` is ``unreachable``, ``unresolved``, ``refused`` or
    ``not-mqtt`` (the target answered a CONNECT with something other than a CONNACK, or never answered one)."""

    kind: str
    message: str


async def reach(target: Target, timeout: float) -> ByteStream | Refusal:
    """A connection to ``target`` over its transport (TCP, TLS, the WebSocket upgrade), or a :class:`Refusal`
    saying in words why there is none."""
    url = target.url
    try:
        return await open_stream(target, timeout)
    except socket.gaierror as exc:
        return Refusal("unresolved", f"cannot resolve {target.host} ({url}): {(exc.strerror or str(exc)).lower()}")
    except TimeoutError:
        step = "TCP connect or the TLS handshake" if target.uses_tls else "TCP connect"
        return Refusal("unreachable", f"cannot reach {url}: no answer to the {step} within {timeout:g} s")
    except ValueError as exc:  # the CA file or the client certificate cannot be used
        return Refusal("unreachable", f"cannot reach {url}: {exc}")
    except OSError as exc:
        return Refusal("unreachable", f"cannot reach {url}: {os_error_text(exc)}")


#: A 3.1.1 CONNACK refusing the Protocol Level [MQTT-3.1.2-2 of 3.1.1]: how a broker that speaks only 3.1.1
#: answers a 5.0 CONNECT. Read as 5.0 those bytes are malformed, but 5.0 does not bind a broker that does not speak it.
REFUSED_LEVEL_3_1_1 = b"\x20\x02\x00\x01"


async def _hello(
    target: Target, timeout: float, version: ProtocolVersion
) -> Refusal | tuple[ProbeConnection, Packet | None]:
    """One connection that sends a plain CONNECT of ``version`` (with the target's user name and password) and waits
    for its CONNACK, then leaves: the connection (its events) and the CONNACK, None when none came; or why there
    is no connection."""
    stream = await reach(target, timeout)
    if isinstance(stream, Refusal):
        return stream
    secret = None if target.credentials is None else target.credentials.password
    connection = ProbeConnection("preflight", stream, time.monotonic, timeout=timeout, version=version, secret=secret)
    username, password = login(target)
    try:
        client_id = "mqapre" + secrets.token_hex(8)
        await connection.send(
            Connect(protocol_level=version.level, client_id=client_id, username=username, password=password)
        )
        # The first bytes decide in one exchange: a CONNACK is waited for whole; anything else (an HTTP status line,
        # a TLS alert, an SSH banner), a close or silence is no MQTT broker's answer.
        heard = await connection.wait_heard()
        ack = await connection.wait_type(Connack) if _connack_type(heard) else None
    finally:
        with contextlib.suppress(Exception):
            await connection.send(bytes((0xE0, 0x00)))
        await connection.finish()
    return connection, ack


async def preflight(
    target: Target, timeout: float, version: ProtocolVersion = ProtocolVersion.V3_1_1
) -> Refusal | None:
    """None when the target accepts a connection and does not refuse a plain CONNECT of ``version`` (with the
    target's user name and password) from the prober (a silent or misbehaving broker is left to the cases to
    judge); else why nothing can be probed in that version. A TLS alert in answer to the CONNECT (a client
    certificate the broker wants and did not get: TLS 1.3 checks it after the handshake) is a refusal too."""
    greeting = await greet(target, timeout, version)
    if greeting.refused is not None:
        return Refusal("refused", f"{target.url}: the broker refused us ({greeting.refused})")
    return greeting.refusal


@dataclass(frozen=True)
class Greeting:
    """What a plain CONNECT of one version got from the broker (see :func:`greet`)."""

    version: ProtocolVersion
    #: Nothing can be probed: the target is unreachable, or refused the prober itself (credentials, unavailable).
    refusal: Refusal | None = None
    #: The broker refused the version itself, in words: 3.1.1's CONNACK 0x01 (unacceptable protocol level) or 5.0's
    #: 0x84 (unsupported protocol version), which only an MQTT broker that does not serve the version sends.
    refused: str | None = None
    #: It closed the connection without answering, or said nothing within the timeout, in words: a broker that does
    #: not serve the version, if it serves the other one (see :func:`versions_unspoken`).
    unanswered: str | None = None

    @property
    def spoken(self) -> bool:
        """The broker answered the CONNECT in a way that serves the version (accepted it, or answered otherwise)."""
        return self.refusal is None and self.refused is None and self.unanswered is None


async def greet(target: Target, timeout: float, version: ProtocolVersion) -> Greeting:
    """One plain CONNECT of ``version`` (with the target's user name and password) and how the broker took it."""
    hello = await _hello(target, timeout, version)
    if isinstance(hello, Refusal):
        return Greeting(version, refusal=hello)
    connection, ack = hello
    plain = f"a plain {version.value} CONNECT"
    if connection.heard and not _connack_type(connection.heard):
        said = f"the server answered {plain} with {answer_text(connection.heard)}"
        return Greeting(version, Refusal("not-mqtt", f"{target.url}: {said}: not an MQTT broker?"))
    first = next(
        (e.frame for e in connection.events if isinstance(e, Sent) and e.sender is Direction.FROM_SERVER), None
    )
    if first is not None and first.raw == REFUSED_LEVEL_3_1_1:
        return Greeting(version, refused=f"it answered {plain} with 3.1.1's CONNACK 20 02 00 01 (unacceptable level)")
    code = _connack_code(first.raw) if first is not None else None
    if code == UNSUPPORTED_VERSION_5:
        return Greeting(version, refused=f"it answered {plain} with CONNACK 0x84 (unsupported protocol version)")
    refusals = REFUSALS_5_0 if version is ProtocolVersion.V5 else REFUSALS
    if isinstance(ack, Connack) and ack.return_code in refusals:
        what, meaning = refusals[ack.return_code]
        return Greeting(
            version, Refusal("refused", f"{target.url}: {what} (CONNACK 0x{ack.return_code:02x}: {meaning})")
        )
    if first is not None or connection.heard:  # a CONNACK, perhaps above the decode bound: the cases judge it
        return Greeting(version)
    if connection.trouble is not None:
        return Greeting(version, Refusal("unreachable", f"cannot reach {target.url}: {connection.trouble}"))
    if connection.closed_by_server:
        end = connection.events[-1] if connection.events else None
        how = "reset" if isinstance(end, Closed) and end.abrupt else "closed"
        return Greeting(version, unanswered=f"it {how} the connection on {plain} without answering")
    return Greeting(version, unanswered=f"it did not answer {plain} within {timeout:g} s")


#: 5.0's CONNACK Reason Code 0x84 (Unsupported Protocol Version): what a broker that reads a CONNECT but does not
#: serve its version may answer [MQTT-3.1.2-2 of 5.0].
UNSUPPORTED_VERSION_5 = 0x84


def _connack_type(heard: bytes) -> bool:
    """The server's first byte is a CONNACK's (type 2, whatever its flags: wrong flags are the cases' to judge)."""
    return bool(heard) and heard[0] >> 4 == 2


#: How much of a server's first line a refusal shows.
SHOWN_BYTES = 60
#: The first bytes of a TLS record (handshake or alert, TLS 1.0 to 1.3): a TLS port spoken to in plain TCP.
TLS_RECORDS = (b"\x15\x03", b"\x16\x03")


def answer_text(heard: bytes) -> str:
    """What a server that is not an MQTT broker sent, for one line: its first line in backquotes, every byte outside
    printable ASCII escaped (``\\x00``) and cut at ``SHOWN_BYTES``; its first 16 bytes in hex when they are not
    text (with a word when they are a TLS record)."""
    first = heard.split(b"\n", 1)[0].removesuffix(b"\r")
    line = first[:SHOWN_BYTES]
    text = sum(0x20 <= byte < 0x7F for byte in line)
    if len(line) < 2 or text * 4 < len(line) * 3:
        shown = " ".join(f"{byte:02x}" for byte in heard[:16]) + (" …" if len(heard) > 16 else "")
        tls = " (a TLS record: for a TLS port use mqtts://)" if heard[:2] in TLS_RECORDS else ""
        return f"the bytes {shown}{tls}"
    quoted = "".join(chr(b) if 0x20 <= b < 0x7F and b not in b"`\\" else f"\\x{b:02x}" for b in line)
    return f"`{quoted}{'…' if len(first) > SHOWN_BYTES else ''}`"


def _connack_code(raw: bytes) -> int | None:
    """The return code (3.1.1) or Reason Code (5.0) of a CONNACK's bytes, whichever form they take; None for other
    bytes."""
    return raw[3] if len(raw) >= 4 and raw[0] == 0x20 and raw[1] >= 2 else None


async def versions_unspoken(
    target: Target, timeout: float, versions: Collection[ProtocolVersion]
) -> Refusal | dict[ProtocolVersion, str]:
    """Capability first: the versions of ``versions`` the broker does not serve, each with how it showed it; or why
    nothing can be probed.

    One plain CONNECT per version of the selection (3.1.1 first: a 5.0-only selection asks in 5.0 alone, so a broker
    that serves only 5.0 is never refused for a 3.1.1 CONNECT it need not take). A version the broker refused itself
    (3.1.1's CONNACK 0x01, 5.0's 0x84) is not served. One it closed on or left unanswered is not served when the
    broker serves the other version (asked too when the selection holds only the one): otherwise the broker answers
    nothing at all, and the cases say what it does."""
    wanted = set(versions)
    order = [ProtocolVersion.V5] if wanted == {ProtocolVersion.V5} else sorted(wanted, key=lambda v: v.level)
    greetings: dict[ProtocolVersion, Greeting] = {}
    for version in order:
        greeting = await greet(target, timeout, version)
        if greeting.refusal is not None:
            return greeting.refusal
        greetings[version] = greeting
    if not any(g.spoken for g in greetings.values()) and any(g.unanswered for g in greetings.values()):
        for other in (ProtocolVersion.V3_1_1, ProtocolVersion.V5):
            if other not in greetings:
                greetings[other] = await greet(target, timeout, other)
    if all(g.unanswered for g in greetings.values()):  # no CONNACK to any version: nothing an MQTT broker does
        said = "; ".join(g.unanswered for g in greetings.values() if g.unanswered)
        return Refusal("not-mqtt", f"{target.url}: {said}: not an MQTT broker?")
    spoken = any(g.spoken for g in greetings.values())
    unspoken: dict[ProtocolVersion, str] = {}
    for version in order:
        greeting = greetings[version]
        why = greeting.refused or (greeting.unanswered if spoken else None)
        if why is not None:
            unspoken[version] = why
    return unspoken


async def preflight_amqp(target: AmqpTarget, timeout: float) -> Refusal | None:
    """The same for an AMQP 0-9-1 target: a TCP connection, then the login, the vhost and a channel."""
    from .amqp import check_login  # the AMQP client loads only for amqp:// targets

    stream = await reach(target, timeout)
    if isinstance(stream, Refusal):
        return stream
    stream.close()
    with contextlib.suppress(OSError):
        await stream.wait_closed()
    why = await check_login(target, timeout=timeout)
    if why is None:
        return None
    why = why.removeprefix("setup: ")
    what = "authentication refused" if "ACCESS_REFUSED" in why else "the broker refused us"
    return Refusal("refused", f"{target.url}: {what} ({why})")

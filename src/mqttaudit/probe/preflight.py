"""Before any case runs: can the prober reach the target and log in? One connection and one CONNECT (or AMQP
login), so an unreachable target costs one timeout rather than one per case."""

from __future__ import annotations

import contextlib
import secrets
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..codec import Connack, Connect, Direction, Packet, ProtocolVersion
from ..judge.events import Sent
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
REFUSALS_5_0: dict[int, tuple[str, str]] = {
    0x84: ("the broker refused us", "unsupported protocol version"),
    0x86: ("authentication refused", "bad user name or password"),
    0x87: ("authentication refused", "not authorized"),
    0x88: ("the broker refused us", "server unavailable"),
}


@dataclass(frozen=True)
class Refusal:
    """Why nothing was probed: ``message`` is one line, ``kind`` is ``unreachable``, ``unresolved`` or ``refused``."""

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
        ack = await connection.wait_type(Connack)
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
    judge); else why nothing can be probed. A TLS alert in answer to the CONNECT (a client certificate the broker
    wants and did not get: TLS 1.3 checks it after the handshake) is a refusal too."""
    hello = await _hello(target, timeout, version)
    if isinstance(hello, Refusal):
        return hello
    connection, ack = hello
    refusals = REFUSALS_5_0 if version is ProtocolVersion.V5 else REFUSALS
    if isinstance(ack, Connack) and ack.return_code in refusals:
        what, meaning = refusals[ack.return_code]
        return Refusal("refused", f"{target.url}: {what} (CONNACK 0x{ack.return_code:02x}: {meaning})")
    if not isinstance(ack, Connack) and connection.trouble is not None:
        return Refusal("unreachable", f"cannot reach {target.url}: {connection.trouble}")
    return None


async def unspoken_5_0(target: Target, timeout: float) -> str | None:
    """Why the target does not serve MQTT 5.0 to the prober, which answered its 3.1.1 CONNECT: a plain 5.0 CONNECT
    is answered with 3.1.1's CONNACK 0x01, with 5.0's 0x84 (unsupported protocol version), or with a close and no
    answer at all. None when it answered otherwise or not in time (the cases judge that)."""
    hello = await _hello(target, timeout, ProtocolVersion.V5)
    if isinstance(hello, Refusal):
        return None
    connection, ack = hello
    first = next(
        (
            event.frame
            for event in connection.events
            if isinstance(event, Sent) and event.sender is Direction.FROM_SERVER
        ),
        None,
    )
    if first is not None and first.raw == REFUSED_LEVEL_3_1_1:
        return "it answered a plain 5.0 CONNECT with 3.1.1's CONNACK 20 02 00 01 (unacceptable protocol level)"
    if isinstance(ack, Connack) and ack.return_code == 0x84:
        return "it answered a plain 5.0 CONNECT with CONNACK 0x84 (unsupported protocol version)"
    if first is None and connection.closed_by_server:
        return "it closed the connection on a plain 5.0 CONNECT without answering"
    return None


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

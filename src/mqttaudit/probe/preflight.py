"""Before any case runs: can the prober reach the target and log in? One TCP connection and one CONNECT (or AMQP
login), so an unreachable target costs one timeout rather than one per case."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..codec import Connack, Connect, ProtocolVersion
from .case import Target, os_error_text
from .connection import ProbeConnection

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


Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def reach(host: str, port: int, url: str, timeout: float) -> Streams | Refusal:
    """A TCP connection to ``host:port``, or a :class:`Refusal` saying in words why there is none."""
    try:
        return await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except socket.gaierror as exc:
        return Refusal("unresolved", f"cannot resolve {host} ({url}): {(exc.strerror or str(exc)).lower()}")
    except TimeoutError:
        return Refusal("unreachable", f"cannot reach {url}: no answer to the TCP connect within {timeout:g} s")
    except OSError as exc:
        return Refusal("unreachable", f"cannot reach {url}: {os_error_text(exc)}")


async def preflight(
    target: Target, timeout: float, version: ProtocolVersion = ProtocolVersion.V3_1_1
) -> Refusal | None:
    """None when the target accepts a TCP connection and does not refuse a plain CONNECT of ``version`` from the
    prober (a silent or misbehaving broker is left to the cases to judge); else why nothing can be probed."""
    streams = await reach(target.host, target.port, target.url, timeout)
    if isinstance(streams, Refusal):
        return streams
    reader, writer = streams
    connection = ProbeConnection("preflight", reader, writer, time.monotonic, timeout=timeout, version=version)
    try:
        await connection.send(Connect(protocol_level=version.level, client_id="mqapre" + secrets.token_hex(8)))
        ack = await connection.wait_type(Connack)
    finally:
        with contextlib.suppress(Exception):
            await connection.send(bytes((0xE0, 0x00)))
        await connection.finish()
    refusals = REFUSALS_5_0 if version is ProtocolVersion.V5 else REFUSALS
    if isinstance(ack, Connack) and ack.return_code in refusals:
        what, meaning = refusals[ack.return_code]
        return Refusal("refused", f"{target.url}: {what} (CONNACK 0x{ack.return_code:02x}: {meaning})")
    return None


async def preflight_amqp(target: AmqpTarget, timeout: float) -> Refusal | None:
    """The same for an AMQP 0-9-1 target: a TCP connection, then the login, the vhost and a channel."""
    from .amqp import check_login  # the AMQP client loads only for amqp:// targets

    streams = await reach(target.host, target.port, target.url, timeout)
    if isinstance(streams, Refusal):
        return streams
    streams[1].close()
    with contextlib.suppress(OSError):
        await streams[1].wait_closed()
    why = await check_login(target, timeout=timeout)
    if why is None:
        return None
    why = why.removeprefix("setup: ")
    what = "authentication refused" if "ACCESS_REFUSED" in why else "the broker refused us"
    return Refusal("refused", f"{target.url}: {what} ({why})")

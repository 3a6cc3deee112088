"""The prober against brokers that misbehave at the transport level: every wait is bounded, nothing raises, and the
reason ends up in the verdicts. The servers here are real TCP servers on 127.0.0.1, each with one fixed behaviour."""

from __future__ import annotations

import asyncio
import itertools
import os
import select
import signal
import socket
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from mqttaudit.codec import Connack, Connect, Direction, ProtocolVersion, StreamDecoder, Subscribe
from mqttaudit.judge import judge_scenario
from mqttaudit.judge.events import Closed, Lost, Sent
from mqttaudit.probe.brokers import free_port, start_broker
from mqttaudit.probe.case import CASES, Target
from mqttaudit.probe.connection import ProbeConnection
from mqttaudit.probe.overflow import MAX_BYTES, MAX_FRAMES
from mqttaudit.probe.preflight import preflight
from mqttaudit.probe.runner import FAIL, INCONCLUSIVE, CaseResult, run_probe
from mqttaudit.probe.transport import ResetStream, SocketStream, open_stream

from .hostile_server import HostileServer

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
SOME = [
    CASES[c] for c in ("connect/accepted", "ping/pingresp", "malformed/subscribe-empty-filter", "retain/qos0-replaces")
]


@asynccontextmanager
async def tcp_server(handler: Handler) -> AsyncIterator[Target]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield Target("127.0.0.1", port)
    finally:
        server.close()
        await server.wait_closed()


async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Reads everything, answers nothing, never closes (until the client does)."""
    while await reader.read(4096):
        pass
    writer.close()


async def resetting(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Resets every connection as soon as it opens."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def test_a_broker_that_never_answers_makes_setups_inconclusive_within_the_timeout() -> None:
    async def scenario() -> list[CaseResult]:
        async with tcp_server(silent) as target:
            run = await asyncio.wait_for(run_probe(target, SOME, timeout=0.3, concurrency=4), 30)
        return run.results

    results = {r.case.id: r for r in asyncio.run(scenario())}
    # Never answering CONNECT is itself a failure of the case about CONNACK ...
    accepted = results.pop("connect/accepted")
    assert accepted.verdict == FAIL and {rule for f in accepted.findings for rule in f.rules} == {"MQTT-3.1.4-4"}
    # ... and leaves every other case without its setup.
    assert [r.verdict for r in results.values()] == [INCONCLUSIVE] * (len(SOME) - 1)
    assert all("no CONNACK" in r.reason for r in results.values()), [r.reason for r in results.values()]


def test_a_server_that_keeps_a_malformed_connect_open_fails_the_close_rule() -> None:
    async def scenario() -> CaseResult:
        async with tcp_server(silent) as target:
            run = await run_probe(target, [CASES["malformed/connect-reserved-flag"]], timeout=0.3)
        return run.results[0]

    result = asyncio.run(scenario())
    assert result.verdict == FAIL
    assert "MQTT-3.1.2-3" in {
        rule for f in result.findings for rule in f.rules
    }  # the reserved flag's own duty to close


def test_a_broker_that_resets_every_connection_is_reported_not_raised() -> None:
    async def scenario() -> list[CaseResult]:
        async with tcp_server(resetting) as target:
            run = await run_probe(target, SOME, timeout=0.3, concurrency=2)
        return run.results

    results = asyncio.run(scenario())
    assert all(r.verdict == INCONCLUSIVE for r in results)
    assert all(r.reason for r in results)


def test_an_unreachable_target_marks_the_run_and_every_case() -> None:
    target = Target("127.0.0.1", free_port())
    run = asyncio.run(run_probe(target, SOME, timeout=0.3, concurrency=1))
    assert run.broker_down is not None and "stopped accepting connections" in run.broker_down
    assert [r.verdict for r in run.results] == [INCONCLUSIVE] * len(SOME)
    assert all(r.reason for r in run.results)


def test_a_broker_that_dies_mid_run_leaves_the_later_cases_inconclusive_with_that_reason() -> None:
    selected = [CASES[c] for c in CASES if c.startswith("malformed/")][:12]
    with start_broker("mosquitto") as broker:
        done: list[CaseResult] = []

        def kill_after_three(result: CaseResult) -> None:
            done.append(result)
            if len(done) == 3:
                os.kill(broker.pid, signal.SIGKILL)

        run = asyncio.run(
            run_probe(Target(broker.host, broker.port), selected, timeout=0.5, concurrency=1, progress=kill_after_three)
        )
    assert run.broker_down is not None
    later = run.results[4:]
    assert later and all(r.verdict == INCONCLUSIVE and r.reason == run.broker_down for r in later)
    assert all(r.verdict != INCONCLUSIVE for r in run.results[:3])


def test_closing_while_the_broker_floods_records_what_was_read_before_the_close() -> None:
    """The recorder keeps the judge's invariant itself: nothing follows Closed, times never go back, and what the
    broker sent before the close took effect is recorded before it (up to the evidence bounds, then counted)."""

    async def scenario() -> ProbeConnection:
        with HostileServer("flooding", lifetime=30) as server:
            loop = asyncio.get_running_loop()
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            connection = ProbeConnection("c1", SocketStream(reader, writer), loop.time, timeout=0.5)
            await connection.send(Connect(client_id="mqaflood"))
            assert isinstance(await connection.wait_type(Connack), Connack)
            await asyncio.sleep(0.05)  # the flood is under way: bytes wait in the reader as we close
            await connection.close()
            await connection.finish()
        return connection

    connection = asyncio.run(scenario())
    events = connection.events
    assert isinstance(events[-1], Closed) and events[-1].by is Direction.FROM_CLIENT
    assert sum(isinstance(event, Closed) for event in events) == 1
    assert all(a.time <= b.time for a, b in itertools.pairwise(events))
    assert connection.capped and connection.overflow.packets["PUBLISH"] > 0
    lost = events[connection.lost_at or 0]
    assert isinstance(lost, Lost) and lost.length == connection.overflow.bytes > 0
    kept = [e for e in events if isinstance(e, Sent) and e.sender is Direction.FROM_SERVER]
    assert len(kept) <= MAX_FRAMES and sum(len(e.frame.raw) for e in kept) <= MAX_BYTES
    assert connection.overflow.after_close == 0
    judge_scenario({"c1": events})  # the judge takes it as it is


def test_an_unreachable_target_is_said_to_refuse_connections_in_words() -> None:
    target = Target("127.0.0.1", free_port())
    run = asyncio.run(run_probe(target, SOME[:1], timeout=0.3, concurrency=1))
    assert run.broker_down is not None and "connection refused" in run.broker_down
    assert "Errno" not in run.broker_down


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_finished_connections_close_their_sockets_without_the_garbage_collector() -> None:
    """A broker that ends each connection with a FIN after its CONNACK leaves the prober's socket half open; the
    connection closes it when it finishes, while its case still holds it for the judge (the socket was left to
    the transport's finaliser, a collection away when the connections are in a cycle)."""

    async def go(target: Target) -> tuple[int, int]:
        before = _open_descriptors()
        held: list[ProbeConnection] = []  # as a case's context holds its connections until they are judged
        for n in range(20):
            connection = ProbeConnection(f"c{n}", await open_stream(target, 2.0), time.monotonic, timeout=2.0)
            held.append(connection)
            await connection.send(Connect(client_id=f"mqafd{n}"))
            assert await connection.wait_close(2.0) and connection.closed_by_server
            await connection.finish()
        deadline = time.monotonic() + 5  # the event loop closes an aborted socket on its next turn
        while _open_descriptors() > before and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return before, _open_descriptors()

    with HostileServer("closing", lifetime=30) as server:
        before, after = asyncio.run(go(Target("127.0.0.1", server.port)))
    assert after <= before, (before, after)


def test_a_reset_reported_on_the_connect_itself_is_the_broker_resetting_not_an_unreachable_broker() -> None:
    """The broker accepts and resets before the prober's event loop sees the connect complete: the kernel reports
    the RST on the connect (ECONNRESET). The test holds the prober's loop to make that order certain: the reset
    happens in a step of the loop that runs before the one that would see the connect done. It is a connection
    the broker reset (what the cases say), not "cannot reach" (what the preflight said, under load)."""

    async def go() -> tuple[object, str, object]:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            target = Target("127.0.0.1", listener.getsockname()[1])
            opening = asyncio.create_task(open_stream(target, 2.0))
            deadline = time.monotonic() + 5
            while not select.select([listener], [], [], 0)[0]:  # the handshake is done when the connection queues
                assert time.monotonic() < deadline, "the prober never connected"
                await asyncio.sleep(0)
            accepted, _ = listener.accept()
            accepted.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            accepted.close()  # RST, before the prober's loop looks at its socket
            stream = await opening
            connection = ProbeConnection("c1", stream, time.monotonic, timeout=2.0)
            await connection.send(Connect(client_id="mqareset"))
            await connection.wait_close(2.0)
            await connection.finish()
            return stream, connection.missing("CONNACK"), await preflight_after_reset(listener, target)

    stream, missing, refusal = asyncio.run(go())
    assert isinstance(stream, ResetStream)
    assert missing.startswith("the broker reset the connection after 0.0"), missing
    assert refusal is None  # reachable: the cases say what the broker did


async def preflight_after_reset(listener: socket.socket, target: Target) -> object:
    """The preflight against the same broker, its connection reset before the prober's loop sees the connect."""
    checking = asyncio.create_task(preflight(target, 2.0))
    deadline = time.monotonic() + 5
    while not select.select([listener], [], [], 0)[0]:
        assert time.monotonic() < deadline, "the preflight never connected"
        await asyncio.sleep(0)
    accepted, _ = listener.accept()
    accepted.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    accepted.close()
    return await checking


async def empty_subacks(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A 5.0 broker that accepts every CONNECT and answers every SUBSCRIBE with a SUBACK that has no Reason Code."""
    decoder = StreamDecoder(Direction.FROM_CLIENT, version=ProtocolVersion.V5)
    while data := await reader.read(4096):
        for frame in decoder.feed(data):
            if isinstance(frame.packet, Connect):
                writer.write(bytes.fromhex("20 03 00 00 00"))
            elif isinstance(frame.packet, Subscribe):
                writer.write(bytes((0x90, 0x03)) + frame.packet.packet_id.to_bytes(2, "big") + b"\x00")
    writer.close()


def test_a_suback_without_its_reason_code_is_judged_not_raised() -> None:
    """A SUBACK must carry one Reason Code per Topic Filter; one with none made a 5.0 case unpack an empty tuple
    (ValueError: exit 3, no reports)."""

    async def scenario() -> CaseResult:
        async with tcp_server(empty_subacks) as target:
            run = await run_probe(target, [CASES["v5/subscription-identifier/sent-qos0"]], timeout=0.3)
        return run.results[0]

    result = asyncio.run(scenario())
    assert result.verdict in (FAIL, INCONCLUSIVE) and result.reason, result


def test_a_probe_stopped_while_its_reader_stops_ends_cancelled() -> None:
    """Stopping a connection's reader swallows the reader's own cancellation, never that of the task doing it: a
    case interrupted at that moment (Ctrl-C) ends instead of going on as if nothing happened."""

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    async def scenario() -> bool:
        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        connection = ProbeConnection("c1", SocketStream(reader, writer), time.monotonic, timeout=0.5)
        stopping = asyncio.create_task(connection._stop_reading())
        await asyncio.sleep(0)  # it has cancelled the reader and waits for it to end
        stopping.cancel()
        try:
            await stopping
        except asyncio.CancelledError:
            cancelled = True
        else:
            cancelled = False
        await connection.finish()
        server.close()
        await server.wait_closed()
        return cancelled

    assert asyncio.run(scenario())


def test_a_crash_that_quotes_the_password_never_shows_it() -> None:
    """An exception's message may quote what the prober held (a CONNECT and its password): the crash summary a
    report writes shows asterisks in its place."""
    from mqttaudit.probe.runner import crashed
    from mqttaudit.probe.transport import Credentials, Secret

    password = "p@ss:w/%d sé"
    target = Target("127.0.0.1", 1883, credentials=Credentials("user", Secret(password)))
    error = RuntimeError(f"could not encode Connect(username='user', password={password!r})")
    result = crashed(CASES["ping/pingresp"], error, [], 0.0, target)
    assert password not in (result.crash or "") and password not in result.reason
    assert "password='***')" in (result.crash or "")

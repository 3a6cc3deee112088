"""Cases are independent: each connection's Client Identifier belongs to one run and one case, and a case's topics
are its own, so no case can take over another's session or see another's messages however many run at once.

The whole library's one run against mosquitto at the default concurrency (:mod:`tests.library_runs`) is read back:
the identifiers and topics from what each case recorded sending (the CONNECT, PUBLISH, SUBSCRIBE and UNSUBSCRIBE bytes
of its evidence in findings.json), and what the run left on the broker, which is still up.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import pytest

from mqttaudit.codec import Connack, Pingreq, Pingresp, Publish
from mqttaudit.probe.case import CASES, Case, CaseContext, Target, all_cases
from mqttaudit.probe.cases import ALONE
from mqttaudit.probe.cases.malformed import FILTER_CARRIERS, ONLY, STIMULI, WILDCARD_LEVELS
from mqttaudit.probe.runner import ProbeRun

from .library_runs import GROUP, LibraryRuns, probe

#: The tests read mosquitto's whole-library run: they meet it in one worker.
pytestmark = GROUP


def with_twins(case_ids: set[str]) -> set[str]:
    """The cases and their MQTT 5.0 twins (``v5/<id>``: the same shape sent in 5.0), where the library has one."""
    return case_ids | {f"v5/{case_id}" for case_id in case_ids if f"v5/{case_id}" in CASES}


#: A Client Identifier every server must accept [MQTT-3.1.3-5].
PLAIN = re.compile(rb"[0-9a-zA-Z]{1,23}")
#: The cases whose CONNECT ends before the Client Identifier: its absence, or the cut, is the defect. An empty
#: identifier needs no exemption: the server assigns each its own [MQTT-3.1.3-6], so two cannot meet.
NO_IDENTIFIER = with_twins(
    {"malformed/connect-no-client-id"}
    | {f"malformed/{stimulus.case_id}" for stimulus in STIMULI if stimulus.case_id.startswith("connect-cut-")}
)
#: Cases that deliberately send an empty Client Identifier and no other.
EMPTY_IDENTIFIER = with_twins({"connect/empty-client-id-persistent-session"}) | {
    "v5/connect/assigned-client-identifier",  # 5.0: the server assigns one and names it in its CONNACK
    "v5/accepted/connect-empty-client-id-clean-start-0",  # 5.0 allows it with Clean Start 0 too
    "v5/client-identifier/rejected",  # whether the server rejects it with 0x85
    "v5/client-identifier/assigned-unique",  # two at once: the server assigns each its own
}
#: Cases that follow the authentication exchange a profile scripts: without one (this run has none) they stop as not
#: applicable before they connect. Their identifiers come from client_id() like every other case's.
NEEDS_AUTHENTICATION_SCRIPT = {
    case_id for case_id, case in CASES.items() if case.script.__module__.endswith(".v5_auth")
} | {  # a repeated property in a re-authenticating AUTH: not applicable without the profile's exchange
    f"v5/malformed/auth-two-{name}" for name in ("authentication-method", "authentication-data", "reason-string")
}
#: The cases that send no CONNECT, or none with an identifier of their own.
WEBSOCKET_SHAPES = ("connect-in-text-frame", "pingreq-in-text-frame", "publish-in-text-frame", "fragmented-text-frame")
WITHOUT_IDENTIFIER = (
    NO_IDENTIFIER
    | EMPTY_IDENTIFIER
    | with_twins({"malformed/first-packet-not-connect"})
    | {f"v5/connect-first/{word}" for word in ("pingreq", "subscribe", "publish")}
    # a Protocol Version no version defines: no reader takes its identifier out (it is the case's own all the same)
    | {f"v5/connect-refused/protocol-version-{version}" for version in (6, 0, 255)}
    | NEEDS_AUTHENTICATION_SCRIPT
    # MQTT in WebSocket text frames: not applicable over the TCP these runs use, they connect nowhere
    | {f"{prefix}websocket/{shape}" for prefix in ("", "v5/") for shape in WEBSOCKET_SHAPES}
)
#: Cases whose identifier is deliberately not plain: its encoding is the defect under test.
NOT_PLAIN = with_twins({"malformed/connect-client-id-ill-formed-utf8"})
#: Cases whose connections share one identifier on purpose (a takeover, a session resumed or discarded).
SHARED_WITHIN_CASE = with_twins(
    {
        "connect/takeover",
        "session/present-flag",
        "session/queued-while-offline",
        "session/clean-session-discards",
        # a PUBREL resent on a resumed session (a client that lost the PUBCOMP)
        "publish/pubrel-unknown-id-then-pingreq",
    }
) | {  # MQTT 5.0: a session resumed, kept, expired or taken over; a Will watched across a reconnect
    "v5/flows/pubrel-unknown-id-then-pingreq",
    "v5/flows/pubrel-unknown-id-short-then-pingreq",
    # a Will watched while its connection leaves with a DISCONNECT other than 0x00, beside a control that discards it
    *(f"v5/will/disconnect-0x{code:02x}-sends-qos1" for code in (0x80, 0x81, 0x98, 0x8B, 0x8E, 0xFF, 0x01)),
    "v5/connect/session-resumed",
    "v5/server-disconnect/session-taken-over",
    "v5/topic-alias/mapped-before-reconnecting",
    "v5/topic-alias/to-client-after-reconnecting",
    "v5/message-expiry/expired-while-offline-qos1",
    "v5/message-expiry/expired-while-offline-qos2",
    "v5/message-expiry/remaining-while-offline-qos1",
    "v5/message-expiry/remaining-while-offline-qos2",
    "v5/session/clean-start-discards-queued",
    "v5/session/clean-start-discards-subscription",
    "v5/session/disconnect-ends-session",
    "v5/session/disconnect-extends-session",
    "v5/session/expired",
    "v5/session/resumed-queued-qos1",
    "v5/session/resumed-queued-qos2",
    "v5/session/resumed-subscription-qos0",
    "v5/session/takeover-clean",
    "v5/session/takeover-persistent",
    "v5/will/delay-reconnect-suppresses",
    "v5/will/delay-then-published",
    "v5/will/disconnect-0x00-discards-qos0",
    "v5/will/disconnect-0x00-discards-qos0-delayed",
    "v5/will/disconnect-0x00-discards-qos1",
    "v5/will/disconnect-0x04-sends-qos0",
    "v5/will/disconnect-0x04-sends-qos0-delayed",
    "v5/will/disconnect-0x04-sends-qos1",
    "v5/session/clean-start-0-new-session",
    "v5/session/clean-start-1-processing",
    "v5/session/other-client-id",
    "v5/session/expired-discards-queued",
    "v5/will/stored-with-session",
    "v5/will/dropped-once-published",
    "v5/will/dropped-after-disconnect",
    "v5/shared/qos2-completed-on-reconnect",
    "v5/redelivery/dup-qos1",  # a message left unacknowledged, re-sent on the resumed session
    "v5/redelivery/dup-qos2",
    "v5/redelivery/after-expiry-qos2",
}
#: Cases with a PUBLISH, SUBSCRIBE or UNSUBSCRIBE that names no topic of the case, and why. The two '#' subscribers
#: see other cases' messages by design; what they judge ('$' topics never matched) does not depend on them.
FOREIGN_TOPICS = {
    "routing/dollar-hash": "'#' alone: the statement is about '#' itself",
    "topics/dollar-not-matched-by-wildcards": "'#' and '+/<run>/#': the statement is about leading wildcards",
    "malformed/publish-topic-empty": "an empty Topic Name is the defect",
    "malformed/publish-topic-overrun": "the Topic Name's length runs past the packet: no topic",
    "malformed/remaining-length-fifth-byte": "only a fixed header",
    "malformed/remaining-length-fifth-byte-subscribe": "only a fixed header",
    "malformed/subscribe-empty-filter": "an empty Topic Filter is the defect",
    "malformed/subscribe-no-payload": "no Topic Filter is the defect",
    "malformed/unsubscribe-empty-filter": "an empty Topic Filter is the defect",
    "malformed/unsubscribe-no-payload": "no Topic Filter is the defect",
    **{
        f"malformed/{carrier}-{name}-only-level": "a wildcard sharing the one level of the filter is the defect"
        for carrier, *_rest in FILTER_CARRIERS
        for name, _level, positions in WILDCARD_LEVELS
        if ONLY in positions
    },
}
FOREIGN_TOPICS |= {twin: FOREIGN_TOPICS[twin.removeprefix("v5/")] for twin in with_twins(set(FOREIGN_TOPICS))}
#: MQTT 5.0 cases whose topics are ``mqttaudit/<run>/<8 hex digits of the case id>`` (short enough for the packet
#: sizes under test, and still the case's own), or whose PUBLISH names its topic by an alias (an empty Topic Name).
SHORT_TOPIC = "mqttaudit/<run>/<hash of the case id>: short enough for the packet sizes under test"
BY_ALIAS = "a PUBLISH named by its Topic Alias alone has an empty Topic Name"
FOREIGN_TOPICS |= {
    **dict.fromkeys(
        (
            "v5/maximum-packet-size/to-client-128-qos0",
            "v5/maximum-packet-size/to-client-128-qos1",
            "v5/maximum-packet-size/to-client-64-qos0",
            "v5/small-maximum/pubrel",
        ),
        SHORT_TOPIC,
    ),
    **dict.fromkeys(
        (
            "v5/topic-alias/mapped-before-reconnecting",
            "v5/topic-alias/mapped-on-another-connection",
            "v5/topic-alias/remapped",
            "v5/topic-alias/to-client-maximum-0",
            "v5/topic-alias/to-client-maximum-2",
            "v5/topic-alias/to-client-without-maximum",
            "v5/topic-alias/unmapped-qos0",
            "v5/topic-alias/unmapped-qos1",
        ),
        BY_ALIAS,
    ),
    "v5/malformed/subscribe-property-length-overrun-by-one": "the Property Length runs past the packet: no filter",
    "v5/malformed/subscribe-property-length-overrun-two-byte-length": (
        "the Property Length runs past the packet: no filter"
    ),
    **dict.fromkeys(
        (
            "v5/malformed/subscribe-share-name-without-filter",
            "v5/malformed/subscribe-share-name-then-empty-filter",
            "v5/malformed/unsubscribe-share-name-without-filter",
        ),
        "no Topic Filter after the ShareName is the defect ('$share/mqttaudit', '$share/mqttaudit/')",
    ),
}
CONNECT, PUBLISH, SUBSCRIBE, UNSUBSCRIBE = 1, 3, 8, 10
#: Each case's recorded connections, by case id: read from findings.json, or from a run made here.
Recorded = dict[str, list[dict[str, Any]]]
#: The library's run, a second run of some cases, and what the first left behind (retained topics, sessions).
Runs = tuple[Recorded, Recorded, tuple[list[str], list[str]]]


def connect_client_id(frame: bytes) -> bytes | None:
    """The Client Identifier field of a CONNECT's bytes, read without validating anything else; None when the
    packet ends before it."""
    pos = 1
    while pos < len(frame) and frame[pos] & 0x80:  # Remaining Length
        pos += 1
    pos += 1
    if pos + 2 > len(frame):
        return None
    pos += 2 + int.from_bytes(frame[pos : pos + 2], "big")  # Protocol Name
    level = frame[pos] if pos < len(frame) else None
    pos += 4  # Level, Connect Flags, Keep Alive
    if level == 5:  # MQTT 5.0: the properties (a Variable Byte Integer length, then that many bytes) come first
        length = shift = 0
        while pos < len(frame):
            length |= (frame[pos] & 0x7F) << shift
            shift += 7
            pos += 1
            if not frame[pos - 1] & 0x80:
                break
        pos += length
    if pos + 2 > len(frame):
        return None
    size = int.from_bytes(frame[pos : pos + 2], "big")
    field = frame[pos + 2 : pos + 2 + size]
    return field if len(field) == size else None


def recorded(run: ProbeRun | dict[str, Any]) -> Recorded:
    """The connections each case recorded, from a :class:`ProbeRun` or from the findings.json of one."""
    if isinstance(run, ProbeRun):
        return {result.case_id: result.connections for result in run.results}
    return {result["case"]: result["evidence"]["connections"] for result in run["results"]}


def client_frames(run: Recorded) -> Iterator[tuple[str, str, bytes]]:
    """(case id, connection name, frame bytes) of every packet a case's connections sent."""
    for case_id, connections in run.items():
        for connection in connections:
            omitted = connection["omitted"]
            later = [] if omitted is None else omitted["client_events"]  # past the events shown in full
            assert omitted is None or len(later) == omitted["client_packets"], case_id
            for event in connection["events"] + later:
                if event.get("from") == "client":  # its first 1,024 bytes: every field read here is in them
                    yield case_id, connection["name"], bytes.fromhex(event["hex"])


def identifiers(run: Recorded) -> dict[str, dict[bytes, set[str]]]:
    """case -> Client Identifier -> the connections whose CONNECT carried it (empty ones left out)."""
    found: dict[str, dict[bytes, set[str]]] = {case_id: {} for case_id in run}
    for case_id, connection, frame in client_frames(run):
        if frame[0] >> 4 == CONNECT:
            client_id = connect_client_id(frame)
            assert client_id is not None or case_id in NO_IDENTIFIER, (case_id, frame.hex(" "))
            if client_id:
                found[case_id].setdefault(client_id, set()).add(connection)
    return found


async def left_behind(url: str, run_id: str, client_ids: list[str]) -> tuple[list[str], list[str]]:
    """What a run left on the broker for a later case to see: retained messages under its topics, and the
    identifiers that still have a session (Session Present 1 to a CleanSession 0 CONNECT; each is then
    discarded again by a CleanSession 1 one)."""
    looker = Case("test/left-behind", (), "what the run left", script=lambda _context: asyncio.sleep(0))
    context = CaseContext(looker, Target.parse(url), timeout=2.0, run_id=run_id)
    try:
        watcher = await context.connect("watcher")
        await context.subscribe(watcher, (f"mqttaudit/{run_id}/#", 0), (f"$mqttaudit/{run_id}/#", 0))
        await watcher.send(Pingreq())  # mosquitto sends the retained messages before it answers this
        await watcher.wait_type(Pingresp)
        retained = [p.topic for p in watcher.received if isinstance(p, Publish)]
        sessions = []
        for client_id in client_ids:
            resumed = await context.connect(client_id=client_id, clean_session=False)
            ack = resumed.received[0]
            if isinstance(ack, Connack) and ack.session_present:
                sessions.append(client_id)
            await context.leave(await context.connect(client_id=client_id, clean_session=True))
        return retained, sessions
    finally:
        for connection in context.connections:
            await connection.finish()


@pytest.fixture(scope="module")
def runs(library_runs: LibraryRuns) -> Runs:
    """The whole library once (the suite's run of mosquitto) and what it left behind, then again every case that
    opens a connection with a CONNECT of its own bytes or resumes a session: the second run must not reuse an
    identifier of the first."""
    default = library_runs("mosquitto").default
    first = recorded(default.report)
    plain = sorted(i.decode() for ids in identifiers(first).values() for i in ids if PLAIN.fullmatch(i))
    run_id = plain[0][3:11]
    left = asyncio.run(left_behind(default.broker.url, run_id, plain))
    again = [c for c in all_cases() if c.id.startswith(("malformed/connect-", "connect/", "session/"))]
    return first, recorded(probe(again, default.broker.url)), left


def test_the_library_leaves_no_retained_message_and_no_session(
    runs: Runs,
) -> None:
    _, _, (retained, sessions) = runs
    assert retained == []
    assert sessions == []


def test_no_client_identifier_is_used_by_two_cases(
    runs: Runs,
) -> None:
    first, _, _ = runs
    owner: dict[bytes, str] = {}
    for case_id, ids in identifiers(first).items():
        for client_id in ids:
            assert owner.setdefault(client_id, case_id) == case_id, (client_id, owner[client_id], case_id)
    # the exemptions are exact: every other case sent an identifier
    without = {case_id for case_id, ids in identifiers(first).items() if not ids}
    assert without == WITHOUT_IDENTIFIER


def test_a_second_run_uses_new_identifiers(runs: Runs) -> None:
    first, second, _ = runs
    before = identifiers(first)
    for case_id, ids in identifiers(second).items():
        assert bool(ids) is (case_id not in WITHOUT_IDENTIFIER), case_id
        assert not set(ids) & set(before[case_id]), case_id


def test_identifiers_are_plain_and_shared_only_where_a_session_is(
    runs: Runs,
) -> None:
    first, _, _ = runs
    for case_id, ids in identifiers(first).items():
        for client_id, connections in ids.items():
            assert case_id in NOT_PLAIN or PLAIN.fullmatch(client_id), (case_id, client_id)
            assert len(connections) == 1 or case_id in SHARED_WITHIN_CASE, (case_id, client_id, connections)
    for case_id in SHARED_WITHIN_CASE:  # the exemption is still needed
        assert any(len(connections) > 1 for connections in identifiers(first)[case_id].values()), case_id


def test_every_topic_a_case_sends_is_its_own(runs: Runs) -> None:
    """A PUBLISH, SUBSCRIBE or UNSUBSCRIBE names ``<run>/<case>``: a broker that routes it, even a malformed
    one, reaches no other case and no other run."""
    first, _, _ = runs
    run_ids: set[bytes] = set()
    exempt_seen: set[str] = set()
    for case_id, _connection, frame in client_frames(first):
        if frame[0] >> 4 not in (PUBLISH, SUBSCRIBE, UNSUBSCRIBE):
            continue
        own = re.search(rb"/([0-9a-f]{8})/" + re.escape(case_id.encode()), frame)
        if own is None:
            assert case_id in FOREIGN_TOPICS, (case_id, frame.hex(" "))
            exempt_seen.add(case_id)
        else:
            run_ids.add(own.group(1))
    assert len(run_ids) == 1
    assert exempt_seen == set(FOREIGN_TOPICS)
    # and the identifiers carry the same run id, so a broker's log ties a session to its run's topics
    (run_id,) = run_ids
    for case_id, ids in identifiers(first).items():
        assert all(i.startswith(b"mqa" + run_id) for i in ids), case_id


def test_every_connect_stimulus_carries_the_case_identifier() -> None:
    """Without a broker: a CONNECT stimulus is built from the case's identifier, and a stimulus that names a
    topic from the case's prefix, so two cases or runs never send the same bytes."""
    for stimulus in STIMULI:
        one, other = stimulus.build("mqa" + "1" * 20, "p/1"), stimulus.build("mqa" + "2" * 20, "p/2")
        if stimulus.data[0] >> 4 == CONNECT and f"malformed/{stimulus.case_id}" not in NO_IDENTIFIER:
            assert one != other, stimulus.case_id
            assert (connect_client_id(one) or b"").startswith(b"mqa1"), stimulus.case_id
        assert (one != other) is stimulus.personal, stimulus.case_id


def test_client_ids_differ_by_run_case_and_call() -> None:
    cases = all_cases()[:2]

    async def ids() -> list[str]:
        made: list[str] = []
        for run_id in ("0a1b2c3d", "4e5f6a7b"):
            for case in cases:
                context = CaseContext(case, Target("127.0.0.1", 1), timeout=1.0, run_id=run_id)
                made += [context.client_id(), context.client_id()]
        return made

    made = asyncio.run(ids())
    assert len(set(made)) == len(made) == 8
    assert all(PLAIN.fullmatch(client_id.encode()) and len(client_id) == 23 for client_id in made)


def sends_retained(frame: bytes) -> bool:
    """A client PUBLISH with RETAIN 1, or a CONNECT whose Will is retained (Will Flag and Will Retain set)."""
    kind, flags = frame[0] >> 4, frame[0] & 0x0F
    if kind == PUBLISH:
        return bool(flags & 0x01)
    if kind != 1:  # CONNECT
        return False
    pos = 1
    while pos < len(frame) and frame[pos] & 0x80:
        pos += 1
    pos += 1
    if pos + 2 > len(frame):
        return False
    pos += 2 + int.from_bytes(frame[pos : pos + 2], "big") + 1  # Protocol Name, Level
    return pos < len(frame) and frame[pos] & 0x24 == 0x24


def test_every_case_that_leaves_a_retained_message_runs_alone(runs: Runs) -> None:
    """A broker that sends every retained message to every client (amqtt 0.12.1) would show one case's retained
    messages to the cases beside it: such a case runs alone, and the library's list says which they are."""
    first, _, _ = runs
    retaining = {case_id for case_id, _connection, frame in client_frames(first) if sends_retained(frame)}
    assert retaining == set(ALONE)
    assert all(CASES[case_id].runs_alone for case_id in retaining)

"""The routing replay of one broker endpoint's whole model: the transcripts of all its captured connections held
against the broker model at once (:func:`replay_broker`), and the rows every routing replay writes. Pure. The audit
replays each broker slice by slice (:mod:`.slicing`), writing these rows; the whole model is the reference that replay
is proven equal to, and the benchmarks' measure of the judge alone.

Every expectation of the model becomes a ``deliveries`` row (expected or allowed, observed or not, the QoS owed and
the QoS seen) and every routing finding a ``routing_findings`` row with its kind (leak, missing, duplicate, qos).
The tolerance is the judge's answer timeout: a delivery later than that after the broker took the message counts
as missing.
Topics, ClientIds and findings are written by the tables' one rule for ill-formed UTF-8 (:func:`wire_text`).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator, Mapping

from mqttaudit.codec.describe import wire_text
from mqttaudit.judge import JudgeConfig
from mqttaudit.judge.model import Expectation, Model, build
from mqttaudit.judge.routing import Routing
from mqttaudit.judge.scenario import across_connections
from mqttaudit.judge.transcript import Transcript
from mqttaudit.judge.verdict import Judgement, combine

from .conversations import (
    CATALOGUE,
    Columns,
    add_undecided,
    finding_text,
    judged_version,
    rule_level,
)
from .tables import DELIVERY_COLUMNS, NOT_ASSESSABLE_COLUMNS, ROUTING_COLUMNS

#: Deliveries rows per batch handed on by :func:`replay_batches` (a Parquet row group of the writing task).
BATCH_ROWS = 65536


def replay_broker(
    broker: str,
    transcripts: Iterable[tuple[str, bytes]],
    config: JudgeConfig,
) -> tuple[Columns, Columns, Columns]:
    """``transcripts``: (flow id, pickled transcript) of every connection to ``broker``. Returns the deliveries
    rows, the routing findings rows, and the ``not_assessable`` rows of what the replay could not decide."""
    batches, findings, undecided = replay_batches(broker, transcripts, config)
    deliveries = Columns(DELIVERY_COLUMNS)
    for batch in batches:
        for name in DELIVERY_COLUMNS:
            deliveries.data[name] += batch.data[name]
    return deliveries, findings, undecided


def replay_batches(
    broker: str,
    transcripts: Iterable[tuple[str, bytes]],
    config: JudgeConfig,
    rows: int = BATCH_ROWS,
    captures: Mapping[str, str | None] | None = None,
) -> tuple[Iterator[Columns], Columns, Columns]:
    """:func:`replay_broker` with the deliveries rows handed on in batches of ``rows`` as they are made, so that a
    task writing them never holds them all (there is one per expectation of the model). ``captures``: the capture
    of each flow, written on the ``not_assessable`` rows the replay leaves (with the ClientId of their connection)."""
    loaded: dict[str, Transcript] = {flow: pickle.loads(blob) for flow, blob in transcripts}
    model = build(loaded, config)
    judgement = combine([Routing(model, loaded, config).judgement(), across_connections(loaded)])
    versions = {flow: judged_version(transcript, config) for flow, transcript in loaded.items()}
    findings = finding_rows(broker, judgement, versions)
    client_ids = {flow: connect_client_id(transcript) for flow, transcript in loaded.items()}
    undecided = undecided_rows(broker, judgement, versions, captures or {}, client_ids)
    return _deliveries(broker, model, rows), findings, undecided


def finding_rows(broker: str, judgement: Judgement, versions: Mapping[str, str]) -> Columns:
    """The ``routing_findings`` rows of ``judgement``'s findings (``versions``: the version each connection was
    judged in, :func:`~.conversations.judged_version`)."""
    findings = Columns(ROUTING_COLUMNS)
    for finding in judgement.findings:
        version = versions.get(finding.conversation, CATALOGUE.version)
        level, section = rule_level(finding.rule, version)
        findings.add(
            broker=broker,
            flow=finding.conversation,
            event=finding.event,
            kind=finding.kind or "session",
            rule=finding.rule,
            level=level,
            section=section,
            time=finding.time,
            detail=finding_text(finding.detail),
            expected=finding_text(finding.expected),
            rule_version=version,
        )
    return findings


def undecided_rows(
    broker: str,
    judgement: Judgement,
    versions: Mapping[str, str],
    captures: Mapping[str, str | None],
    client_ids: Mapping[str, str | None],
) -> Columns:
    """The ``not_assessable`` rows of what ``judgement`` left undecided, with the capture and the ClientId of each
    connection (``client_ids``: :func:`connect_client_id` of its transcript)."""
    undecided = Columns(NOT_ASSESSABLE_COLUMNS)
    for instance in judgement.undecided:
        add_undecided(undecided, "", instance, None, version=versions.get(instance.conversation, CATALOGUE.version))
    # The broker is the server of every connection replayed; the client is the flow's other endpoint.
    undecided.data["server"] = [broker] * len(undecided)
    undecided.data["client"] = [client_of(flow, broker) for flow in undecided.data["flow"]]
    # The connection's capture and ClientId, as the judge's rows of the same connection have them.
    undecided.data["capture"] = [captures.get(flow) or "" for flow in undecided.data["flow"]]
    undecided.data["client_id"] = [client_ids.get(flow) for flow in undecided.data["flow"]]
    return undecided


def connect_client_id(transcript: Transcript | None) -> str | None:
    """The ClientId of a connection's CONNECT, as the tables write text (None when no CONNECT was captured)."""
    connect = None if transcript is None else transcript.connect
    return None if connect is None else wire_text(connect.client_id)


def client_of(flow: str | None, broker: str) -> str | None:
    """The client endpoint of a connection id (``client|server@start``, endpoints in either order)."""
    if not flow:
        return None
    endpoints = flow.rsplit("@", 1)[0].split("|")
    others = [endpoint for endpoint in endpoints if endpoint != broker]
    return others[0] if len(endpoints) == 2 and len(others) == 1 else None


def _deliveries(broker: str, model: Model, rows: int) -> Iterator[Columns]:
    return delivery_batches(broker, (e for link in model.links for e in link.expectations), rows)


def delivery_batches(broker: str, expectations: Iterable[Expectation], rows: int) -> Iterator[Columns]:
    """The ``deliveries`` rows of ``expectations`` (a forbidden one only when it arrived), in batches of ``rows``."""
    deliveries = Columns(DELIVERY_COLUMNS)
    # Appended by position (one row per expectation of the model: the replay's largest output).
    columns = [deliveries.data[name] for name in DELIVERY_COLUMNS]
    for expectation in expectations:
        values = delivery_row(broker, expectation)
        if values is None:
            continue
        for column, value in zip(columns, values, strict=True):
            column.append(value)
        if len(columns[0]) >= rows:
            yield deliveries
            deliveries = Columns(DELIVERY_COLUMNS)
            columns = [deliveries.data[name] for name in DELIVERY_COLUMNS]
    if len(deliveries):
        yield deliveries


def delivery_row(broker: str, expectation: Expectation) -> tuple[object, ...] | None:
    """The ``deliveries`` row of one expectation, in :data:`.tables.DELIVERY_COLUMNS` order (None: a forbidden
    delivery that did not arrive has none)."""
    if expectation.forbidden and not expectation.delivered:
        return None
    message = expectation.message
    link = expectation.link
    seen = expectation.delivered
    return (
        broker,
        message.link.name,
        message.event,
        wire_text(message.publish.topic),
        message.will,
        link.name,
        wire_text(link.client_id),
        "forbidden" if expectation.forbidden else ("owed" if expectation.must else "allowed"),
        expectation.rule,
        expectation.retained,
        bool(seen),
        0 if expectation.forbidden else expectation.copies,
        len(seen),
        None if expectation.forbidden else expectation.qos,
        max((p.qos for p in seen), default=None),
    )

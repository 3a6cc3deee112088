"""The AMQP 0-9-1 routing probe against a real RabbitMQ (started once for the module), the routing judge on its
own, and ``mqttaudit probe amqp://...`` end to end.

Pinned from hand checks with pika against RabbitMQ 3.10.8 (Debian 12): two topic exchanges with the same bindings,
a message with the empty routing key published to one reaches exactly that exchange's queues bound with '' and '#'
and none of the other's. The leak fixed by rabbitmq/rabbitmq-server#16271 (empty binding keys stored under one
root shared by every topic exchange) lives in the Khepri projection of the 4.x series, not in 3.10's per-exchange
Mnesia trie, so the suite passes here. The probe's leak report is checked with a leak RabbitMQ makes on purpose: an
exchange-to-exchange binding, made behind the probe's back, that routes one exchange's messages into the other.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import pika
import pytest
from pika import spec

from mqttaudit.cli.main import main
from mqttaudit.probe import amqp
from mqttaudit.probe.amqp import (
    AMQP_CASES,
    AMQP_RULES,
    ONE_COPY,
    TOPIC_MATCH,
    AmqpTarget,
    BoundQueue,
    Command,
    Observation,
    Published,
    judge_routing,
    queue_label,
    run_amqp_routing,
)
from mqttaudit.probe.brokers import BrokerUnavailable, RunningBroker, free_port, start_broker
from mqttaudit.probe.case import CASES, Target
from mqttaudit.probe.runner import ProbeRun, run_probe
from mqttaudit.report import write_probe_reports
from mqttaudit.report.output_schemas import output_schema
from mqttaudit.topics import TopicTrie

TIMEOUT = 1.0
EMPTY_KEY = "amqp-routing/empty-key"


@pytest.fixture(scope="module")
def rabbitmq() -> Iterator[RunningBroker]:
    try:
        broker = start_broker("rabbitmq")
    except BrokerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    with broker:
        yield broker


@pytest.fixture(scope="module")
def suite_run(rabbitmq: RunningBroker) -> ProbeRun:
    return run_amqp_routing(rabbitmq.urls["amqp"], TIMEOUT)


def evidence(run: ProbeRun, case_id: str) -> dict[str, Any]:
    [result] = [r for r in run.results if r.case.id == case_id]
    return result.evidence()


def packets(events: list[dict[str, Any]], prefix: str) -> list[str]:
    return [e["packet"] for e in events if "from" in e and str(e["packet"]).startswith(prefix)]


class CrossBinding:
    """An exchange-to-exchange binding from x1 to x2 of one case of a run, made on the side: RabbitMQ then routes
    x1's messages with that key into x2's queues, exactly the symptom of a trie shared across exchanges."""

    def __init__(self, broker: RunningBroker, run_id: str, case: str, routing_key: str) -> None:
        self.connection = pika.BlockingConnection(pika.URLParameters(broker.urls["amqp"] + "?socket_timeout=5"))
        channel = self.connection.channel()
        self.exchanges = [f"mqttaudit.{run_id}.{case}.{label}" for label in ("x1", "x2")]
        for name in self.exchanges:
            channel.exchange_declare(name, "topic", auto_delete=True)
        channel.exchange_bind(destination=self.exchanges[1], source=self.exchanges[0], routing_key=routing_key)
        self.channel = channel

    def close(self) -> None:
        for name in self.exchanges:
            self.channel.exchange_delete(name)
        self.connection.close()


# -- against RabbitMQ 3.10.8 -------------------------------------------------------------------------------------


def test_the_routing_suite_passes_on_rabbitmq_3_10_8(suite_run: ProbeRun) -> None:
    [start] = packets(evidence(suite_run, EMPTY_KEY)["connections"][0]["events"], "Connection.Start(")

    assert "product='RabbitMQ', version='3.10.8'" in start
    assert [r.case.id for r in suite_run.results] == list(AMQP_CASES)
    assert {r.case.id: r.verdict for r in suite_run.results} == dict.fromkeys(AMQP_CASES, "pass")
    assert all(r.statements == {TOPIC_MATCH: "pass", ONE_COPY: "pass"} for r in suite_run.results)


def test_empty_routing_key_stays_in_its_own_exchange_on_rabbitmq_3_10_8(suite_run: ProbeRun) -> None:
    messages = evidence(suite_run, EMPTY_KEY)["routing"]["messages"]

    assert [(m["exchange"], m["routing_key"], m["delivered"]) for m in messages] == [
        ("x1", "", ["x1 '#'", "x1 ''"]),
        ("x2", "", ["x2 '#'", "x2 ''"]),
    ]
    assert all(m["confirmed"] and m["owed"] == m["delivered"] for m in messages)


def test_every_delivery_of_the_suite_comes_from_the_exchange_of_its_queue(suite_run: ProbeRun) -> None:
    deliveries, owed = 0, 0
    for result in suite_run.results:
        routing = result.evidence()["routing"]
        for deliver in packets(result.evidence()["connections"][0]["events"], "Basic.Deliver("):
            label = deliver.split("consumer_tag=", 1)[1][1:3]  # the tag starts with the queue's exchange label
            assert f"exchange={routing['exchanges'][label]!r}" in deliver
            deliveries += 1
        owed += sum(len(message["owed"]) for message in routing["messages"])
    assert deliveries == owed > 2 * len(AMQP_CASES)


def test_a_binding_that_crosses_exchanges_is_reported_as_a_leak(rabbitmq: RunningBroker, tmp_path: Path) -> None:
    cross = CrossBinding(rabbitmq, "pinned", "empty-key", "")
    try:
        run = run_amqp_routing(rabbitmq.urls["amqp"], TIMEOUT, run_id="pinned")
    finally:
        cross.close()
    write_probe_reports(run, tmp_path, AMQP_RULES)

    verdicts = {r.case.id: r.verdict for r in run.results}
    assert verdicts == {**dict.fromkeys(AMQP_CASES, "pass"), EMPTY_KEY: "fail"}
    [result] = [r for r in run.results if r.case.id == EMPTY_KEY]
    assert result.statements == {TOPIC_MATCH: "fail", ONE_COPY: "pass"}
    assert sorted(
        (f.kind, rule, f.detail.split(" reaches queue ")[1][:6]) for f in result.findings for rule in f.rules
    ) == [
        ("leak", TOPIC_MATCH, "\"x2 '#"),
        ("leak", TOPIC_MATCH, "\"x2 ''"),
    ]
    assert all("bound only to the other exchange" in f.detail for f in result.findings)
    assert all(f.detail.endswith("AMQP 0-9-1 section 3.1.3.3") for f in result.findings)
    assert result.reason.startswith("2 leak: AMQP-3.1.3.3-topic-match: the message published to ")

    report = json.loads((tmp_path / "findings.json").read_text())
    schema = jsonschema.Draft202012Validator(output_schema("findings.json"))
    assert [error.message for error in schema.iter_errors(report)] == []
    [failed] = [r for r in report["results"] if r["verdict"] == "fail"]
    assert [f["kind"] for f in failed["evidence"]["findings"]] == ["leak", "leak"]
    assert failed["level"] == "MUST"
    markdown = (tmp_path / "findings.md").read_text()
    assert '<a id="fail-amqp-routing/empty-key"></a>' in markdown
    assert "- Section 3.1.3.3, statement [AMQP-3.1.3.3-topic-match] (MUST, server): " in markdown
    assert "Basic.Deliver(consumer_tag=\"x2 ''\", delivery_tag=" in markdown
    assert "exchange='mqttaudit.pinned.empty-key.x1', routing_key='') body b\"empty-key x1 ''\"" in markdown
    junit = (tmp_path / "junit.xml").read_text()
    assert junit.count('<failure message="2 leak: ') == 1 and 'type="AMQP-3.1.3.3-topic-match"' in junit


def test_a_refused_login_is_inconclusive_and_the_password_is_never_written_down(
    rabbitmq: RunningBroker, tmp_path: Path
) -> None:
    password = "not-the-pw"
    url = rabbitmq.urls["amqp"].replace("guest:guest", f"guest:{password}")

    run = run_amqp_routing(url, TIMEOUT)
    write_probe_reports(run, tmp_path, AMQP_RULES)

    assert {r.verdict for r in run.results} == {"inconclusive"}
    assert run.results[0].reason.startswith("setup: the broker closed the connection: 403 ACCESS_REFUSED")
    written = "".join(path.read_text() for path in tmp_path.iterdir())
    assert password not in written and password.encode().hex(" ") not in written
    assert "guest\\\\x00<password withheld>" in written  # as findings.json escapes it


def test_a_down_amqp_port_is_inconclusive_with_the_reason(tmp_path: Path) -> None:
    port = free_port()

    run = run_amqp_routing(f"amqp://guest:guest@127.0.0.1:{port}/%2F", TIMEOUT)
    write_probe_reports(run, tmp_path, AMQP_RULES)

    reason = f"cannot connect to amqp://guest@127.0.0.1:{port}/%2F: "
    assert [r.verdict for r in run.results] == ["inconclusive"] * len(AMQP_CASES)
    assert all(r.reason.startswith(reason) and r.reason.endswith("connection refused") for r in run.results)
    assert run.broker_down is not None and run.broker_down.startswith(reason)
    junit = (tmp_path / "junit.xml").read_text()
    assert f'skipped="{len(AMQP_CASES)}"' in junit and "<failure" not in junit


# -- the command line --------------------------------------------------------------------------------------------


def test_probe_amqp_with_suite_routing_writes_the_three_reports(rabbitmq: RunningBroker, tmp_path: Path) -> None:
    status = main(["probe", rabbitmq.urls["amqp"], "--suite", "routing", "--timeout", "1", "--out", str(tmp_path)])

    assert status == 0
    report = json.loads((tmp_path / "findings.json").read_text())
    assert report["target"] == rabbitmq.urls["amqp"].replace("guest:guest@", "guest@")
    assert [r["case"] for r in report["results"]] == list(AMQP_CASES)
    assert report["summary"]["pass"] == len(AMQP_CASES)
    assert (tmp_path / "findings.md").read_text().startswith("# mqttaudit probe findings: `amqp://guest@127.0.0.1:")
    assert (tmp_path / "junit.xml").read_text().count("<testcase ") == len(AMQP_CASES)


def test_probe_amqp_exits_1_on_a_leak_and_says_which_case(
    rabbitmq: RunningBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(amqp, "secrets", SimpleNamespace(token_hex=lambda _: "clipinned"))
    cross = CrossBinding(rabbitmq, "clipinned", "empty-key", "")
    try:
        status = main(["probe", rabbitmq.urls["amqp"], "--timeout", "1", "--out", str(tmp_path)])
    finally:
        cross.close()

    assert status == 1
    out = capsys.readouterr().out
    assert f"{len(AMQP_CASES)} cases in " in out and ": 4 pass, 1 fail, 0 inconclusive" in out
    assert "\nFAIL amqp-routing/empty-key [AMQP-3.1.3.3-topic-match, AMQP-3.1.3.3-one-copy-per-queue]: leak: " in out


def test_probe_amqp_with_a_wrong_password_exits_4_in_one_line_without_the_password(
    rabbitmq: RunningBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = rabbitmq.urls["amqp"].replace("guest:guest", "guest:not-the-pw")

    status = main(["probe", url, "--timeout", "1", "--out", str(tmp_path)])

    captured = capsys.readouterr()
    assert status == 4 and captured.out == ""
    shown = url.replace("guest:not-the-pw@", "guest@")
    assert captured.err.startswith(f"mqttaudit: {shown}: authentication refused (")
    assert "403 ACCESS_REFUSED" in captured.err and captured.err.endswith("— nothing was probed\n")
    written = "".join(path.read_text() for path in tmp_path.iterdir())
    assert "not-the-pw" not in captured.err + written
    assert f'errors="{len(AMQP_CASES)}"' in (tmp_path / "junit.xml").read_text()


def test_probe_amqp_refuses_any_other_suite(rabbitmq: RunningBroker, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", rabbitmq.urls["amqp"], "--suite", "malformed"]) == 2
    assert "amqp:// targets have one suite, 'routing', not 'malformed'" in capsys.readouterr().err


def test_suite_selects_the_mqtt_cases_whose_id_starts_with_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--list", "--suite", "malformed", "--format", "json"]) == 0

    listed = [row["id"] for row in json.loads(capsys.readouterr().out)]
    assert listed == [case_id for case_id in CASES if case_id.startswith("malformed/")]
    assert listed


def test_an_unknown_suite_matches_no_mqtt_case(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "mqtt://127.0.0.1:1", "--suite", "nosuch"]) == 2
    assert "in suite 'nosuch'" in capsys.readouterr().err


# -- the target and the routing judge, without a broker ----------------------------------------------------------


def test_amqp_target_reads_user_password_port_and_vhost_and_shows_no_password() -> None:
    target = AmqpTarget.parse("amqp://ops:p%40ss@broker.example:5673/tenant%2Fa")

    assert (target.host, target.port, target.user, target.password, target.vhost) == (
        "broker.example",
        5673,
        "ops",
        "p@ss",
        "tenant/a",
    )
    assert target.url == "amqp://ops@broker.example:5673/tenant%2Fa"
    assert "p@ss" not in repr(target)
    assert AmqpTarget.parse("amqp://h") == AmqpTarget("h", 5672, user="guest", password="guest", vhost="/")
    with pytest.raises(ValueError, match="not an amqp:// target"):
        AmqpTarget.parse("mqtt://h:1883")


def observation(routing_key: str, deliveries: list[str], *, ack: bool = True, watched: bool = True) -> Observation:
    """One message published to x1 with ``routing_key``, against the queues of :data:`amqp.BINDINGS` on x1 and x2,
    delivered to the queues labelled in ``deliveries`` (event numbers from 10), acknowledged or not."""
    oracle: TopicTrie[str] = TopicTrie(dialect="amqp")
    queues = {}
    for label in ("x1", "x2"):
        for keys in amqp.BINDINGS:
            tag = queue_label(label, keys)
            queues[tag] = BoundQueue(tag, label, keys, f"amq.gen-{len(queues)}")
            for key in keys:
                oracle.add(label, key, tag)
    body = b"m1"
    message = Published("x1", "run.x1", routing_key, body, 1, 5, frozenset(oracle.match("x1", routing_key)))
    confirm = spec.Basic.Ack(delivery_tag=1) if ack else spec.Basic.Nack(delivery_tag=1)
    received = [Command(confirm, 1, b"", 6, 0.1)]
    received += [
        Command(
            spec.Basic.Deliver(consumer_tag=tag, delivery_tag=n, exchange="run.x1", routing_key=routing_key),
            1,
            body,
            10 + n,
            0.2,
        )
        for n, tag in enumerate(deliveries)
    ]
    return Observation({"x1": "run.x1", "x2": "run.x2"}, queues, [message], received, 2.0 if watched else None)


def test_an_owed_queue_that_gets_nothing_is_missing() -> None:
    verdict = judge_routing(observation("", ["x1 '#'"]), "c1", TIMEOUT)

    [finding] = verdict.findings
    assert (finding.kind, finding.rule, finding.event, finding.conversation) == ("missing", TOPIC_MATCH, 5, "c1")
    assert "never reaches queue \"x1 ''\" (amq.gen-0), bound to that exchange with '', which matches it" in (
        finding.detail
    )
    assert verdict.statements == {TOPIC_MATCH: "fail", ONE_COPY: "pass"}


def test_a_second_copy_in_a_queue_bound_twice_is_a_duplicate() -> None:
    both = "x1 'a.#' '#.b'"
    owed = ["x1 '#'", "x1 '#.b'", "x1 '*.*'", "x1 '*.b'", "x1 'a.#'", "x1 'a.*'", "x1 'a.b'", both]

    verdict = judge_routing(observation("a.b", [*owed, both]), "c1", TIMEOUT)

    [finding] = verdict.findings
    assert (finding.kind, finding.rule, finding.event) == ("duplicate", ONE_COPY, 10 + len(owed))
    assert f"reaches queue {both!r} (amq.gen-11) again (copy 2, event {10 + len(owed)}" in finding.detail
    assert verdict.statements == {TOPIC_MATCH: "pass", ONE_COPY: "fail"}


def test_a_queue_of_the_same_exchange_whose_key_does_not_match_is_a_leak() -> None:
    verdict = judge_routing(observation("", ["x1 '#'", "x1 ''", "x1 '*'"]), "c1", TIMEOUT)

    [finding] = verdict.findings
    assert (finding.kind, finding.event) == ("leak", 12)
    assert "bound to that exchange with '*', which does not match" in finding.detail


def test_a_message_the_broker_did_not_confirm_is_owed_nothing_and_leaves_routing_undecided() -> None:
    verdict = judge_routing(observation("", [], ack=False), "c1", TIMEOUT)

    assert verdict.findings == []
    assert verdict.statements == {TOPIC_MATCH: "inconclusive", ONE_COPY: "pass"}
    assert verdict.undecided[0].startswith(f"{TOPIC_MATCH}: the broker did not confirm (Basic.Ack within 1 s)")


def test_nothing_is_missing_before_the_observation_ran_its_course() -> None:
    verdict = judge_routing(observation("", [], watched=False), "c1", TIMEOUT)

    assert verdict.findings == []
    assert set(verdict.statements.values()) == {"inconclusive"}


#: The MQTT routing cases against RabbitMQ 3.10.8's MQTT plugin, checked by hand against the bytes: it matches
#: '$' topics through leading wildcards [MQTT-4.7.2-1] and sends retained messages only to subscriptions whose
#: filter is the exact topic [MQTT-3.3.1-6] (a limitation its documentation states); plain matching is right.
RABBITMQ_MQTT_ROUTING = {
    "routing/hash-parent": "pass",
    "routing/plus-empty-leading": "pass",
    "routing/empty-level-dropped": "pass",
    "routing/no-unicode-normalisation": "pass",
    "routing/dollar-exact": "pass",
    "routing/dollar-plus": "fail",
    "routing/retained-to-wildcard-subscribers": "fail",
}


def test_the_mqtt_routing_cases_run_against_the_mqtt_plugin(rabbitmq: RunningBroker) -> None:
    cases = [CASES[c] for c in RABBITMQ_MQTT_ROUTING]
    run = asyncio.run(run_probe(Target.parse(rabbitmq.url), cases, timeout=2.0, concurrency=4))
    observed = {r.case.id: r.verdict for r in run.results}
    assert observed == RABBITMQ_MQTT_ROUTING, {r.case.id: r.reason for r in run.results}
    leak = next(r for r in run.results if r.case.id == "routing/dollar-plus")
    assert [(rule, f.kind) for f in leak.findings for rule in f.rules] == [("MQTT-4.7.2-1", "leak")]

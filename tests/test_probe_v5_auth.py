"""The MQTT 5.0 enhanced authentication cases of probe/cases/v5_auth.py: every statement a case lists is one the
judge decides on a conversation of the case's shape, kept by a conforming broker and broken by a violating one (pure,
the probe's judge configuration); then the cases run against mosquitto given an authentication method by the test
plugin tests/plugins/mqttaudit_challenge_auth.c (built here with gcc, headers from Debian's mosquitto-dev) with a
profile scripting its exchange, and against brokers without a script (not applicable)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqttaudit import codec
from mqttaudit.codec.properties import make
from mqttaudit.judge import Judgement, judge_scenario
from mqttaudit.probe.brokers import RunningBroker
from mqttaudit.probe.case import CASES, Case
from mqttaudit.probe.cases import v5_auth
from mqttaudit.probe.cases.malformed import charged
from mqttaudit.probe.profile import parse_profile
from mqttaudit.probe.runner import FAIL, NOT_APPLICABLE, PASS, decide, judge_config

from .live import configured_mosquitto, run_together
from .talk import S, Talk

TIMEOUT = 1.0
MODULE = "mqttaudit.probe.cases.v5_auth"
AUTH_CASES = [case for case in CASES.values() if case.script.__module__ == MODULE]
METHOD = "mqttaudit-challenge"
#: The plugin's exchange: CONNECT data, its challenge, the answer it takes (the challenge reversed).
FIRST, CHALLENGE_DATA, ANSWER_DATA = b"client-first", b"mqttaudit-nonce", b"ecnon-tiduattqm"
PROFILE = parse_profile(
    f'[authentication]\nmethod = "{METHOD}"\ndata = ["{FIRST.hex()}", "{ANSWER_DATA.hex()}"]\n', "challenge.toml"
)
PLUGIN_SOURCE = Path(__file__).parent / "plugins" / "mqttaudit_challenge_auth.c"


def auth(code: int, data: bytes | None = None, method: str | None = METHOD, **extra: object) -> codec.Auth:
    values: dict[str, object] = {}
    if method is not None:
        values["authentication_method"] = method
    if data is not None:
        values["authentication_data"] = data
    return codec.Auth(reason_code=code, properties=make(**values, **extra))  # type: ignore[arg-type]


def connect(**extra: object) -> codec.Connect:
    properties = make(authentication_method=METHOD, authentication_data=FIRST, **extra)  # type: ignore[arg-type]
    return codec.Connect(client_id="auth", protocol_level=5, properties=properties)


CONNECT = connect()
CHALLENGE = auth(0x18, CHALLENGE_DATA)
ANSWER = auth(0x18, ANSWER_DATA)
ACCEPT = codec.Connack(properties=make(authentication_method=METHOD))
REAUTH = auth(0x19, FIRST)
DONE = auth(0x00)
WRONG = b"mqttaudit-wrong-data"
PUBLISH_1 = codec.Publish(topic="t", payload=b"x", qos=1, packet_id=1)
SUBSCRIBE_1 = codec.Subscribe(packet_id=1, subscriptions=[codec.Subscription(topic_filter="t", qos=0)])
PROTOCOL_ERROR = codec.Disconnect(reason_code=0x82)


def talk() -> Talk:
    return Talk(version="5")


def authenticated() -> Talk:
    return talk().client(CONNECT).server(CHALLENGE).client(ANSWER).server(ACCEPT)


def challenged() -> Talk:
    return talk().client(CONNECT).server(CHALLENGE)


#: The Maximum Packet Size of the small-maximum pair: the challenge with 8 bytes to spare, which a Reason String of 4
#: characters (7 bytes) or a User Property ("k", "vv": 8 bytes) each fit, but not both.
SMALL = len(codec.encode(CHALLENGE, version="5")) + 8


def pairs() -> dict[str, tuple[Talk, Talk, bool]]:
    """Per case: (a conversation in which the broker keeps every statement, one in which it breaks every one,
    whether the violating broker closes the connection in the end), fresh each time (judging one ends it)."""
    interrupted = {
        "publish-while-authenticating": (PUBLISH_1, codec.Puback(packet_id=1)),
        "pingreq-while-authenticating": (codec.Pingreq(), codec.Pingresp()),
        "subscribe-while-authenticating": (SUBSCRIBE_1, codec.Suback(packet_id=1, return_codes=(0,))),
    }
    answers = {
        "answer-with-success": auth(0x00, ANSWER_DATA),
        "answer-with-reauthenticate": auth(0x19, ANSWER_DATA),
        "answer-short-form": bytes((0xF0, 0x00)),
    }
    return {
        "v5/auth/exchange": (
            authenticated().client(codec.Pingreq()).server(codec.Pingresp()).client(codec.Disconnect()),
            talk().client(CONNECT).server(auth(0x00, CHALLENGE_DATA, "other")).client(ANSWER).server(codec.Connack()),
            False,
        ),
        "v5/auth/reauthenticate": (
            authenticated().client(REAUTH).server(CHALLENGE).client(ANSWER).server(DONE).client(codec.Disconnect()),
            authenticated().client(REAUTH).server(CHALLENGE).client(ANSWER).server(auth(0x00, method=None)),
            False,
        ),
        "v5/auth/wrong-answer": (
            challenged().client(auth(0x18, WRONG)).server(codec.Connack(return_code=0x87)),
            talk()
            .client(CONNECT)
            .server(auth(0x00, CHALLENGE_DATA))
            .client(auth(0x18, WRONG))
            .server(codec.Connack(return_code=0x87)),
            False,
        ),
        **{
            f"v5/auth/reauthentication-fails-{name}": (
                authenticated()
                .client(REAUTH)
                .server(CHALLENGE)
                .client(auth(0x18, WRONG))
                .server(codec.Disconnect(reason_code=0x87)),
                authenticated()
                .client(REAUTH)
                .server(CHALLENGE)
                .client(auth(0x18, WRONG))
                .server(codec.Disconnect(reason_code=0x87)),
                False,
            )
            for name in ("at-start", "answer")
        },
        **{
            f"v5/auth/{name}": (
                challenged().client(offending),
                challenged().client(offending).server(answer, PROTOCOL_ERROR),
                False,
            )
            for name, (offending, answer) in interrupted.items()
        },
        **{
            f"v5/auth/{name}": (
                challenged().client(offending).server(codec.Connack(return_code=0x87)),
                challenged().client(offending).server(PROTOCOL_ERROR),
                False,
            )
            for name, offending in answers.items()
        },
        "v5/auth/reauthenticate-other-method": (
            authenticated().client(auth(0x19, FIRST, "mqttaudit-other-method")).server(PROTOCOL_ERROR),
            authenticated().client(auth(0x19, FIRST, "mqttaudit-other-method")).server(CHALLENGE),
            False,
        ),
        "v5/auth/reauthenticate-without-method": (
            authenticated().client(auth(0x19, method=None)).server(PROTOCOL_ERROR),
            authenticated().client(auth(0x19, method=None)).server(DONE),
            False,
        ),
        "v5/auth/small-maximum-packet-size": (
            talk()
            .client(connect(maximum_packet_size=SMALL))
            .server(CHALLENGE)
            .client(ANSWER)
            .server(ACCEPT)
            .client(codec.Disconnect()),
            talk()
            .client(connect(maximum_packet_size=SMALL))
            .server(auth(0x18, CHALLENGE_DATA, reason_string="more", user_property=[("k", "vv")]))
            .client(ANSWER)
            .server(ACCEPT)
            .client(codec.Disconnect()),
            True,
        ),
    }


def judged(case: Case, conversation: Talk, *, closed: bool) -> Judgement:
    ended = conversation.closed(S) if closed else conversation.quiet(after=10)
    return judge_scenario({"c1": ended.events}, judge_config(case, TIMEOUT))


def test_every_case_has_a_pair_and_lists_only_its_own_statements() -> None:
    assert sorted(case.id for case in AUTH_CASES) == sorted(pairs())
    for case in AUTH_CASES:
        assert case.statements, case.id
        assert set(case.statements) <= {
            v5_auth.SERVER_CONTINUES,
            v5_auth.CLIENT_CONTINUES,
            v5_auth.CLOSE_ON_REFUSAL,
            v5_auth.SAME_METHOD,
            v5_auth.REAUTH_SAME_METHOD,
            v5_auth.CLOSE_ON_FAILED_REAUTH,
            v5_auth.ONLY_AUTH_UNTIL_CONNACK,
            v5_auth.CLOSE_ON_ERROR,
            v5_auth.NO_EARLY_DISCONNECT,
            v5_auth.AUTH_REASON_STRING,
            v5_auth.AUTH_USER_PROPERTY,
        }


@pytest.mark.parametrize("case", AUTH_CASES, ids=lambda case: case.id)
def test_a_conforming_broker_keeps_every_statement_of_the_case(case: Case) -> None:
    """Decided as the runner decides: the rules the probe breaks on purpose are the client's findings, which the
    broker upholds by closing."""
    kept, _broken, _closes = pairs()[case.id]
    result = decide(case, judged(case, kept, closed=True))
    assert result.verdict == PASS, (result.reason, result.statements)
    assert not result.other_findings, result.other_findings


@pytest.mark.parametrize("case", AUTH_CASES, ids=lambda case: case.id)
def test_a_violating_broker_is_charged_with_every_statement_of_the_case(case: Case) -> None:
    """Every statement fails, or (a client's breach no statement binds the server to detect, 4.13.1) is accepted
    leniently."""
    _kept, broken, closes = pairs()[case.id]
    judgement = judged(case, broken, closed=closes)
    assert set(case.statements) <= set(charged(judgement)), (case.statements, charged(judgement))


def test_a_client_auth_breaking_the_exchange_is_acted_on_by_a_connack_that_accepts() -> None:
    """An AUTH 0x00 answering the server's AUTH 0x18 breaks [MQTT-4.12.0-3], the client's; CONNACK 0x00 after it
    accepts the broken exchange, which no later close undoes: leniency, as no statement binds the server to detect
    it (4.13.1)."""
    case = CASES["v5/auth/answer-with-success"]
    judgement = judged(case, challenged().client(auth(0x00, ANSWER_DATA)).server(ACCEPT), closed=True)
    assert v5_auth.CLIENT_CONTINUES not in {rule for f in judgement.findings if f.side is S for rule in f.rules}
    (entry,) = [x for x in judgement.lenient if x.side is S]
    assert entry.rule == v5_auth.CLIENT_CONTINUES and "accepts the authentication after" in entry.detail


def test_a_re_authentication_that_succeeds_owes_no_close() -> None:
    """AUTH 0x00 ends the re-authentication: a DISCONNECT after it is no failed re-authentication [MQTT-4.12.1-2]."""
    case = CASES["v5/auth/reauthenticate"]
    conversation = authenticated().client(REAUTH).server(CHALLENGE).client(ANSWER).server(DONE)
    judgement = judged(case, conversation.server(codec.Disconnect(reason_code=0x8B)), closed=False)
    assert v5_auth.CLOSE_ON_FAILED_REAUTH not in judgement.assessed


def test_a_re_authentication_ended_by_the_close_alone_keeps_the_rule() -> None:
    case = CASES["v5/auth/reauthentication-fails-at-start"]
    judgement = judged(case, authenticated().client(auth(0x19, WRONG)), closed=True)
    assert v5_auth.CLOSE_ON_FAILED_REAUTH in judgement.passed


def test_an_auth_too_large_even_without_reason_string_and_user_properties_breaks_neither_rule() -> None:
    """An AUTH too large even without its Reason String and User Properties is the Maximum Packet Size's own finding
    [MQTT-3.1.2-24]."""
    case = CASES["v5/auth/small-maximum-packet-size"]
    huge = auth(0x18, b"x" * 100, reason_string="r")
    judgement = judged(case, talk().client(connect(maximum_packet_size=SMALL)).server(huge), closed=True)
    assert not {rule for f in judgement.findings for rule in f.rules} & {
        v5_auth.AUTH_REASON_STRING,
        v5_auth.AUTH_USER_PROPERTY,
    }
    assert "MQTT-3.1.2-24" in {rule for f in judgement.findings for rule in f.rules}


# Live ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mosquitto_challenge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    """mosquitto with the test plugin: the method ``mqttaudit-challenge`` (see the plugin's source)."""
    workdir = tmp_path_factory.mktemp("mosquitto-challenge")
    plugin = workdir / "mqttaudit_challenge_auth.so"
    built = subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(plugin), str(PLUGIN_SOURCE)], check=False, capture_output=True, text=True
    )
    why = "building the plugin (scripts/install-test-deps.sh installs gcc and mosquitto-dev)"
    assert built.returncode == 0, f"{why}:\n{built.stderr}"
    # Run as root, mosquitto changes to the user mosquitto, which cannot read the private temporary directory.
    settings = ["user root"] if os.geteuid() == 0 else []
    with configured_mosquitto(workdir, *settings, f"plugin {plugin}") as broker:
        yield broker


#: The cases in which mosquitto 2.0.11 sends DISCONNECT 0x82 before any CONNACK [MQTT-3.14.0-1].
EARLY_DISCONNECTS = [
    f"v5/auth/{name}"
    for name in (
        "publish-while-authenticating",
        "subscribe-while-authenticating",
        "answer-with-success",
        "answer-with-reauthenticate",
    )
]


#: The cases in which mosquitto 2.0.11 answers a failed re-authentication with a second CONNACK [MQTT-3.2.0-2].
SECOND_CONNACKS = [f"v5/auth/reauthentication-fails-{name}" for name in ("at-start", "answer")]


def test_mosquitto_with_the_plugin_closes_on_every_breach_but_disconnects_before_its_connack(
    mosquitto_challenge: RunningBroker,
) -> None:
    """mosquitto 2.0.11 carries the method in every AUTH and the CONNACK, continues with 0x18, refuses a wrong
    answer with CONNACK 0x87 and closes, and closes on every breach of the exchange; it upholds every statement but
    one. A PUBLISH or SUBSCRIBE in the middle of the authentication (handle__packet answers the Protocol Error with
    DISCONNECT 0x82 whatever the state), or an answer to its AUTH 0x18 with Reason Code 0x00 or 0x19 (handle__auth
    sends the same), gets the bytes e0 01 82 with no CONNACK before them, then the close: a DISCONNECT before a
    CONNACK that accepts [MQTT-3.14.0-1]. A PINGREQ gets the close alone, a bare AUTH (f0 00) CONNACK 0x87. A failed
    re-authentication gets a second CONNACK, 20 03 00 87 00, then the close: the close keeps MQTT-4.12.1-2, the
    CONNACK breaks [MQTT-3.2.0-2], which no case lists but which fails the case that saw it (a MUST broken by the
    broker's own act)."""
    results = run_together(mosquitto_challenge, AUTH_CASES, "6e6e6e6e", PROFILE)
    assert {case_id: result.verdict for case_id, result in results.items()} == {
        **dict.fromkeys(pairs(), PASS),
        **dict.fromkeys(EARLY_DISCONNECTS, FAIL),
        **dict.fromkeys(SECOND_CONNACKS, FAIL),
    }
    for case_id in EARLY_DISCONNECTS:
        assert results[case_id].statements[v5_auth.NO_EARLY_DISCONNECT] == FAIL
        # One act, one finding: the DISCONNECT before any CONNACK also breaks "CONNACK 0x00 before any packet
        # other than AUTH" [MQTT-3.2.0-1], failed with it.
        [finding] = results[case_id].findings
        assert finding.rules == (v5_auth.NO_EARLY_DISCONNECT, "MQTT-3.2.0-1")
    for case_id in SECOND_CONNACKS:
        result = results[case_id]
        assert [rule for f in result.findings for rule in f.rules] == ["MQTT-3.2.0-2"]
        assert result.statements[v5_auth.CLOSE_ON_FAILED_REAUTH] == PASS
    assert results["v5/auth/small-maximum-packet-size"].statements == {
        v5_auth.AUTH_REASON_STRING: PASS,
        v5_auth.AUTH_USER_PROPERTY: PASS,
    }


@pytest.mark.parametrize("broker_name", ["mosquitto", "mqttools"])
def test_without_a_scripted_exchange_every_case_is_not_applicable(
    broker_name: str, request: pytest.FixtureRequest
) -> None:
    broker: RunningBroker = request.getfixturevalue(broker_name)
    results = run_together(broker, AUTH_CASES, "6f6f6f6f")
    assert {case_id: result.verdict for case_id, result in results.items()} == dict.fromkeys(pairs(), NOT_APPLICABLE)
    assert all("declares no authentication" in result.reason for result in results.values())

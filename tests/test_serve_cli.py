"""``mqttaudit serve`` as a user runs it: a process listening on a free port, stopped by Ctrl-C (SIGINT), --clients
or --duration, with its reports and exit status; its profile of limits; the enhanced authentication it offers; and
what a client does after a hostile scenario's stimulus."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

from mqttaudit import codec
from mqttaudit.codec.properties import make
from mqttaudit.probe.brokers import free_port
from mqttaudit.report.serve_reports import serve_html, write_serve_reports
from mqttaudit.serve.background import BackgroundServe
from mqttaudit.serve.broker import AUTH_CHALLENGE, AUTH_CLIENT_FIRST, AUTH_METHOD, AUTH_RESPONSE
from mqttaudit.serve.scenarios import scenario

from .observed_captures import RawClient
from .serve_process import ServeProcess


def _mqttaudit(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mqttaudit", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def test_serve_reports_a_wildcard_publisher_and_exits_1(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path, "--clients", "2")
    port = int(serve.urls[0].rsplit(":", 1)[1])
    good = RawClient(port)
    good.send(codec.Connect(client_id="good"))
    good.receive(codec.Connack)
    good.send(codec.Disconnect())
    good.close()
    bad = RawClient(port)
    bad.send(codec.Connect(client_id="bad"))
    bad.receive(codec.Connack)
    bad.send(codec.Publish(topic="sensor/#", payload=b"1"))
    bad.close()
    status = serve.process.wait(timeout=30)  # --clients 2: it stops by itself
    assert status == 1
    report = json.loads((tmp_path / "out" / "findings.json").read_text())
    assert report["summary"]["clients"] == 2 and report["summary"]["client_findings"] == 1
    (finding,) = next(c for c in report["clients"] if c["client_id"] == "bad")["findings"]
    assert finding["statement"]["id"] == "MQTT-3.3.2-2" and finding["side"] == "client"
    markdown = (tmp_path / "out" / "findings.md").read_text()
    assert "MQTT-3.3.2-2" in markdown and "30 0b 00 08 73 65 6e 73 6f 72 2f 23" in markdown
    assert "Statement coverage, MQTT 3.1.1:" in markdown
    page = (tmp_path / "out" / "report.html").read_text()
    assert "MQTT-3.3.2-2" in page and "30 0b 00 08 73 65 6e 73 6f 72 2f 23" in page
    suite = ElementTree.parse(tmp_path / "out" / "junit.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    assert [failure.get("type") for failure in suite.iter("failure")] == ["MQTT-3.3.2-2"]
    reproducers = sorted((tmp_path / "out" / "reproducers").iterdir())
    assert len(reproducers) == 1  # the connection with a finding only
    _replay(reproducers[0])


def _replay(script: Path) -> None:
    """The reproducer plays serve's side against a client that sends the same bytes: it prints them, answers
    with serve's CONNACK, and closes where serve closed."""
    port = free_port()
    replay = subprocess.Popen(
        [sys.executable, str(script), str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert replay.stdout is not None
    assert replay.stdout.readline().strip() == f"listening on 127.0.0.1:{port}"
    client = RawClient(port)
    client.send(codec.Connect(client_id="bad"))
    assert client.receive(codec.Connack) == codec.Connack()
    client.send(codec.Publish(topic="sensor/#", payload=b"1"))
    assert client.socket.recv(16) == b""  # closed, as serve closed
    client.close()
    said, _ = replay.communicate(timeout=30)
    assert replay.returncode == 0, said
    assert said.splitlines() == [
        "client -> 10 0f 00 04 4d 51 54 54 04 02 00 00 00 03 62 61 64",
        "server -> 20 02 00 00",
        "client -> 30 0b 00 08 73 65 6e 73 6f 72 2f 23 31",
        "server closes the connection",
    ]


def test_serve_stopped_before_any_client_is_incomplete(tmp_path: Path) -> None:
    done = _mqttaudit("serve", "--listen", "127.0.0.1:0", "--duration", "0.5", "--out", str(tmp_path / "out"))
    assert done.returncode == 4, done.stderr
    assert json.loads((tmp_path / "out" / "findings.json").read_text())["summary"]["clients"] == 0


def test_serve_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    cases = [
        (["--listen", "nowhere"], "expected HOST:PORT"),
        (["--scenario", "no-such"], "no scenario 'no-such'"),
        (["--tls-listen", "127.0.0.1:0"], "need --tls-cert and --tls-key"),
        (["--scenario", "receive-maximum-1", "--hostile", "unsolicited-pubrel"], "choose one scenario"),
    ]
    for args, said in cases:
        done = _mqttaudit("serve", *args, "--out", str(tmp_path / "never"))
        assert done.returncode == 2, (args, done.stderr)
        assert said in done.stderr, (args, done.stderr)
    profile = tmp_path / "bad.toml"
    profile.write_text("receive_maximum = 0\n")
    done = _mqttaudit("serve", "--profile", str(profile), "--out", str(tmp_path / "never"))
    assert done.returncode == 2 and "receive_maximum must be an integer from 1 to 65535, not 0" in done.stderr
    profile.write_text("receive_maximun = 3\n")
    done = _mqttaudit("serve", "--profile", str(profile), "--out", str(tmp_path / "never"))
    assert done.returncode == 2 and "unknown key 'receive_maximun'" in done.stderr
    assert not (tmp_path / "never").exists()
    listing = _mqttaudit("serve", "--list-scenarios")
    assert listing.returncode == 0 and "reconnect-mid-qos1" in listing.stdout and "MQTT-4.4.0-1" in listing.stdout


def test_a_profile_sets_the_limits_connack_declares_and_options_override_it(tmp_path: Path) -> None:
    profile = tmp_path / "limits.toml"
    profile.write_text("receive_maximum = 10\ntopic_alias_maximum = 0\nmaximum_packet_size = 1024\n")
    serve = ServeProcess(tmp_path, "--profile", str(profile), "--receive-maximum", "7")
    port = int(serve.urls[0].rsplit(":", 1)[1])
    client = RawClient(port, 5)
    client.send(codec.Connect(protocol_level=5, client_id="limits"))
    connack = client.receive(codec.Connack)
    client.send(codec.Disconnect())
    client.close()
    served = serve.stop()
    assert isinstance(connack, codec.Connack)
    assert connack.properties == make(receive_maximum=7, maximum_packet_size=1024)  # no Topic Alias Maximum: 0
    assert served.status == 0


def test_the_challenge_authentication_and_a_client_that_sends_auth_without_a_method() -> None:
    with BackgroundServe() as serve:
        client = RawClient(serve.port, 5)
        client.send(
            codec.Connect(
                protocol_level=5,
                client_id="authenticated",
                properties=make(authentication_method=AUTH_METHOD, authentication_data=AUTH_CLIENT_FIRST),
            )
        )
        challenge = client.receive(codec.Auth)
        assert challenge == codec.Auth(
            reason_code=0x18, properties=make(authentication_method=AUTH_METHOD, authentication_data=AUTH_CHALLENGE)
        )
        answer = make(authentication_method=AUTH_METHOD, authentication_data=AUTH_RESPONSE)
        client.send(codec.Auth(reason_code=0x18, properties=answer))
        connack = client.receive(codec.Connack)
        assert connack == codec.Connack(properties=(*connack.properties[:-1], *make(authentication_method=AUTH_METHOD)))
        client.send(
            codec.Auth(
                reason_code=0x19,
                properties=make(authentication_method=AUTH_METHOD, authentication_data=AUTH_CLIENT_FIRST),
            )
        )
        client.receive(codec.Auth)
        client.send(codec.Auth(reason_code=0x18, properties=answer))
        assert client.receive(codec.Auth) == codec.Auth(
            reason_code=0x00, properties=make(authentication_method=AUTH_METHOD)
        )
        client.send(codec.Disconnect())
        client.close()
        rogue = RawClient(serve.port, 5)
        rogue.send(codec.Connect(protocol_level=5, client_id="rogue"))
        rogue.receive(codec.Connack)
        rogue.send(codec.Auth(reason_code=0x19, properties=make(authentication_method=AUTH_METHOD)))
        assert rogue.receive(codec.Disconnect) == codec.Disconnect(reason_code=0x82)
        rogue.close()
        assert serve.wait_for_clients(2)
    run = serve.stop()
    by_id = {client.client_id: client for client in run.clients}
    assert by_id["authenticated"].client_findings == []
    assert "MQTT-4.12.0-3" in by_id["authenticated"].judgement.client_assessed  # type: ignore[union-attr]
    assert "MQTT-4.12.0-7" in {rule for f in by_id["rogue"].client_findings for rule in f.rules}
    assert all(client.server_findings == [] for client in run.clients)


def _read(client: RawClient, count: int) -> bytes:
    got = b""
    while len(got) < count:
        more = client.socket.recv(count - len(got))
        assert more, f"closed after {got.hex(' ')}"
        got += more
    return got


def test_what_a_client_does_after_a_hostile_stimulus_is_named() -> None:
    stimulus = bytes.fromhex("20020000") + bytes.fromhex("30ffffffff01")  # CONNACK, then the hostile bytes
    with BackgroundServe(scenario=scenario("hostile/five-byte-remaining-length")) as serve:
        closes = RawClient(serve.port)
        closes.send(codec.Connect(client_id="closes"))
        _read(closes, len(stimulus))  # all of it: a socket closed with bytes unread would reset the connection
        closes.close()
        carries_on = RawClient(serve.port)
        carries_on.send(codec.Connect(client_id="carries-on"))
        _read(carries_on, len(stimulus))
        carries_on.send(codec.Pingreq())
        _read(carries_on, 2)  # its PINGRESP
        assert serve.wait_for_clients(1)
    run = serve.stop()
    reactions = {client.client_id: client.reaction for client in run.clients}
    assert reactions == {"closes": "closed", "carries-on": "carried on"}


def test_the_html_report_escapes_what_a_client_sent() -> None:
    with BackgroundServe() as serve:
        client = RawClient(serve.port)
        client.send(codec.Connect(client_id="<script>alert(1)</script>"))
        client.receive(codec.Connack)
        client.send(codec.Publish(topic="<b>/#", payload=b"1"))
        client.close()
        assert serve.wait_for_clients(1)
    page = serve_html(serve.stop())
    assert "<script>alert" not in page and "<b>/#" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "MQTT-3.3.2-2" in page


def test_a_client_s_password_is_masked_in_everything_serve_writes(tmp_path: Path) -> None:
    secret = b"s3cret-pass"
    with BackgroundServe() as serve:
        client = RawClient(serve.port)
        client.send(codec.Connect(client_id="with-password", username="user", password=secret))
        client.receive(codec.Connack)
        client.send(codec.Publish(topic="sensor/#", payload=b"1"))  # a finding, so a reproducer is written too
        client.close()
        assert serve.wait_for_clients(1)
    paths = write_serve_reports(serve.stop(), tmp_path)
    written = b"".join(p.read_bytes() for path in paths for p in ([path] if path.is_file() else path.iterdir()))
    assert (tmp_path / "reproducers").is_dir()
    for shown in (secret, secret.hex().encode(), secret.hex(" ").encode()):
        assert shown not in written
    assert b"*" * len(secret) in written or ("2a " * len(secret)).strip().encode() in written

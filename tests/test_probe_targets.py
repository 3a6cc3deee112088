"""Probe targets as URLs: schemes, default ports, WebSocket paths, IPv6, credentials percent-decoded, and the
password kept out of every text a target shows; the options of probe and matrix that go with them."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqttaudit.cli.connection import split_spec
from mqttaudit.cli.main import main
from mqttaudit.probe.amqp import AmqpTarget
from mqttaudit.probe.case import Target
from mqttaudit.probe.targets import parse_target
from mqttaudit.probe.transport import Credentials, Secret, TlsOptions


@pytest.mark.parametrize(
    ("url", "scheme", "host", "port", "path"),
    [
        ("mqtt://broker.example", "mqtt", "broker.example", 1883, ""),
        ("broker.example:1884", "mqtt", "broker.example", 1884, ""),
        ("mqtts://broker.example", "mqtts", "broker.example", 8883, ""),
        ("ws://broker.example", "ws", "broker.example", 80, "/mqtt"),
        ("ws://broker.example:8080/", "ws", "broker.example", 8080, "/"),
        ("wss://broker.example/ws/mqtt", "wss", "broker.example", 443, "/ws/mqtt"),
        ("mqtts://[::1]:8884", "mqtts", "::1", 8884, ""),
        ("wss://[2001:db8::7]", "wss", "2001:db8::7", 443, "/mqtt"),
    ],
)
def test_a_target_url_names_its_transport_port_and_path(url: str, scheme: str, host: str, port: int, path: str) -> None:
    target = Target.parse(url)
    assert (target.scheme, target.host, target.port, target.path) == (scheme, host, port, path)
    assert target.uses_tls == (scheme in ("mqtts", "wss"))
    assert target.websocket == (scheme in ("ws", "wss"))
    assert Target.parse(target.url) == target  # the URL it shows reads back as the same target


@pytest.mark.parametrize(("url", "port"), [("amqp://h", 5672), ("amqps://h", 5671), ("amqps://u:p@h:5999/v", 5999)])
def test_amqp_targets_take_tls_and_their_own_default_ports(url: str, port: int) -> None:
    target = parse_target(url)
    assert isinstance(target, AmqpTarget)
    assert target.port == port
    assert target.uses_tls == url.startswith("amqps")
    assert target.url.startswith(url.split("://", maxsplit=1)[0] + "://")


@pytest.mark.parametrize(
    "url", ["http://x:1", "mqtt://x:0", "mqtt://x:port", "", "mqtt://x/path", "mqtts://x?a=1", "mqtt://:pw@x"]
)
def test_bad_targets_are_refused(url: str) -> None:
    with pytest.raises(ValueError):
        Target.parse(url)


def test_credentials_in_a_url_are_percent_decoded_and_the_password_never_shows() -> None:
    target = Target.parse("mqtts://ops%20team:p%40ss%3Aw@broker.example:8883")
    assert target.credentials == Credentials("ops team", Secret("p@ss:w"))
    assert target.credentials is not None and target.credentials.password_bytes() == b"p@ss:w"
    assert target.url == "mqtts://ops%20team@broker.example:8883"
    for shown in (repr(target), str(target), target.url, repr(target.credentials), str(Secret("p@ss:w"))):
        assert "p@ss" not in shown and "p%40ss" not in shown


def test_a_bad_target_error_names_no_password() -> None:
    with pytest.raises(ValueError) as caught:
        parse_target("mqtt://user:hunter2@host:port")
    assert "hunter2" not in str(caught.value)
    assert "user:***@host" in str(caught.value)


_USERINFO = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=24)


@given(user=_USERINFO, password=st.text(st.characters(codec="utf-8"), max_size=24))
def test_percent_encoded_credentials_round_trip(user: str, password: str) -> None:
    """Whatever a user name and password hold (``@``, ``:``, ``/``, ``%``, spaces, any script), percent-encoded in
    a URL they come back as they were, and the URL the target shows has the user and never the password."""
    url = f"mqtts://{quote(user, safe='')}:{quote(password, safe='')}@broker.example:8883"
    target = Target.parse(url)
    assert target.credentials is not None
    assert target.credentials.username == user
    assert target.credentials.password == Secret(password)
    assert target.url == f"mqtts://{quote(user, safe='')}@broker.example:8883"
    assert Target.parse(target.url).credentials == Credentials(user)


def test_options_join_the_url_and_the_urls_own_credentials_win() -> None:
    options = Credentials("opt", Secret("from-file"))
    assert Target.parse("mqtt://h").with_options(None, options).credentials == options
    assert Target.parse("mqtt://u:v@h").with_options(None, options).credentials == Credentials("u", Secret("v"))
    # a user in the URL without a password takes the options' password
    assert Target.parse("mqtt://u@h").with_options(None, options).credentials == Credentials("u", Secret("from-file"))
    with pytest.raises(ValueError, match="needs a user name"):
        Target.parse("mqtt://h").with_options(None, Credentials("", Secret("x")))
    with pytest.raises(ValueError, match="need a TLS target"):
        Target.parse("ws://h").with_options(TlsOptions(insecure=True))
    assert Target.parse("wss://h").with_options(TlsOptions(insecure=True)).tls == TlsOptions(insecure=True)


@pytest.mark.parametrize(
    ("spec", "split"),
    [
        ("a=mqtt://h:1", ("a", "mqtt://h:1")),
        ("mqtt://h:1", ("", "mqtt://h:1")),
        ("mqtt://u:p=q@h:1", ("", "mqtt://u:p=q@h:1")),
        ("b=mqtts://u:p=q@h", ("b", "mqtts://u:p=q@h")),
        ("u:p=q@h:1", ("", "u:p=q@h:1")),  # a scheme-less URL: 'u:p' is no label, and never shown as one
        ("u@x=y:p@h:1", ("", "u@x=y:p@h:1")),
    ],
)
def test_a_matrix_label_is_split_off_before_the_url_whatever_the_password_holds(
    spec: str, split: tuple[str, str]
) -> None:
    assert split_spec(spec) == split


@pytest.fixture
def readable(tmp_path: Path) -> Path:
    path = tmp_path / "file.pem"
    path.write_text("x\n")
    return path


def _usage(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["probe", *args]) == 2
    return capsys.readouterr().err


def test_option_mistakes_are_usage_errors(capsys: pytest.CaptureFixture[str], readable: Path, tmp_path: Path) -> None:
    assert "--key needs --cert" in _usage(capsys, "mqtts://127.0.0.1:1", "--key", str(readable))
    assert "need a TLS target" in _usage(capsys, "mqtt://127.0.0.1:1", "--cafile", str(readable))
    assert "need a TLS target" in _usage(capsys, "ws://127.0.0.1:1", "--insecure")
    assert "does not exist" in _usage(capsys, "mqtts://127.0.0.1:1", "--cafile", str(tmp_path / "missing.pem"))
    err = _usage(capsys, "mqtt://u:hunter2@127.0.0.1:1", "--password-file", str(readable))
    assert "a password in the target URL and --password-file" in err and "hunter2" not in err
    assert "needs a user name" in _usage(capsys, "mqtt://127.0.0.1:1", "--password-file", str(readable))
    assert main(["matrix", "mqtt://127.0.0.1:1", "mqtt://127.0.0.1:2", "--cafile", str(readable)]) == 2
    assert "need a TLS target" in capsys.readouterr().err


def test_an_unreadable_ca_file_is_a_usage_error_before_anything_is_probed(
    capsys: pytest.CaptureFixture[str], readable: Path, tmp_path: Path
) -> None:
    # a file that is no PEM certificate: the TLS context cannot take it, and no connection is tried
    status = main(["probe", "mqtts://127.0.0.1:1", "--cafile", str(readable), "--out", str(tmp_path / "out")])
    assert status == 2
    assert "TLS: cannot load the CA file" in capsys.readouterr().err

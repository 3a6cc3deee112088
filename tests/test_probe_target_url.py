"""The one parser of target URLs and the masking of their passwords (pure code): a password that holds any of
``@ / : ? # %``, spaces or non-ASCII letters, raw or percent-encoded, is read as meant or refused with a message
that says how to encode it, and neither the message nor any URL shown holds a piece of it."""

from __future__ import annotations

import itertools
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqttaudit.probe.amqp import AmqpTarget
from mqttaudit.probe.case import Target
from mqttaudit.probe.target_url import (
    MASK,
    TargetUrlError,
    mask_password,
    parse_target_url,
    password_forms,
    shown_url,
)
from mqttaudit.probe.targets import parse_target

#: Passwords a URL holds raw as meant: the user info ends at its last '@' and the user name at its first ':'.
READ_RAW = ["s3cr@t", "p:w@x:y", "sé€ 密码", "@@", "a b"]
#: Passwords that cannot be read raw: '/', '?' and '#' end a URL's host part, a '%' must start an escape.
REFUSED_RAW = ["s3cr@t/pw", "q?x=1", "h#1", "100%", "p@ss:w/%d sé", "tab\there"]


@pytest.mark.parametrize("password", READ_RAW + REFUSED_RAW)
@pytest.mark.parametrize("scheme", ["mqtt", "mqtts", "ws", "amqp"])
def test_a_percent_encoded_password_reads_back_as_it_was(scheme: str, password: str) -> None:
    target = parse_target(f"{scheme}://audit:{quote(password, safe='')}@broker.example:1884")
    assert target.credentials is not None and target.credentials.password is not None
    assert target.credentials.password.reveal() == password
    assert (target.host, target.port, target.credentials.username) == ("broker.example", 1884, "audit")
    assert target.url.startswith(f"{scheme}://audit@broker.example:1884")


@pytest.mark.parametrize("password", READ_RAW)
def test_a_raw_at_colon_space_or_letter_in_a_password_is_read_as_meant(password: str) -> None:
    target = Target.parse(f"mqtt://audit:{password}@broker.example:1884")
    assert target.credentials is not None and target.credentials.password is not None
    assert target.credentials.password.reveal() == password
    assert target.url == "mqtt://audit@broker.example:1884"
    assert shown_url(f"mqtt://audit:{password}@broker.example:1884") == "mqtt://audit:***@broker.example:1884"


@pytest.mark.parametrize("password", REFUSED_RAW)
@pytest.mark.parametrize("scheme", ["mqtt", "ws", "amqp"])
def test_a_raw_password_that_cannot_be_read_is_refused_with_how_to_encode_it(scheme: str, password: str) -> None:
    url = f"{scheme}://audit:{password}@broker.example:1884"
    with pytest.raises(TargetUrlError) as caught:
        parse_target(url)
    message = str(caught.value)
    assert f"'{scheme}://audit:***@broker.example:1884'" in message, message
    assert "'@' as %40, '/' as %2F" in message and "'%' as %25" in message and "--password-file" in message
    assert not any(form in message for form in password_forms(password)), message
    assert shown_url(url) == f"{scheme}://audit:***@broker.example:1884"


def test_the_issue_s_url_is_refused_without_a_piece_of_its_password() -> None:
    """The URL of the report: the hand-written masking split it at the first '/', showed 't/pw' and said the
    target had a path."""
    with pytest.raises(TargetUrlError) as caught:
        Target.parse("mqtt://audit:s3cr@t/pw@127.0.0.1:1883")
    assert str(caught.value).startswith(
        "cannot read the target 'mqtt://audit:***@127.0.0.1:1883': '/' in a user name or password ends a URL's host "
        "part (an '@' in a WebSocket path is written %40); percent-encode it ('@' as %40, '/' as %2F"
    )
    assert "t/pw" not in str(caught.value) and "no path" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("mqtt://audit:%zz@h", "a '%' that starts no escape"),
        ("mqtt://audit:%ff@h", "not UTF-8"),
        ("mqtt://:pw@h", "needs a user name"),
        ("mqtt://audit:pw@", "no host"),
        ("mqtt://audit:pw@h:port", "bad host or port"),
        ("mqtt://audit:pw@[::1:1883", "bad host or port"),
        ("ws://h/a@b", "an '@' in a WebSocket path is written %40"),
    ],
)
def test_each_unreadable_url_says_what_is_wrong(url: str, said: str) -> None:
    with pytest.raises(TargetUrlError, match=said) as caught:
        parse_target_url(url)
    assert "pw" not in str(caught.value).replace("WebSocket path", "")


def test_a_user_name_that_ends_the_host_part_is_not_shown_either() -> None:
    assert shown_url("mqtt://us/er:pw@h:1") == "mqtt://***@h:1"
    assert shown_url("mqtt://user@h:1") == "mqtt://user@h:1"
    assert shown_url("mqtt://127.0.0.1:1883") == "mqtt://127.0.0.1:1883"
    assert shown_url("admin:pw@127.0.0.1:1") == "admin:***@127.0.0.1:1"


def test_an_amqp_url_names_its_user_or_logs_in_as_guest() -> None:
    named = AmqpTarget.parse("amqp://admin:s3cr%2Ft@h/%2Fvh")
    assert (named.user, named.password, named.vhost) == ("admin", "s3cr/t", "/vh")
    assert named.credentials is not None
    guest = AmqpTarget.parse("amqps://h")
    assert (guest.user, guest.password, guest.port, guest.credentials) == ("guest", "guest", 5671, None)
    with pytest.raises(ValueError, match="not an amqp:// target"):
        AmqpTarget.parse("mqtt://u:pw@h")


_MARKED = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20).map(lambda t: f"Zq9{t}Xw8")


@given(password=_MARKED)
def test_any_password_raw_in_a_url_is_read_as_meant_or_refused_and_never_shown(password: str) -> None:
    """Whatever a password holds, typed raw into a URL: the parser reads it exactly or refuses the URL, and
    neither the URL shown nor the refusal holds its first or last characters (where a wrong split would cut)."""
    url = f"mqtt://audit:{password}@broker.example:1883"
    shown = [shown_url(url)]
    try:
        target = Target.parse(url)
    except ValueError as exc:
        shown.append(str(exc))
    else:
        assert target.credentials is not None and target.credentials.password is not None
        assert target.credentials.password.reveal() == password
        shown.append(target.url)
    for text in shown:
        assert "Zq9" not in text and "Xw8" not in text, text


def test_a_known_password_is_masked_in_every_form_a_message_quotes() -> None:
    password = "p@ss:w/%d sé<&>"
    quoted = [
        password,
        repr(password),
        repr(password.encode()),
        quote(password, safe=""),
        password.encode().hex(" "),
        '{"password": "p@ss:w/%d s\\u00e9<&>"}',
        "p@ss:w/%d sé&lt;&amp;&gt;",
    ]
    for text in quoted:
        masked = mask_password(f"Connect(password={text})", password)
        assert MASK in masked and not any(form in masked for form in password_forms(password)), masked
    assert mask_password("nothing to hide", None) == "nothing to hide"
    assert mask_password("nothing to hide", "") == "nothing to hide"


def test_the_readme_shows_the_refusal_of_the_issue_s_url_as_the_parser_words_it() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    command = "mqttaudit probe 'mqtt://audit:s3cr@t/pw@broker.example.com'\n"
    after = readme[readme.index(command) + len(command) :].splitlines()
    comment = " ".join(line.removeprefix("# ") for line in itertools.takewhile(lambda x: x.startswith("# "), after))
    head, _, tail = comment.removeprefix("Error: ").partition(" ...")
    with pytest.raises(TargetUrlError) as caught:
        parse_target_url("mqtt://audit:s3cr@t/pw@broker.example.com")
    assert str(caught.value).startswith(head) and str(caught.value).endswith(tail.removeprefix(")")), comment
    encoded = Target.parse("mqtt://audit:s3cr%40t%2Fpw@broker.example.com")
    assert encoded.credentials is not None and encoded.credentials.password is not None
    assert (encoded.credentials.username, encoded.credentials.password.reveal()) == ("audit", "s3cr@t/pw")

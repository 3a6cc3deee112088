"""A password never reaches the terminal or a file, whatever it holds and wherever it comes from: the real command
(``python -m mqttaudit`` in a process of its own) against mosquitto with a password file, with passwords holding
``@ / : ? # %``, a space, non-ASCII letters and U+2028, given raw in the URL, percent-encoded, in
``--password-file`` and in ``$MQTTAUDIT_PASSWORD``, down every path: an unparseable URL, a refused connection, a
broker that refuses the credentials, a crash of a case, the matrix, a baseline. Standard output, standard error and
every file under ``--out`` are searched byte-wise for the password in every form a program could write it (as it
is, percent-encoded, escaped by ``repr`` or JSON, HTML-escaped, in hex) and for each piece of it between two special
characters (a wrong split shows a piece: the hand-written masking showed ``t/pw`` of ``s3cr@t/pw``)."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

from mqttaudit.probe.brokers import free_port

from .transports import TransportBroker, mosquitto_password

SOURCE = Path(__file__).resolve().parents[1] / "src"
RUN_SECONDS = 120
USER = "audit"
#: Every character a URL cannot hold as it is, a space, non-ASCII letters and a line separator; each piece between
#: two of them is a marker found nowhere else (mixed case, no hex digit pair), so a piece that shows is caught.
PASSWORD = "Qz1@Wy2/Rx3:Tv4?Us5#Pk6%41Jm7 é密Hn8\u2028Gf9"
#: The password of the issue, typed raw: a '@' and a '/' in it.
ISSUE_PASSWORD = "s3cr@t/pw"
#: A password a URL holds raw as meant ('@', ':', non-ASCII): the user info ends at its last '@'.
RAW_USER, RAW_PASSWORD = "raw", "Lm1@Np2:Kr3é"
#: A wrong password, refused by the broker: no more shown than the right one.
WRONG = "Wq1/Xx2@Zz3"
PIECES = {
    PASSWORD: ["Qz1", "Wy2", "Rx3", "Tv4", "Us5", "Pk6", "Jm7", "Hn8", "Gf9"],
    ISSUE_PASSWORD: ["s3cr", "t/pw"],
    RAW_PASSWORD: ["Lm1", "Np2", "Kr3"],
    WRONG: ["Wq1", "Xx2", "Zz3"],
    PASSWORD + "=Vb0": ["Vb0"],
}


def forms(secret: str) -> set[bytes]:
    """The bytes that would show ``secret``: as it is, percent-encoded, escaped by repr (text and UTF-8 bytes) and
    JSON, HTML-escaped, in hex (either case, spaced or not), and each of its pieces."""
    data = secret.encode()
    texts = {
        secret,
        quote(secret, safe=""),
        quote(secret),
        repr(secret)[1:-1],
        ascii(secret)[1:-1],
        repr(data)[2:-1],
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        html.escape(secret),
        data.hex(),
        data.hex(" "),
        *PIECES[secret],
    }
    return {t.encode() for t in texts} | {t.encode().upper() for t in (data.hex(), data.hex(" "))}


@dataclass
class Ran:
    status: int
    stdout: bytes
    stderr: bytes
    out: Path

    @property
    def err(self) -> str:
        return self.stderr.decode(errors="replace")

    def written(self) -> dict[str, bytes]:
        """Everything the run showed or wrote: its two streams and every file under --out."""
        shown = {"stdout": self.stdout, "stderr": self.stderr}
        for path in sorted(self.out.rglob("*")) if self.out.exists() else []:
            if path.is_file():
                shown[str(path.relative_to(self.out))] = path.read_bytes()
        return shown

    def assert_no_leak(self, *secrets: str) -> None:
        for name, data in self.written().items():
            for secret in (PASSWORD, ISSUE_PASSWORD, RAW_PASSWORD, WRONG, *secrets):
                shown = [form for form in forms(secret) if form in data or form in name.encode()]
                assert not shown, f"{name} shows {shown!r} of {secret!r}: {data[:400]!r}"


def mqttaudit(
    out: Path, *argv: str, env: dict[str, str] | None = None, prelude: str = "", timeout: float = RUN_SECONDS
) -> Ran:
    """``python -m mqttaudit ARGV --out OUT`` in a process of its own; ``prelude`` is Python run first in that
    process (the one way to put a bug into the real command)."""
    code = f"{prelude}\nimport sys\nfrom mqttaudit.cli.main import main\nsys.exit(main(sys.argv[1:]))"
    command = [sys.executable, "-c", code, *argv, "--out", str(out)] if prelude else None
    command = command or [sys.executable, "-m", "mqttaudit", *argv, "--out", str(out)]
    environment = {k: v for k, v in os.environ.items() if k != "MQTTAUDIT_PASSWORD"}
    environment.update({"PYTHONPATH": str(SOURCE), "COLUMNS": "100", **(env or {})})
    done = subprocess.run(command, capture_output=True, env=environment, timeout=timeout, check=False)
    return Ran(done.returncode, done.stdout, done.stderr, out)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TransportBroker]:
    """mosquitto refusing anonymous clients, with the two users of the tests in its password file."""
    with mosquitto_password(tmp_path_factory.mktemp("broker"), {USER: PASSWORD, RAW_USER: RAW_PASSWORD}) as running:
        yield running


def _url(broker: TransportBroker, password: str | None = None, *, user: str = USER, raw: bool = False) -> str:
    if password is None:
        return f"mqtt://{user}@127.0.0.1:{broker.tcp_port}"
    written = password if raw else quote(password, safe="")
    return f"mqtt://{user}:{written}@127.0.0.1:{broker.tcp_port}"


def _password_file(tmp_path: Path, password: str = PASSWORD) -> Path:
    path = tmp_path / "password"
    path.write_text(password + "\n", encoding="utf-8")
    return path


#: A few cases, the CONNECT ones among them (one writes its own CONNECT without the password: inconclusive).
CASES = ("--cases", "ping/*,connect/*", "--timeout", "1", "--max-inconclusive", "100%")


@pytest.mark.parametrize("password", [PASSWORD, ISSUE_PASSWORD], ids=["every-special", "issue"])
def test_a_raw_password_that_ends_the_host_part_is_refused_with_how_to_encode_it(
    broker: TransportBroker, password: str, tmp_path: Path
) -> None:
    ran = mqttaudit(tmp_path / "out", "probe", _url(broker, password, raw=True), *CASES)
    assert ran.status == 2, ran.err
    assert f"cannot read the target 'mqtt://{USER}:***@127.0.0.1:{broker.tcp_port}': " in ran.err, ran.err
    assert "'@' as %40, '/' as %2F" in ran.err and "--password-file" in ran.err
    assert "no path" not in ran.err and "Traceback" not in ran.err
    ran.assert_no_leak()


def test_a_raw_at_colon_and_letters_are_read_as_meant_and_the_broker_lets_us_in(
    broker: TransportBroker, tmp_path: Path
) -> None:
    ran = mqttaudit(tmp_path / "out", "probe", _url(broker, RAW_PASSWORD, user=RAW_USER, raw=True), *CASES)
    assert ran.status == 0, ran.err
    assert f"mqtt://{RAW_USER}@127.0.0.1:{broker.tcp_port}: " in ran.stdout.decode()
    ran.assert_no_leak()


@pytest.mark.parametrize("source", ["url", "file", "environment"])
def test_the_password_from_each_source_logs_in_and_shows_nowhere(
    broker: TransportBroker, source: str, tmp_path: Path
) -> None:
    """Percent-encoded in the URL, the first line of --password-file, $MQTTAUDIT_PASSWORD: each logs in (exit 0,
    the CONNECT cases judged) and no stream or report holds a piece of it; a second run against the first run's
    findings.json as its baseline too."""
    if source == "url":
        target, options, env = _url(broker, PASSWORD), [], {}
    elif source == "file":
        target, options, env = _url(broker), ["--password-file", str(_password_file(tmp_path))], {}
    else:
        target, options, env = _url(broker), [], {"MQTTAUDIT_PASSWORD": PASSWORD}
    first = mqttaudit(tmp_path / "first", "probe", target, *options, *CASES, env=env)
    assert first.status == 0, first.err
    assert {"findings.json", "findings.md", "junit.xml"} <= set(first.written()), first.written().keys()
    baseline = ["--baseline", str(tmp_path / "first" / "findings.json"), "--format", "json"]
    second = mqttaudit(tmp_path / "second", "probe", target, *options, *CASES, *baseline, env=env)
    assert second.status == 0, second.err
    assert json.loads(second.stdout)["baseline"] is not None
    for ran in (first, second):
        ran.assert_no_leak()


def test_a_broker_that_refuses_the_password_says_so_without_it(broker: TransportBroker, tmp_path: Path) -> None:
    ran = mqttaudit(tmp_path / "out", "probe", _url(broker, WRONG), *CASES)
    assert ran.status == 4, ran.err
    assert "authentication refused (CONNACK 0x05: not authorised)" in ran.err
    assert f"mqtt://{USER}@127.0.0.1:{broker.tcp_port}" in ran.err
    ran.assert_no_leak()


@pytest.mark.parametrize("scheme", ["mqtt", "amqp"])
def test_a_refused_connection_is_one_line_without_the_password(scheme: str, tmp_path: Path) -> None:
    port = free_port()
    url = f"{scheme}://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:{port}"
    ran = mqttaudit(tmp_path / "out", "probe", url, "--timeout", "1")
    assert ran.status == 4, ran.err
    assert f"cannot reach {scheme}://{USER}@127.0.0.1:{port}" in ran.err and "connection refused" in ran.err
    ran.assert_no_leak()


@pytest.mark.parametrize(
    "arguments",
    [
        ("probe", "mqtt://audit:{encoded}@127.0.0.1:port"),
        ("probe", "mqtt://audit:{encoded}@127.0.0.1:1", "--password-file", "{file}"),
        ("probe", "mqtt://audit:{encoded}@127.0.0.1:1", "--cafile", "{file}"),
        ("matrix", "lab=mqtt://audit:{raw}@127.0.0.1:1", "mqtt://127.0.0.1:2"),
    ],
    ids=["bad-port", "url-and-file", "tls-options", "raw-in-matrix"],
)
def test_a_usage_error_about_a_target_never_shows_its_password(arguments: Sequence[str], tmp_path: Path) -> None:
    """A bad port, a password in the URL and in --password-file, TLS options for a plain target, a raw password in
    a matrix target: each a usage error (exit 2) in one message, the password in none of it."""
    values = {"encoded": quote(PASSWORD, safe=""), "raw": PASSWORD, "file": str(_password_file(tmp_path))}
    ran = mqttaudit(tmp_path / "out", *(a.format(**values) for a in arguments))
    assert ran.status == 2, ran.err
    assert "Traceback" not in ran.err
    ran.assert_no_leak()


def test_a_matrix_of_targets_with_credentials_shows_no_password(broker: TransportBroker, tmp_path: Path) -> None:
    port = broker.tcp_port
    ran = mqttaudit(
        tmp_path / "out",
        "matrix",
        f"lab={_url(broker, PASSWORD)}",
        f"mqtt://{RAW_USER}:{quote(RAW_PASSWORD, safe='')}@127.0.0.1:{port}",
        _url(broker),
        "--password-file",
        str(_password_file(tmp_path)),
        *CASES,
    )
    assert ran.status == 0, ran.err
    assert {"matrix.md", "matrix.html"} <= set(ran.written()), ran.written().keys()
    ran.assert_no_leak()


def test_a_matrix_target_whose_password_holds_an_equals_sign_is_not_cut_into_a_label(tmp_path: Path) -> None:
    """``USER:PA=SS@HOST`` (no scheme) was cut at the '=' into the label ``USER:PA``, shown in the matrix and its
    folder names; it is one target, whose password shows nowhere."""
    port = free_port()
    ran = mqttaudit(tmp_path / "out", "matrix", f"{USER}:{quote(PASSWORD, safe='')}=Vb0@127.0.0.1:{port}")
    assert ran.status == 4, ran.err
    assert f"cannot reach mqtt://{USER}@127.0.0.1:{port}" in ran.err
    ran.assert_no_leak(PASSWORD + "=Vb0")


#: A bug put into the real command: the case's script raises an exception that quotes the password it was given
#: in several forms, as a careless ``repr`` of a CONNECT or of its bytes would.
CRASH = """
from mqttaudit.probe import case

async def crash(context):
    password = context.target.credentials.password.reveal()
    raise RuntimeError(f"Connect(password={password!r}) {password.encode()!r} {password}")

object.__setattr__(case.CASES["ping/pingresp"], "script", crash)  # a frozen Case, changed in this process only
"""


def test_a_case_that_crashes_quoting_the_password_does_not_show_it(broker: TransportBroker, tmp_path: Path) -> None:
    ran = mqttaudit(
        tmp_path / "out", "probe", _url(broker, PASSWORD), "--cases", "ping/pingresp", "--timeout", "1", prelude=CRASH
    )
    assert ran.status == 3, ran.err
    assert "mqttaudit: internal error: the prober failed on 1 case(s)" in ran.err, ran.err
    report = json.loads((tmp_path / "out" / "findings.json").read_text())
    [result] = report["results"]
    assert "RuntimeError: Connect(password='***') b'***' ***" in result["reason"], result["reason"]
    ran.assert_no_leak()


#: A bug outside any case: writing the reports raises an exception that quotes the password of the target.
REPORTS_CRASH = """
from mqttaudit.probe import api

def write_reports(self, *args, **kwargs):
    password = self.run.target.credentials.password.reveal()
    raise RuntimeError(f"cannot write the reports of Connect(password={password!r}) {password}")

api.ProbeResult.write_reports = write_reports
"""


def test_the_traceback_of_a_bug_that_quotes_the_password_does_not_show_it(tmp_path: Path) -> None:
    """The last line of defence: a bug that reaches the command line's handler prints its traceback (exit 3), and a
    password the process was given is masked in it."""
    url = f"mqtt://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:{free_port()}"
    ran = mqttaudit(tmp_path / "out", "probe", url, "--timeout", "1", prelude=REPORTS_CRASH)
    assert ran.status == 3, ran.err
    assert "RuntimeError: cannot write the reports of Connect(password='***') ***" in ran.err, ran.err
    assert "mqttaudit: internal error (the traceback above is a bug; please report it)" in ran.err
    ran.assert_no_leak()

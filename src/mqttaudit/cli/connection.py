"""How ``probe`` and ``matrix`` reach their targets: TLS trust (``--cafile``, ``--cert``/``--key``, ``--insecure``)
and credentials (``--username``, ``--password-file`` or the ``MQTTAUDIT_PASSWORD`` environment variable). A
password is never an option's value: one on a command line is seen by every user of the machine (``ps``) and kept in
shell histories."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from mqttaudit import option_files
from mqttaudit.option_files import OptionFileError, read_first_line
from mqttaudit.probe.case import Target
from mqttaudit.probe.targets import is_amqp, parse_target
from mqttaudit.probe.transport import Credentials, Secret, TlsOptions
from mqttaudit.report.evidence import printable

Command = TypeVar("Command", bound=Callable[..., Any])

#: The environment variable a password may come from when no --password-file is given.
PASSWORD_VARIABLE = "MQTTAUDIT_PASSWORD"

_FILE = click.Path(exists=True, dir_okay=False, readable=True, path_type=Path)


def connection_options(command: Command) -> Command:
    """``--cafile``, ``--cert``, ``--key``, ``--insecure``, ``--username`` and ``--password-file``."""
    options = [
        click.option(
            "--password-file",
            type=_FILE,
            help=f"A file whose first line is the password (else ${PASSWORD_VARIABLE}, when a user name is given). "
            "Never shown in any report or message.",
        ),
        click.option(
            "--username",
            help="The user name of every CONNECT the prober's own client steps send (a user name in the URL wins).",
        ),
        click.option(
            "--insecure", is_flag=True, help="TLS: do not verify the broker's certificate (a test broker only)."
        ),
        click.option("--key", "keyfile", type=_FILE, help="TLS: the private key of --cert (PEM), when apart from it."),
        click.option("--cert", "certfile", type=_FILE, help="TLS: a client certificate (PEM) to show the broker."),
        click.option(
            "--cafile",
            type=_FILE,
            help="TLS: the CA certificates (PEM) that signed the broker's certificate; else the system's trust store.",
        ),
    ]
    for option in options:
        command = option(command)
    return command


@dataclass(frozen=True)
class Connection:
    """What the options say about reaching the targets: TLS trust, and credentials for the targets whose URL
    names none. ``password_source`` says where the password came from (``--password-file``, the variable)."""

    tls: TlsOptions | None
    credentials: Credentials | None
    password_source: str | None = None


def connection_from_options(
    urls: Sequence[str],
    *,
    cafile: Path | None,
    certfile: Path | None,
    keyfile: Path | None,
    insecure: bool,
    username: str | None,
    password_file: Path | None,
    every_target: bool,
) -> Connection:
    """The options checked against ``urls`` (usage errors: --key without --cert, TLS options with no TLS target, a
    password in the URL and in --password-file, a password without a user name). ``every_target`` (``probe``): the
    one target must take every option given; else (``matrix``) TLS options go to the TLS targets and a URL's own
    credentials win over the options."""
    if keyfile is not None and certfile is None:
        raise click.UsageError("--key needs --cert (the client certificate it belongs to)")
    tls = TlsOptions(cafile, certfile, keyfile, insecure)
    targets = [_parsed(url) for url in urls]
    mqtt_targets = [t for url, t in zip(urls, targets, strict=True) if t is not None and not is_amqp(url)]
    if tls.given:
        plain = [t for t in targets if t is not None and not t.uses_tls]
        if (every_target and plain) or not any(t is not None and t.uses_tls for t in targets):
            shown = plain[0].url if plain else "the targets"
            raise click.UsageError(
                printable(f"--cafile, --cert, --key and --insecure need a TLS target (mqtts://, wss://), not {shown}")
            )
    password, source = _password(password_file)
    if password_file is not None and every_target:
        for target in mqtt_targets:
            if target.credentials is not None and target.credentials.password is not None:
                raise click.UsageError(
                    printable(f"a password in the target URL and --password-file: give one ({target.url})")
                )
    named = username is not None or any(t.credentials is not None for t in mqtt_targets)
    if password is not None and not named:
        if source == "--password-file":
            raise click.UsageError("--password-file needs a user name: --username, or USER@ in the target URL")
        password = None  # the variable is for a user named somewhere; an anonymous run ignores it
    credentials = None
    if username is not None or password is not None:
        credentials = Credentials(username or "", password)
    return Connection(tls if tls.given else None, credentials, source if password is not None else None)


def split_spec(spec: str) -> tuple[str, str]:
    """``NAME=URL`` of a matrix target -> (NAME, URL); a plain URL -> ("", URL), whatever its password holds (a
    NAME has no ``:`` or ``@``: an ``=`` after one is in a URL's user info, never the end of a label)."""
    name, equals, url = spec.partition("=")
    if equals and not any(ch in name for ch in ":@"):
        return name, url
    return "", spec


def _parsed(url: str) -> Target | None:
    """The target ``url`` names (``NAME=URL`` in a matrix), None when it does not parse (the run says why)."""
    try:
        return parse_target(split_spec(url)[1])
    except ValueError:
        return None


def _password(password_file: Path | None) -> tuple[Secret | None, str | None]:
    """The password of --password-file (its first line), else of the environment variable, else None."""
    if password_file is not None:
        try:  # its first line only, and no longer than an MQTT password can be
            line = read_first_line(password_file, option="--password-file", cap=option_files.PASSWORD_LINE)
            text = line.decode("utf-8")
        except OptionFileError as exc:
            raise click.UsageError(printable(str(exc))) from None
        except UnicodeDecodeError:
            raise click.UsageError(printable(f"--password-file {password_file} is not UTF-8 text")) from None
        return Secret(text), "--password-file"  # the whole line: a password may hold U+2028 or U+0085
    value = os.environ.get(PASSWORD_VARIABLE)
    if value is None:
        return None, None
    return Secret(value), PASSWORD_VARIABLE

"""A target URL parsed once, its password never shown. :func:`parse_target_url` is the one parser of every target
(``mqtt``, ``mqtts``, ``ws``, ``wss``, ``amqp``, ``amqps``): it takes the user info off at the last ``@`` and leaves
the rest to :func:`urllib.parse.urlsplit`. :func:`shown_url` is how a target URL as typed may be shown, whatever its
password holds and whether it parses or not; :func:`mask_password` takes a known password out of any other text in
every form it may have been quoted in (an exception's message, a crash summary)."""

from __future__ import annotations

import binascii
import json
import re
from dataclasses import dataclass, field
from html import escape
from urllib.parse import quote, unquote, urlsplit

from .transport import Secret

#: How to write a user name or password that a URL cannot hold as it is; every refusal of user info says it.
ENCODING_HINT = (
    "percent-encode it ('@' as %40, '/' as %2F, ':' as %3A, '?' as %3F, '#' as %23, '%' as %25, a space as %20), "
    "or put the password in --password-file or $MQTTAUDIT_PASSWORD"
)
#: What stands for a password wherever one would show.
MASK = "***"

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_ENDS_AUTHORITY = frozenset("/?#")


class TargetUrlError(ValueError):
    """A target URL that cannot be read; the message shows the URL without its password and says what to change."""


@dataclass(frozen=True)
class TargetUrl:
    """A target URL's parts: ``scheme`` lower-case, ``host`` without IPv6 brackets, ``port`` None when the URL
    names none, ``username`` and ``password`` percent-decoded (None when absent), and ``shown``, the URL as typed
    with its password masked, for messages."""

    scheme: str
    host: str
    port: int | None
    path: str
    query: str
    fragment: str
    shown: str
    username: str | None = None
    password: Secret | None = field(default=None, repr=False)


def parse_target_url(url: str, default_scheme: str = "mqtt") -> TargetUrl:
    """``[SCHEME://][USER[:PASSWORD]@]HOST[:PORT][/PATH][?QUERY][#FRAGMENT]``, SCHEME ``default_scheme`` when the
    URL has none. The user info is everything before the last ``@``: a raw ``@`` or ``:`` in a password is read as
    meant. A ``/``, ``?`` or ``#`` before that ``@`` ends a URL's host part, so the URL reads two ways (a password
    holding it, or a path holding an ``@``): :class:`TargetUrlError` says how to percent-encode it, and so it does
    for a ``%`` that starts no escape, control characters, escapes that are not UTF-8, and an empty user name."""
    text = url if _SCHEME.match(url) else f"{default_scheme}://{url}"
    scheme, _, rest = text.partition("://")
    userinfo, at, host_part = rest.rpartition("@")
    shown = shown_url(url)
    username: str | None = None
    password: Secret | None = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = _decoded(user, shown)
        password = Secret(_decoded(secret, shown)) if colon else None
        if not username:
            raise TargetUrlError(f"a target's user info needs a user name: SCHEME://USER[:PASSWORD]@HOST ({shown})")
    try:
        parts = urlsplit(f"{scheme}://{host_part}")
        port = parts.port
    except ValueError:  # a port that is no number or out of range, an unclosed IPv6 bracket
        raise TargetUrlError(f"bad host or port in {shown!r}") from None
    if not parts.hostname:
        raise TargetUrlError(f"no host in {shown!r}")
    return TargetUrl(
        parts.scheme, parts.hostname, port, parts.path, parts.query, parts.fragment, shown, username, password
    )


def _decoded(field_text: str, shown: str) -> str:
    """A user name or password as the URL holds it, percent-decoded; refused when it cannot be read one way."""
    ends = sorted(_ENDS_AUTHORITY.intersection(field_text))
    if ends:
        raise TargetUrlError(
            f"cannot read the target {shown!r}: {' and '.join(map(repr, ends))} in a user name or password ends a "
            f"URL's host part (an '@' in a WebSocket path is written %40); {ENCODING_HINT}"
        )
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in field_text):
        raise TargetUrlError(
            f"cannot read the target {shown!r}: a control character in its user info; {ENCODING_HINT} (a tab as %09)"
        )
    if _BAD_ESCAPE.search(field_text):
        raise TargetUrlError(
            f"cannot read the target {shown!r}: a '%' that starts no escape in its user info; {ENCODING_HINT}"
        )
    try:
        return unquote(field_text, errors="strict")
    except UnicodeDecodeError:
        raise TargetUrlError(
            f"cannot read the target {shown!r}: its user info decodes to bytes that are not UTF-8; {ENCODING_HINT}"
        ) from None


def shown_url(url: str) -> str:
    """``url`` (a target as typed, parsed or not) as a message may show it: ``USER:***@`` for its user info when it
    holds a password, whatever the password holds (the user info ends at the last ``@``); other URLs unchanged."""
    match = _SCHEME.match(url)
    start = match.end() if match else 0
    userinfo, at, host_part = url[start:].rpartition("@")
    user, colon, _ = userinfo.partition(":")
    if not at or not colon:
        return url
    if _ENDS_AUTHORITY.intersection(user):  # where the user name ends is not known: none of it shows
        return f"{url[:start]}{MASK}@{host_part}"
    return f"{url[:start]}{user}:{MASK}@{host_part}"


def mask_password(text: str, password: Secret | str | None) -> str:
    """``text`` with ``password`` replaced by ``***`` in every form a message may quote it in: as it is,
    percent-encoded, escaped as Python's ``repr`` or JSON escape it (text or UTF-8 bytes), HTML-escaped, in hex."""
    secret = password.reveal() if isinstance(password, Secret) else password
    if not secret:
        return text
    for form in sorted(password_forms(secret), key=len, reverse=True):
        text = text.replace(form, MASK)
    return text


def mask_given_passwords(text: str) -> str:
    """``text`` with every password this process was given (:attr:`Secret.given`) masked, as :func:`mask_password`
    masks one: for a text that may quote any of them, such as the traceback of a bug."""
    for secret in sorted(Secret.given, key=len, reverse=True):
        text = mask_password(text, secret)
    return text


def password_forms(secret: str) -> set[str]:
    """The texts that show ``secret``: what :func:`mask_password` takes out and what the leak tests look for."""
    data = secret.encode("utf-8", "surrogatepass")
    forms = {
        secret,
        quote(secret, safe=""),
        quote(secret),
        quote(secret, safe="").lower(),
        repr(secret)[1:-1],
        ascii(secret)[1:-1],
        repr(data)[2:-1],
        json.dumps(secret)[1:-1],
        escape(secret),
        escape(secret, quote=False),
        data.hex(),
        data.hex().upper(),
        binascii.hexlify(data, " ").decode(),
        binascii.hexlify(data, " ").decode().upper(),
    }
    return {form for form in forms if form}

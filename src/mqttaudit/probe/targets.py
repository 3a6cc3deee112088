"""Target strings: ``mqtt://HOST:PORT`` for the case library, ``amqp://USER:PASS@HOST:PORT/VHOST`` for the AMQP
routing suite. A password in a target never reaches a message: :func:`mask_userinfo` hides it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .case import Target

if TYPE_CHECKING:
    from .amqp import AmqpTarget


def mask_userinfo(url: str) -> str:
    """``amqp://admin:secret@host`` -> ``amqp://admin:***@host`` (with or without a scheme, whatever the password
    holds, ``@`` included); other strings unchanged."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        scheme, rest = "", url
    authority, slash, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    if not at or not colon:
        return url
    return f"{scheme}{separator}{user}:***@{host}{slash}{path}"


def shown_target(url: str) -> str:
    """``url`` as a message may show it: :func:`mask_userinfo`, and when that finds no user info in a string that
    holds an ``@`` (a malformed URL, a password with an unencoded ``/``), everything between the scheme and the
    last ``@`` hidden."""
    masked = mask_userinfo(url)
    if masked != url or "@" not in url:
        return masked
    start = url.find("//") + 2 if "//" in url else 0
    return f"{url[:start]}***@{url.rpartition('@')[2]}"


def is_amqp(url: str) -> bool:
    return url.startswith(("amqp://", "amqps://"))


def parse_target(url: str) -> Target:
    """An :class:`~mqttaudit.probe.amqp.AmqpTarget` for ``amqp://``, else a :class:`Target`; ValueError (with any
    password masked) when ``url`` is neither."""
    try:
        if is_amqp(url):
            return parse_amqp(url)
        return Target.parse(url)
    except ValueError as exc:
        raise ValueError(str(exc).replace(url, shown_target(url))) from None


def parse_amqp(url: str) -> AmqpTarget:
    from .amqp import AmqpTarget  # the AMQP client loads only for amqp:// targets

    return AmqpTarget.parse(url)

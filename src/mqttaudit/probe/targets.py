"""Target strings: ``mqtt://HOST:PORT`` for the case library, ``amqp://USER:PASS@HOST:PORT/VHOST`` for the AMQP
routing suite. A password in a target never reaches a message: :func:`mask_userinfo` hides it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .case import Target

if TYPE_CHECKING:
    from .amqp import AmqpTarget

_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^/@:]*):[^/@]*@")


def mask_userinfo(url: str) -> str:
    """``amqp://admin:secret@host`` -> ``amqp://admin:***@host``; other strings unchanged."""
    return _PASSWORD.sub(r"\1:***@", url)


def is_amqp(url: str) -> bool:
    return url.startswith("amqp://")


def parse_target(url: str) -> Target:
    """An :class:`~mqttaudit.probe.amqp.AmqpTarget` for ``amqp://``, else a :class:`Target`; ValueError (with any
    password masked) when ``url`` is neither."""
    try:
        if is_amqp(url):
            return parse_amqp(url)
        return Target.parse(url)
    except ValueError as exc:
        raise ValueError(str(exc).replace(url, mask_userinfo(url))) from None


def parse_amqp(url: str) -> AmqpTarget:
    from .amqp import AmqpTarget  # the AMQP client loads only for amqp:// targets

    return AmqpTarget.parse(url)

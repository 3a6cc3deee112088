"""Target strings: ``mqtt://HOST:PORT`` for the case library, ``amqp://USER:PASS@HOST:PORT/VHOST`` for the AMQP
routing suite, each read by :func:`~mqttaudit.probe.target_url.parse_target_url` (whose messages never show the
password)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .case import Target

if TYPE_CHECKING:
    from .amqp import AmqpTarget


def is_amqp(url: str) -> bool:
    return url.startswith(("amqp://", "amqps://"))


def parse_target(url: str) -> Target:
    """An :class:`~mqttaudit.probe.amqp.AmqpTarget` for ``amqp://``, else a :class:`Target`; ValueError (the URL
    shown without its password) when ``url`` is neither."""
    if is_amqp(url):
        return parse_amqp(url)
    return Target.parse(url)


def parse_amqp(url: str) -> AmqpTarget:
    from .amqp import AmqpTarget  # the AMQP client loads only for amqp:// targets

    return AmqpTarget.parse(url)

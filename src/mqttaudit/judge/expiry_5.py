"""MQTT 5.0 intervals on the model's clock: Message Expiry (3.3.2.3.3), Session Expiry (3.1.2.11.2) and the Will
Delay Interval (3.1.3.2.2), read from properties, and what an observed time can say of them.

Servers keep these timers in whole seconds, so every comparison allows :data:`GRANULARITY` either way: a time
within it of an interval's end decides nothing.
"""

from __future__ import annotations

import math
from typing import Final

from mqttaudit.codec.packets import Properties
from mqttaudit.codec.properties import MESSAGE_EXPIRY_INTERVAL, SESSION_EXPIRY_INTERVAL, first

#: The resolution of a server's timers, allowed either way of every interval's end (seconds).
GRANULARITY: Final = 1.0
#: Session Expiry Interval 0xFFFFFFFF: the session does not expire.
NEVER: Final = 0xFFFFFFFF
#: Will Delay Interval (a Will property).
WILL_DELAY_INTERVAL: Final = 0x18

#: What a time says of an interval that ends then: surely not yet, surely passed, or too close to tell.
ALIVE: Final = 0
EXPIRED: Final = 1
UNSURE: Final = 2


def seconds(properties: Properties | None, identifier: int) -> float | None:
    """The interval property ``identifier`` (seconds), None when absent; 0xFFFFFFFF of a Session Expiry Interval
    is forever."""
    value = first(properties, identifier)
    if not isinstance(value, int):
        return None
    return math.inf if identifier == SESSION_EXPIRY_INTERVAL and value == NEVER else float(value)


def message_expiry(properties: Properties | None) -> float | None:
    """The Message Expiry Interval of a PUBLISH or Will (None: the message does not expire)."""
    return seconds(properties, MESSAGE_EXPIRY_INTERVAL)


def state_at(taken: tuple[float, float], interval: float, time: float) -> int:
    """Whether a message taken between ``taken[0]`` and ``taken[1]`` with expiry ``interval`` has expired at
    ``time``: :data:`ALIVE`, :data:`EXPIRED` or :data:`UNSURE`."""
    if time > taken[1] + interval + GRANULARITY:
        return EXPIRED
    if time < taken[0] + interval - GRANULARITY:
        return ALIVE
    return UNSURE


def remaining_allowed(interval: float, taken_from: float, sent_by: float) -> tuple[float, float]:
    """[MQTT-3.3.2-6] The Message Expiry Interval a copy sent by ``sent_by`` may carry: the interval received
    minus the time the message waited, which is at least 0 and at most ``sent_by - taken_from``."""
    return (interval - (sent_by - taken_from) - GRANULARITY, interval)

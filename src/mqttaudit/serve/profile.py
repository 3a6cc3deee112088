"""serve's profile: a TOML file of the limits the broker advertises and keeps, for ``mqttaudit serve --profile``::

    receive_maximum = 10          # CONNACK Receive Maximum (1..65535)
    topic_alias_maximum = 0       # CONNACK Topic Alias Maximum (0..65535; 0: none)
    maximum_packet_size = 1024    # CONNACK Maximum Packet Size (5..268435460)
    server_keep_alive = 30        # CONNACK Server Keep Alive (0..65535; absent: the client's Keep Alive)
    queued_messages = 100         # messages kept per session for an offline client (0..1000000)
    sessions = 10000              # sessions kept at once; more CONNECTs are refused
    subscriptions = 1000          # subscriptions per session; more are refused in SUBACK
    retained_messages = 10000     # topics with a retained message

Every key is optional (an absent one keeps the default); another key, a wrong type or a value out of range is
refused with a message that names it. Options on the command line override the file.
"""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Final

from .. import option_files
from ..option_files import OptionFileError, read_capped
from .broker import Limits

#: Key -> the smallest and largest value.
KEYS: Final[dict[str, tuple[int, int]]] = {
    "receive_maximum": (1, 0xFFFF),
    "topic_alias_maximum": (0, 0xFFFF),
    "maximum_packet_size": (5, 268_435_460),
    "server_keep_alive": (0, 0xFFFF),
    "queued_messages": (0, 1_000_000),
    "sessions": (1, 10_000_000),
    "subscriptions": (1, 10_000_000),
    "retained_messages": (0, 10_000_000),
}


class ServeProfileError(ValueError):
    """The profile cannot be used; the message says where and why."""


def load_limits(path: Path | str, base: Limits | None = None) -> Limits:
    """The limits of ``base`` (the defaults) with what the profile at ``path`` sets."""
    try:
        raw = read_capped(path, option="--profile", cap=option_files.PROFILE, what="the profile")
        values = tomllib.loads(raw.decode("utf-8"))
    except OptionFileError as exc:
        raise ServeProfileError(str(exc)) from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ServeProfileError(f"cannot read the profile {path}: {exc}") from None
    chosen: dict[str, int] = {}
    for key, value in values.items():
        if key not in KEYS:
            raise ServeProfileError(f"{path}: unknown key {key!r}; known: {', '.join(KEYS)}")
        low, high = KEYS[key]
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ServeProfileError(f"{path}: {key} must be an integer from {low} to {high}, not {value!r}")
        chosen[key] = value
    return replace(base or Limits(), **chosen)

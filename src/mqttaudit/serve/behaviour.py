"""Behaviour topics: how a scenario drives a client under test that cannot be scripted from outside.

The client's test harness (a few lines around the library under test) subscribes to
``mqttaudit/behaviour/<its ClientId>``; once it has, the broker publishes the scenario's commands there, one
message each, in order, at QoS 0, and the harness carries each out with the library's own API. A command is a line
of words:

``publish COUNT QOS TOPIC [SIZE] [retain]``
    publish COUNT messages at QOS to TOPIC, as fast as the library lets it (SIZE payload bytes, default 8), with
    RETAIN set when ``retain`` is given;
``reconnect``
    disconnect normally, then connect again with the same ClientId and without a clean start;
``disconnect``
    disconnect normally and stop.

A client driven by its own application instead (observed) is judged the same way: the scenario only changes what
the broker does, and whatever the client does in it is judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

PUBLISH: Final = "publish"
RECONNECT: Final = "reconnect"
DISCONNECT: Final = "disconnect"
#: The payload size of a command's messages when it names none.
DEFAULT_SIZE: Final = 8


@dataclass(frozen=True)
class Command:
    verb: str
    count: int = 0
    qos: int = 0
    topic: str = ""
    size: int = DEFAULT_SIZE
    retain: bool = False


def parse_command(text: str) -> Command:
    """A command line as the broker sends it; ValueError for anything else."""
    words = text.split()
    if words in ([RECONNECT], [DISCONNECT]):
        return Command(words[0])
    if len(words) >= 4 and words[0] == PUBLISH:
        retain = words[-1] == "retain"
        rest = words[4:-1] if retain else words[4:]
        if len(rest) <= 1 and words[1].isdigit() and words[2] in ("0", "1", "2") and all(r.isdigit() for r in rest):
            size = int(rest[0]) if rest else DEFAULT_SIZE
            return Command(PUBLISH, int(words[1]), int(words[2]), words[3], size, retain)
    raise ValueError(f"not a behaviour command: {text!r}")

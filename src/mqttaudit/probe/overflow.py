"""How much of what a broker sends one probe connection keeps, and the count of the rest.

A broker that floods a connection must not grow the prober's memory, its time or its reports with what it sends:
a connection keeps the first ``MAX_FRAMES`` frames, ``MAX_BYTES`` bytes or ``MAX_VIOLATIONS`` codec violations
from the server as judge events, and only counts what follows (bytes and packets by type; framed, never decoded,
so a flood costs the prober framing alone), for a summary such as "then 1,048,576 more bytes in 12,003 PUBLISH
packets". The judge is told that those bytes were not observed, so nothing that hangs on them is judged.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

from ..codec import Frame, PacketType
from ..codec.rules import TRUNCATED

#: Frames from the server one connection keeps as evidence; no case of the library needs more than a few dozen.
MAX_FRAMES: Final = 1000
#: Bytes of server frames one connection keeps as evidence.
MAX_BYTES: Final = 256 * 1024
#: Codec violations in the server frames one connection keeps (a hostile frame may break a rule in every byte).
MAX_VIOLATIONS: Final = 5000
#: The largest packet the prober decodes from a server. A broker may send far larger ones to a CONNECT that set no
#: Maximum Packet Size (a 700 KB CONNACK of 100,000 User Properties is legal); one above this bound is skipped
#: undecoded, never buffered, and the connection keeps nothing more: what hangs on it is not assessable, with that
#: reason, never a fail. Bound by what decoding costs: 1 MiB of hostile bytes shaped as a SUBACK decodes into a
#: million violations (about 200 MB), and one shaped as a SUBSCRIBE takes about 10 s per 256 KiB to decode.
SERVER_MAX_PACKET: Final = 64 * 1024


#: A counted packet's name by its type (3.1.1's reserved 15 is 5.0's AUTH: named as the type's both names).
_TYPE_NAMES: Final = {
    int(kind): {0: "reserved type 0", 15: "AUTH or reserved type 15"}.get(int(kind), kind.name) for kind in PacketType
}


def packet_name(frame: Frame) -> str:
    """``PUBLISH``, ``CONNACK``, ...; ``unfinished`` for a packet the stream ended in, ``undecodable`` for other
    bytes that did not decode."""
    if frame.packet is not None:
        return type(frame.packet).__name__.upper()
    return "unfinished" if any(v.rule_key == TRUNCATED for v in frame.violations) else "undecodable"


@dataclass
class Overflow:
    """What one side sent past the bounds of the evidence: counted, never kept."""

    #: Seconds (on the case's clock) of the first byte not kept, None while nothing overflowed.
    since: float | None = None
    bytes: int = 0
    packets: Counter[str] = field(default_factory=Counter)
    #: Of those, frames that arrived after the connection was recorded closed (none by construction; counted).
    after_close: int = 0
    #: Why the connection stopped keeping what the server sent, when a bound other than the evidence bounds stopped
    #: it (a packet above the decode bound, a WebSocket bound): names the bound and the policy.
    reason: str | None = None

    @property
    def active(self) -> bool:
        return self.since is not None

    def add(self, time: float, frame: Frame) -> None:
        if self.since is None:
            self.since = time
        self.bytes += frame.length
        self.packets[packet_name(frame)] += 1

    def add_counted(self, time: float, counted: dict[int, int], size: int) -> None:
        """Adds whole packets the decoder only counted (by the type of their first byte: not decoded, so a
        malformed one is named by its type too), ``size`` bytes in all."""
        if not counted:
            return
        if self.since is None:
            self.since = time
        self.bytes += size
        for kind, count in counted.items():
            self.packets[_TYPE_NAMES[kind]] += count

    def merge(self, other: Overflow) -> None:
        """Adds what ``other`` counted (which began later) to this count."""
        if other.since is not None and self.since is None:
            self.since = other.since
        self.bytes += other.bytes
        self.packets.update(other.packets)
        self.after_close += other.after_close
        self.reason = self.reason or other.reason

    def summary(self) -> str:
        """``then 1,048,576 more bytes in 12,003 PUBLISH packets`` (the most frequent types first)."""
        kinds = ", ".join(f"{count:,} {name}" for name, count in self.packets.most_common(4))
        rest = sum(self.packets.values()) - sum(count for _, count in self.packets.most_common(4))
        if rest:
            kinds += f" and {rest:,} other"
        return f"then {self.bytes:,} more bytes in {kinds} packets" if kinds else "nothing more"

    def to_json(self) -> dict[str, Any]:
        return {
            "since_t": None if self.since is None else round(self.since, 6),
            "bytes": self.bytes,
            "packets": dict(self.packets.most_common()),
            "summary": self.summary(),
            "reason": self.reason,
        }

"""The audit's declared budgets: what one connection may make a task hold, each with its default, the policy at
the bound (named in every output) and the counter that says how often it applied.

- ``max_message_bytes``: the largest MQTT packet decoded (fixed header included). A larger one is skipped as it
  arrives, never buffered: its first bytes are kept as evidence, its declared size still judged (a 5.0 Maximum
  Packet Size), and its bytes are a not-assessable record of what was skipped.
- ``max_out_of_order_bytes``: what one direction of a connection holds behind a hole, each piece charged its bytes
  plus :data:`PIECE_COST` (so ten thousand one-byte segments cost what they weigh in memory). Past it, the oldest
  holes are declared gaps until half of it is free; the bytes after them are framed again from a proven boundary.
- ``max_flow_bytes``: the captured TCP payload of one flow (both directions, every connection on its 4-tuple) a
  judging task holds, the depth to which a flow is audited. A judging task holds one flow at a time, so this is
  also the per-task memory budget (the task's worker peaks at its floor plus about twice it, see the README). Past
  it the flow stops: its later segments are counted, not held; the connection open at the cut is judged up to its
  last held segment and what the rest carried is a not-assessable record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mqttaudit.codec.stream import DEFAULT_MAX_PACKET_SIZE, MIN_MAX_PACKET_SIZE

#: The default per-message bound: the codec's (16 MiB). A message at the bound costs its decoding task about four
#: times its size while it is decoded (the bytes gathered, joined, framed and read); kept the same as the codec's,
#: which the live probe and ``decode`` use, so that one capture decodes alike everywhere.
DEFAULT_MAX_MESSAGE_BYTES: Final = DEFAULT_MAX_PACKET_SIZE
#: The smallest per-message budget: a fixed header may take that many bytes before the packet's size is known.
MIN_MAX_MESSAGE_BYTES: Final = MIN_MAX_PACKET_SIZE
#: Out-of-order bytes held per direction by default: 1 MiB, a few full TCP windows of a fast link (Suricata holds
#: 1 MiB of depth per stream; Zeek stops buffering above a gap after 16 KiB).
DEFAULT_MAX_OUT_OF_ORDER_BYTES: Final = 1 << 20
#: What holding one out-of-order piece costs beyond its bytes (a tuple, an int, a bytes header, a list slot:
#: measured 125 bytes on CPython 3.11), charged against ``max_out_of_order_bytes``.
PIECE_COST: Final = 128
#: Captured payload of one flow a judging task holds by default: 256 MiB. Measured, a judging task's Python worker
#: peaks at its floor (about 170 MB: imports, input batches) plus about 2.2 times the flow it holds (a 48 MiB flow:
#: 276 MB, a 64 MiB flow: 313 MB), so under about 750 MB at this bound.
DEFAULT_MAX_FLOW_BYTES: Final = 256 << 20
#: The smallest flow budget: one full-size segment (64 KiB) always fits, whatever the capture's segment sizes.
MIN_MAX_FLOW_BYTES: Final = 64 << 10
#: The smallest out-of-order budget: a few pieces.
MIN_MAX_OUT_OF_ORDER_BYTES: Final = 4 * PIECE_COST


@dataclass(frozen=True, slots=True)
class Budgets:
    """The bounds one connection is held to (see the module's text for each policy)."""

    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_out_of_order_bytes: int = DEFAULT_MAX_OUT_OF_ORDER_BYTES
    max_flow_bytes: int = DEFAULT_MAX_FLOW_BYTES

    def __post_init__(self) -> None:
        for name, value, least in (
            ("max_message_bytes", self.max_message_bytes, MIN_MAX_MESSAGE_BYTES),
            ("max_out_of_order_bytes", self.max_out_of_order_bytes, MIN_MAX_OUT_OF_ORDER_BYTES),
            ("max_flow_bytes", self.max_flow_bytes, MIN_MAX_FLOW_BYTES),
        ):
            if not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be an integer of at least {least}, not {value!r}")


DEFAULT_BUDGETS: Final = Budgets()

#: The policies at each bound, as the summary and the reports name them.
MESSAGE_POLICY: Final = (
    "a packet declared larger than the per-message budget is not buffered: its first bytes are kept as evidence "
    "and its declared size is judged (a 5.0 Maximum Packet Size), the rest of it is skipped as it arrives, and its "
    "bytes are a not-assessable row of the gaps table (message above the per-message budget)"
)
OUT_OF_ORDER_POLICY: Final = (
    "out-of-order bytes held behind a hole (each piece charged its bytes plus "
    f"{PIECE_COST} for its bookkeeping) are bounded per direction; at the bound the oldest holes are declared gaps "
    "until half of it is free, and what follows is framed again from a proven packet boundary"
)
FLOW_POLICY: Final = (
    "a judging task holds one flow at a time, and of it at most the per-flow budget of captured TCP payload; past "
    "it the flow stops: its later segments are counted, not held, the connection open at the cut is judged up to "
    "its last held segment (observation ends there), and what the rest carried is a not-assessable row of the gaps "
    "table"
)


def message_reason(declared: int, budget: int) -> str:
    """Why the bytes of a packet above the per-message budget are not assessable."""
    return (
        f"message above the per-message budget: the packet declares {declared:,} bytes, above the {budget:,}-byte "
        "budget (--max-message-bytes); skipped undecoded, its first bytes kept as evidence"
    )


def out_of_order_reason(budget: int) -> str:
    """Why a gap declared at the out-of-order budget is a gap: its bytes had not been captured when the budget ran
    out (they may come later, as a retransmission the stream no longer takes)."""
    return (
        f"not captured while the out-of-order bytes waiting behind them reached the {budget:,}-byte budget "
        "(--max-out-of-order-bytes): declared a gap"
    )


def flow_reason(budget: int, segments: int, payload: int) -> str:
    """Why what a flow carried past its budget is not assessable."""
    return (
        f"flow stopped at the per-flow budget of {budget:,} captured bytes (--max-flow-bytes): {segments:,} later "
        f"segment(s) with {payload:,} payload bytes were counted, not held, so nothing they carried is judged"
    )

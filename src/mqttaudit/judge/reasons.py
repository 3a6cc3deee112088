"""Why a rule could not be decided: the short tags every not-assessable reason starts with, one per thing the
observation could not show, so a reader (and a filter) can group them. A reason is ``"<tag>: <details>"``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

#: Bytes the client sent before its first decoded packet were not captured: its CONNECT may be among them.
GAP_BEFORE_CONNECT: Final = "gap before CONNECT"
#: Observation began inside the connection: its CONNECT, version and session are unknown.
MID_STREAM: Final = "capture began inside the connection"
#: The receiver's TCP never acknowledged the bytes that called for an answer: they may never have reached it.
NEVER_ACKNOWLEDGED: Final = "receiver never acknowledged the bytes"
#: Nothing of the connection was captured after a time before the deadline (the capture may have lost it).
NO_ACTIVITY: Final = "no activity captured after"
#: The capture (or the live observation) ends before the deadline.
CAPTURE_ENDS: Final = "capture ends before the deadline"
#: The server never accepted the connection (no CONNACK 0 seen), so it owed no answer to anything on it.
NOT_ACCEPTED: Final = "connection never accepted"
#: Bytes of the owing side went unobserved while the answer was due: the answer may be among them.
LOST_BYTES: Final = "bytes not captured"
#: The peer closed the connection before the deadline: the owing side had no chance to show what it does.
PEER_CLOSED: Final = "peer closed first"
#: The owing side closed instead of answering, which it may do.
CLOSED_INSTEAD: Final = "closed instead of answering"
#: What the rule is judged on (an answer, a CONNACK) never came: there is nothing to judge it on.
NO_ANSWER: Final = "no answer to judge"
#: The observation stopped before the rule was exercised for long enough.
TOO_SHORT: Final = "observation too short"
#: Bytes were captured but could not be decoded as a packet.
UNDECODED: Final = "bytes not decoded"
#: Bytes arrived twice with different content (a conflicting TCP retransmission): which copy the receiver kept is
#: unknown, so nothing decoded from them is judged.
CONFLICTING: Final = "conflicting retransmission"
#: The connection follows another specification (another protocol name, or a level the server supports).
ANOTHER_SPECIFICATION: Final = "another specification"
#: The session began on an earlier connection the capture does not hold (or did not tie to this one).
EARLIER_SESSION: Final = "earlier session unknown"
#: A statement would owe it, but the text lets the server withhold it (a SHOULD: section 4.7.2 asks the server to
#: keep clients from exchanging messages on '$' topics): its arrival is judged, its absence decides nothing.
NOT_OWED: Final = "allowed to withhold"
#: A delivery may stand for more than one message (the same topic and payload, live and retained): which one it is
#: decides the rule, and the bytes cannot tell.
AMBIGUOUS: Final = "which message is ambiguous"
#: A message owed was not delivered within its window (its deadline plus the late window), but a copy that can be it
#: came later on its session: the specification sets no time limit on delivery, so it is not surely missing.
LATE_COPY: Final = "copy after the late window"


def reason(tag: str, details: str) -> str:
    """A reason: its tag, then what exactly could not be seen."""
    return f"{tag}: {details}"


def instant(seconds: float, *, wall_clock: bool) -> str:
    """A time as a detail names it: a capture's (``wall_clock``, seconds since the epoch) as an ISO 8601 UTC time;
    the prober's (seconds from the start of its observation) as ``2.023 s``."""
    return utc(seconds) if wall_clock else f"{seconds:.3f} s"


def utc(seconds: float) -> str:
    """A capture time (seconds since the epoch) as an ISO 8601 UTC time to the microsecond."""
    try:
        moment = datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return f"{seconds:.6f} s"
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def elapsed(seconds: float) -> str:
    """A duration as a person reads it: ``55 µs``, ``12.5 ms``, ``3.2 s``, ``4 min 10 s``, ``2 h 5 min`` (never
    ``5.51e-05 s``)."""
    if seconds < 0:
        return "-" + elapsed(-seconds)
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    if seconds < 60:
        return f"{seconds:.3g} s"
    whole = round(seconds)
    if whole < 3600:
        minutes, rest = divmod(whole, 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(whole // 60, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def unseen(since: float, due: float, seen_until: float, capture_end: float, event: int, owed: str) -> str:
    """Why a deadline (``due``, for what event ``event`` at ``since`` called for) past a capture's observation of
    the connection cannot be judged: the capture ends before it, or the connection is not seen after
    ``seen_until``. ``owed`` ends the sentence ("before the server had to send PUBACK (5 s)")."""
    if due > capture_end:
        return reason(CAPTURE_ENDS, f"it ends {elapsed(capture_end - since)} after event {event}, {owed}")
    return reason(
        f"{NO_ACTIVITY} {utc(seen_until)}",
        f"the connection is not seen after {elapsed(seen_until - since)} from event {event} (the capture goes on "
        f"{elapsed(capture_end - seen_until)}), {owed}",
    )


def tag_of(text: str) -> str:
    """The tag a reason starts with ("" when it has none of the known tags)."""
    for tag in TAGS:
        if text.startswith(tag):
            return tag
    return ""


TAGS: Final = (
    GAP_BEFORE_CONNECT,
    MID_STREAM,
    NEVER_ACKNOWLEDGED,
    NO_ACTIVITY,
    CAPTURE_ENDS,
    NOT_ACCEPTED,
    LOST_BYTES,
    PEER_CLOSED,
    CLOSED_INSTEAD,
    NO_ANSWER,
    TOO_SHORT,
    UNDECODED,
    CONFLICTING,
    ANOTHER_SPECIFICATION,
    EARLIER_SESSION,
    NOT_OWED,
    AMBIGUOUS,
    LATE_COPY,
)


#: Each tag in plain words, for a reader who has not met it (the demo explains the ones its audit shows).
EXPLANATIONS: Final[dict[str, str]] = {
    GAP_BEFORE_CONNECT: "bytes before the client's first packet were not captured, and its CONNECT may be among them",
    MID_STREAM: "the capture began inside the connection, so its CONNECT, version and session are unknown",
    NEVER_ACKNOWLEDGED: "the receiver's TCP never acknowledged the bytes that called for an answer",
    NO_ACTIVITY: "nothing of the connection was captured after some time before the deadline",
    CAPTURE_ENDS: "the capture ends before the deadline by which the answer was due",
    NOT_ACCEPTED: "the server never accepted the connection, so it owed no answer on it",
    LOST_BYTES: "bytes of the side that owed the answer were not captured while it was due",
    PEER_CLOSED: (
        "the other side closed the connection before the deadline, so the side that owed a reaction had no chance "
        "to show it"
    ),
    CLOSED_INSTEAD: "the side that owed an answer closed the connection instead, which it may do",
    NO_ANSWER: "what the rule is judged on (an answer, a CONNACK) never came",
    TOO_SHORT: "the observation stopped before the rule was exercised for long enough",
    UNDECODED: "bytes were captured but could not be decoded as a packet",
    CONFLICTING: "bytes arrived twice with different content, so which copy the receiver kept is unknown",
    ANOTHER_SPECIFICATION: "the connection follows another specification (another protocol name or level)",
    EARLIER_SESSION: "the session began on an earlier connection that the capture does not hold",
    NOT_OWED: "the specification lets the server withhold it (a SHOULD), so its absence decides nothing",
    AMBIGUOUS: "a delivery may stand for more than one message, and the bytes cannot tell which",
    LATE_COPY: (
        "a copy of the message came after its late window: the specification sets no time limit on delivery, so "
        "it is not surely missing"
    ),
}

"""A sender's own malformed packets as findings: the MUST-level codec rules a frame breaks, charged to its sender.

The judge decides the reaction to a violation (the receiver's close); the violation itself is the codec's, found
in the frame. One frame is one act: one finding, citing the first rule it breaks that binds the sender, the others
recorded with it (:attr:`~mqttaudit.judge.verdict.Finding.also`).
"""

from __future__ import annotations

from mqttaudit.codec import Direction, Frame

from .rules import ENFORCED_CODEC_RULES, SENDER_CODEC_RULES_5_0
from .sides import side_name
from .verdict import Finding, binds


def frame_finding(
    frame: Frame, sender: Direction, *, v5: bool, time: float, event: int, conversation: str = ""
) -> Finding | None:
    """The finding of ``frame``'s own defects against ``sender``, None when it breaks no MUST that binds it (in
    5.0, every MUST-level codec rule; in 3.1.1, those a receiver must close on)."""
    held_to = SENDER_CODEC_RULES_5_0 if v5 else ENFORCED_CODEC_RULES
    broken = [v for v in frame.violations if v.rule_key in held_to and binds(v.rule, sender)]
    if not broken:
        return None
    first = broken[0]
    side = side_name(sender)
    return Finding(
        first.rule,
        sender,
        time,
        event,
        f"the {side} sent {first.detail} (byte {first.offset} of its stream)",
        f"the {side} sends only packets that keep {first.rule}",
        conversation,
        also=tuple(dict.fromkeys(v.rule for v in broken[1:] if v.rule != first.rule)),
    )

"""Scenarios: several conversations with one broker on a common clock, each judged on its own and all of them
held against the broker model (sessions, subscriptions, retained messages, Wills)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from .config import JudgeConfig
from .conversation import DEFAULT_CONFIG, ConversationJudge
from .discarded_5 import judge_discarded
from .events import Event
from .handshake_5 import unique_assigned_identifiers
from .model import ExpectedDelivery, build, deliveries_of
from .routing import Routing
from .transcript import Transcript
from .verdict import Judgement, Undecided, combine


def _transcribe(
    conversations: Mapping[str, Sequence[Event]], config: JudgeConfig
) -> tuple[dict[str, Transcript], list[Judgement]]:
    transcripts: dict[str, Transcript] = {}
    parts: list[Judgement] = []
    for name, events in conversations.items():
        judge = ConversationJudge(config, conversation=name)
        for event in events:
            judge.feed(event)
        parts.append(judge.finish())
        transcripts[name] = judge.transcript
    return transcripts, parts


def expected_deliveries(
    conversations: Mapping[str, Sequence[Event]], config: JudgeConfig = DEFAULT_CONFIG
) -> list[ExpectedDelivery]:
    """What a conforming broker sends, given every connection to it on one clock: for each PUBLISH (and Will)
    it took, one record per subscriber connection that must or may get it, in the order the messages were taken."""
    transcripts, _ = _transcribe(conversations, config)
    return deliveries_of(build(transcripts, config))


def judge_scenario(conversations: Mapping[str, Sequence[Event]], config: JudgeConfig = DEFAULT_CONFIG) -> Judgement:
    """Judges every conversation (findings name it in ``Finding.conversation``) and the routing between them.

    Times of all conversations share one clock. A finding both a conversation and the model make (a delivery
    matching no subscription) is reported once.
    """
    transcripts, parts = _transcribe(conversations, config)
    replay = Routing(build(transcripts, config), transcripts, config)
    routing = replay.judgement()
    parts = [_without_settled(part, replay.settled, transcripts) for part in parts]
    seen = {(f.conversation, rule, f.event) for part in parts for f in part.findings for rule in f.rules}
    fresh = tuple(f for f in routing.findings if (f.conversation, f.rule, f.event) not in seen)
    parts.append(Judgement(fresh, routing.assessed, routing.not_assessable, routing.undecided))
    parts.append(across_connections(transcripts))
    return combine(parts)


def across_connections(
    transcripts: Mapping[str, Transcript], discarding: Mapping[str, Transcript] | None = None
) -> Judgement:
    """The 5.0 rules decided from one server's connections together, beside the routing model: a unique Assigned
    Client Identifier for connections open at once [MQTT-3.1.3-6], and a message too large for a subscriber's
    Maximum Packet Size discarded, the next one still delivered [MQTT-3.1.2-25]. The probe's scenarios and the
    capture audit's replay of a broker both run them. ``discarding``: the whole transcripts the second rule reads
    (None: ``transcripts``), which may be only the connections it concerns
    (:func:`~.discarded_5.too_large_for`)."""
    whole = transcripts if discarding is None else discarding
    return combine([unique_assigned_identifiers(transcripts), judge_discarded(whole)])


def _without_settled(
    part: Judgement, settled: Mapping[tuple[str, str], set[int]], transcripts: Mapping[str, Transcript]
) -> Judgement:
    """One conversation's judgement without the instances the replay decided: a row a conversation left
    undecided at a delivery (for this delivery "and later ones like it") goes when the replay, which knows every
    connection's subscriptions and messages, decided that rule at that delivery and at every later one."""
    kept: list[Undecided] = []
    dropped = False
    for row in part.undecided:
        events = settled.get((row.conversation, row.rule))
        transcript = transcripts.get(row.conversation)
        if events is not None and transcript is not None and row.event in events:
            later = {d.event for d in transcript.delivered if d.event >= row.event}
            if later <= events:
                dropped = True
                continue
        kept.append(row)
    if not dropped:
        return part
    rules = {row.rule for row in kept}
    reasons = {rule: why for rule, why in part.not_assessable.items() if rule in rules}
    return Judgement(part.findings, part.assessed, MappingProxyType(reasons), tuple(kept))

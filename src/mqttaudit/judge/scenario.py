"""Scenarios: several conversations with one broker on a common clock, each judged on its own and all of them
held against the broker model (sessions, subscriptions, retained messages, Wills)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .config import JudgeConfig
from .conversation import DEFAULT_CONFIG, ConversationJudge
from .events import Event
from .model import ExpectedDelivery, build, deliveries_of
from .routing import Routing
from .transcript import Transcript
from .verdict import Judgement, combine


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
    routing = Routing(build(transcripts, config), transcripts, config).judgement()
    seen = {(f.conversation, f.rule, f.event) for part in parts for f in part.findings}
    fresh = tuple(f for f in routing.findings if (f.conversation, f.rule, f.event) not in seen)
    parts.append(Judgement(fresh, routing.assessed, routing.not_assessable, routing.undecided))
    return combine(parts)

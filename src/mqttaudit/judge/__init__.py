"""The conversation judge: timed events of MQTT 3.1.1 connections in, behaviour findings out.

:func:`judge` (or :class:`ConversationJudge`, one event at a time) judges one connection in both directions;
:func:`judge_scenario` judges several connections to one broker on a common clock and holds them against the broker
model. Every finding names its statement, the side at fault and the event that shows it; a rule the events cannot
decide is *not assessable*, never a pass. :data:`CHECKED_RULES` lists every rule the judge decides.

- ``events``: what the judge consumes (Sent, Closed, Quiet); ``verdict``: Finding, Judgement and the ledger.
- ``obligations``: deadlines (close within the grace, answer within the timeout) and how events settle them.
- ``violations``, ``connection``, ``pairing``, ``deliveries``, ``keepalive``: the rules of one connection.
- ``transcript``, ``model``, ``routing``, ``scenario``: what each connection did, what a conforming broker owed
  each one, and the findings across connections.

>>> from mqttaudit import codec
>>> from mqttaudit.judge import Quiet, Sent, judge
>>> def sent(time, sender, packet):
...     return Sent(time, sender, codec.StreamDecoder(sender).feed(codec.encode(packet))[0])
>>> client, server = codec.Direction.FROM_CLIENT, codec.Direction.FROM_SERVER
>>> verdict = judge([
...     sent(0.0, client, codec.Connect(client_id="probe")),
...     sent(0.1, server, codec.Connack()),
...     sent(0.2, client, codec.Subscribe(packet_id=1, subscriptions=[codec.Subscription(topic_filter="a")])),
...     Quiet(10.0),
... ])
>>> [(f.rule.text, f.rule.version, f.side.value) for f in verdict.findings]
[('MQTT-3.8.4-1', '3.1.1', 'server')]
"""

from .config import JudgeConfig
from .conversation import ConversationJudge, judge
from .events import Closed, Event, Lost, Quiet, Sent
from .model import ExpectedDelivery
from .rules import CHECKED_RULES, ENFORCED_CODEC_RULES, OWN_RULES
from .scenario import expected_deliveries, judge_scenario
from .sides import peer
from .transcript import Transcript
from .verdict import Finding, Judgement, Leniency, combine

__all__ = [
    "CHECKED_RULES",
    "ENFORCED_CODEC_RULES",
    "OWN_RULES",
    "Closed",
    "ConversationJudge",
    "Event",
    "ExpectedDelivery",
    "Finding",
    "JudgeConfig",
    "Judgement",
    "Leniency",
    "Lost",
    "Quiet",
    "Sent",
    "Transcript",
    "combine",
    "expected_deliveries",
    "judge",
    "judge_scenario",
    "peer",
]

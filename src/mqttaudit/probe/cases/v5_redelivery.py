"""MQTT 5.0 re-delivery on a resumed session (sections 3.3.1.1, 4.3.3, 4.4): a QoS 1 or 2 PUBLISH the broker sent
and never saw acknowledged is sent again when the session resumes [MQTT-4.4.0-1], and that copy has DUP 1
[MQTT-3.3.1-1]; a QoS 2 one is sent again even after its Message Expiry Interval passed, the broker applying no
expiry to a PUBLISH it has sent [MQTT-4.3.3-7].

Each case: a subscriber whose session is kept 60 s gets one message, answers nothing, drops the TCP connection
(a reset) and connects again with Clean Start 0; its new connection answers whatever comes, and the session ends with
it. The broker model of the judge (:mod:`mqttaudit.judge.routing`) holds the new connection's PUBLISH packets
against what the old one left unacknowledged; the scripts only drive the traffic.
"""

from __future__ import annotations

import asyncio
from typing import Final

from mqttaudit.spec.ids import R5

from ...codec import Packet, Publish
from ...codec import properties as props
from ..case import CaseContext, Inconclusive, Script
from .v5_connect import v5_case
from .v5_flows_more import PAST_EXPIRY
from .v5_routing import _end_session, _keep, _require_qos

#: The 5.0 statement ids the cases target.
DUP_ON_REDELIVERY: Final[str] = R5.MQTT_3_3_1_1
QOS2_SENT_NOT_EXPIRED: Final[str] = R5.MQTT_4_3_3_7
#: The Message Expiry Interval of the expiring message (seconds): it passes while the subscriber is away.
EXPIRY: Final = 1


def _delivered(packet: Packet) -> bool:
    return isinstance(packet, Publish) and packet.qos > 0


def _redelivery(qos: int, *, expiring: bool = False) -> Script:
    async def script(context: CaseContext) -> None:
        client_id = context.client_id()
        topic = context.topic("t")
        first = await context.connect("first", client_id=client_id, auto_ack=False, properties=_keep())
        _require_qos(context, qos)
        await context.subscribe_granted(first, topic, qos)
        publisher = await context.connect("publisher")
        expiry = props.make(message_expiry_interval=EXPIRY) if expiring else ()
        await context.publish(publisher, topic, b"unacknowledged", qos=qos, properties=expiry)
        if await first.wait_for(_delivered) is None:
            raise Inconclusive(f"setup: {first.missing(f'a QoS {qos} delivery')}")
        delivered = context.clock()
        await first.close(abrupt=True)  # no PUBACK, no PUBREC: the PUBLISH stays unacknowledged
        if expiring:  # past the interval and a server's one-second timer resolution, counted from the delivery
            await asyncio.sleep(max(PAST_EXPIRY - (context.clock() - delivered), 0.0))
        again = await context.connect("again", client_id=client_id, clean_session=False, properties=_keep())
        await context.settle(again)
        await _end_session(context, again)
        await context.disconnect(publisher)

    return script


for _qos in (1, 2):
    v5_case(
        f"v5/redelivery/dup-qos{_qos}",
        [DUP_ON_REDELIVERY],
        f"A QoS {_qos} PUBLISH re-sent on a resumed session has DUP 1",
        stimulus=f"a subscriber at QoS {_qos}, Session Expiry Interval 60, gets a QoS {_qos} message, sends no "
        f"{'PUBACK' if _qos == 1 else 'PUBREC'} and drops the connection (TCP reset); it connects again with Clean "
        "Start 0",
        expected="Session Present 1, and the message sent again with its Packet Identifier and DUP 1",
        timing=True,
    )(_redelivery(_qos))

v5_case(
    "v5/redelivery/after-expiry-qos2",
    [QOS2_SENT_NOT_EXPIRED],
    "A QoS 2 PUBLISH sent before its Message Expiry Interval passed is re-sent on the resumed session all the same",
    stimulus=f"a subscriber at QoS 2, Session Expiry Interval 60, gets a QoS 2 message with Message Expiry Interval "
    f"{EXPIRY}, sends no PUBREC and drops the connection (TCP reset); {PAST_EXPIRY:g} s after the delivery it "
    "connects again with Clean Start 0",
    expected="the message sent again (DUP 1): a QoS 2 sender applies no Message Expiry to a PUBLISH it has sent",
    timing=True,
)(_redelivery(2, expiring=True))

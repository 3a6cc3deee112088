"""``mqttaudit serve``: a strict reference broker that judges the MQTT clients connecting to it.

It is built from the codec, the topics and the judge (not a production broker: memory only, bounded, small limits
on purpose): :mod:`.broker` holds sessions, subscriptions, retained messages, Wills and the QoS flows of 3.1.1 and
5.0 without I/O; :mod:`.server` runs it on asyncio, records every connection as judge events and judges each one
live with the judge the probe and the audit use. A finding against the client is what the client broke; one
against the server is a defect of this broker.
"""

from .broker import Broker, Limits, Link
from .server import ServedClient, ServeRun, ServeServer

__all__ = ["Broker", "Limits", "Link", "ServeRun", "ServeServer", "ServedClient"]

"""The case library: importing this package registers every case in :data:`mqttaudit.probe.case.CASES` (which
imports it on first use)."""

from __future__ import annotations

import importlib

from ..case import CASES

#: The modules in the library's order (the order of ``probe --list`` and of a run): what a broker must do, then
#: the malformed families, then their negative controls; then the MQTT 5.0 cases; then the WebSocket text frames
#: (both versions). The 5.0 routing and flow cases come
#: before the 3.1.1 routing table: the cases that leave retained messages run alone in this order, and the last of them
#: must be one whose own leftovers reach no later case (routing/retained-to-wildcard-subscribers).
MODULES = (
    "delivery",
    "session",
    "v5_routing",
    "v5_sessions",
    "v5_flows",
    "v5_flows_more",
    "v5_redelivery",
    "routing",
    "malformed",
    "accepted",
    "v5_connect",
    "v5_connect_more",
    "v5_auth",
    "v5_malformed",
    "v5_malformed_more",
    "v5_limits",
    "v5_limits_more",
    "v5_forbidden",
    "v5_ported",
    "v5_duplicates",
    "v5_handshake",
    "websocket",
)
for _module in MODULES:
    importlib.import_module(f"{__name__}.{_module}")

__all__ = ["ALONE", "MODULES", "QUIET", "TIMING"]

#: Cases whose verdict hangs on a broker-side timer or on what the broker does after a connection drops: they are
#: judged after every other case, and a failure of one of them is run again, alone, before it is reported (a case
#: registered with ``timing=True`` is one too).
TIMING = (
    "keep-alive/server-disconnects-silent-client",  # the Keep Alive timer [MQTT-3.1.2-24]
    "will/published-on-abnormal-close",  # the Will is published some time after the drop
    "will/retained",
    "will/not-after-disconnect",
    "connect/takeover",  # the old connection is closed after the new CONNECT
    "v5/server-disconnect/session-taken-over",  # the same, with the DISCONNECT that may come first
    "session/queued-while-offline",  # the session outlives the drop of its connection
    "v5/keep-alive/server-disconnects-silent-client",  # the Keep Alive timer [MQTT-3.1.2-22]
    "v5/keep-alive/client-value-applies",
)

#: Cases that publish retained messages (or a retained Will): a broker that sends every retained message to every
#: client would show them to the cases beside them, so they run alone (a test checks the list against what each
#: case of the library sends).
ALONE = (
    "subscribe/delivery-matches-filter",
    "retain/delivered-on-subscribe",
    "retain/qos0-replaces",
    "retain/qos0-replaces-qos1-rounds",
    "v5/retain/qos0-replaces-qos1-rounds",
    "retain/zero-byte-clears",
    "retain/non-retained-leaves-retained",
    "retain/survives-session-end",
    "routing/retained-to-wildcard-subscribers",
    "will/retained",
    "v5/forbidden/publish-qos-3-retain",  # a broker that takes the malformed PUBLISH may keep it as retained
    *importlib.import_module(f"{__name__}.v5_routing").ALONE,
    *importlib.import_module(f"{__name__}.v5_flows").ALONE,
)

#: Timing cases whose stimulus is silence: the broker must close a connection nothing is sent on. They run last,
#: one at a time, with nothing beside them (see ``Case.quiet``).
QUIET = (
    "keep-alive/server-disconnects-silent-client",
    "v5/keep-alive/server-disconnects-silent-client",
    "v5/keep-alive/client-value-applies",
)

CASES.mark_timing(TIMING)
CASES.mark_quiet(QUIET)
CASES.mark_alone(ALONE)

"""The flow keys of an audit finding, named as Suricata's EVE names them, so that ``findings.jsonl`` joins with the
logs of the other tools an operator runs: the endpoints (``src_ip``, ``src_port``, ``dest_ip``, ``dest_port``),
``proto``, a numeric ``flow_id`` and the Community ID flow hash (``community_id``, computed by Corelight's
``communityid`` library, seed 0, as Suricata, Zeek and tshark compute it by default).

``src`` is the side the finding judges (the sender of the offending bytes, or the side that owed an answer; the
broker for a routing finding), ``dest`` the other side, as an alert's source is the packet's sender in EVE. The
Community ID does not depend on that order.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

from ..capture.segments import parse_endpoint

#: Every flow the audit judges is a TCP connection.
PROTO = "TCP"
#: Bits of the numeric flow id: integers a JSON reader holds exactly (JavaScript's safe integers), as Suricata's are.
FLOW_ID_BITS = 53
#: The EVE fields of a finding, in the order ``findings.jsonl`` writes them.
FIELDS = ("flow_id", "src_ip", "src_port", "dest_ip", "dest_port", "proto", "community_id")


def flow_id(flow: str) -> int:
    """A number for the audit's flow id (``10.0.0.1:1883|10.0.0.2:50000@1700000000000000000``), the same in every
    finding of that connection and in every audit of the same capture: the first bits of its BLAKE2b hash."""
    digest = hashlib.blake2b(flow.encode("utf-8", "surrogateescape"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> (64 - FLOW_ID_BITS)


@functools.lru_cache(maxsize=4096)
def community_id(src_ip: str, src_port: int, dest_ip: str, dest_port: int) -> str:
    """The Community ID (version 1, seed 0) of a TCP flow, ``1:`` and a base64 SHA-1."""
    import communityid

    return str(communityid.CommunityID().calc(communityid.FlowTuple.make_tcp(src_ip, dest_ip, src_port, dest_port)))


def flow_fields(flow: str | None, client: str | None, server: str | None, src_side: str) -> dict[str, Any]:
    """The EVE fields of a finding on ``flow``, whose connection's endpoints are ``client`` and ``server`` (as the
    connections table writes them; None when it does not name the flow), judging ``src_side`` ("client" or
    "server"; any other value puts the client first). A field that cannot be known is None."""
    ends = [None if end is None else parse_endpoint(end) for end in (client, server)]
    src, dest = (ends[1], ends[0]) if src_side == "server" else (ends[0], ends[1])
    return {
        "flow_id": None if flow is None else flow_id(flow),
        "src_ip": None if src is None else src[0],
        "src_port": None if src is None else src[1],
        "dest_ip": None if dest is None else dest[0],
        "dest_port": None if dest is None else dest[1],
        "proto": PROTO,
        "community_id": None if src is None or dest is None else community_id(*src, *dest),
    }

"""Link layers: where the IP header starts in a captured frame, for each link type a capture may hold.

Ethernet (with any number of 802.1Q/802.1ad VLAN tags), Linux cooked capture v1 (SLL) and v2 (SLL2), BSD
loopback (``NULL``, the address family in the capturing host's byte order, and ``LOOP``, in network order), and
raw IP (``RAW``, and ``IPV4``/``IPV6`` that promise one version).
"""

from __future__ import annotations

import enum
from typing import Final


class Skip(enum.StrEnum):
    """Why a record yields no TCP segment. Counted per reason, never dropped silently."""

    UNSUPPORTED_LINKTYPE = "unsupported-linktype"
    TRUNCATED_LINK = "truncated-link-header"
    NOT_IP = "not-ip"
    TRUNCATED_IP = "truncated-ip-header"
    BAD_IP = "bad-ip-header"
    #: A fragment other than the first: its bytes cannot be placed without reassembling the datagram.
    FRAGMENT = "ip-fragment"
    #: The first fragment of a fragmented TCP segment: its data is incomplete (fragments are not reassembled).
    FIRST_FRAGMENT = "first-ip-fragment"
    NOT_TCP = "not-tcp"
    ENCRYPTED = "ipsec-esp"
    TRUNCATED_TCP = "truncated-tcp-header"
    BAD_TCP = "bad-tcp-header"
    #: The snapshot length cut the TCP data: its bytes are missing, and reassembly reports them as a gap.
    TRUNCATED_PAYLOAD = "truncated-tcp-payload"


# Link types (https://www.tcpdump.org/linktypes.html).
NULL: Final = 0
ETHERNET: Final = 1
RAW_BSD: Final = 12  # DLT_RAW as some BSDs numbered it; found in old files
RAW_OPENBSD: Final = 14
RAW: Final = 101
LOOP: Final = 108
LINUX_SLL: Final = 113
IPV4: Final = 228
IPV6: Final = 229
LINUX_SLL2: Final = 276

ETHERTYPE_IPV4: Final = 0x0800
ETHERTYPE_IPV6: Final = 0x86DD
#: 802.1Q, 802.1ad (QinQ) and the pre-standard QinQ tag protocol identifiers.
VLAN_TPIDS: Final = frozenset({0x8100, 0x88A8, 0x9100, 0x9200, 0x9300})

AF_INET: Final = 2
#: AF_INET6 differs by system: Linux 10, Windows 23, NetBSD/OpenBSD 24, FreeBSD 28, macOS 30.
AF_INET6: Final = frozenset({10, 23, 24, 28, 30})

#: Where the IP header starts and which IP version the link layer announces (0: read it from the header).
Network = tuple[int, int]


def network_layer(linktype: int, data: bytes) -> Network | Skip:
    """The offset of the IP header in ``data`` and the IP version the link layer names, or why there is none."""
    if linktype == ETHERNET:
        if len(data) < 14:
            return Skip.TRUNCATED_LINK
        return _ethertype(data, 14, data[12] << 8 | data[13])
    if linktype == LINUX_SLL:
        if len(data) < 16:
            return Skip.TRUNCATED_LINK
        return _ethertype(data, 16, data[14] << 8 | data[15])
    if linktype == LINUX_SLL2:
        if len(data) < 20:
            return Skip.TRUNCATED_LINK
        return _ethertype(data, 20, data[0] << 8 | data[1])
    if linktype in (RAW, RAW_BSD, RAW_OPENBSD):
        return 0, 0
    if linktype == IPV4:
        return 0, 4
    if linktype == IPV6:
        return 0, 6
    if linktype in (NULL, LOOP):
        if len(data) < 4:
            return Skip.TRUNCATED_LINK
        family = int.from_bytes(data[:4], "little")
        if family > 0xFFFF:  # written in the other byte order
            family = int.from_bytes(data[:4], "big")
        if family == AF_INET:
            return 4, 4
        if family in AF_INET6:
            return 4, 6
        return Skip.NOT_IP
    return Skip.UNSUPPORTED_LINKTYPE


def _ethertype(data: bytes, pos: int, ethertype: int) -> Network | Skip:
    while ethertype in VLAN_TPIDS:
        if len(data) < pos + 4:
            return Skip.TRUNCATED_LINK
        ethertype = data[pos + 2] << 8 | data[pos + 3]
        pos += 4
    if ethertype == ETHERTYPE_IPV4:
        return pos, 4
    if ethertype == ETHERTYPE_IPV6:
        return pos, 6
    return Skip.NOT_IP

"""From a captured frame to a TCP segment: link layer, IPv4 or IPv6 (with extension headers), then TCP.

A segment is the plain tuple ``(time_ns, src_ip, src_port, dst_ip, dst_port, seq, ack, flags, payload)``; the
addresses are the packed 4 or 16 bytes. A record that holds no usable segment gives a :class:`Skip` reason instead.
Checksums are not verified: captures taken on the sending host routinely hold offloaded, unfilled checksums.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Final

from .link import Skip, network_layer
from .records import Record

Segment = tuple[int, bytes, int, bytes, int, int, int, int, bytes]

# TCP flags (RFC 9293, RFC 3168, RFC 3540).
FIN: Final = 0x001
SYN: Final = 0x002
RST: Final = 0x004
PSH: Final = 0x008
ACK: Final = 0x010
URG: Final = 0x020
ECE: Final = 0x040
CWR: Final = 0x080
NS: Final = 0x100

TCP: Final = 6
# IPv6 extension headers sized in 8-octet units after their first 8 octets.
_IPV6_OPTION_HEADERS: Final = frozenset({0, 43, 60, 135, 139, 140})
_IPV6_FRAGMENT: Final = 44
_IPV6_AH: Final = 51
_IPV6_ESP: Final = 50
_IPV6_EXTENSIONS: Final = _IPV6_OPTION_HEADERS | {_IPV6_FRAGMENT, _IPV6_AH}


def decode_segment(time_ns: int, linktype: int, data: bytes) -> Segment | Skip:
    """The TCP segment a captured frame holds, or why it holds none."""
    network = network_layer(linktype, data)
    if isinstance(network, Skip):
        return network
    pos, version = network
    size = len(data)
    if size < pos + 1:
        return Skip.TRUNCATED_IP
    found = data[pos] >> 4
    if version and found != version:
        return Skip.BAD_IP
    if found == 4:
        if size < pos + 20:
            return Skip.TRUNCATED_IP
        header = (data[pos] & 0x0F) * 4
        if header < 20:
            return Skip.BAD_IP
        if size < pos + header:
            return Skip.TRUNCATED_IP
        fragment = data[pos + 6] << 8 | data[pos + 7]
        if fragment & 0x1FFF:
            return Skip.FRAGMENT
        if data[pos + 9] != TCP:
            return Skip.NOT_TCP
        if fragment & 0x2000:
            return Skip.FIRST_FRAGMENT
        total = data[pos + 2] << 8 | data[pos + 3]
        if total and total < header:
            return Skip.BAD_IP
        # A total length of 0 is what segmentation offload leaves in frames captured on the sending host.
        end = pos + total if total else size
        src, dst = data[pos + 12 : pos + 16], data[pos + 16 : pos + 20]
        tcp = pos + header
    elif found == 6:
        if size < pos + 40:
            return Skip.TRUNCATED_IP
        length = data[pos + 4] << 8 | data[pos + 5]
        end = pos + 40 + length if length else size  # 0: a jumbogram or offload; the frame's end it is
        src, dst = data[pos + 8 : pos + 24], data[pos + 24 : pos + 40]
        tcp = pos + 40
        next_header = data[pos + 6]
        first_fragment = False
        while next_header != TCP:
            if next_header in _IPV6_EXTENSIONS:
                if size < tcp + 8:
                    return Skip.TRUNCATED_IP
                if next_header == _IPV6_FRAGMENT:
                    fragment = data[tcp + 2] << 8 | data[tcp + 3]
                    if fragment & 0xFFF8:
                        return Skip.FRAGMENT
                    first_fragment = first_fragment or bool(fragment & 1)
                    skip = 8
                elif next_header == _IPV6_AH:
                    skip = (data[tcp + 1] + 2) * 4
                else:
                    skip = (data[tcp + 1] + 1) * 8
                next_header = data[tcp]
                tcp += skip
                if tcp > end:
                    return Skip.BAD_IP
            elif next_header == _IPV6_ESP:
                return Skip.ENCRYPTED
            else:
                return Skip.NOT_TCP
        if first_fragment:
            return Skip.FIRST_FRAGMENT
    else:
        return Skip.BAD_IP
    if end < tcp + 20:
        return Skip.BAD_TCP
    if size < tcp + 20:
        return Skip.TRUNCATED_TCP
    offset = (data[tcp + 12] >> 4) * 4
    if offset < 20 or tcp + offset > end:
        return Skip.BAD_TCP
    if size < tcp + offset:
        return Skip.TRUNCATED_TCP
    if end > size:
        return Skip.TRUNCATED_PAYLOAD
    return (
        time_ns,
        src,
        data[tcp] << 8 | data[tcp + 1],
        dst,
        data[tcp + 2] << 8 | data[tcp + 3],
        int.from_bytes(data[tcp + 4 : tcp + 8], "big"),
        int.from_bytes(data[tcp + 8 : tcp + 12], "big"),
        (data[tcp + 12] & 1) << 8 | data[tcp + 13],
        data[tcp + offset : end],
    )


def segments(records: Iterable[Record], skipped: Counter[str] | None = None) -> Iterator[tuple[int, Segment]]:
    """``(record index, segment)`` for every record that holds a TCP segment; the others are counted in
    ``skipped`` by reason."""
    for time_ns, linktype, data, _orig_len, index, _offset in records:
        segment = decode_segment(time_ns, linktype, data)
        if isinstance(segment, str):
            if skipped is not None:
                skipped[segment] += 1
        else:
            yield index, segment


def format_endpoint(ip: bytes, port: int) -> str:
    """``10.0.0.1:1883`` or ``[::1]:1883``."""
    address = ipaddress.ip_address(ip)
    return f"{address}:{port}" if address.version == 4 else f"[{address}]:{port}"


def parse_endpoint(text: str) -> tuple[str, int] | None:
    """The address and port of an endpoint as :func:`format_endpoint` writes it (``10.0.0.1:1883``,
    ``[::1]:1883``); None for any other text."""
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not 0 <= int(port) < 65536:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return str(ipaddress.ip_address(host)), int(port)
    except ValueError:
        return None

"""Deterministic capture writing: pcap and pcapng files from ``(time, link type, frame)``, and the frames themselves
(Ethernet with VLAN tags, Linux cooked v1/v2, BSD loopback, IPv4, IPv6 with extension headers, TCP) with correct
lengths and checksums. The same input always gives the same bytes.
"""

from __future__ import annotations

import io
import ipaddress
import struct
from collections.abc import Iterable, Sequence
from typing import BinaryIO, Final

from . import link, pcapng
from .records import MICROSECONDS, Interface
from .segments import ACK, FIN, PSH, RST, SYN

DEFAULT_SNAPLEN: Final = 262_144
_NS: Final = 1_000_000_000


class PcapWriter:
    """Writes a classic pcap file: one link type, micro- or nanosecond timestamps, either byte order."""

    def __init__(
        self,
        out: BinaryIO,
        linktype: int,
        *,
        nanoseconds: bool = False,
        byteorder: str = "<",
        snaplen: int = DEFAULT_SNAPLEN,
    ) -> None:
        self._out = out
        self._byteorder = byteorder
        self._unit = 1 if nanoseconds else 1000
        magic = 0xA1B23C4D if nanoseconds else 0xA1B2C3D4
        out.write(struct.pack(byteorder + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype))

    def write(self, time_ns: int, frame: bytes, *, orig_len: int | None = None) -> None:
        seconds, rest = divmod(time_ns, _NS)
        length = len(frame) if orig_len is None else orig_len
        self._out.write(struct.pack(self._byteorder + "IIII", seconds, rest // self._unit, len(frame), length))
        self._out.write(frame)


def pcap_bytes(
    frames: Iterable[tuple[int, bytes]],
    linktype: int,
    *,
    nanoseconds: bool = False,
    byteorder: str = "<",
    snaplen: int = DEFAULT_SNAPLEN,
) -> bytes:
    """A whole pcap file holding ``(time_ns, frame)`` pairs."""
    out = io.BytesIO()
    writer = PcapWriter(out, linktype, nanoseconds=nanoseconds, byteorder=byteorder, snaplen=snaplen)
    for time_ns, frame in frames:
        writer.write(time_ns, frame)
    return out.getvalue()


class PcapngWriter:
    """Writes a pcapng file: sections, interfaces (each with its own link type and timestamp resolution),
    Enhanced, Simple and obsolete Packet Blocks, and any other block as given."""

    def __init__(self, out: BinaryIO, *, byteorder: str = "<") -> None:
        self._out = out
        self._byteorder = byteorder
        self._interfaces: list[Interface] = []
        self.section()

    def section(self) -> None:
        """Starts a new section (the interface table starts empty again)."""
        body = struct.pack(self._byteorder + "IHHq", pcapng.BYTE_ORDER_MAGIC, 1, 0, -1)
        self.write_block(pcapng.SECTION_HEADER, body)
        self._interfaces = []

    def add_interface(self, linktype: int, *, tsresol: int = MICROSECONDS, snaplen: int = 0, tsoffset: int = 0) -> int:
        """Describes an interface; returns its id for :meth:`write`."""
        options = b""
        if tsresol != MICROSECONDS:
            options += self._option(pcapng.OPTION_TSRESOL, bytes([tsresol]))
        if tsoffset:
            options += self._option(pcapng.OPTION_TSOFFSET, struct.pack(self._byteorder + "q", tsoffset))
        if options:
            options += self._option(pcapng.OPTION_END, b"")
        self.write_block(
            pcapng.INTERFACE_DESCRIPTION, struct.pack(self._byteorder + "HHI", linktype, 0, snaplen) + options
        )
        self._interfaces.append(Interface(linktype, snaplen, tsresol, tsoffset))
        return len(self._interfaces) - 1

    def write(self, interface: int, time_ns: int, frame: bytes, *, orig_len: int | None = None) -> None:
        """An Enhanced Packet Block."""
        units = self._interfaces[interface].from_ns(time_ns)
        length = len(frame) if orig_len is None else orig_len
        head = struct.pack(self._byteorder + "IIIII", interface, units >> 32, units & 0xFFFFFFFF, len(frame), length)
        self.write_block(pcapng.ENHANCED_PACKET, head + _pad(frame))

    def write_obsolete(self, interface: int, time_ns: int, frame: bytes) -> None:
        """An obsolete Packet Block (type 2)."""
        units = self._interfaces[interface].from_ns(time_ns)
        head = struct.pack(
            self._byteorder + "HHIIII", interface, 0, units >> 32, units & 0xFFFFFFFF, len(frame), len(frame)
        )
        self.write_block(pcapng.PACKET, head + _pad(frame))

    def write_simple(self, frame: bytes, *, orig_len: int | None = None) -> None:
        """A Simple Packet Block (interface 0, no timestamp)."""
        length = len(frame) if orig_len is None else orig_len
        self.write_block(pcapng.SIMPLE_PACKET, struct.pack(self._byteorder + "I", length) + _pad(frame))

    def write_block(self, block_type: int, body: bytes) -> None:
        """Any block: ``body`` is padded to 32 bits and framed by the block type and both length fields."""
        body = _pad(body)
        length = len(body) + 12
        self._out.write(struct.pack(self._byteorder + "II", block_type, length) + body)
        self._out.write(struct.pack(self._byteorder + "I", length))

    def _option(self, code: int, value: bytes) -> bytes:
        return struct.pack(self._byteorder + "HH", code, len(value)) + _pad(value)


def _pad(data: bytes) -> bytes:
    return data + b"\x00" * (-len(data) % 4)


# Frames ------------------------------------------------------------------------------------------------------------

CLIENT_MAC: Final = bytes.fromhex("020000000001")
SERVER_MAC: Final = bytes.fromhex("020000000002")


def ethernet(
    payload: bytes,
    *,
    ethertype: int = link.ETHERTYPE_IPV4,
    vlans: Sequence[tuple[int, int]] = (),
    src: bytes = CLIENT_MAC,
    dst: bytes = SERVER_MAC,
) -> bytes:
    """An Ethernet II frame; ``vlans`` are ``(tpid, vlan id)`` tags, outermost first."""
    tags = b"".join(struct.pack("!HH", tpid, vid & 0x0FFF) for tpid, vid in vlans)
    return dst + src + tags + struct.pack("!H", ethertype) + payload


def linux_sll(payload: bytes, *, protocol: int = link.ETHERTYPE_IPV4, packet_type: int = 0) -> bytes:
    """A Linux cooked capture (v1) header: packet type, ARPHRD_ETHER, address length 6, address, protocol."""
    return struct.pack("!HHH8sH", packet_type, 1, 6, CLIENT_MAC, protocol) + payload


def linux_sll2(payload: bytes, *, protocol: int = link.ETHERTYPE_IPV4, interface_index: int = 1) -> bytes:
    """A Linux cooked capture v2 header: protocol, reserved, interface index, ARPHRD_ETHER, type, address."""
    return struct.pack("!HHIHBB8s", protocol, 0, interface_index, 1, 0, 6, CLIENT_MAC) + payload


def loopback(payload: bytes, *, family: int = link.AF_INET, byteorder: str = "<") -> bytes:
    """A BSD loopback (NULL / LOOP) header: the address family as 4 bytes in ``byteorder``."""
    return struct.pack(byteorder + "I", family) + payload


def link_frame(
    linktype: int,
    packet: bytes,
    *,
    ethertype: int = link.ETHERTYPE_IPV4,
    vlans: Sequence[tuple[int, int]] = (),
    family: int = link.AF_INET,
    byteorder: str = "<",
) -> bytes:
    """``packet`` in a frame of ``linktype``: Ethernet with ``vlans`` and ``ethertype``, Linux cooked v1 and v2 with
    ``ethertype`` as protocol, BSD loopback (``NULL``, ``LOOP``) with ``family`` in ``byteorder``; any other link type
    carries it as it is (raw IP, or a link type the reader does not know)."""
    if linktype == link.ETHERNET:
        return ethernet(packet, ethertype=ethertype, vlans=vlans)
    if linktype == link.LINUX_SLL:
        return linux_sll(packet, protocol=ethertype)
    if linktype == link.LINUX_SLL2:
        return linux_sll2(packet, protocol=ethertype)
    if linktype in (link.NULL, link.LOOP):
        return loopback(packet, family=family, byteorder=byteorder)
    return packet


def checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071)."""
    if len(data) % 2:
        data += b"\x00"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _packed(address: str | bytes) -> bytes:
    return address if isinstance(address, bytes) else ipaddress.ip_address(address).packed


def ipv4(
    src: str | bytes,
    dst: str | bytes,
    payload: bytes,
    *,
    protocol: int = 6,
    ident: int = 0,
    ttl: int = 64,
    dont_fragment: bool = True,
    more_fragments: bool = False,
    fragment_offset: int = 0,
    options: bytes = b"",
) -> bytes:
    """An IPv4 packet with a correct header checksum; ``options`` are padded to 32 bits, ``fragment_offset`` is
    in 8-byte units."""
    options = _pad(options)
    header_length = 20 + len(options)
    flags = (0x4000 if dont_fragment else 0) | (0x2000 if more_fragments else 0) | fragment_offset
    header = struct.pack(
        "!BBHHHBBH4s4s",
        0x40 | header_length // 4,
        0,
        header_length + len(payload),
        ident,
        flags,
        ttl,
        protocol,
        0,
        _packed(src),
        _packed(dst),
    )
    header += options
    return header[:10] + struct.pack("!H", checksum(header)) + header[12:] + payload


#: IPv6 extension headers whose length counts 8-octet units beyond the first 8.
_OPTION_HEADERS: Final = frozenset({0, 43, 60, 135, 139, 140})
IPV6_HOP_BY_HOP: Final = 0
IPV6_ROUTING: Final = 43
IPV6_FRAGMENT: Final = 44
IPV6_ESP: Final = 50
IPV6_AH: Final = 51
IPV6_DESTINATION: Final = 60


def ipv6(
    src: str | bytes,
    dst: str | bytes,
    payload: bytes,
    *,
    next_header: int = 6,
    hop_limit: int = 64,
    extensions: Sequence[tuple[int, bytes]] = (),
) -> bytes:
    """An IPv6 packet; ``extensions`` are ``(header type, body after the first two bytes)``, in order, each given
    its next-header and length fields (bodies are zero-padded to the header's unit)."""
    chain = b""
    kinds = [kind for kind, _body in extensions] + [next_header]
    for (kind, body), following in zip(extensions, kinds[1:], strict=True):
        if kind == IPV6_FRAGMENT:
            chain += bytes([following, 0]) + body[:6].ljust(6, b"\x00")
            continue
        padded = body + b"\x00" * (-(len(body) + 2) % 8)
        units = (len(padded) + 2) // 4 - 2 if kind == IPV6_AH else (len(padded) + 2) // 8 - 1
        chain += bytes([following, units]) + padded
    first = kinds[0]
    header = struct.pack(
        "!IHBB16s16s", 6 << 28, len(chain) + len(payload), first, hop_limit, _packed(src), _packed(dst)
    )
    return header + chain + payload


def ipv6_fragment_header(offset: int, *, more: bool, ident: int = 1) -> bytes:
    """The body of a Fragment header (``offset`` in 8-byte units) for :func:`ipv6` extensions."""
    return struct.pack("!HI", offset << 3 | int(more), ident)


def tcp(
    src: str | bytes,
    dst: str | bytes,
    src_port: int,
    dst_port: int,
    payload: bytes = b"",
    *,
    seq: int = 0,
    ack: int = 0,
    flags: int = ACK,
    window: int = 65535,
    options: bytes = b"",
) -> bytes:
    """A TCP segment with a correct checksum over the IPv4 or IPv6 pseudo-header of ``src`` and ``dst``."""
    options = _pad(options)
    offset = (20 + len(options)) // 4
    header = struct.pack(
        "!HHIIBBHHH",
        src_port,
        dst_port,
        seq & 0xFFFFFFFF,
        ack & 0xFFFFFFFF,
        offset << 4 | (flags >> 8 & 1),
        flags & 0xFF,
        window,
        0,
        0,
    )
    segment = header + options + payload
    source, destination = _packed(src), _packed(dst)
    if len(source) == 4:
        pseudo = source + destination + struct.pack("!BBH", 0, 6, len(segment))
    else:
        pseudo = source + destination + struct.pack("!IxxxB", len(segment), 6)
    return segment[:16] + struct.pack("!H", checksum(pseudo + segment)) + segment[18:]


def ip_tcp(
    src: str | bytes,
    dst: str | bytes,
    src_port: int,
    dst_port: int,
    payload: bytes = b"",
    *,
    seq: int = 0,
    ack: int = 0,
    flags: int = ACK,
    options: bytes = b"",
) -> bytes:
    """An IPv4 or IPv6 packet (by the addresses) holding one TCP segment."""
    segment = tcp(src, dst, src_port, dst_port, payload, seq=seq, ack=ack, flags=flags, options=options)
    if len(_packed(src)) == 4:
        return ipv4(src, dst, segment)
    return ipv6(src, dst, segment)


class TcpSession:
    """Both ends of one TCP connection: builds its IP packets and keeps the sequence numbers.

    Side 0 is the client, side 1 the server. :meth:`send` advances the sender's sequence number; :meth:`segment`
    builds any segment without advancing it (for retransmissions, reordering and overlaps).
    """

    def __init__(
        self,
        client: tuple[str, int] = ("10.0.0.1", 50000),
        server: tuple[str, int] = ("10.0.0.2", 1883),
        *,
        client_isn: int = 1000,
        server_isn: int = 5000,
    ) -> None:
        self.endpoints = (client, server)
        self.isn = [client_isn & 0xFFFFFFFF, server_isn & 0xFFFFFFFF]
        self.next = [(client_isn + 1) & 0xFFFFFFFF, (server_isn + 1) & 0xFFFFFFFF]

    def handshake(self) -> list[bytes]:
        client, server = self.endpoints
        return [
            ip_tcp(client[0], server[0], client[1], server[1], seq=self.isn[0], flags=SYN),
            ip_tcp(server[0], client[0], server[1], client[1], seq=self.isn[1], ack=self.next[0], flags=SYN | ACK),
            self.segment(0),
        ]

    def segment(self, side: int, payload: bytes = b"", *, at: int = 0, flags: int = ACK) -> bytes:
        """A segment from ``side`` whose data starts ``at`` bytes after the sender's next sequence number."""
        (src, src_port), (dst, dst_port) = self.endpoints[side], self.endpoints[1 - side]
        seq = (self.next[side] + at) & 0xFFFFFFFF
        return ip_tcp(src, dst, src_port, dst_port, payload, seq=seq, ack=self.next[1 - side], flags=flags)

    def send(self, side: int, payload: bytes, *, flags: int = PSH | ACK) -> bytes:
        packet = self.segment(side, payload, flags=flags)
        self.next[side] = (self.next[side] + len(payload)) & 0xFFFFFFFF
        return packet

    def fin(self, side: int) -> bytes:
        packet = self.segment(side, flags=FIN | ACK)
        self.next[side] = (self.next[side] + 1) & 0xFFFFFFFF
        return packet

    def reset(self, side: int) -> bytes:
        return self.segment(side, flags=RST | ACK)

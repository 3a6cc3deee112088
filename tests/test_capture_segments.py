"""From captured frames to TCP segments: every link type the reader knows, IPv4 options and fragments, IPv6
extension headers, TCP options, and the reason a frame holds no segment. Frames come from the capture writer,
whose checksums are checked here too."""

from __future__ import annotations

import ipaddress
import struct
from collections import Counter

import pytest

from mqttaudit.capture import Skip, decode_segment, segments, writer
from mqttaudit.capture.link import (
    AF_INET,
    ETHERNET,
    IPV4,
    IPV6,
    LINUX_SLL,
    LINUX_SLL2,
    LOOP,
    NULL,
    RAW,
    RAW_BSD,
)
from mqttaudit.capture.segments import ACK, FIN, NS, PSH, SYN
from mqttaudit.capture.writer import IPV6_AH, IPV6_DESTINATION, IPV6_ESP, IPV6_FRAGMENT, IPV6_HOP_BY_HOP, IPV6_ROUTING

V4 = ("192.0.2.1", "198.51.100.7")
V6 = ("2001:db8::1", "2001:db8::2")
PAYLOAD = b"\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c"  # a CONNECT, as bytes


def packet(
    addresses: tuple[str, str] = V4, payload: bytes = PAYLOAD, *, flags: int = PSH | ACK, options: bytes = b""
) -> bytes:
    return writer.ip_tcp(*addresses, 50123, 1883, payload, seq=7, ack=9, flags=flags, options=options)


def expect_segment(result: object, addresses: tuple[str, str] = V4, payload: bytes = PAYLOAD) -> None:
    assert not isinstance(result, str), result
    assert isinstance(result, tuple)
    time, src, sport, dst, dport, seq, ack, flags, data = result
    assert (time, sport, dport, seq, ack, flags, data) == (42, 50123, 1883, 7, 9, PSH | ACK, payload)
    assert (src, dst) == tuple(ipaddress.ip_address(address).packed for address in addresses)


def test_ethernet_ipv4_tcp_and_its_padding() -> None:
    frame = writer.ethernet(packet(payload=b"\xc0\x00"))
    padded = frame + b"\x00" * (60 - len(frame))  # Ethernet's minimum frame: padding is not TCP data
    expect_segment(decode_segment(42, ETHERNET, padded), payload=b"\xc0\x00")


@pytest.mark.parametrize(
    "vlans",
    [[(0x8100, 10)], [(0x88A8, 100), (0x8100, 10)], [(0x9100, 5), (0x8100, 6), (0x8100, 7)]],
    ids=["802.1Q", "QinQ", "three-tags"],
)
def test_ethernet_with_vlan_tags(vlans: list[tuple[int, int]]) -> None:
    expect_segment(decode_segment(42, ETHERNET, writer.ethernet(packet(), vlans=vlans)))
    frame = writer.ethernet(packet(V6), ethertype=0x86DD, vlans=vlans)
    expect_segment(decode_segment(42, ETHERNET, frame), V6)


def test_linux_cooked_capture_v1_and_v2() -> None:
    expect_segment(decode_segment(42, LINUX_SLL, writer.linux_sll(packet())))
    expect_segment(decode_segment(42, LINUX_SLL2, writer.linux_sll2(packet())))
    expect_segment(decode_segment(42, LINUX_SLL2, writer.linux_sll2(packet(V6), protocol=0x86DD)), V6)
    tagged = writer.linux_sll(struct.pack("!HH", 12, 0x0800) + packet(), protocol=0x8100)
    expect_segment(decode_segment(42, LINUX_SLL, tagged))


@pytest.mark.parametrize("byteorder", ["<", ">"])
@pytest.mark.parametrize("linktype", [NULL, LOOP])
def test_bsd_loopback_in_either_byte_order_with_every_system_s_inet6(byteorder: str, linktype: int) -> None:
    expect_segment(decode_segment(42, linktype, writer.loopback(packet(), family=AF_INET, byteorder=byteorder)))
    for family in (10, 23, 24, 28, 30):  # Linux, Windows, NetBSD/OpenBSD, FreeBSD, macOS
        frame = writer.loopback(packet(V6), family=family, byteorder=byteorder)
        expect_segment(decode_segment(42, linktype, frame), V6)
    assert decode_segment(42, linktype, writer.loopback(packet(), family=7, byteorder=byteorder)) == Skip.NOT_IP


def test_raw_ip_link_types() -> None:
    for linktype in (RAW, RAW_BSD):
        expect_segment(decode_segment(42, linktype, packet()))
        expect_segment(decode_segment(42, linktype, packet(V6)), V6)
    expect_segment(decode_segment(42, IPV4, packet()))
    expect_segment(decode_segment(42, IPV6, packet(V6)), V6)
    assert decode_segment(42, IPV4, packet(V6)) == Skip.BAD_IP
    assert decode_segment(42, IPV6, packet()) == Skip.BAD_IP


def test_ipv4_options_move_the_tcp_header() -> None:
    segment = writer.tcp(*V4, 50123, 1883, PAYLOAD, seq=7, ack=9, flags=PSH | ACK)
    routed = writer.ipv4(*V4, segment, options=b"\x07\x07\x04" + bytes(4) + b"\x01")  # record route, a NOP
    assert (routed[0] & 0x0F) == 7
    expect_segment(decode_segment(42, RAW, routed))


def test_ipv4_total_length_zero_from_segmentation_offload_takes_the_frame_length() -> None:
    ip = bytearray(packet())
    ip[2:4] = b"\x00\x00"
    expect_segment(decode_segment(42, RAW, bytes(ip)))


def test_ipv4_fragments_are_recorded_not_guessed() -> None:
    segment = writer.tcp(*V4, 50123, 1883, PAYLOAD, seq=7, ack=9, flags=PSH | ACK)
    first = writer.ipv4(*V4, segment[:24], dont_fragment=False, more_fragments=True)
    rest = writer.ipv4(*V4, segment[24:], dont_fragment=False, fragment_offset=3)
    assert decode_segment(42, RAW, first) == Skip.FIRST_FRAGMENT
    assert decode_segment(42, RAW, rest) == Skip.FRAGMENT


def test_ipv6_extension_headers_are_walked() -> None:
    segment = writer.tcp(*V6, 50123, 1883, PAYLOAD, seq=7, ack=9, flags=PSH | ACK)
    chain = [
        (IPV6_HOP_BY_HOP, b"\x01\x04\x00\x00\x00\x00"),
        (IPV6_DESTINATION, b"\x01\x0c" + bytes(12)),
        (IPV6_ROUTING, b"\x04\x00" + bytes(4)),
        (IPV6_FRAGMENT, writer.ipv6_fragment_header(0, more=False)),  # an atomic fragment
        (IPV6_AH, bytes(14)),
    ]
    expect_segment(decode_segment(42, RAW, writer.ipv6(*V6, segment, extensions=chain)), V6)


def test_ipv6_fragments_encryption_and_other_protocols_are_skipped_with_their_reason() -> None:
    segment = writer.tcp(*V6, 50123, 1883, PAYLOAD)
    first = writer.ipv6(*V6, segment[:16], extensions=[(IPV6_FRAGMENT, writer.ipv6_fragment_header(0, more=True))])
    later = writer.ipv6(*V6, segment[16:], extensions=[(IPV6_FRAGMENT, writer.ipv6_fragment_header(2, more=False))])
    assert decode_segment(42, RAW, first) == Skip.FIRST_FRAGMENT
    assert decode_segment(42, RAW, later) == Skip.FRAGMENT
    assert decode_segment(42, RAW, writer.ipv6(*V6, bytes(24), next_header=IPV6_ESP)) == Skip.ENCRYPTED
    assert decode_segment(42, RAW, writer.ipv6(*V6, bytes(8), next_header=17)) == Skip.NOT_TCP
    assert decode_segment(42, RAW, writer.ipv6(*V6, b"", next_header=59)) == Skip.NOT_TCP
    assert decode_segment(42, RAW, writer.ipv4(*V4, bytes(8), protocol=17)) == Skip.NOT_TCP


def test_tcp_options_and_the_data_offset() -> None:
    options = b"\x02\x04\x05\xb4\x01\x03\x03\x07\x04\x02\x08\x0a" + bytes(8)  # MSS, NOP, WS, SACKOK, timestamps
    expect_segment(decode_segment(42, RAW, packet(options=options)))
    header = bytearray(packet())
    header[20 + 12] = 4 << 4  # a data offset of 16 bytes
    assert decode_segment(42, RAW, bytes(header)) == Skip.BAD_TCP


def test_every_tcp_flag_is_kept() -> None:
    result = decode_segment(42, RAW, packet(flags=SYN | FIN | NS | ACK))
    assert not isinstance(result, str)
    assert result[7] == SYN | FIN | NS | ACK


def test_cut_frames_say_which_header_was_cut() -> None:
    frame = writer.ethernet(packet())
    assert decode_segment(42, ETHERNET, frame[:10]) == Skip.TRUNCATED_LINK
    assert decode_segment(42, ETHERNET, frame[: 14 + 12]) == Skip.TRUNCATED_IP
    assert decode_segment(42, ETHERNET, frame[: 14 + 20 + 10]) == Skip.TRUNCATED_TCP
    assert decode_segment(42, ETHERNET, frame[:-3]) == Skip.TRUNCATED_PAYLOAD
    assert decode_segment(42, LINUX_SLL2, b"\x08\x00") == Skip.TRUNCATED_LINK
    assert decode_segment(42, NULL, b"\x02\x00") == Skip.TRUNCATED_LINK


def test_frames_without_a_tcp_segment() -> None:
    assert decode_segment(42, ETHERNET, writer.ethernet(bytes(28), ethertype=0x0806)) == Skip.NOT_IP
    assert decode_segment(42, ETHERNET, writer.ethernet(bytes(28), ethertype=0x05DC)) == Skip.NOT_IP  # 802.3
    assert decode_segment(42, 147, packet()) == Skip.UNSUPPORTED_LINKTYPE
    assert decode_segment(42, RAW, b"\x50" + bytes(40)) == Skip.BAD_IP
    assert decode_segment(42, RAW, b"\x44" + bytes(40)) == Skip.BAD_IP  # header length 16


def test_segments_pairs_each_segment_with_its_record_index_and_counts_the_rest() -> None:
    records = [
        (1, ETHERNET, writer.ethernet(packet()), 0, 0, 24),
        (2, ETHERNET, writer.ethernet(bytes(28), ethertype=0x0806), 0, 1, 100),
        (3, RAW, writer.ipv4(*V4, bytes(8), protocol=17), 0, 2, 200),
        (4, RAW, packet(), 0, 3, 300),
    ]
    skipped: Counter[str] = Counter()
    found = list(segments(records, skipped))
    assert [(index, segment[0]) for index, segment in found] == [(0, 1), (3, 4)]
    assert skipped == Counter({Skip.NOT_IP: 1, Skip.NOT_TCP: 1})


def test_the_writer_s_checksums_verify() -> None:
    v4 = packet()
    assert writer.checksum(v4[:20]) == 0
    pseudo = v4[12:20] + struct.pack("!BBH", 0, 6, len(v4) - 20)
    assert writer.checksum(pseudo + v4[20:]) == 0
    v6 = packet(V6)
    pseudo6 = v6[8:40] + struct.pack("!IxxxB", len(v6) - 40, 6)
    assert writer.checksum(pseudo6 + v6[40:]) == 0

"""Framing of large packets: one 16 MiB PUBLISH fed to ``StreamDecoder`` in TCP-sized pieces, and eight of them.

What is measured
    One PUBLISH of exactly ``codec.DEFAULT_MAX_PACKET_SIZE`` bytes (16 MiB, fixed header included: the largest
    packet the audit decodes by default) is fed to a ``StreamDecoder`` in 1,448-byte pieces (one TCP MSS) and in
    64 KiB pieces, and a stream of eight such packets in 1,448-byte pieces. Framing is linear when the packet
    in small pieces costs less than 2x what it costs in large pieces (the small pieces also pay for 45 times
    more calls), and eight packets no more than eight times one. A decoder that joined the pending bytes on
    every call copied the packet once per piece: about 11,600 copies of up to 16 MiB for one packet, some 40x
    the 64 KiB time. Times include the memory system: a fresh 16 MiB buffer faults its pages in, so a packet
    in a warm process (the eight-packet stream) can cost less than the first.

    The pieces are cut before the clock starts; each run checks that every packet came out whole, without a
    violation. One untimed run first (a process's first large allocations fault their pages in, which a
    long-running audit has done long before), then best of ``--repeat`` runs (wall time, ``time.perf_counter``),
    garbage collected before each.

How to reproduce
    .venv/bin/python bench/framing_bench.py                     # the installed (compiled) codec
    PYTHONPATH=src .venv/bin/python bench/framing_bench.py      # the pure-Python codec
    ``bench/codec_throughput.py`` (``make bench``) runs it too and adds its figures to its JSON.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from mqttaudit import codec

KIB = 1 << 10
MIB = 1 << 20
MSS = 1448
LARGE_PIECE = 64 * KIB
PACKETS_IN_STREAM = 8
TARGET_RATIO = 2.0
TOPIC = "bench/large/payload"


def large_publish(size: int = codec.DEFAULT_MAX_PACKET_SIZE) -> bytes:
    """The wire bytes of a QoS 0 PUBLISH of exactly ``size`` bytes."""
    length_bytes = next(n for n in (1, 2, 3, 4) if len(codec.encode_remaining_length(size - 1 - n)) == n)
    payload = size - 1 - length_bytes - 2 - len(TOPIC.encode())
    wire = codec.encode(codec.Publish(topic=TOPIC, payload=bytes(payload)))
    assert len(wire) == size, f"built {len(wire)} bytes, wanted {size}"
    return wire


def pieces(data: bytes, size: int) -> list[bytes]:
    return [data[pos : pos + size] for pos in range(0, len(data), size)]


def frame_all(chunks: Sequence[bytes], size: int) -> list[int]:
    """Feeds every piece, consuming frames as they come; returns the size of each packet framed."""
    decoder = codec.StreamDecoder("client", max_packet_size=max(size, codec.DEFAULT_MAX_PACKET_SIZE))
    feed = decoder.feed
    sizes: list[int] = []
    for chunk in chunks:
        for frame in feed(chunk):
            assert frame.packet is not None and not frame.violations, f"bad frame {frame.offset}"
            sizes.append(frame.length)
    assert not decoder.close(), "bytes left at the end of the stream"
    return sizes


@dataclass
class Case:
    name: str
    packets: int
    piece: int
    fed: int
    walls: list[float]

    @property
    def best(self) -> float:
        return min(self.walls)


def measure(name: str, wire: bytes, piece: int, size: int, repeat: int) -> Case:
    """Times framing ``wire`` (whole packets of ``size`` bytes) fed in ``piece``-byte pieces."""
    chunks = pieces(wire, piece)
    packets = len(wire) // size
    walls: list[float] = []
    frame_all(chunks, size)  # untimed: the first large allocations of a process fault their pages in
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        sizes = frame_all(chunks, size)
        walls.append(time.perf_counter() - start)
        assert sizes == [size] * packets, f"{name}: framed {len(sizes)} packets, expected {packets}"
    print(f"  {name}: best {min(walls):.3f} s, median {statistics.median(walls):.3f} s", file=sys.stderr)
    return Case(name, packets, piece, len(wire), walls)


def run(repeat: int = 3, size: int = codec.DEFAULT_MAX_PACKET_SIZE) -> dict[str, object]:
    """Runs the cases, prints them as Markdown and returns them for a JSON report."""
    wire = large_publish(size)
    mib = size >> 20
    small = measure(f"one {mib} MiB PUBLISH, {MSS:,}-byte pieces", wire, MSS, size, repeat)
    large = measure(f"one {mib} MiB PUBLISH, {LARGE_PIECE // KIB} KiB pieces", wire, LARGE_PIECE, size, repeat)
    eight = measure(
        f"{PACKETS_IN_STREAM} x {mib} MiB PUBLISH, {MSS:,}-byte pieces",
        wire * PACKETS_IN_STREAM,
        MSS,
        size,
        max(1, repeat - 1),
    )
    pieces_ratio = small.best / large.best
    per_packet = eight.best / PACKETS_IN_STREAM / small.best
    build = "compiled (mypyc)" if codec.COMPILED else "pure Python"
    print(f"## Framing of large packets (codec build: {build})\n")
    print("| case | packets | wall s (best) | MiB/s |")
    print("|---|---:|---:|---:|")
    for case in (small, large, eight):
        print(f"| {case.name} | {case.packets} | {case.best:.3f} | {case.fed / MIB / case.best:,.0f} |")
    met = "met" if pieces_ratio < TARGET_RATIO else "NOT MET"
    label = f"{MSS:,}-byte / {LARGE_PIECE // KIB} KiB pieces"
    print(f"\n- {label}: {pieces_ratio:.2f}x (target < {TARGET_RATIO:g}x: {met})")
    print(f"- {PACKETS_IN_STREAM} packets / ({PACKETS_IN_STREAM} x one packet): {per_packet:.2f}x (linear: <= ~1)")
    print(
        f"\nA decoder that copies its pending bytes on every call is quadratic in the packet (about 40x here at"
        f" 16 MiB). The ratio also holds the fixed cost of {LARGE_PIECE // MSS}x more calls."
    )
    return {
        "codec_build": "compiled" if codec.COMPILED else "pure-python",
        "packet_bytes": size,
        "cases": [
            {"case": c.name, "packets": c.packets, "piece_bytes": c.piece, "wall_s": round(c.best, 6)}
            for c in (small, large, eight)
        ],
        "small_over_large_pieces": round(pieces_ratio, 3),
        "eight_over_eight_times_one": round(per_packet, 3),
        "target": f"small/large pieces < {TARGET_RATIO:g}x",
        "met": pieces_ratio < TARGET_RATIO,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each case (default 3)")
    parser.add_argument("--mib", type=int, default=16, help="packet size in MiB (default 16)")
    args = parser.parse_args(argv)
    if args.repeat < 1 or not 1 <= args.mib <= 255:
        parser.error("--repeat must be positive and --mib within 1..255 (the largest MQTT packet is 256 MiB)")
    run(args.repeat, args.mib << 20)
    return 0


if __name__ == "__main__":
    sys.exit(main())

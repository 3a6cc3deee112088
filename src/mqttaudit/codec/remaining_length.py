"""Remaining Length: the variable-length integer of the fixed header (section 2.2.3, as corrected by Errata 01).

Up to four bytes, seven bits each, least significant first; a set top bit means another byte follows. The largest
value is 268,435,455 (0xFF 0xFF 0xFF 0x7F). A fifth byte is never allowed.
"""

from __future__ import annotations

from typing import Final

from .buffer import BytesLike, to_bytes
from .errors import EncodeError

MAX_REMAINING_LENGTH: Final = 268_435_455
MAX_BYTES: Final = 4

#: Returned as the end position by :func:`read_remaining_length`.
NEED_MORE: Final = -1
TOO_LONG: Final = -2


def read_remaining_length(data: BytesLike, pos: int, end: int) -> tuple[int, int]:
    """Reads the Remaining Length starting at ``data[pos]``.

    Returns ``(value, next_pos)``; ``(0, NEED_MORE)`` when ``data[:end]`` stops before the last length byte;
    ``(value_so_far, TOO_LONG)`` when four bytes all ask for another and a fifth byte is there.
    """
    if isinstance(data, bytes):
        return _read(data, pos, end)
    # Only the bytes it may read are converted: a caller may walk a large buffer one header at a time.
    stop = min(end, pos + MAX_BYTES + 1)
    value, next_pos = _read(to_bytes(data[pos:stop], "data"), 0, stop - pos)
    return value, next_pos + pos if next_pos >= 0 else next_pos


def _read(data: bytes, pos: int, end: int) -> tuple[int, int]:
    value = 0
    shift = 0
    for index in range(pos, min(pos + MAX_BYTES, end)):
        byte = data[index]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, index + 1
        shift += 7
    if end - pos > MAX_BYTES:
        return value, TOO_LONG
    return 0, NEED_MORE


def is_shortest(value: int, size: int) -> bool:
    """True when ``value`` written in ``size`` bytes uses no more bytes than it needs (no trailing 0x80 0x00)."""
    return size == 1 or value >= 1 << (7 * (size - 1))


def encoded_size(value: int) -> int:
    """Bytes of the Variable Byte Integer holding ``value`` (1 to 4 within the Remaining Length's range; more for a
    larger value, as a size computation past the range may ask)."""
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def encode_remaining_length(value: int) -> bytes:
    if not 0 <= value <= MAX_REMAINING_LENGTH:
        raise EncodeError(f"Remaining Length {value} does not fit in four bytes (maximum {MAX_REMAINING_LENGTH})")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)

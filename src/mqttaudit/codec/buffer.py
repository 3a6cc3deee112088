"""A bounded read cursor over bytes: typed reads that fail cleanly and leave the position unchanged; and the one
conversion every entry point applies to the bytes it is given."""

from __future__ import annotations

from typing import TypeAlias

from .errors import BufferUnderrun

#: What the codec accepts wherever it takes bytes. Each entry point converts once, so both builds accept the same.
BytesLike: TypeAlias = bytes | bytearray | memoryview


def to_bytes(data: BytesLike, what: str) -> bytes:
    """``data`` as ``bytes`` (itself when it already is); anything else than the three bytes-like types is a
    ``TypeError`` naming ``what``, as ``bytes(5)`` would silently make five zero bytes."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"{what} must be bytes, bytearray or memoryview, not {type(data).__name__}")


def wire_string(text: str) -> bytes:
    """UTF-8 bytes of ``text``; lone surrogates U+DC80..U+DCFF stand for the raw bytes they escaped (PEP 383)
    and other lone surrogates are written as their (ill-formed) three-byte forms, so invalid strings survive."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        out = bytearray()
        for char in text:
            code = ord(char)
            if 0xDC80 <= code <= 0xDCFF:
                out.append(code - 0xDC00)
            else:
                out += char.encode("utf-8", "surrogatepass")
        return bytes(out)


class Buffer:
    """Reads big-endian integers and byte strings from ``data[start:end]``.

    A read that would cross ``end`` raises :class:`BufferUnderrun` and does not move the position, so a caller
    can report where the data ran out, or roll back and wait for more.
    """

    __slots__ = ("_data", "_end", "_pos")

    def __init__(self, data: BytesLike, start: int = 0, end: int | None = None) -> None:
        self._data = data if isinstance(data, bytes) else to_bytes(data, "Buffer data")
        self._pos = start
        self._end = len(data) if end is None else end

    @property
    def data(self) -> bytes:
        """The whole underlying bytes (positions count from their start)."""
        return self._data

    @property
    def end(self) -> int:
        """The position reads stop at."""
        return self._end

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int) -> None:
        self._pos = pos

    def remaining(self) -> int:
        return self._end - self._pos

    def eof(self) -> bool:
        return self._pos >= self._end

    def pull_uint8(self) -> int:
        pos = self._pos
        if pos >= self._end:
            raise BufferUnderrun(pos, 1, 0)
        self._pos = pos + 1
        return self._data[pos]

    def pull_uint16(self) -> int:
        pos = self._pos
        if pos + 2 > self._end:
            raise BufferUnderrun(pos, 2, self._end - pos)
        self._pos = pos + 2
        data = self._data
        return (data[pos] << 8) | data[pos + 1]

    def pull_bytes(self, length: int) -> bytes:
        pos = self._pos
        if pos + length > self._end:
            raise BufferUnderrun(pos, length, self._end - pos)
        self._pos = pos + length
        return self._data[pos : pos + length]

    def pull_rest(self) -> bytes:
        pos = self._pos
        self._pos = self._end
        return self._data[pos : self._end]

"""A bounded read cursor over bytes: typed reads that fail cleanly and leave the position unchanged."""

from __future__ import annotations

from .errors import BufferUnderrun


class Buffer:
    """Reads big-endian integers and byte strings from ``data[start:end]``.

    A read that would cross ``end`` raises :class:`BufferUnderrun` and does not move the position, so a caller
    can report where the data ran out, or roll back and wait for more.
    """

    __slots__ = ("_data", "_end", "_pos")

    def __init__(self, data: bytes, start: int = 0, end: int | None = None) -> None:
        self._data = data
        self._pos = start
        self._end = len(data) if end is None else end

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

"""The capture layer's errors: a file that is not a capture, or whose structure breaks at a known offset."""

from __future__ import annotations


class CaptureError(Exception):
    """A capture file cannot be read on: not a pcap/pcapng file, or a header that contradicts itself.

    ``source`` names the file and ``offset`` is the byte offset in it of the header at fault.
    """

    def __init__(self, source: str, offset: int, detail: str) -> None:
        super().__init__(f"{source}: offset {offset}: {detail}")
        self.source = source
        self.offset = offset
        self.detail = detail

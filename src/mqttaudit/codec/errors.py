"""The codec's own errors and the violation record every check produces."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule: its id, the byte offset in the decoded input (or encoded output), and what was seen.

    ``rule`` is the statement id of the version the bytes were read in; ``key`` the rule's version-independent
    key (see :mod:`mqttaudit.spec.identity`) when that differs, so that checks above the codec compare keys."""

    rule: str
    offset: int
    detail: str
    key: str = field(default="", compare=False)

    @property
    def rule_key(self) -> str:
        """The rule's key: the same in every version that states it."""
        return self.key or self.rule


class CodecError(Exception):
    """Base of every error the codec raises; nothing else ever escapes it."""


class BufferUnderrun(CodecError):
    """A read needed more bytes than the buffer holds; the read position is left unchanged."""

    def __init__(self, offset: int, needed: int, available: int, what: str = "", *, reported: bool = False) -> None:
        super().__init__(f"{what or 'a field'} needs {needed} byte(s), {available} remain")
        self.offset = offset
        self.needed = needed
        self.available = available
        self.what = what
        #: The reader found and reported why the packet ended early (a Property Length past its end): the fields
        #: that should have followed are not missing on their own account.
        self.reported = reported


class ProtocolViolation(CodecError):
    """A packet breaks a rule: raised by strict decoding and by validating encoders.

    ``rule`` is the statement id (``MQTT-4.7.3-1``), ``offset`` the byte offset where it shows, ``detail`` what
    was seen. ``violations`` holds every violation found in the packet, the raised one first, and ``packet`` the
    best-effort packet (None when the bytes could not be framed). A stream decoder also sets ``frames``: the frames
    it completed in that call, the offending one last.
    """

    def __init__(
        self,
        violation: Violation,
        *,
        violations: tuple[Violation, ...] = (),
        packet: object | None = None,
        frames: tuple[object, ...] = (),
    ) -> None:
        super().__init__(f"{violation.rule} at offset {violation.offset}: {violation.detail}")
        self.violation = violation
        self.rule = violation.rule
        self.offset = violation.offset
        self.detail = violation.detail
        self.violations = violations or (violation,)
        self.packet = packet
        self.frames = frames


class EncodeError(CodecError, ValueError):
    """A packet holds a value its wire format cannot express at all (a 70,000-byte string, QoS 4, ...)."""

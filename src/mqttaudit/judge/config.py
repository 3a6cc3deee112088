"""How patient the judge is: the time limits that turn "not yet" into "did not"."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class JudgeConfig:
    #: Seconds a receiver may take to close the connection after a protocol violation, after refusing a
    #: connection, or (client) after sending DISCONNECT.
    close_grace: float = 5.0
    #: Seconds a receiver may take to answer a request (CONNACK, PUBACK, PUBREC, PUBREL, PUBCOMP, SUBACK,
    #: UNSUBACK, PINGRESP) and a server to deliver a message it accepted. The spec sets no limit: past this one
    #: the judge reports the answer as missing.
    answer_timeout: float = 5.0
    #: Seconds past its deadline a delivered copy may still be matched to a message it repeats (the late window): a
    #: copy observed later than a message's deadline plus this is no copy of it (the message, if owed, is missing,
    #: unless such a copy comes later on its session: MQTT sets no time limit on delivery, so it is then not
    #: assessable; the copy breaks no rule of it). A replay that forgets messages holds each this long past its
    #: deadline; every check of the routing replay that looks back over deliveries is bounded by it (see
    #: :mod:`.stream`).
    late_window: float = 60.0
    #: Per connection, how many messages owed and missing (no copy within the late window) the routing replay holds
    #: until the connection's session ends, for a copy that comes later (its rules are then not assessable: MQTT
    #: sets no time limit on delivery). A connection's missing messages past this many are reported missing at once,
    #: and their findings say so.
    late_copies_held: int = 1000
    #: The server must drop a client silent for this many Keep Alive periods [MQTT-3.1.2-24].
    keep_alive_factor: float = 1.5
    #: Timer granularity allowed on top of every Keep Alive limit, for both sides.
    keep_alive_slack: float = 1.0
    #: Protocol Levels the server is known to support; a CONNECT with another level must be refused with
    #: CONNACK 0x01 [MQTT-3.1.2-2]. A supported level 5 is judged against MQTT 5.0; another supported level other
    #: than 4 is another specification and is not judged.
    supported_protocol_levels: frozenset[int] = field(default_factory=lambda: frozenset({4}))
    #: The version a connection speaks until its CONNECT says otherwise ("3.1.1" or "5.0"): the prober's own, for a
    #: connection it opens with another packet on purpose (its findings cite that version's statements).
    opening_version: str = "3.1.1"
    #: The times are a capture's, seconds since the epoch: details name them as UTC times. Otherwise (the prober's
    #: clock) they count from the start of the observation, and details give those seconds.
    wall_clock: bool = False

    def __post_init__(self) -> None:
        for name in ("close_grace", "answer_timeout", "keep_alive_slack", "late_window"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        if self.late_copies_held < 0:
            raise ValueError("late_copies_held must not be negative")
        if self.keep_alive_factor < 1:
            raise ValueError("keep_alive_factor must be at least 1")
        if self.opening_version not in ("3.1.1", "5.0"):
            raise ValueError(f"opening_version is 3.1.1 or 5.0, not {self.opening_version!r}")

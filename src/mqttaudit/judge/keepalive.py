"""Keep Alive (3.1.2.10): the client is never silent for longer than Keep Alive [MQTT-3.1.2-23], and the server
drops a client silent for one and a half times Keep Alive [MQTT-3.1.2-24]. In MQTT 5.0 the Keep Alive is the
Server Keep Alive of the CONNACK when there is one, else the client's own, which the server then keeps to
[MQTT-3.2.2-22]."""

from __future__ import annotations

from typing import Final

from mqttaudit.codec import Direction
from mqttaudit.codec.properties import first
from mqttaudit.spec import identity

from . import lifecycle, reasons, rules
from .connection import SERVER_KEEP_ALIVE, Connection
from .context import Context, Seen
from .events import Quiet
from .obligations import Obligation, OnClose
from .violations import Offences

CLIENT: Final = Direction.FROM_CLIENT
SERVER: Final = Direction.FROM_SERVER


class KeepAlive:
    def __init__(self, ctx: Context, connection: Connection, offences: Offences) -> None:
        self._ctx = ctx
        self._connection = connection
        self._offences = offences
        self._last: Seen | None = None  # the client's last packet since its CONNECT
        self._reported = False  # the silence since _last was reported already
        self._decided = False  # some silence was judged
        self._due: Obligation | None = None
        self._armed_after_connack = False  # the server's deadline was set with the CONNACK's Keep Alive known

    def period(self) -> float:
        """The Keep Alive in force: 0 before an acceptable CONNECT, after a refusal, after DISCONNECT, and once
        the client broke a rule (the server must close for that reason instead)."""
        connection = self._connection
        connect = connection.connect
        if (
            connect is None
            or not connection.connect_valid
            or connection.refused_at is not None
            or connection.disconnect_seen is not None
            or self._offences.by(CLIENT) is not None
        ):
            return 0.0
        return float(connection.keep_alive)

    def lost(self, reason: str, event: int, time: float) -> None:
        """Client bytes went unobserved (event ``event``): its silence can no longer be measured, on either side's
        duty."""
        self._last = None
        if self._due is not None:
            self._ctx.obligations.drop(self._due, reason)
            self._due = None
        self._ctx.ledger.undecided(rules.CLIENT_KEEP_ALIVE, reason, side=CLIENT, event=event, time=time)

    def on_client(self, seen: Seen) -> None:
        """The client spoke (its silence was judged by :meth:`gap`): the server's deadline starts again."""
        if self._connection.connect_seen is not None:
            self._last, self._reported = seen, False
        self._arm()

    def after_event(self) -> None:
        """Withdraws the server's duty once the Keep Alive no longer applies."""
        if self._due is not None and not self.period():
            self._ctx.obligations.drop(self._due)
            self._due = None
        if self._due is not None and self._connection.connack is not None and not self._armed_after_connack:
            self._arm()  # 5.0: the CONNACK may set the Keep Alive (Server Keep Alive) [MQTT-3.2.2-21]

    def gap(self, seen: Seen) -> None:
        """[MQTT-3.1.2-23] The silence that a client packet ends is at most the Keep Alive."""
        if self._too_long(seen.time, seen.event) is False:
            self._decided = True
            self._ctx.ledger.held(rules.CLIENT_KEEP_ALIVE)

    def silence(self, time: float, event: int) -> None:
        """A silence still going on at ``time`` may already be too long."""
        self._too_long(time, event)

    def end(self, time: float, event: int, quiet: Quiet | None = None) -> None:
        """The silence at the end counts only when too long; a conversation that never saw a whole Keep Alive
        period decided nothing. A capture's connection not seen closing went on unobserved after ``quiet.time``:
        neither side's Keep Alive duty can be judged past it."""
        last = self._last
        if quiet is not None and quiet.capture_end is not None and last is not None and self.period():
            if self._too_long(time, event) is False:
                self._unobserved(last, quiet.time, quiet.capture_end)
            return
        if self._too_long(time, event) is False and not self._decided and self.period():
            self._ctx.ledger.undecided(
                rules.CLIENT_KEEP_ALIVE,
                reasons.reason(reasons.TOO_SHORT, "no whole Keep Alive period was observed"),
                side=CLIENT,
                event=event,
                time=time,
            )

    def _unobserved(self, last: Seen, seen_until: float, capture_end: float) -> None:
        """The client's Keep Alive past the end of a capture's observation of the connection: not assessable (the
        server's duty is settled with the other open obligations)."""
        period = self.period()
        due = last.time + period + self._ctx.config.keep_alive_slack
        owed = f"before the client had to send a packet (Keep Alive {period:g} s)"
        why = reasons.unseen(last.time, due, seen_until, capture_end, last.event, owed)
        self._ctx.ledger.undecided(rules.CLIENT_KEEP_ALIVE, why, side=CLIENT, event=last.event, time=last.time)

    def _too_long(self, time: float, event: int) -> bool | None:
        """None when no Keep Alive applies or the silence was reported already."""
        period = self.period()
        last = self._last
        if not period or last is None or self._reported:
            return None
        silence = time - last.time
        if silence <= period + self._ctx.config.keep_alive_slack:
            return False
        self._reported = self._decided = True
        self._ctx.ledger.fail(
            rules.CLIENT_KEEP_ALIVE,
            CLIENT,
            time,
            event,
            f"the client sent nothing for {reasons.elapsed(silence)} after {last.describe()}; "
            f"Keep Alive is {period:g} s",
            "the client sends a packet (PINGREQ if nothing else) within each Keep Alive period",
        )
        return True

    def _arm(self) -> None:
        """[MQTT-3.1.2-24] Restarts the server's deadline from the client's latest packet."""
        if self._due is not None:
            self._ctx.obligations.drop(self._due)
            self._due = None
        period, last = self.period(), self._last
        if not period or last is None:
            return
        config = self._ctx.config
        limit = config.keep_alive_factor * period
        connection = self._connection
        connack = connection.connack
        self._armed_after_connack = connack is not None
        # [MQTT-3.2.2-22] No Server Keep Alive in the CONNACK: the server keeps to the client's Keep Alive.
        own = connack is not None and first(connack.properties, SERVER_KEEP_ALIVE) is None
        enforces = (lifecycle.CLIENT_KEEP_ALIVE_APPLIES,) if own and connection.version == identity.V5 else ()
        self._due = self._ctx.obligations.open(
            Obligation(
                rules.SERVER_DROPS_SILENT_CLIENT,
                SERVER,
                last.event,
                last.time,
                last.time + limit + config.keep_alive_slack,
                lambda: (
                    f"close the connection of a client silent for {limit:g} s (Keep Alive {period:g} s)",
                    f"the server disconnects a client that sends nothing for {config.keep_alive_factor:g} times "
                    "its Keep Alive",
                ),
                OnClose.FULFILS,
                exercised_after=last.time + period,
                answers=False,
                enforces=enforces,
            )
        )

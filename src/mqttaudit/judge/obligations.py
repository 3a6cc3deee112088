"""Deadlines: what one side owes the other by when, and how later events settle it.

An obligation is opened by an event (a request, a violation, a refusal) and settled by an answer (fulfilled),
by the connection closing (depending on :class:`OnClose`), or by evidence that the connection was still open
after the deadline: a later event, or a :class:`~mqttaudit.judge.events.Quiet` at or past it (a finding).
Whatever is still open when observation ends is not assessable. A close the owing side is not bound to make (an
MQTT 5.0 receiver not bound to detect the defect) is watched the same way, and missing it is leniency, not a finding.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass

from mqttaudit.codec import Direction

from . import reasons
from .events import Closed, Quiet
from .sides import peer, side_name
from .verdict import Ledger


class OnClose(enum.Enum):
    """What the owing side closing the connection before the deadline means."""

    FULFILS = "fulfils"  # the obligation is to close
    EXCUSES = "excuses"  # closing instead of answering is allowed: the rule is not assessable
    BREAKS = "breaks"  # the answer had to come before the close (CONNACK 0x01, then close)

    __hash__ = object.__hash__  # singletons compared by identity (see Direction)


@dataclass(frozen=True, slots=True)
class Lenient:
    """The owing side is not bound to detect what the close would answer (MQTT 5.0, section 4.13.1): missing the
    close is leniency under ``rule`` (the statement the packet broke, its sender's), for ``basis``."""

    rule: str
    basis: str
    #: What the packet was, for the leniency's detail.
    what: str
    #: The other rules (keys) the packet broke.
    others: tuple[str, ...] = ()
    #: Whether closing still keeps the obligation's rules (a Server's close keeps [MQTT-4.13.1-1] and the rules it
    #: detected broken; a Client's keeps nothing it is bound to).
    upholds: bool = True


@dataclass(eq=False, slots=True)
class Obligation:
    rule: str
    #: The side that owes it.
    side: Direction
    #: The event that opened it (the request, the violation, the refusal).
    event: int
    since: float
    due: float
    #: What is owed, as a verb phrase ("close the connection", "send PUBACK for PUBLISH id 7"), and what a
    #: conforming side does; or a function that says both, for the obligations opened once per packet (their text
    #: is read only when one is broken or undecided).
    text: tuple[str, str] | Callable[[], tuple[str, str]]
    on_close: OnClose
    #: A close before this time does not exercise the rule at all (Keep Alive: the client was not silent long
    #: enough for the close to be an answer to its silence).
    exercised_after: float = -math.inf
    #: Rules the awaited answer also decides (its Packet Identifier, its type): they pass with the obligation
    #: and are not assessable when it is, or when it is broken (no answer, so nothing to judge them on).
    informs: tuple[str, ...] = ()
    #: Bytes of the owing side went unobserved while it was open: the answer may be among them, so a missed
    #: deadline is not a finding (this says why).
    lost: str | None = None
    #: Rules the owing side enforces by doing what it owes (the rule a malformed packet broke, which its receiver
    #: upholds by closing): they hold, fail or stay undecided with the obligation itself.
    enforces: tuple[str, ...] = ()
    #: Owed only on an accepted connection (the server's answers to the client's requests): while the server has
    #: not accepted the connection, a missing answer is not a finding.
    needs_acceptance: bool = False
    #: The obligation answers its event, so it is not owed if the owing side never received it; False for a
    #: deadline merely counted from the event (Keep Alive: without that packet the silence began earlier).
    answers: bool = True
    #: Why a close before the answer is not a finding after all, for an obligation the close breaks: the peer
    #: broke a rule after the request, and the owing side closed on that (see :meth:`Obligations.excuse_close`).
    close_excuse: str | None = None
    #: The owing side is not bound to this close: missing it is leniency (see :class:`Lenient`), not a finding.
    lenient: Lenient | None = None

    def __init__(  # written out: the compiled build runs it natively (a generated __init__ is interpreted)
        self,
        rule: str,
        side: Direction,
        event: int,
        since: float,
        due: float,
        text: tuple[str, str] | Callable[[], tuple[str, str]],
        on_close: OnClose,
        exercised_after: float = -math.inf,
        informs: tuple[str, ...] = (),
        lost: str | None = None,
        enforces: tuple[str, ...] = (),
        needs_acceptance: bool = False,
        answers: bool = True,
        close_excuse: str | None = None,
        lenient: Lenient | None = None,
    ) -> None:
        self.rule = rule
        self.side = side
        self.event = event
        self.since = since
        self.due = due
        self.text = text
        self.on_close = on_close
        self.exercised_after = exercised_after
        self.informs = informs
        self.lost = lost
        self.enforces = enforces
        self.needs_acceptance = needs_acceptance
        self.answers = answers
        self.close_excuse = close_excuse
        self.lenient = lenient

    @property
    def decided(self) -> tuple[str, ...]:
        """Every rule settled with the obligation, its own first (none for a close that keeps nothing)."""
        if self.lenient is not None and not self.lenient.upholds:
            return ()
        return (self.rule, *self.enforces)

    @property
    def limit(self) -> float:
        return self.due - self.since

    @property
    def owed(self) -> str:
        return self._text()[0]

    @property
    def expected(self) -> str:
        return self._text()[1]

    def _text(self) -> tuple[str, str]:
        text = self.text
        return text if isinstance(text, tuple) else text()


class Obligations:
    """The open obligations of one conversation; every settlement is recorded in the ledger."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._open: list[Obligation] = []
        #: Why the server is not known to have accepted the connection (None once it did, or when that is
        #: presumed): answers that need an accepted connection are not assessable meanwhile.
        self.not_accepted: str | None = None
        #: Events whose bytes the receiver's TCP never acknowledged: their sender, and why that matters.
        self._unreceived: dict[int, tuple[Direction, str]] = {}

    def unreceived(self, event: int, sender: Direction, reason: str) -> None:
        """The receiver never acknowledged event ``event``: it may never have received it, so owed it nothing."""
        self._unreceived[event] = (sender, reason)

    def open(self, obligation: Obligation) -> Obligation:
        self._open.append(obligation)
        return obligation

    def fulfil(self, obligation: Obligation) -> None:
        """The owing side did what it owed in time (an answer after a missed deadline was already reported)."""
        if obligation in self._open:
            self._open.remove(obligation)
            for rule in (*obligation.decided, *obligation.informs):
                self._ledger.held(rule, obligation.side)

    def drop(self, obligation: Obligation, reason: str | None = None) -> bool:
        """Withdraws an obligation: not assessable for ``reason``, or silently when it never applied. Returns
        whether it was still open."""
        if obligation not in self._open:
            return False
        self._open.remove(obligation)
        if reason is not None:
            self._undecided(obligation, reason)
        return True

    def mark_lost(self, side: Direction, reason: str) -> None:
        """Bytes ``side`` sent went unobserved: what it owes now may have been sent in them."""
        for obligation in self._open:
            if obligation.side is side:
                obligation.lost = reason

    def excuse_close(self, side: Direction, reason: str) -> None:
        """The peer of ``side`` broke a rule: ``side`` may close on that before it answers what came before."""
        for obligation in self._open:
            if obligation.side is side and obligation.on_close is OnClose.BREAKS and obligation.close_excuse is None:
                obligation.close_excuse = reason

    def drop_where(self, predicate: Callable[[Obligation], bool], reason: str | None = None) -> None:
        for obligation in [o for o in self._open if predicate(o)]:
            self.drop(obligation, reason)

    def advance(self, time: float, event: int, *, quiet: bool) -> None:
        """Event ``event`` shows the connection open at ``time``: every obligation past its deadline is broken.
        A Quiet at the deadline itself counts (the grace is over); any other event must come after it."""
        for obligation in list(self._open):
            if time > obligation.due or (quiet and time >= obligation.due):
                self._open.remove(obligation)
                self._breach(obligation, time, event, f"still open {reasons.elapsed(time - obligation.since)} after it")

    def close(self, closed: Closed, event: int) -> None:
        """The connection ended: settles every open obligation."""
        for obligation in list(self._open):
            self._open.remove(obligation)
            self._settle_on_close(obligation, closed, event)

    def finish(self, now: float, quiet: Quiet | None = None) -> None:
        """Observation ended without a close or a deadline passing: whatever is open is not assessable. ``quiet``
        says where a capture's observation of the connection stopped and where the capture itself did: the
        connection went on unobserved, so a duty not yet exercised when it was last seen may have been since."""
        unobserved = quiet is not None and quiet.capture_end is not None
        for obligation in list(self._open):
            self._open.remove(obligation)
            if now >= obligation.exercised_after or unobserved:
                self._undecided(obligation, self._excuse(obligation) or self._unseen(obligation, now, quiet))

    def _unseen(self, obligation: Obligation, now: float, quiet: Quiet | None) -> str:
        """Why an obligation whose deadline lies beyond the observation is not assessable."""
        owed = f"before the {side_name(obligation.side)} had to {obligation.owed} ({obligation.limit:g} s)"
        end = None if quiet is None else quiet.capture_end
        if end is None:
            return reasons.reason(
                reasons.TOO_SHORT,
                f"observation ended {reasons.elapsed(now - obligation.since)} after event {obligation.event}, {owed}",
            )
        return reasons.unseen(obligation.since, obligation.due, now, end, obligation.event, owed)

    def _excuse(self, obligation: Obligation) -> str | None:
        """Why a missed deadline is not a finding: the owing side never received what called for the answer, it
        never accepted the connection, or its answer may be in bytes nobody captured."""
        unreceived = self._unreceived.get(obligation.event) if obligation.answers else None
        if unreceived is not None and unreceived[0] is peer(obligation.side):
            return unreceived[1]
        if obligation.needs_acceptance and self.not_accepted is not None:
            return self.not_accepted
        return obligation.lost

    def _settle_on_close(self, obligation: Obligation, closed: Closed, event: int) -> None:
        if closed.time < obligation.exercised_after:
            return
        if closed.time > obligation.due:
            closed_after = closed.time - obligation.since
            closed_text = f"the connection closed only {reasons.elapsed(closed_after)} after it"
            self._breach(obligation, closed.time, event, closed_text)
            return
        side = side_name(obligation.side)
        if closed.by is None:
            self._undecided(
                obligation,
                reasons.reason(reasons.PEER_CLOSED, "the connection closed within the limit, by a side unknown"),
            )
        elif closed.by is not obligation.side:
            self._undecided(
                obligation,
                reasons.reason(
                    reasons.PEER_CLOSED,
                    f"the {side_name(peer(obligation.side))} closed the connection "
                    f"{reasons.elapsed(closed.time - obligation.since)} after event {obligation.event}, "
                    f"before the {side} had to {obligation.owed}",
                ),
            )
        elif obligation.on_close is OnClose.FULFILS:
            for rule in obligation.decided:
                self._ledger.held(rule, obligation.side)
        elif obligation.on_close is OnClose.EXCUSES:
            self._undecided(
                obligation,
                reasons.reason(
                    reasons.CLOSED_INSTEAD,
                    f"the {side} closed the connection instead, which it may do (event {obligation.event})",
                ),
            )
        elif (excuse := self._excuse(obligation) or obligation.close_excuse) is not None:
            self._undecided(obligation, excuse)
        else:
            self._fail(
                obligation,
                closed.time,
                event,
                f"the {side} closed the connection {reasons.elapsed(closed.time - obligation.since)} after event "
                f"{obligation.event} but did not {obligation.owed} first",
            )

    def _undecided(self, obligation: Obligation, reason: str) -> None:
        for rule in (*obligation.decided, *obligation.informs):
            self._ledger.undecided(rule, reason, side=obligation.side, event=obligation.event, time=obligation.since)

    def _breach(self, obligation: Obligation, time: float, event: int, observed: str) -> None:
        excuse = self._excuse(obligation)
        if excuse is not None:
            self._undecided(obligation, excuse)
            return
        for rule in obligation.informs:
            self._ledger.undecided(
                rule,
                reasons.reason(reasons.NO_ANSWER, f"no answer to event {obligation.event}"),
                side=obligation.side,
                event=obligation.event,
                time=obligation.since,
            )
        self._fail(
            obligation,
            time,
            event,
            f"the {side_name(obligation.side)} did not {obligation.owed} within {obligation.limit:g} s of event "
            f"{obligation.event}: {observed}",
        )

    def _fail(self, obligation: Obligation, time: float, event: int, detail: str) -> None:
        lenient = obligation.lenient
        if lenient is not None:
            # One entry, shown by the packet it accepted: what it was, and how long the connection stayed open.
            self._ledger.lenient(
                lenient.rule,
                obligation.side,
                obligation.since,
                obligation.event,
                f"{lenient.what}; {detail}",
                lenient.basis,
                others=lenient.others,
            )
            return
        cause = obligation.event if obligation.event != event else -1
        # One act (the missing answer or close), one finding: its own rule, the rules it enforces failed with it.
        self._ledger.fail(
            obligation.rule,
            obligation.side,
            time,
            event,
            detail,
            obligation.expected,
            cause=cause,
            also=obligation.enforces,
        )

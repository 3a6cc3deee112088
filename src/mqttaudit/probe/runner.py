"""Runs probe cases against a live broker and turns each recorded conversation into a verdict through the judge.

Cases are independent (fresh connections, unique client ids and topics) and may run concurrently; every wait is
bounded by the timeout. A broker that stops accepting connections is reported once, and every case after that
point is inconclusive with that reason instead of failing one by one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from ..codec import Connack, Connect, Direction, ProtocolVersion
from ..codec.describe import describe_packet
from ..judge import Finding, JudgeConfig, Judgement, Leniency, judge_scenario
from ..judge.events import Closed, Event, Lost, Quiet, Sent
from ..judge.sender_violations import frame_finding
from ..judge.verdict import binds
from ..spec.registry import StatementId, rule_of
from .baseline import BaselineDiff
from .cancellation import within
from .case import Case, CaseContext, Inconclusive, NotApplicable, Target, Unreachable, login, open_target
from .connection import ProbeConnection
from .overflow import Overflow
from .preflight import REFUSED_LEVEL_3_1_1
from .profile import NO_PROFILE, BrokerProfile
from .target_url import mask_password
from .transport import Secret

PASS = "pass"
FAIL = "fail"
#: No targeted statement failed, but the broker accepted a malformed packet or a Protocol Error that it was not
#: bound to detect (MQTT 5.0 section 4.13.1): not a failure, counted apart; ``--strict`` makes it fail the run.
LENIENT = "lenient"
INCONCLUSIVE = "inconclusive"
NOT_APPLICABLE = "not-applicable"
#: Lenient last: counts written before it existed keep their places.
VERDICTS = (PASS, FAIL, INCONCLUSIVE, NOT_APPLICABLE, LENIENT)


@dataclass
class CaseResult:
    case: Case
    verdict: str
    reason: str = ""
    #: Verdict per targeted statement.
    statements: dict[str, str] = field(default_factory=dict)
    #: Findings against the broker on the case's statements (the failure), then any others the judge made.
    findings: list[Finding] = field(default_factory=list)
    other_findings: list[Finding] = field(default_factory=list)
    #: What the broker accepted that it was not bound to detect (the ``lenient`` verdict), in the order met.
    lenient: list[Leniency] = field(default_factory=list)
    connections: list[dict[str, Any]] = field(default_factory=list)
    duration: float = 0.0
    #: Every rule the judge decided in the case's conversations, targeted or not.
    assessed: list[str] = field(default_factory=list)
    #: The case could not be judged because the target was unreachable, refused the prober or went down: an
    #: error of the run, not a verdict on the broker.
    error: bool = False
    #: Findings past ``MAX_FINDINGS`` in ``findings`` and ``other_findings``: counted, not kept.
    findings_omitted: int = 0
    other_findings_omitted: int = 0
    #: Per rule of ``other_findings``, counted before the list was cut: the acts (one finding each) of the broker,
    #: and the answers or closes it owed and did not give in time (findings with a ``cause``).
    other_acts: dict[str, int] = field(default_factory=dict)
    other_owed: dict[str, int] = field(default_factory=dict)
    #: Acts after a malformed packet the prober sent on purpose and the broker did not close on (the case's own
    #: failure): they follow from the broker's reading of that packet, not the judge's, so they are listed apart.
    other_after: dict[str, int] = field(default_factory=dict)
    #: Per connection, the event of the prober's first malformed packet (a negative case's stimulus).
    malformed_at: dict[str, int] = field(default_factory=dict)
    #: The prober itself failed on this case (a bug of mqttaudit): the exception and where it was raised, in one
    #: line. The case is an ``error``, inconclusive, and nothing of its conversations is judged.
    crash: str | None = None

    @property
    def case_id(self) -> str:
        return self.case.id

    @property
    def cited(self) -> tuple[str, ...]:
        """The statements the result speaks of: the case's, then any other its findings fail (a MUST the broker
        broke by an act of its own during the case, see :func:`fail_on_acts`)."""
        return tuple(
            dict.fromkeys((*self.case.statements, *(rule for finding in self.findings for rule in finding.rules)))
        )

    def evidence(self) -> dict[str, Any]:
        return {
            "connections": self.connections,
            "findings": [finding_to_dict(f) for f in self.findings],
            "findings_omitted": self.findings_omitted,
            "other_findings": [finding_to_dict(f) for f in self.other_findings],
            "other_findings_omitted": self.other_findings_omitted,
            "other_acts": self.other_acts,
            "other_owed": self.other_owed,
            "other_after_malformed": self.other_after,
            "lenient": [leniency_to_dict(row) for row in self.lenient],
            "statements": self.statements,
            "assessed": self.assessed,
            "reason": self.reason,
            "crash": self.crash,
            "duration_s": round(self.duration, 3),
        }


@dataclass
class ProbeRun:
    target: Target
    started: str
    results: list[CaseResult]
    duration: float
    #: Why the broker stopped being probed, when it did (it crashed or stopped accepting connections).
    broker_down: str | None = None
    #: Why the run does not judge the broker: unreachable, refused the prober, went down, or too many
    #: inconclusive cases. None for a complete run.
    incomplete: str | None = None
    #: The comparison with a previous run's findings.json, when one was given.
    baseline: BaselineDiff | None = None
    #: Leniency fails the run (``--strict``, or ``strict = true`` in the broker profile).
    strict: bool = False
    #: Protocol version ("3.1.1", "5.0") -> why the broker does not speak it: every case of that version is not
    #: applicable for that one reason (see :func:`mqttaudit.probe.preflight.versions_unspoken`).
    unspoken: dict[str, str] = field(default_factory=dict)

    def count(self, verdict: str) -> int:
        return sum(1 for result in self.results if result.verdict == verdict)


@dataclass
class _Health:
    """Shared by the cases of one run: whether the broker still accepts connections."""

    down: str | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


#: Cases run at once by default. Most of a case is waiting (for an answer, a close, a deadline), so many run side by
#: side: 32 cases hold about 60 connections, which a broker on loopback or a LAN takes easily, and the whole 3.1.1
#: library runs in under half a minute against a broker that answers at once.
DEFAULT_CONCURRENCY = 32


async def run_probe(
    target: Target,
    cases: Sequence[Case],
    *,
    timeout: float = 2.0,
    concurrency: int = DEFAULT_CONCURRENCY,
    progress: Callable[[CaseResult], None] | None = None,
    profile: BrokerProfile = NO_PROFILE,
) -> ProbeRun:
    """Runs ``cases`` against ``target``, at most ``concurrency`` at a time; results keep the order of ``cases``;
    the phases of :func:`phases`, one after the other. ``profile`` is what the operator declared about the broker
    (see :mod:`~mqttaudit.probe.profile`)."""
    run_id = secrets.token_hex(4)  # topics of concurrent runs against one broker never meet
    started = datetime.now(UTC).isoformat(timespec="seconds")
    clock0 = time.monotonic()
    health = _Health()
    limit = asyncio.Semaphore(max(1, concurrency))

    async def one(case: Case) -> CaseResult:
        async with limit:
            result = await run_case(case, target, timeout=timeout, run_id=run_id, health=health, profile=profile)
        if progress is not None:
            progress(result)
        return result

    done: dict[int, CaseResult] = {}

    async def together(batch: Sequence[Case]) -> None:
        done.update(
            zip((id(case) for case in batch), await asyncio.gather(*(one(case) for case in batch)), strict=True)
        )

    async def one_by_one(batch: Sequence[Case]) -> None:
        for case in batch:
            done[id(case)] = await one(case)

    for batch, side_by_side in phases(cases):
        await (together(batch) if side_by_side else one_by_one(batch))
    results = [done[id(case)] for case in cases]
    return ProbeRun(target, started, results, time.monotonic() - clock0, health.down)


def phases(cases: Sequence[Case]) -> list[tuple[list[Case], bool]]:
    """The phases of a run, in order: each batch of ``cases`` (in their order) and whether its cases run side by
    side (else one at a time). Empty batches are left out.

    1. Every case that needs nothing of its own, side by side.
    2. The cases that leave retained messages (``Case.alone``): some brokers send every retained message they hold
       to every client right after CONNACK, and keep some that a zero-byte retained PUBLISH should clear (amqtt
       0.12.1), so nothing else runs beside them. The MQTT 5.0 ones run side by side with each other: each decides
       its statements by the deliveries of its own topics, under subscriptions to its own topics, which another
       case's retained message pushed to every client can neither make nor break. The 3.1.1 ones then run one at a
       time, in library order (two of them judge any delivery at all against its subscription [MQTT-3.3.2-3]), so
       each gets the verdict it gets alone.
    3. The timing cases (``Case.timing``: Keep Alive, Wills after a drop, Will Delay, expiry), after every other,
       so that none is judged, pass or fail, while the other cases' traffic keeps the broker busy (or awake): side
       by side with each other only; the MQTT 5.0 ones together, those that leave retained messages included (as
       in 2), then the 3.1.1 ones, those that leave retained messages one at a time.
    4. The quiet ones (``Case.quiet``: Keep Alive, whose stimulus is silence), last, one at a time, with nothing
       beside them: another case's traffic could wake a broker that checks its timers only when traffic comes."""
    five = ProtocolVersion.V5
    ordinary = [case for case in cases if not case.timing]
    timing = [case for case in cases if case.timing and not case.quiet]
    plan = [
        ([case for case in ordinary if not case.alone], True),
        ([case for case in ordinary if case.alone and case.protocol is five], True),
        ([case for case in ordinary if case.alone and case.protocol is not five], False),
        ([case for case in timing if case.protocol is five], True),
        ([case for case in timing if not case.alone and case.protocol is not five], True),
        ([case for case in timing if case.alone and case.protocol is not five], False),
        ([case for case in cases if case.quiet], False),
    ]
    return [(batch, side_by_side) for batch, side_by_side in plan if batch]


#: A case's script is cancelled after this many timeouts, however much its broker sends; ending its connections
#: (each at most one timeout, or 1 s, to record what they hold) and its clean-up (``CLEAN_UP_TIMEOUTS``) follow.
SCRIPT_TIMEOUTS = 20
CLEAN_UP_TIMEOUTS = 4


async def run_case(
    case: Case,
    target: Target,
    *,
    timeout: float,
    run_id: str,
    health: _Health | None = None,
    profile: BrokerProfile = NO_PROFILE,
) -> CaseResult:
    """Runs one case and judges it. An exception the prober did not expect, in the case's script or in judging it,
    is a bug of mqttaudit, not a verdict on the broker: that case alone ends as an error that names the exception
    (see :func:`crashed`), its connections closed and its retained messages cleared; the run goes on."""
    health = health or _Health()
    if health.down:
        return CaseResult(case, INCONCLUSIVE, health.down, error=True)
    context = CaseContext(case, target, timeout=timeout, run_id=run_id, profile=profile)
    started = time.monotonic()
    try:
        return await _run_case(case, context, target, timeout, health, started)
    except Exception as exc:  # one case's bug never takes the run down with it
        with contextlib.suppress(Exception):
            for connection in context.connections:
                await connection.finish()
        return crashed(case, exc, context.connections, time.monotonic() - started, target)


async def _run_case(
    case: Case, context: CaseContext, target: Target, timeout: float, health: _Health, started: float
) -> CaseResult:
    stopped: tuple[str, str] | None = None
    crash: Exception | None = None
    try:
        await within(case.script(context), timeout * SCRIPT_TIMEOUTS)
    except NotApplicable as exc:
        stopped = (NOT_APPLICABLE, str(exc))
    except Unreachable as exc:
        stopped = (INCONCLUSIVE, await _check_health(target, timeout, health, case, str(exc)))
    except Inconclusive as exc:
        stopped = (INCONCLUSIVE, str(exc))
    except TimeoutError:
        stopped = (INCONCLUSIVE, f"the case did not finish within {timeout * SCRIPT_TIMEOUTS:g} s")
    except Exception as exc:  # the prober's own bug: its retained messages are still cleared below
        crash = exc
    finally:
        for connection in context.connections:
            await connection.finish()
    with contextlib.suppress(Inconclusive, NotApplicable, OSError, TimeoutError):  # clearing is best effort
        await within(context.clean_up(), timeout * CLEAN_UP_TIMEOUTS)
    if crash is not None:
        return crashed(case, crash, context.connections, time.monotonic() - started, target)
    judgement = judge_scenario(
        {connection.name: connection.events for connection in context.connections}, judge_config(case, timeout)
    )
    sent = [finding for connection in context.connections for finding in server_violations(connection)]
    result = decide(case, judgement, stopped, sent)
    refused = _refused_login(target, context.connections)
    if refused is not None and result.verdict != NOT_APPLICABLE:
        result.verdict, result.reason = INCONCLUSIVE, refused
    if case.protocol is ProtocolVersion.V5:
        unspoken = _refused_version_5(context.connections)
    else:
        unspoken = _answered_in_5_0_form(context.connections)
    if unspoken is not None:
        # A broker that does not speak 5.0 is bound by none of 5.0's statements, and one that does by none of what
        # 3.1.1 asks of a server that does not: nothing of the case is judged.
        result.verdict, result.reason = NOT_APPLICABLE, unspoken
        result.findings.clear()
        result.other_findings.clear()
        result.lenient.clear()
    capped = [connection.cap_summary() for connection in context.connections if connection.capped]
    if capped and result.verdict == INCONCLUSIVE:
        # Nothing past the bounds was judged: that, rather than each statement's own "not observed", is why.
        result.reason = "not assessable, evidence capped: " + "; ".join(capped)
    if not result.reason and result.verdict in (FAIL, INCONCLUSIVE):
        result.reason = f"the judge decided none of {', '.join(case.statements)} from the conversation"
    # One act is one finding: an act the case's failure already reports is not another violation.
    result.findings, result.other_findings = once_per_act(result.findings, result.other_findings)
    result.malformed_at = malformed_at(context.connections)
    fail_on_acts(result)
    kinds = [(finding, other_kind(finding, result.malformed_at)) for finding in result.other_findings]
    result.other_acts = count_acts(f for f, kind in kinds if kind == ACT)
    result.other_owed = count_acts(f for f, kind in kinds if kind == OWED)
    result.other_after = count_acts(f for f, kind in kinds if kind == AFTER_MALFORMED)
    result.findings_omitted = max(0, len(result.findings) - MAX_FINDINGS)
    kept = kept_findings(result.other_findings)
    result.other_findings_omitted = len(result.other_findings) - len(kept)
    result.other_findings = kept
    del result.findings[MAX_FINDINGS:]
    result.assessed = sorted(judgement.assessed)
    result.connections = [connection_evidence(connection) for connection in context.connections]
    result.duration = time.monotonic() - started
    result.error = result.verdict == INCONCLUSIVE and health.down is not None and result.reason == health.down
    return result


#: CONNACK codes that refuse a client for its credentials: 3.1.1's 0x04 and 0x05, 5.0's 0x86 and 0x87.
LOGIN_REFUSALS = {ProtocolVersion.V3_1_1: frozenset({0x04, 0x05}), ProtocolVersion.V5: frozenset({0x86, 0x87})}


def _refused_login(target: Target, connections: Sequence[ProbeConnection]) -> str | None:
    """Against a broker that wants a user name, a case that writes its own CONNECT (a defect on purpose) sends
    none, and the broker refuses it for that before it sees what the case tests: the verdict would judge the login,
    not the statement. Says so when a connection's own CONNECT (not one with the target's user name) got such a
    refusal; None otherwise, and always for an anonymous target."""
    if target.credentials is None:
        return None
    for connection in connections:
        connect = next(
            (
                event.frame.packet
                for event in connection.events
                if isinstance(event, Sent)
                and event.sender is Direction.FROM_CLIENT
                and isinstance(event.frame.packet, Connect)
            ),
            None,
        )
        if connect is None or connect.username == target.credentials.username:
            continue
        codes = LOGIN_REFUSALS.get(connection.version, frozenset())
        ack = next((packet for packet in connection.received if isinstance(packet, Connack)), None)
        if ack is not None and ack.return_code in codes:
            return (
                f"the broker refused the case's own CONNECT on {connection.name} for its credentials (CONNACK "
                f"0x{ack.return_code:02x}): the case writes that CONNECT itself, without the target's user name and "
                "password, so it cannot test its statements against a broker that wants them"
            )
    return None


def _answer_to_5_0(connection: ProbeConnection) -> bytes | None:
    """The bytes of the broker's first frame on a connection that opened with a plain MQTT 5.0 CONNECT (Protocol
    Name "MQTT": another name may be answered by another specification's rules); None otherwise, or when the broker
    sent nothing."""
    sent = [event for event in connection.events if isinstance(event, Sent)]
    connect = next((e.frame.packet for e in sent if e.sender is Direction.FROM_CLIENT), None)
    first = next((e.frame for e in sent if e.sender is Direction.FROM_SERVER), None)
    if not isinstance(connect, Connect) or connect.protocol_level != ProtocolVersion.V5.level or first is None:
        return None
    return first.raw if connect.protocol_name == "MQTT" else None


def _refused_version_5(connections: Sequence[ProbeConnection]) -> str | None:
    """Why a 5.0 case does not apply: a connection whose 5.0 CONNECT the broker answered with 3.1.1's CONNACK 0x01
    (unacceptable protocol level), which is what a broker that implements only 3.1.1 must answer [MQTT-3.1.2-2 of
    3.1.1]. Read as 5.0 those bytes are malformed, but 5.0's statements do not bind a broker that does not speak it
    (a 5.0 broker refusing the version answers 0x84 in 5.0's form, judged as such). None otherwise."""
    for connection in connections:
        if _answer_to_5_0(connection) == REFUSED_LEVEL_3_1_1:
            return (
                f"the broker does not speak MQTT 5.0: it answered the 5.0 CONNECT on {connection.name} with the "
                "3.1.1 CONNACK 20 02 00 01 (unacceptable protocol level), as a 3.1.1 broker must"
            )
    return None


def _answered_in_5_0_form(connections: Sequence[ProbeConnection]) -> str | None:
    """Why a 3.1.1 case that sends a 5.0 CONNECT does not apply: the broker answered it with a CONNACK in 5.0's form
    (Remaining Length 3 or more: a Property Length follows the Reason Code), so it reads MQTT 5.0, accepting or
    refusing by 5.0's rules; 3.1.1's [MQTT-3.1.2-2] binds a server that does not support the level. None otherwise
    (a 3.1.1 CONNACK, a close or silence: judged under 3.1.1)."""
    for connection in connections:
        raw = _answer_to_5_0(connection)
        if raw is not None and len(raw) >= 3 and raw[0] == CONNACK_BYTE and raw[1] >= CONNACK_5_0_LENGTH:
            code = raw[3] if len(raw) > 3 else None
            shown = "" if code is None else f" 0x{code:02x}"
            return (
                f"the broker speaks MQTT 5.0: it answered the 5.0 CONNECT on {connection.name} with a 5.0 CONNACK"
                f"{shown} ({raw[:8].hex(' ')}); 3.1.1 binds a server that does not support the level"
            )
    return None


#: A CONNACK's first byte, and the smallest Remaining Length of one in 5.0's form (flags, Reason Code, Property
#: Length); 3.1.1's is always 2.
CONNACK_BYTE = 0x20
CONNACK_5_0_LENGTH = 3


def judge_config(case: Case, timeout: float) -> JudgeConfig:
    """How the judge takes a case's conversations: ``timeout`` is the grace for closing and answering; a 5.0 case
    speaks to a broker that supports 5.0 (its CONNECTs are judged as 5.0, not refused as an unknown level), 5.0 from
    its first byte (a connection it opens with another packet than CONNECT included)."""
    if case.protocol is ProtocolVersion.V5:
        return JudgeConfig(
            close_grace=timeout,
            answer_timeout=timeout,
            supported_protocol_levels=frozenset({4, 5}),
            opening_version="5.0",
        )
    return JudgeConfig(close_grace=timeout, answer_timeout=timeout)


def server_violations(connection: ProbeConnection) -> list[Finding]:
    """The broker's own malformed packets: every MUST-level codec rule a frame it sent breaks (the judge judges
    the reaction to a violation; the violation itself is the codec's)."""
    findings: list[Finding] = []
    if _speaks_another_version(connection):
        return findings
    v5 = connection.version is ProtocolVersion.V5
    for index, event in enumerate(connection.events):
        if isinstance(event, Sent) and event.sender is Direction.FROM_SERVER:
            found = frame_finding(
                event.frame, event.sender, v5=v5, time=event.time, event=index, conversation=connection.name
            )
            if found is not None:
                findings.append(found)
    return findings


def _speaks_another_version(connection: ProbeConnection) -> bool:
    """The connection's CONNECT asked for a Protocol Version other than the one it is read in, or named another
    Protocol Name (an unsupported one on purpose): the server may answer in the form of any version it speaks (a 3.1.1
    CONNACK 0x01, a 5.0 CONNACK 0x84), or follow another specification [MQTT-3.1.2-1], so its bytes are held to no
    version's form."""
    for event in connection.events:
        packet = event.frame.packet if isinstance(event, Sent) else None
        if isinstance(event, Sent) and event.sender is Direction.FROM_CLIENT and isinstance(packet, Connect):
            return packet.protocol_level != connection.version.level or packet.protocol_name != "MQTT"
    return False


def level_of(rule: str) -> str:
    """MUST, SHOULD or MAY: the level of a statement of the registry (an id outside the catalogues counts as MUST,
    as the run's violations count it)."""
    entry = rule_of(rule, rule.version) if isinstance(rule, StatementId) else None
    return "MUST" if entry is None else entry.level


def fail_on_acts(result: CaseResult) -> None:
    """A MUST the broker broke by an act of its own during the case (a PUBREL with Reason Code 0x80, DUP 1 on a QoS
    0 delivery, a DISCONNECT sent to a 3.1.1 client) fails the case on the statement broken, whatever the case
    targets and however its script ended: a verdict never passes over a broken MUST. Moved from
    ``other_findings`` to ``findings``, one finding per act (see :func:`once_per_act`). Not an answer or close the
    broker owed past a deadline the case set for other statements, nor an act after a malformed packet of the
    prober that it did not close on (see :func:`other_kind`): those stay where they are."""
    acts = [
        finding
        for finding in result.other_findings
        if other_kind(finding, result.malformed_at) == ACT and level_of(finding.rule) == "MUST"
    ]
    if not acts:
        return
    folded = {id(finding) for finding in acts}
    result.other_findings = [finding for finding in result.other_findings if id(finding) not in folded]
    firsts: dict[tuple[str, int], Finding] = {}
    for finding in acts:
        firsts.setdefault((finding.conversation, finding.event), finding)
    cited, _ = once_per_act(list(firsts.values()), acts)
    for finding in cited:
        for rule in finding.rules:
            result.statements[rule] = FAIL
    stopped = "" if result.verdict in (PASS, FAIL) else f" (the case itself ended {result.verdict}: {result.reason})"
    result.findings += cited
    result.verdict = FAIL
    result.reason = _grouped(result.findings) + stopped


def once_per_act(reported: Sequence[Finding], others: Sequence[Finding]) -> tuple[list[Finding], list[Finding]]:
    """One act is one finding: of ``others``, those of an act (a connection's event) that a finding of
    ``reported`` cites already are not listed again; the statements they name join that finding's
    :attr:`~mqttaudit.judge.Finding.also`, failed with it. Returns ``reported`` so completed, and the rest of
    ``others``. An answer or close owed and not given is no act: it stays where it is."""
    first_at: dict[tuple[str, int], int] = {}
    for index, finding in enumerate(reported):
        if not owed(finding):
            first_at.setdefault((finding.conversation, finding.event), index)
    also: dict[int, list[str]] = {}
    rest: list[Finding] = []
    for finding in others:
        at = None if owed(finding) else first_at.get((finding.conversation, finding.event))
        if at is None:
            rest.append(finding)
            continue
        known = also.setdefault(at, [])
        known += [rule for rule in finding.rules if rule not in reported[at].rules and rule not in known]
    completed = [
        replace(finding, also=(*finding.also, *also[index])) if also.get(index) else finding
        for index, finding in enumerate(reported)
    ]
    return completed, rest


#: What a finding outside a case's statements is: an act of the broker, an answer or close it owed and did not
#: give in time, or an act after a malformed packet of the prober that it did not close on.
ACT, OWED, AFTER_MALFORMED = "act", "owed", "after-malformed"


def other_kind(finding: Finding, malformed: dict[str, int]) -> str:
    """Which of :data:`ACT`, :data:`OWED` and :data:`AFTER_MALFORMED` a finding outside the case's statements is,
    ``malformed`` giving the event of the prober's first malformed packet per connection."""
    if owed(finding):
        return OWED
    if finding.event > malformed.get(finding.conversation, finding.event):
        return AFTER_MALFORMED
    return ACT


def malformed_at(connections: Sequence[ProbeConnection]) -> dict[str, int]:
    """Per connection, the event of the first packet the prober sent malformed on purpose (bytes its own decoder
    finds a violation in, or cannot frame)."""
    found: dict[str, int] = {}
    for connection in connections:
        for index, event in enumerate(connection.events):
            if (
                isinstance(event, Sent)
                and event.sender is Direction.FROM_CLIENT
                and (event.frame.packet is None or event.frame.violations)
            ):
                found[connection.name] = index
                break
    return found


def owed(finding: Finding) -> bool:
    """Whether a finding is an answer or a close the broker owed and did not give in time (it has a cause), rather
    than something the broker sent or did."""
    return finding.cause >= 0


def count_acts(findings: Iterable[Finding]) -> dict[str, int]:
    """Acts per rule: one act is one finding, and the judge and the codec citing the same rule at the same event
    of the same connection are one act."""
    acts = {(f.rule, f.conversation, f.event) for f in findings}
    counts: dict[str, int] = {}
    for rule, _, _ in sorted(acts):
        counts[rule] = counts.get(rule, 0) + 1
    return counts


def kept_findings(findings: Sequence[Finding]) -> list[Finding]:
    """The first ``MAX_FINDINGS`` findings, and the first of every other rule among the rest (acts and owed
    answers apart): a rule broken only after a flood of another is still shown, never only counted."""
    kept = list(findings[:MAX_FINDINGS])
    seen = {(finding.rule, owed(finding)) for finding in kept}
    for finding in findings[MAX_FINDINGS:]:
        if (finding.rule, owed(finding)) not in seen:
            seen.add((finding.rule, owed(finding)))
            kept.append(finding)
    return kept


#: Findings a case keeps in ``findings`` and in ``other_findings``; a flooding broker may cause thousands.
MAX_FINDINGS = 10
#: Distinct observations a failure's reason names; the rest are counted.
MAX_REASONS = 5


def _grouped(findings: Sequence[Finding | Leniency], label: str = "") -> str:
    """One line per distinct observation, with every rule it breaks: "MQTT-a, MQTT-b: detail" (the first
    ``MAX_REASONS`` of them, then how many more), each rule list after ``label``."""
    by_detail: dict[str, list[str]] = {}
    for finding in findings:
        rules = by_detail.setdefault(finding.detail, [])
        broken = finding.rules if isinstance(finding, Finding) else (finding.rule,)
        rules += [rule for rule in broken if rule not in rules]
    named = list(by_detail.items())[:MAX_REASONS]
    more = len(by_detail) - len(named)
    return "; ".join(f"{label}{', '.join(rules)}: {detail}" for detail, rules in named) + (
        f"; and {more:,} more" if more else ""
    )


def decide(
    case: Case, judgement: Judgement, stopped: tuple[str, str] | None = None, sent: Sequence[Finding] = ()
) -> CaseResult:
    """The verdict of a case from the judgement of its conversations.

    ``fail`` when the judge found the broker breaking a targeted statement; else ``lenient`` when the broker
    accepted a malformed packet or Protocol Error it was not bound to detect (:class:`~mqttaudit.judge.Leniency`);
    ``pass`` when it assessed every targeted statement without such a finding; otherwise ``inconclusive``, with the
    judge's reasons. A script that stopped early (not applicable, setup failed) keeps its verdict unless the broker
    already failed or was lenient.

    Only a MUST that binds the Server can fail a case: its statements are nothing else (see
    :func:`~mqttaudit.probe.case.unjudgeable`), and a finding against the broker on a statement that binds the
    Client alone is none of the broker's (the judge makes none). A SHOULD or MAY it broke outside the case's
    statements is listed with the other findings, where it fails nothing (see :mod:`.violations`).
    """
    server = Direction.FROM_SERVER
    against = [f for f in (*judgement.findings, *sent) if f.side is server and binds(f.rule, server)]
    lenient = [row for row in judgement.lenient if row.side is server]
    # One act is one finding; a targeted statement the act broke besides the one it cites fails the case too.
    on_target = [f for f in against if any(rule in case.statements for rule in f.rules)]
    others = [f for f in against if not any(rule in case.statements for rule in f.rules)]
    per_statement: dict[str, str] = {}
    reasons: list[str] = []
    for statement in case.statements:
        if any(statement in f.rules for f in on_target):
            per_statement[statement] = FAIL
        elif statement in judgement.assessed:
            per_statement[statement] = PASS
        else:
            per_statement[statement] = INCONCLUSIVE
            why = judgement.not_assessable.get(statement, "the conversation did not exercise it")
            reasons.append(f"{statement}: {why}")
    if on_target:
        verdict, reason = FAIL, _grouped(on_target)
    elif lenient:
        verdict, reason = LENIENT, _grouped(lenient, "accepted a packet breaking ")
    elif stopped is not None:
        verdict, reason = stopped
    elif all(v == PASS for v in per_statement.values()):
        verdict, reason = PASS, ""
    else:
        verdict, reason = INCONCLUSIVE, "; ".join(reasons)
    return CaseResult(case, verdict, reason, per_statement, on_target, others, lenient)


def crashed(
    case: Case,
    exc: BaseException,
    connections: Sequence[ProbeConnection],
    duration: float,
    target: Target | None = None,
) -> CaseResult:
    """The result of a case the prober failed on: inconclusive, an ``error`` of the run, with the exception and
    where it was raised as the reason; the conversations are kept as evidence and not judged (what the prober
    meant to send next is unknown). An exception's message may quote what the prober held: the target's password
    never shows in it."""
    password = None if target is None or target.credentials is None else target.credentials.password
    summary = crash_summary(exc, password)
    result = CaseResult(
        case,
        INCONCLUSIVE,
        f"internal error of the prober (a bug of mqttaudit, please report it), nothing of the case judged: {summary}",
        {statement: INCONCLUSIVE for statement in case.statements},
        error=True,
        crash=summary,
    )
    with contextlib.suppress(Exception):  # the evidence of a broken case is a bonus, never a second crash
        result.connections = [connection_evidence(connection) for connection in connections]
    result.duration = duration
    return result


def crash_summary(exc: BaseException, password: Secret | None = None) -> str:
    """``EncodeError: Topic Alias 65536 does not fit ... (at mqttaudit/codec/properties.py:469 in _write_one <-
    ... <- mqttaudit/probe/cases/v5_limits.py:71 in _stimulus)``: the exception, the innermost frame of its
    traceback and the innermost frame of the prober's own code that led there, each file named from the package
    (never a path of the machine that ran it). ``password`` never shows in it, in any form the message quotes it
    (masked before the message's white space is collapsed, which would change a password holding some)."""
    frames = [(_source_name(f.filename), f.lineno, f.name) for f in traceback.extract_tb(exc.__traceback__)]
    shown = frames[-1:]
    probe_frames = [frame for frame in frames[:-1] if frame[0].startswith("mqttaudit/probe/")]
    if probe_frames:
        shown.append(probe_frames[-1])
    where = " <- ... <- ".join(f"{name}:{line} in {function}" for name, line, function in shown)
    text = " ".join(mask_password(str(exc), password).split()) or "(no message)"
    return f"{type(exc).__name__}: {_bounded(text)}" + (f" (at {where})" if where else "")


def _source_name(filename: str) -> str:
    """A traceback's file as the package names it (``mqttaudit/probe/runner.py``), else its base name."""
    parts = filename.replace("\\", "/").split("/")
    if "mqttaudit" in parts:
        return "/".join(parts[len(parts) - parts[::-1].index("mqttaudit") - 1 :])
    return parts[-1]


def crashes(results: Iterable[CaseResult]) -> str | None:
    """Why a run is incomplete when the prober failed on some of its cases (a bug: exit status 3), else None."""
    broken = [result.case.id for result in results if result.crash is not None]
    if not broken:
        return None
    more = len(broken) - MAX_REASONS
    named = ", ".join(broken[:MAX_REASONS]) + (f" and {more} more" if more > 0 else "")
    return (
        f"the prober failed on {len(broken)} case(s), an internal error (a bug of mqttaudit, please report it): "
        f"{named}; every other case was run and judged"
    )


async def _check_health(target: Target, timeout: float, health: _Health, case: Case, error: str) -> str:
    """After a failed connection: is the broker still there? Marks the run when it is not."""
    async with health.lock:
        if health.down:
            return health.down
        why = await broker_trouble(target, timeout)
        if why is None:
            return f"transient: {error}"
        if why.startswith("cannot connect"):
            health.down = f"the broker stopped accepting connections during case {case.id} ({error})"
        else:
            health.down = f"the broker stopped answering a CONNECT during case {case.id}: {why} (first: {error})"
        return health.down


async def broker_alive(target: Target, timeout: float) -> bool:
    """A fresh connection gets a CONNACK for a plain CONNECT within ``timeout``."""
    return await broker_trouble(target, timeout) is None


async def broker_trouble(target: Target, timeout: float) -> str | None:
    """None when a fresh connection gets a CONNACK for a plain CONNECT within ``timeout``, else what happened."""
    try:
        stream = await open_target(target, timeout)
    except Unreachable as exc:
        return str(exc)
    secret = None if target.credentials is None else target.credentials.password
    connection = ProbeConnection("health", stream, time.monotonic, timeout=timeout, secret=secret)
    try:
        client_id = "mqahealth" + f"{time.monotonic_ns() % 10**14:014d}"
        username, password = login(target)
        await connection.send(Connect(client_id=client_id, username=username, password=password))
        answered = isinstance(await connection.wait_type(Connack), Connack)
    finally:
        with contextlib.suppress(Exception):
            await connection.send(bytes((0xE0, 0x00)))
        await connection.finish()
    return None if answered else connection.missing("CONNACK")


#: Events of one connection written to findings.json (the judge saw up to ``overflow.MAX_FRAMES``; no connection
#: of the library has more than about 25 against a conforming broker); the rest are summarised.
JSON_EVENTS = 32
#: Bytes of one frame written as hex in findings.json; ``length`` says how many the frame had.
JSON_HEX_BYTES = 1024
#: Characters of JSON the events of one connection take in findings.json at most (about 25 KB, whatever the
#: broker sent); the events that do not fit are summarised like those past ``JSON_EVENTS``.
JSON_CONNECTION_BYTES = 24 * 1024


def connection_evidence(connection: ProbeConnection) -> dict[str, Any]:
    """One connection as findings.json holds it: its first ``JSON_EVENTS`` events, and when there were more (or
    the broker sent past the evidence bounds) ``omitted``: what was left out, counted, and how the connection
    ended."""
    events = connection.events
    cut = min(JSON_EVENTS, len(events) if connection.lost_at is None else connection.lost_at)
    shown: list[dict[str, Any]] = []
    size = 0
    for index, record in enumerate(events_to_dicts(events[:cut])):
        size += len(json.dumps(record))
        if size > JSON_CONNECTION_BYTES:
            cut = index
            break
        shown.append(record)
    omitted: dict[str, Any] | None = None
    if cut < len(events):
        server = Overflow()  # what the broker sent, kept or not, that findings.json does not show
        client: list[Event] = []  # what the prober sent is never summarised: it is the stimulus
        for event in events[cut:]:
            if isinstance(event, Sent) and event.sender is Direction.FROM_SERVER:
                server.add(event.time, event.frame)
            elif isinstance(event, Sent):
                client.append(event)
        server.merge(connection.overflow)
        omitted = {
            "events": len(events) - cut,
            "from_server": server.to_json(),
            "client_packets": len(client),
            "client_events": events_to_dicts(client[:JSON_EVENTS]),
            "not_recorded": connection.overflow.to_json() if connection.capped else None,
            "end": events_to_dicts(events[-1:])[0],
        }
    return {"name": connection.name, "client_id": connection.client_id, "events": shown, "omitted": omitted}


def events_to_dicts(events: Iterable[Event]) -> list[dict[str, Any]]:
    """The evidence of one connection: bytes both ways with times (at most ``JSON_HEX_BYTES`` of a frame), and
    how it ended."""
    out: list[dict[str, Any]] = []
    for event in events:
        if isinstance(event, Sent):
            frame = event.frame
            out.append(
                {
                    "t": round(event.time, 6),
                    "from": event.sender.value,
                    "offset": frame.offset,
                    "length": frame.length,
                    "hex": frame.raw[:JSON_HEX_BYTES].hex(" "),
                    "packet": None if frame.packet is None else _bounded(describe_packet(frame.packet)),
                    "violations": [
                        {"rule": v.rule, "offset": v.offset, "detail": _bounded(v.detail)}
                        for v in frame.violations[:JSON_VIOLATIONS]
                    ],
                    "violations_omitted": max(0, len(frame.violations) - JSON_VIOLATIONS),
                }
            )
        elif isinstance(event, Closed):
            out.append(
                {
                    "t": round(event.time, 6),
                    "closed_by": None if event.by is None else event.by.value,
                    "how": "rst" if event.abrupt else "fin",
                }
            )
        elif isinstance(event, Quiet):
            out.append({"t": round(event.time, 6), "quiet_until": True})
        elif isinstance(event, Lost):  # connection_evidence puts the probe's own in ``omitted``
            out.append({"t": round(event.time, 6), "lost": event.sender.value, "length": event.length})
    return out


#: Violations of one frame written to findings.json; ``violations_omitted`` counts the rest.
JSON_VIOLATIONS = 5
#: Characters of a packet's description or a violation's detail written to findings.json.
JSON_TEXT_CHARS = 1024


def _bounded(text: str) -> str:
    """``text``, cut after ``JSON_TEXT_CHARS`` characters with a note of its length."""
    if len(text) <= JSON_TEXT_CHARS:
        return text
    return text[:JSON_TEXT_CHARS] + f"... ({len(text):,} characters)"


def leniency_to_dict(row: Leniency) -> dict[str, Any]:
    """A leniency as findings.json holds it: the rule the accepted packet broke, the receiver that accepted it, and
    why that receiver was not bound to detect it (``basis``)."""
    return {
        "rule": row.rule,
        "side": row.side.value,
        "t": round(row.time, 6),
        "event": row.event,
        "detail": row.detail,
        "basis": row.basis,
        "conversation": row.conversation,
        "cause": row.cause,
    }


def finding_to_dict(finding: Finding) -> dict[str, Any]:
    return {
        "rule": finding.rule,
        "also": list(finding.also),
        "side": finding.side.value,
        "t": round(finding.time, 6),
        "event": finding.event,
        "detail": finding.detail,
        "expected": finding.expected,
        "conversation": finding.conversation,
        "kind": finding.kind,
    }

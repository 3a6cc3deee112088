"""``findings.md`` of an audit: the headline and what was audited, the violations by rule, then one section per
(rule, side) in the form of a conformance finding (summary, standard reference, expected behaviour, evidence bytes,
what it means for users), then the routing findings by kind in the same form, the clients and servers that broke
rules (each charged with its own), the connections per MQTT version and the rule instances not assessable."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from ..spec import Catalogue
from . import markdown
from .audit_data import AuditReportData, UndecidedRow
from .audit_findings import (
    LENIENCY_TEXT,
    AuditView,
    LenientFinding,
    Reference,
    RoutingGroup,
    RuleFinding,
    UndecidedGroup,
    audit_view,
    expected_of,
)
from .audit_format import (
    MAX_ROWS,
    WHOLE_IN,
    also_text,
    cause_text,
    client_label,
    count,
    evidence_is_cause,
    frame_label,
    packet_shape,
    plural,
    shown_at,
    when,
)
from .evidence import MAX_HEX_BYTES
from .markdown import fenced, left_out, prose, table
from .peer_text import cut
from .probe_markdown import SPEC

inline = functools.partial(markdown.inline, whole_in=WHOLE_IN)
code = functools.partial(markdown.code, whole_in=WHOLE_IN)

HOW_TO_READ = (
    "How to read this: each finding names the statement of the specification that was broken and the side that "
    "broke it (client or server). A violation found by the codec was seen in the bytes of one packet; one found by "
    "the judge was seen in the behaviour over the connection. A rule the traffic could not decide is *not "
    "assessable*, which is not a pass. Frames are numbered from 1 in their capture file, as Wireshark numbers them. "
    "Offsets count the bytes of one direction of the connection."
)


#: Distinct observations quoted in a finding's summary; the expected-behaviour table has every sample.
OBSERVATIONS = 3


def audit_to_markdown(data: AuditReportData, catalogue: Catalogue | None = None) -> str:
    """The whole ``findings.md`` document."""
    view = audit_view(data, catalogue)
    lines = ["# mqttaudit audit findings", "", f"**{prose(view.headline.text)}.**", ""]
    if view.headline.clean:
        lines += [
            "No rule was found broken in the audited traffic. This covers only what the captures show, and rules "
            "that could not be decided are counted apart, never as passes.",
            "",
        ]
    lines += [f"- {label}: {inline(value)}" for label, value in view.facts]
    lines += [f"- **Warning:** {prose(warning)}" for warning in view.warnings]
    lines += ["", HOW_TO_READ, "", "## Violations by rule", ""]
    if view.findings:
        lines += table(
            ("Statement", "Broken by", "Level", "Section", "What the rule says", "Found", "Count", "First seen"),
            (
                (
                    f"[{code(f.reference.label, cell=True)}](#{f.anchor})",
                    inline(f.actor),
                    inline(f.level),
                    inline(f.reference.section),
                    prose(f.reference.summary),
                    inline(", ".join(f.origins)),
                    count(f.count),
                    inline(when(f.first_time)),
                )
                for f in view.findings
            ),
        )
        lines += ["", "## Findings"]
        for finding in view.findings:
            lines += ["", *finding_section(finding, view)]
    else:
        lines.append("No violations: no client and no server broke a rule in the audited traffic.")
    lines += lenient_part(view)
    lines += ["", *routing_part(view), "", *offenders_part(view), "", *versions_part(view)]
    lines += ["", *undecided_part(view), "", *capture_part(view)]
    return "\n".join(lines) + "\n"


def finding_section(finding: RuleFinding, view: AuditView) -> list[str]:
    """The section of one (rule, side): summary, standard reference, expected behaviour, evidence, meaning."""
    lines = [
        f'<a id="{finding.anchor}"></a>',
        f"### {inline(finding.title)}",
        "",
        f"**{inline(finding.level)}**, {plural(finding.count, 'violation')}.",
        "",
        "#### Summary",
        "",
        prose(finding.summary),
        "",
        *_observed(finding),
        "#### Standard reference",
        "",
        *reference_lines([finding.reference]),
        "",
        "#### Expected behaviour",
        "",
    ]
    if finding.samples:
        lines += table(
            ("Sample", "Packet shape", "Expected", "Observed"),
            (
                (
                    f"[{sample.number}](#{sample.anchor})",
                    inline(
                        packet_shape(sample.row.get("evidence"))
                        + (": the unanswered packet" if evidence_is_cause(sample.row) else "")
                    ),
                    inline(expected_of(sample, finding)),
                    inline(sample.row["detail"]),
                )
                for sample in finding.samples
            ),
        )
    else:
        lines.append(f"Expected: {prose(finding.reference.summary)}. No sample was kept.")
    lines += ["", "#### Evidence", ""]
    if len(finding.samples) < finding.count:
        lines += [f"{count(len(finding.samples))} of {count(finding.count)} shown; the violations table has all.", ""]
    for sample in finding.samples:
        row = sample.row
        where = [
            f"capture {code(row['capture'])}",
            f"flow {code(row['flow'])}",
            inline(shown_at(row)),
            f"event {_value(row.get('event'))}",
            *([] if row.get("offset") is None else [f"stream offset {_value(row.get('offset'))}"]),
            f"at {inline(when(row.get('time')))}",
            *([inline(cause_text(row))] if cause_text(row) else []),
            *([inline(also_text(row))] if also_text(row) else []),
        ]
        found = inline(", ".join(str(part) for part in (row.get("origin"), row.get("kind")) if part))
        lines += [
            f'<a id="{sample.anchor}"></a>',
            f"**Sample {sample.number}** ({found}): {', '.join(where)}.",
            "",
        ]
        evidence = row.get("evidence")
        if evidence_is_cause(row):
            lines += ["Bytes of the unanswered packet:", ""]
        lines += (
            [*fenced(cut(str(evidence), 3 * MAX_HEX_BYTES, WHOLE_IN)), ""]
            if evidence
            else ["No bytes: the finding is about what the connection did.", ""]
        )
    lines += ["#### What it means for users", "", prose(finding.meaning)]
    return lines


def lenient_part(view: AuditView) -> list[str]:
    """The leniency: a table by rule and receiver, then one section each (nothing when there is none)."""
    if not view.lenient:
        return []
    lines = ["", "## Leniency", "", LENIENCY_TEXT, ""]
    lines += table(
        ("Rule the packet breaks", "Binds", "Accepted by", "Level", "Section", "Accepted", "Why not bound"),
        (
            (
                f"[{code(f.reference.label, cell=True)}](#{f.anchor})",
                inline(f.reference.binds_text or "-"),
                inline(f.actor),
                inline(f.reference.level),
                inline(f.reference.section),
                count(f.count),
                prose(f.basis),
            )
            for f in view.lenient
        ),
    )
    for finding in view.lenient:
        lines += ["", *lenient_section(finding)]
    return lines


def lenient_section(finding: LenientFinding) -> list[str]:
    """One (rule, receiver) of the leniency: summary, the rule the packets broke, why the receiver was not bound,
    and the samples."""
    lines = [
        f'<a id="{finding.anchor}"></a>',
        f"### {inline(finding.title)}",
        "",
        prose(finding.summary),
        "",
        "#### The rule the packet breaks",
        "",
        *reference_lines([finding.reference]),
        "",
        "#### Why the receiver was not bound to detect it",
        "",
        prose(finding.basis) or "-",
        "",
        "#### Samples",
        "",
    ]
    if len(finding.samples) < finding.count:
        lines += [f"{count(len(finding.samples))} of {count(finding.count)} shown.", ""]
    for number, row in enumerate(finding.samples, 1):
        where = [
            f"capture {code(row['capture'])}",
            f"flow {code(row['flow'])}",
            inline(shown_at(row)),
            f"event {_value(row.get('event'))}",
            f"at {inline(when(row.get('time')))}",
        ]
        lines += [f"**Sample {number}**: {', '.join(where)}: {inline(row['detail'])}", ""]
        evidence = row.get("evidence")
        if evidence:
            lines += [*fenced(cut(str(evidence), 3 * MAX_HEX_BYTES, WHOLE_IN)), ""]
    return lines


def routing_part(view: AuditView) -> list[str]:
    """The routing findings: deliveries, counts by kind, then one section per kind."""
    lines = ["## Routing findings", ""]
    deliveries = view.data.deliveries_summary
    if deliveries:
        owed = ", ".join(f"{inline(name)} {count(value)}" for name, value in deliveries.items())
        lines += [f"Deliveries the broker model worked out from the subscriptions seen: {owed}.", ""]
    if not view.routing:
        return [*lines, "No routing findings."]
    lines += table(
        ("Kind", "What went wrong", "Findings", "Shown"),
        (
            (f"[{inline(g.kind)}](#{g.anchor})", prose(g.description), count(g.count), count(len(g.samples)))
            for g in view.routing
        ),
    )
    for group in view.routing:
        lines += ["", *routing_section(group)]
    return lines


def routing_section(group: RoutingGroup) -> list[str]:
    lines = [
        f'<a id="{group.anchor}"></a>',
        f"### {inline(group.title)}",
        "",
        "#### Summary",
        "",
        prose(group.summary),
        "",
        "#### Standard reference",
        "",
        *reference_lines(group.references),
        "",
        "#### Expected behaviour",
        "",
    ]
    lines += table(
        ("Finding", "Subscriber flow", "Expected", "Observed"),
        (
            (
                f"[{sample.number}](#{sample.anchor})",
                f"{code(sample.row['flow'], cell=True)}, event {_value(sample.row.get('event'))}",
                inline(sample.row.get("expected") or "-"),
                inline(sample.row["detail"]),
            )
            for sample in group.samples
        ),
    )
    lines += [
        "",
        "#### Evidence",
        "",
        "A routing finding rests on the transcripts of the broker's connections, not on one packet: the event named is "
        "where it shows (the delivery, or the end of the subscriber's connection for one that never came). The "
        "packets table holds the bytes of every event.",
        "",
    ]
    for sample in group.samples:
        row = sample.row
        lines += [
            f'<a id="{sample.anchor}"></a>',
            f"**Finding {sample.number}** ({code(row['rule'])}): broker {code(row['broker'])}, "
            f"flow {code(row['flow'])}, event {_value(row.get('event'))}, at {inline(when(row.get('time')))}.",
            "",
        ]
    lines += ["#### What it means for users", "", prose(group.meaning)]
    return lines


def offenders_part(view: AuditView) -> list[str]:
    """The clients and the servers with the most violations, each charged only with those it committed itself."""
    data = view.data
    lines = [
        "## Top offending clients",
        "",
        "Each client is charged only with the violations it committed itself, the server's on its connections are "
        "counted against the server; it is named by its ClientId, or by its address when its ClientId was empty or "
        "no CONNECT was captured.",
        "",
    ]
    if data.top_clients:
        lines += table(
            ("Client", "Address", "Violations by the client", "Connections"),
            (
                (
                    code(client_label(row["client"], row["client_id"]), cell=True),
                    code(row["client"], cell=True),
                    count(row["violations"]),
                    count(row["connections"]),
                )
                for row in data.top_clients
            ),
        )
    else:
        lines.append("No client broke a rule.")
    lines += ["", "## Top offending servers", ""]
    if data.top_servers:
        lines += table(
            ("Server", "Violations by the server", "Connections"),
            (
                (code(row["server"], cell=True), count(row["violations"]), count(row["connections"]))
                for row in data.top_servers
            ),
        )
    else:
        lines.append("No server broke a rule.")
    return lines


def versions_part(view: AuditView) -> list[str]:
    """The connections per MQTT version and how the audit handled each, then the sample of connections with the
    version each speaks."""
    lines = ["## Protocol versions", ""]
    if not view.versions:
        lines.append("No version count was recorded.")
    else:
        lines += table(
            ("Version", "Connections", "Packets", "How the audit handled them"),
            (
                (inline(version), count(info["connections"]), count(info.get("packets")), inline(info["handling"]))
                for version, info in view.versions
            ),
        )
    rows = [row for anchor, row in view.connections if anchor]
    if rows:
        total = view.summary.get("connections")
        out_of = f" of {count(total)}" if isinstance(total, int) else ""
        lines += ["", f"### Connections ({count(len(rows))}{out_of}, the most violations first)", ""]
        lines += table(
            ("Flow", "Client", "Version", "How the audit handled it", "Packets", "Violations"),
            (
                (
                    code(row["flow"], cell=True),
                    code(client_label(row["client"], row.get("client_id")), cell=True),
                    inline(str(row.get("version") or "-")),
                    inline(str(row.get("handling") or "-")),
                    count(row.get("packets")),
                    count(row.get("violations")),
                )
                for row in rows
            ),
        )
    return lines


def undecided_part(view: AuditView) -> list[str]:
    """The rule instances not assessable, one section per reason tag."""
    lines = ["## Not assessable", ""]
    if not view.undecided:
        if view.undecided_total:
            return [*lines, f"{plural(view.undecided_total, 'rule instance')} could not be decided; no rows kept."]
        if "not_assessable" in view.summary:
            return [*lines, "None: every rule the traffic exercised could be decided."]
        return [*lines, "No count of rule instances not assessable was recorded."]
    lines += [
        f"{plural(view.undecided_total, 'rule instance')} could not be decided from what the captures show: neither "
        "passes nor violations.",
        "",
    ]
    lines += table(
        ("Reason", "What it means", "Instances", "Shown"),
        (
            (
                f"[{inline(group.title)}](#{group.anchor})",
                prose(group.meaning),
                count(group.count),
                count(len(group.rows)),
            )
            for group in view.undecided
        ),
    )
    for group in view.undecided:
        lines += ["", *undecided_section(group)]
    return lines


def undecided_section(group: UndecidedGroup) -> list[str]:
    lines = [f'<a id="{group.anchor}"></a>', f"### Not assessable: {inline(group.title)}", ""]
    lines += [f"{plural(group.count, 'instance')}: {prose(group.meaning)}.", ""]
    if group.rows:
        lines += table(
            ("Statement", "Side", "Connection", "Event", "Frame", "Time", "Reason"),
            (
                (
                    code(row["rule"], cell=True),
                    inline(row["actor"] or "-"),
                    _undecided_where(row),
                    _value(row.get("event")),
                    inline(frame_label(row.get("frame"))),
                    inline(when(row.get("time"))),
                    inline(row["reason"]),
                )
                for row in group.rows
            ),
        )
        lines += left_out(len(group.rows), group.count, "rows", "the not_assessable table")
    return lines


def _undecided_where(row: UndecidedRow) -> str:
    """The connection of a not-assessable row: its flow, whom it is about, and who left it."""
    where = code(row["flow"], cell=True)
    if row.get("client") is not None or row.get("client_id") is not None:
        where += f", client {code(client_label(row.get('client'), row.get('client_id')), cell=True)}"
    return where + (", left by the routing replay" if row.get("origin") == "routing" else "")


def capture_part(view: AuditView) -> list[str]:
    """What limits the audit: unreadable captures, gaps, skipped records, and whether the bytes reconcile."""
    summary, data = view.summary, view.data
    lines = ["## Captures", ""]
    errors = summary.get("errors", [])
    if errors:
        lines += ["Captures that could not be read to the end:", ""]
        lines += table(
            ("File", "Byte offset", "Reason"),
            ((code(e["file"], cell=True), count(e.get("offset")), inline(e["reason"])) for e in errors[:MAX_ROWS]),
        )
        lines += [*left_out(MAX_ROWS, len(errors), "captures that could not be read", WHOLE_IN), ""]
    else:
        lines += ["Every capture was read to its end.", ""]
    if data.gaps_total or data.gaps:
        lines += [
            f"{plural(data.gaps_total, 'gap')} in all (bytes the capture never saw; not audited), "
            f"{count(min(len(data.gaps), MAX_ROWS))} shown:",
            "",
        ]
        lines += table(
            ("Capture", "Flow", "Direction", "Stream offset", "Bytes missing", "Time"),
            (
                (
                    code(g["capture"], cell=True),
                    code(g["flow"], cell=True),
                    inline(g["direction"]),
                    count(g["offset"]),
                    count(g["length"]),
                    inline(when(g.get("time"))),
                )
                for g in data.gaps[:MAX_ROWS]
            ),
        )
        lines += [*left_out(MAX_ROWS, len(data.gaps), "gaps", WHOLE_IN), ""]
    else:
        lines += ["No gaps: the captures hold every byte of every MQTT connection they saw.", ""]
    skipped = summary.get("skipped", {})
    if skipped:
        reasons = ", ".join(f"{inline(reason)} {count(n)}" for reason, n in skipped.items())
        lines += [f"Capture records skipped (no usable TCP segment), by reason: {reasons}.", ""]
    if view.accounting is not None:
        parts = "; ".join(f"{prose(label)} {count(value)}" for label, value in view.accounting.parts)
        lines += [f"Bytes of the MQTT flows: {count(view.accounting.total)} in all; {parts}."]
        lines.append(prose(view.accounting.verdict))
        lines += [prose(note) for note in view.accounting.notes]
    return lines


def reference_lines(references: Sequence[Reference]) -> list[str]:
    """The standard reference of some statements: section, id, level, the side bound and the catalogue summary."""
    versions = sorted({ref.version for ref in references}) or ["3.1.1"]
    source = SPEC if versions == ["3.1.1"] else f"OASIS MQTT Version {' and '.join(versions)}"
    lines = [f"Source: {source}.", ""]
    for ref in references:
        if not ref.catalogued:
            lines.append(
                f"- Section {inline(ref.section)}, [{inline(ref.rule)}] ({inline(ref.level)}): {prose(ref.summary)}."
            )
            continue
        basis = f" Stated without a number: {prose(ref.basis)}." if ref.basis else ""
        of = "" if ref.version == "3.1.1" else f" of MQTT {ref.version}"
        lines.append(
            f"- Section {ref.section}{of}, statement [{ref.rule}] ({ref.level}, binds {ref.binds_text}): "
            f"{prose(ref.summary)}.{basis}"
        )
    lines += [
        "",
        "The requirements above are the catalogue's one-line summaries, not the text of the specification; the "
        "section and statement id locate the original wording.",
    ]
    return lines


def _observed(finding: RuleFinding) -> list[str]:
    """The distinct observations of the samples, as a list (none without samples)."""
    details = list(dict.fromkeys(sample.row["detail"] for sample in finding.samples))[:OBSERVATIONS]
    if not details:
        return []
    return ["Observed in the samples:", "", *(f"- {inline(detail)}" for detail in details), ""]


def _value(value: object) -> str:
    return "-" if value is None else inline(str(value))

"""``junit.xml``: one test case per probe case, so CI systems show probe failures like test failures."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from ..probe.runner import FAIL, INCONCLUSIVE, LENIENT, NOT_APPLICABLE, CaseResult, ProbeRun
from ..probe.violations import OtherViolation, not_counted, other_violations
from ..spec import Catalogue
from .evidence import WHOLE_IN, Budget, printable, transcript
from .peer_text import shown
from .statements import case_catalogue, default_catalogue, rule_text, section_of, strongest_level


def probe_run_to_junit(run: ProbeRun, catalogue: Catalogue | None = None) -> ET.Element:
    """A ``<testsuite>``; failures carry the reason and the evidence transcript. A case that could not be judged
    because the target was unreachable, refused the prober or went down is an ``<error>``; other undecided cases
    (not applicable, inconclusive) are skipped. A lenient case is no failure: it passes, with a ``verdict``
    property of ``lenient``, a ``lenient`` property per acceptance, and in ``<system-out>`` the rule the accepted
    packet broke, whom it binds and why the broker was not bound to detect it, then the evidence (a strict run's exit
    status says whether leniency failed it; the suite's ``strict`` property says so too). Test cases are classed
    ``mqttaudit.probe.<suite>`` (the first part of the case id) and carry their statement ids in the name and as
    properties, with the protocol version, and each statement's text, level and section in that version's catalogue
    (``rule`` properties).

    Every text goes through :func:`printable`, so control bytes from the wire never reach the XML (XML 1.0 cannot
    hold them even as character references); ElementTree escapes the markup characters. Peer text is cut, and the
    transcripts share one evidence budget, so the document stays bounded whatever the broker sent.
    """
    rules = default_catalogue(catalogue)
    violations = other_violations(run, rules)
    failing = [v for v in violations if v.counted]
    errors = sum(1 for result in run.results if result.error)
    skipped = sum(run.count(verdict) for verdict in (INCONCLUSIVE, NOT_APPLICABLE)) - errors
    suite = ET.Element(
        "testsuite",
        {
            "name": "mqttaudit probe " + shown(run.target.url, whole_in=WHOLE_IN),
            "tests": str(len(run.results) + len(violations)),
            "failures": str(run.count(FAIL) + len(failing)),
            "errors": str(errors),
            "skipped": str(skipped + len(violations) - len(failing)),
            "time": f"{run.duration:.3f}",
            "timestamp": printable(run.started),
        },
    )
    run_properties = [
        ("broker_down", run.broker_down),
        ("incomplete", run.incomplete),
        ("lenient", str(run.count(LENIENT)) if run.count(LENIENT) else None),
        ("strict", "true" if run.strict else None),
    ]
    if any(value for _, value in run_properties):
        properties = ET.SubElement(suite, "properties")
        for name, value in run_properties:
            if value:
                ET.SubElement(properties, "property", {"name": name, "value": shown(value, whole_in=WHOLE_IN)})
    budget = Budget()
    for result in run.results:
        statements = result.case.statements
        case_rules = case_catalogue(result.case, rules)
        testcase = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": f"mqttaudit.probe.{classname_part(result.case.id)}",
                "name": printable(f"{result.case.id} [{', '.join(statements)}]"),
                "time": f"{result.duration:.3f}",
            },
        )
        case_properties = ET.SubElement(testcase, "properties")
        for statement in statements:
            ET.SubElement(case_properties, "property", {"name": "statement", "value": printable(statement)})
        ET.SubElement(case_properties, "property", {"name": "section", "value": _section(statements, case_rules)})
        named: list[tuple[str, str]] = [
            ("protocol", result.case.protocol.value),
            ("level", strongest_level(statements, case_rules) or "unlisted"),
            *(("rule", rule_text(statement, case_rules)) for statement in statements),
        ]
        if result.verdict == LENIENT:
            named += [("verdict", LENIENT), *(("lenient", line) for line in leniency_lines(result, case_rules))]
        for name, value in named:  # the catalogue's words, and peer text already cut
            ET.SubElement(case_properties, "property", {"name": name, "value": printable(value)})
        reason = shown(result.reason, whole_in=WHOLE_IN)
        if result.verdict == FAIL:
            rule = result.findings[0].rule if result.findings else (statements[0] if statements else "")
            failure = ET.SubElement(testcase, "failure", {"message": reason, "type": rule})
            reference = "\n".join(printable(rule_text(s, case_rules)) for s in statements)
            failure.text = f"{reason}\n\n{reference}\n\n{transcript(result.connections, budget)}\n"
        elif result.verdict == LENIENT:
            out = ET.SubElement(testcase, "system-out")
            explained = "\n".join(printable(line) for line in leniency_lines(result, case_rules))
            out.text = f"lenient (not a failure): {reason}\n\n{explained}\n\n{transcript(result.connections, budget)}\n"
        elif result.error:
            ET.SubElement(testcase, "error", {"message": reason, "type": "not-judged"})
        elif result.verdict in (INCONCLUSIVE, NOT_APPLICABLE):
            ET.SubElement(testcase, "skipped", {"message": f"{result.verdict}: {reason}"})
    for violation in violations:
        _violation_case(suite, violation)
    return suite


def leniency_lines(result: CaseResult, rules: Catalogue) -> list[str]:
    """One line per acceptance of a lenient case: what the broker accepted, the rule the packet broke (its
    version's text, level, section and whom it binds), and why the broker was not bound to detect it; what the
    peer controls is cut."""
    return [
        f"accepted by the {row.side.value} on {shown(row.conversation or 'the connection', whole_in=WHOLE_IN)}: "
        f"{shown(row.detail, whole_in=WHOLE_IN)}; the packet breaks {rule_text(row.rule, rules)}; not bound to "
        f"detect it: {row.basis}"
        for row in result.lenient
    ]


def _violation_case(suite: ET.Element, violation: OtherViolation) -> None:
    """A rule the broker broke outside the cases' statements, as a test case of ``mqttaudit.probe.violations``:
    failed when it counts (a MUST-level act the baseline does not know), skipped with why otherwise. Its name and
    properties say which version's statement the id names (5.0 renumbers 3.1.1's)."""
    of = f" of MQTT {violation.protocol}" if violation.protocol else ""
    testcase = ET.SubElement(
        suite,
        "testcase",
        {
            "classname": "mqttaudit.probe.violations",
            "name": printable(f"{violation.rule}{of} [{violation.acts} act(s) in {len(violation.cases)} case(s)]"),
            "time": "0.000",
        },
    )
    properties = ET.SubElement(testcase, "properties")
    ET.SubElement(properties, "property", {"name": "statement", "value": printable(violation.rule)})
    ET.SubElement(properties, "property", {"name": "section", "value": printable(violation.section)})
    if violation.protocol:
        ET.SubElement(properties, "property", {"name": "protocol", "value": printable(violation.protocol)})
    first = violation.first
    message = shown(
        f"the {first.side.value} broke {violation.rule} ({violation.level}) {violation.acts} time(s), in cases no "
        f"one of which targets it; first in {violation.first_case} on {first.conversation}: {first.detail}",
        whole_in=WHOLE_IN,
    )
    if not violation.counted:
        ET.SubElement(testcase, "skipped", {"message": f"{not_counted(violation)}: {message}"})
        return
    failure = ET.SubElement(testcase, "failure", {"message": message, "type": printable(violation.rule)})
    cases = ", ".join(violation.cases[:20]) + (
        f" and {len(violation.cases) - 20} more" if len(violation.cases) > 20 else ""
    )
    lines = [message, shown(f"expected: {first.expected}", whole_in=WHOLE_IN), printable(f"cases: {cases}")]
    failure.text = "\n".join(lines) + "\n"


def classname_part(case_id: str) -> str:
    """The suite of a case (``malformed/pingreq-length-1`` -> ``malformed``), safe between the dots of a Java-style
    class name, so CI servers group the cases by suite."""
    suite = case_id.split("/", 1)[0]
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in suite) or "unknown"


def _section(statements: tuple[str, ...], rules: Catalogue) -> str:
    return printable(section_of(statements[0], rules)) if statements else "unknown"


def junit_bytes(suite: ET.Element) -> bytes:
    """The suite as an indented UTF-8 XML document."""
    ET.indent(suite)
    document: bytes = ET.tostring(suite, encoding="utf-8", xml_declaration=True)
    return document

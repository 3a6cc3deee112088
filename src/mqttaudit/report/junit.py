"""``junit.xml``: one test case per probe case, so CI systems show probe failures like test failures."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from ..probe.runner import FAIL, INCONCLUSIVE, NOT_APPLICABLE, ProbeRun
from ..spec import Catalogue
from .evidence import printable, transcript
from .statements import default_catalogue, section_of


def probe_run_to_junit(run: ProbeRun, catalogue: Catalogue | None = None) -> ET.Element:
    """A ``<testsuite>``; failures carry the reason and the evidence transcript, undecided cases are skipped.

    Every text goes through :func:`printable`, so control bytes from the wire never reach the XML (XML 1.0 cannot
    hold them even as character references); ElementTree escapes the markup characters.
    """
    rules = default_catalogue(catalogue)
    skipped = sum(run.count(verdict) for verdict in (INCONCLUSIVE, NOT_APPLICABLE))
    suite = ET.Element(
        "testsuite",
        {
            "name": printable(f"mqttaudit probe {run.target.url}"),
            "tests": str(len(run.results)),
            "failures": str(run.count(FAIL)),
            "errors": "0",
            "skipped": str(skipped),
            "time": f"{run.duration:.3f}",
            "timestamp": printable(run.started),
        },
    )
    if run.broker_down:
        properties = ET.SubElement(suite, "properties")
        ET.SubElement(properties, "property", {"name": "broker_down", "value": printable(run.broker_down)})
    for result in run.results:
        statements = result.case.statements
        section = section_of(statements[0], rules) if statements else "unknown"
        testcase = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": f"mqttaudit.probe.{section}",
                "name": printable(f"{result.case.id} [{', '.join(statements)}]"),
                "time": f"{result.duration:.3f}",
            },
        )
        reason = printable(result.reason)
        if result.verdict == FAIL:
            rule = result.findings[0].rule if result.findings else (statements[0] if statements else "")
            failure = ET.SubElement(testcase, "failure", {"message": reason, "type": rule})
            failure.text = f"{reason}\n\n{transcript(result.evidence()['connections'])}\n"
        elif result.verdict in (INCONCLUSIVE, NOT_APPLICABLE):
            ET.SubElement(testcase, "skipped", {"message": f"{result.verdict}: {reason}"})
    return suite


def junit_bytes(suite: ET.Element) -> bytes:
    """The suite as an indented UTF-8 XML document."""
    ET.indent(suite)
    document: bytes = ET.tostring(suite, encoding="utf-8", xml_declaration=True)
    return document

"""The probe's own check: ``mqttaudit probe`` (the whole library, MQTT 3.1.1 and 5.0) against ``mqttaudit serve``
over every transport serve offers (TCP, TLS, WebSocket, WebSocket over TLS) passes every case: no fail, no
leniency, no inconclusive. A fail here is a defect of one of the two, fixed, never pinned.

One ``mqttaudit serve`` process listens on all four transports; the four probe runs go side by side (a probe run
mostly waits on deadlines). serve judges the prober's connections as clients meanwhile: the library's deliberate
malformed packets are client findings there, and a finding against the broker itself would be a defect of serve.
Then the cases the default (small) limits leave not applicable run against a serve with large limits.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme

from mqttaudit.serve.broker import AUTH_CLIENT_FIRST, AUTH_METHOD, AUTH_RESPONSE

from .serve_process import Served, ServeProcess

#: Four whole-library runs at once and the broker judging all their connections hold both cores for a minute: beside
#: the parallel suite they would slow the timed tests of others (an amqtt case turned inconclusive in clean-clone CI),
#: and no case here may end inconclusive. So they run after it, alone.
pytestmark = pytest.mark.alone

TRANSPORTS = ("mqtt", "mqtts", "ws", "wss")
#: How long the four runs may take together (about 65 s on two idle cores).
RUN_LIMIT = 600.0
#: Why a case may be not applicable against serve: what its CONNACK declares, a transport, or a refusal serve has
#: no reason to make.
ALLOWED_NOT_APPLICABLE = (
    "the target is not a WebSocket target",
    "the broker's CONNACK declares Receive Maximum 2",
    "the broker's Maximum Packet Size 256 is smaller",
    "the broker declares Topic Alias Maximum 2",
    "the broker supports QoS 2",
    "the broker declares Maximum QoS 2",
    "the broker declares no Retain Available 0",
    "the broker speaks MQTT 5.0",
    "the broker took the PUBLISH",
    "the broker used no Topic Alias toward the client",
    "the broker sent no PUBLISH with a Topic Alias alone",
    "the broker answered CONNACK 0x00: it did not reject the Client Identifier",
)


@dataclass
class ProbeRuns:
    runs: dict[str, dict[str, Any]]
    statuses: dict[str, int]
    served: Served
    profile: Path
    tmp: Path


def _profile(folder: Path) -> Path:
    """A broker profile declaring serve's authentication exchange, so that the AUTH cases apply."""
    path = folder / "challenge.toml"
    path.write_text(
        f'[authentication]\nmethod = "{AUTH_METHOD}"\ndata = ["{AUTH_CLIENT_FIRST.hex()}", "{AUTH_RESPONSE.hex()}"]\n'
    )
    return path


def _probe(url: str, out: Path, profile: Path, ca: Path, *options: str) -> subprocess.Popen[bytes]:
    tls = ["--cafile", str(ca)] if url.startswith(("mqtts:", "wss:")) else []
    command = [sys.executable, "-m", "mqttaudit", "probe", url, "--out", str(out), "--profile", str(profile)]
    with (out.parent / f"{out.name}.log").open("wb") as log:
        return subprocess.Popen([*command, *tls, *options], stdout=log, stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProbeRuns]:
    tmp = tmp_path_factory.mktemp("serve-probe")
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    issued.private_key_pem.write_to_path(str(tmp / "key.pem"))
    for index, pem in enumerate(issued.cert_chain_pems):
        pem.write_to_path(str(tmp / "cert.pem"), append=index > 0)
    tls = ["--tls-cert", str(tmp / "cert.pem"), "--tls-key", str(tmp / "key.pem")]
    extra = ["--tls-listen", "127.0.0.1:0", "--ws-listen", "127.0.0.1:0", "--wss-listen", "127.0.0.1:0"]
    (tmp / "serve").mkdir()
    serve = ServeProcess(tmp / "serve", *extra, *tls)
    profile = _profile(tmp)
    try:
        urls = dict(zip(TRANSPORTS, serve.urls, strict=True))
        processes = {name: _probe(url, tmp / name, profile, tmp / "ca.pem") for name, url in urls.items()}
        deadline = time.monotonic() + RUN_LIMIT
        statuses = {name: p.wait(timeout=max(1.0, deadline - time.monotonic())) for name, p in processes.items()}
    finally:
        served = serve.stop()
    runs = {name: json.loads((tmp / name / "findings.json").read_text()) for name in TRANSPORTS}
    yield ProbeRuns(runs, statuses, served, profile, tmp)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_case_of_the_library_passes_against_serve(transport: str, probed: ProbeRuns) -> None:
    run = probed.runs[transport]
    verdicts = {r["case"]: (r["verdict"], r["reason"]) for r in run["results"]}
    assert len(verdicts) > 900
    wrong = {case: v for case, v in verdicts.items() if v[0] not in ("pass", "not-applicable")}
    assert wrong == {}
    unexplained = {
        case: reason
        for case, (verdict, reason) in verdicts.items()
        if verdict == "not-applicable" and not any(allowed in reason for allowed in ALLOWED_NOT_APPLICABLE)
    }
    assert unexplained == {}
    assert run["violations"] == []  # nothing the broker did on any connection broke a rule
    assert probed.statuses[transport] == 0


def test_serve_judged_the_prober_s_connections_and_found_no_defect_of_its_own(probed: ProbeRuns) -> None:
    summary = probed.served.report["summary"]
    assert summary["server_findings"] == 0
    assert summary["internal_errors"] == 0
    # The library's malformed packets are the prober's own deviations, as a client: reported, so exit status 1.
    assert summary["client_findings"] > 100
    assert probed.served.status == 1
    clients = probed.served.report["clients"]
    assert all(finding["side"] == "client" for client in clients for finding in client["findings"])
    assert all(finding["statement"]["binds"] in ("client", "both") for c in clients for finding in c["findings"])
    cited = {finding["statement"]["id"] for client in clients for finding in client["findings"]}
    assert {"MQTT-3.3.2-2", "MQTT-4.7.3-1", "MQTT-2.2.2-1"} <= cited


def test_the_cases_small_limits_leave_out_pass_against_serve_with_large_limits(probed: ProbeRuns) -> None:
    limited = sorted(
        r["case"]
        for r in probed.runs["mqtt"]["results"]
        if r["verdict"] == "not-applicable" and any(word in r["reason"] for word in ("Receive Maximum", "Packet Size"))
    )
    assert len(limited) >= 4
    folder = probed.tmp / "large"
    folder.mkdir()
    limits = ["--receive-maximum", "65535", "--maximum-packet-size", "268435460", "--topic-alias-maximum", "65535"]
    serve = ServeProcess(folder, *limits)
    try:
        probe = _probe(
            serve.urls[0], folder / "probe", probed.profile, probed.tmp / "ca.pem", "--cases", ",".join(limited)
        )
        status = probe.wait(timeout=RUN_LIMIT)
    finally:
        served = serve.stop()
    results = json.loads((folder / "probe" / "findings.json").read_text())["results"]
    assert {r["case"]: r["verdict"] for r in results} == dict.fromkeys(limited, "pass")
    assert status == 0
    assert served.report["summary"]["server_findings"] == 0

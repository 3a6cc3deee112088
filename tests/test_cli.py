"""The command line: decode's exact findings and exit statuses, rules, demo."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mqttaudit import __version__
from mqttaudit.cli.main import main

ISSUE_VECTORS = [
    ("82 05 00 01 00 00 00", ["MQTT-4.7.3-1"]),
    ("a2 04 00 02 00 00", ["MQTT-4.7.3-1"]),
    ("32 0e 00 08 73 65 6e 73 6f 72 2f 23 00 03 68 69", ["MQTT-3.3.2-2", "MQTT-4.7.1-1"]),
    ("30 ff ff ff ff 01", ["MQTT-2.2.3-four-bytes"]),
    ("82 08 00 04 00 03 61 2f 62 00", []),
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize(("hex_text", "expected"), ISSUE_VECTORS)
def test_decode_json_gives_exactly_the_expected_findings(
    capsys: pytest.CaptureFixture[str], hex_text: str, expected: list[str]
) -> None:
    status, out, _ = run(capsys, "decode", "--hex", hex_text, "--from", "client", "--format", "json")
    document = json.loads(out)
    assert [v["rule"] for v in document["violations"]] == expected
    assert status == (1 if expected else 0)
    for violation in document["violations"]:
        assert {"rule", "offset", "detail"} <= violation.keys()
        assert violation["actor"] == "client"


def test_decode_text_shows_packet_rule_offset_detail_and_summary(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "decode", "--hex", "82 05 00 01 00 00 00", "--from", "client")
    assert status == 1
    assert "SUBSCRIBE id=1" in out
    assert "MQTT-4.7.3-1" in out and "at offset 4" in out
    assert "Topic Filter is empty" in out
    assert "at least one character long" in out  # the rule's summary


def test_decode_json_lists_packets_with_their_fields(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "decode", "--hex", "82 08 00 04 00 03 61 2f 62 00", "--from", "client", "--format", "json")
    packet = json.loads(out)["packets"][0]
    assert packet["packet"]["type"] == "SUBSCRIBE"
    assert packet["packet"]["subscriptions"] == [{"topic_filter": "a/b", "qos": 0}]
    assert packet["hex"] == "82 08 00 04 00 03 61 2f 62 00"  # bytes.hex(" "), as every output writes hex
    assert json.loads(out)["mqttaudit_version"] == __version__


def test_decode_text_says_what_every_number_is(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "decode", "--hex", "c0 00 82 05 00 01 00 00 00 30", "--from", "client")
    assert status == 1
    lines = out.splitlines()
    assert lines[0] == "frame 0 at offset 0, 2 bytes: PINGREQ"
    assert lines[1] == "      bytes: c0 00"
    assert lines[2].startswith("frame 1 at offset 2, 7 bytes: SUBSCRIBE id=1")
    assert lines[3] == "      bytes: 82 05 00 01 00 00 00"
    assert "VIOLATION MQTT-4.7.3-1 (MUST, section 4.7.3) by the client at offset 6: " in lines[4]
    assert lines[6] == "frame 2 at offset 9, 1 byte: bytes that are not a packet"
    assert lines[-1] == "2 packet(s), 2 violation(s), 0 warning(s) in 10 bytes"
    # Every frame header and every violation names its numbers: no bare "[n]" index or section.
    assert not [line for line in lines if re.search(r"\[\d+\]|\((MUST|SHOULD|MAY) \d", line)]


def test_decode_text_says_how_much_of_a_cut_frame_it_shows(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(
        capsys, "decode", "--hex", "30 ff 01" + " 00" * 255, "--from", "client", "--max-packet-size", "100"
    )
    assert status == 0  # a packet above the bound is a warning
    assert out.startswith("frame 0 at offset 0, 258 bytes: bytes that are not a packet\n")
    assert "      bytes: 30 ff 01 " + " ".join(["00"] * 61) + " ... (first 64 of 258 bytes)\n" in out


def test_decode_reads_raw_bytes_from_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    capture = tmp_path / "packets.bin"
    capture.write_bytes(bytes.fromhex("c0 00 82 05 00 01 00 00 00"))
    status, out, _ = run(capsys, "decode", "--file", str(capture), "--from", "client", "--format", "json")
    document = json.loads(out)
    assert status == 1
    assert [p["packet"]["type"] for p in document["packets"]] == ["PINGREQ", "SUBSCRIBE"]
    assert document["violations"][0]["offset"] == 6


def test_decode_direction_matters(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "decode", "--hex", "20 02 00 00", "--from", "server")[0] == 0
    status, out, _ = run(capsys, "decode", "--hex", "20 02 00 00", "--from", "client", "--format", "json")
    assert status == 1
    assert [v["rule"] for v in json.loads(out)["violations"]] == ["MQTT-2.2.1-direction"]


def test_decode_warnings_alone_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "decode", "--hex", "c0 80 00", "--from", "client")
    assert status == 0
    assert "warning MQTT-2.2.3-shortest-encoding" in out


def test_decode_protocol_5_names_5_0_statements_and_properties(capsys: pytest.CaptureFixture[str]) -> None:
    # PUBLISH 'a' with Topic Alias 0 (properties 03 23 00 00): no 3.1.1 rule reads it, 5.0's [MQTT-3.3.2-8] does.
    publish = "30 07 00 01 61 03 23 00 00"
    assert run(capsys, "decode", "--hex", publish, "--from", "client")[0] == 0
    status, out, _ = run(capsys, "decode", "--hex", publish, "--from", "client", "--protocol", "5", "--format", "json")
    document = json.loads(out)
    assert status == 1
    assert document["protocol"] == "5.0"
    assert [(v["rule"], v["offset"], v["level"]) for v in document["violations"]] == [("MQTT-3.3.2-8", 7, "MUST")]
    assert document["packets"][0]["packet"]["properties"] == [{"identifier": 35, "name": "Topic Alias", "value": 0}]
    status, out, _ = run(capsys, "decode", "--hex", publish, "--from", "client", "--protocol", "5")
    assert status == 1
    assert out.startswith("read as MQTT 5.0 (as asked)")
    assert "[Topic Alias=0]" in out and "MQTT-3.3.2-8 (MUST, section 3.3.2.3.4)" in out


def test_decode_protocol_5_renumbers_rules_both_versions_state(capsys: pytest.CaptureFixture[str]) -> None:
    # PINGREQ with flags 0010: reserved flags are [MQTT-2.2.2-1] in 3.1.1 and [MQTT-2.1.3-1] in 5.0.
    _, out, _ = run(capsys, "decode", "--hex", "c2 00", "--from", "client", "--protocol", "5", "--format", "json")
    assert [v["rule"] for v in json.loads(out)["violations"]] == ["MQTT-2.1.3-1"]
    # A 3.1.1 CONNACK on a 5.0 connection has no Property Length [MQTT-2.2.2-1 of 5.0].
    _, out, _ = run(capsys, "decode", "--hex", "20 02 00 00", "--from", "server", "--protocol", "5", "--format", "json")
    assert [v["rule"] for v in json.loads(out)["violations"]] == ["MQTT-2.2.2-1"]


def test_decode_protocol_auto_learns_the_version_from_the_connect(capsys: pytest.CaptureFixture[str]) -> None:
    # CONNECT 'MQTT' level 5, then PUBLISH with an empty Topic Name and Topic Alias 2: valid 5.0 only.
    stream = "10 0d 00 04 4d 51 54 54 05 02 00 00 00 00 00 30 06 00 00 03 23 00 02"
    status, out, _ = run(capsys, "decode", "--hex", stream, "--from", "client", "--protocol", "auto")
    assert status == 0
    assert out.startswith("read as MQTT 5.0 (learned from the CONNECT)")
    # Read as 3.1.1 the same bytes hold a wrong protocol level, a byte after the CONNECT's last field (the 5.0
    # Property Length) and an empty Topic Name.
    status, out, _ = run(capsys, "decode", "--hex", stream, "--from", "client", "--format", "json")
    assert status == 1
    assert {v["rule"] for v in json.loads(out)["violations"]} == {
        "MQTT-3.1.2-protocol-level",
        "MQTT-2.2.3-leftover",
        "MQTT-4.7.3-1",
    }
    # No CONNECT: auto reads 3.1.1 and says why.
    status, out, _ = run(capsys, "decode", "--hex", "c0 00", "--from", "client", "--protocol", "auto")
    assert status == 0 and out.startswith("read as MQTT 3.1.1 (no CONNECT names a version: read as 3.1.1)")


@pytest.mark.parametrize(
    "argv",
    [
        ["decode", "--hex", "c000", "--protocol", "6"],
        ["decode", "--hex", "zz"],
        ["decode", "--hex", "123"],
        ["decode", "--hex", "c000", "--from", "broker"],
        ["decode", "--hex", "c000", "--file", "x"],
        ["no-such-command"],
    ],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    status, _, err = run(capsys, *argv)
    assert status == 2
    assert err


def test_console_script_reads_stdin_hex_and_raw(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "mqttaudit"
    hex_run = subprocess.run(
        [str(exe), "decode", "--hex", "-", "--from", "client"],
        input=b"a2 04 00 02 00 00\n",
        capture_output=True,
        check=False,
    )
    assert hex_run.returncode == 1, hex_run.stderr
    assert b"MQTT-4.7.3-1" in hex_run.stdout
    raw_run = subprocess.run(
        [str(exe), "decode", "--from", "client", "--format", "json"],
        input=bytes.fromhex("82 08 00 04 00 03 61 2f 62 00"),
        capture_output=True,
        check=False,
    )
    assert raw_run.returncode == 0, raw_run.stderr
    assert json.loads(raw_run.stdout)["violations"] == []


def test_rules_json_lists_every_rule_with_its_fields_and_checker(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "rules", "--format", "json")
    rows = json.loads(out)
    assert status == 0
    assert len([r for r in rows if r["origin"] == "statement"]) == 141
    for row in rows:
        assert {"id", "section", "level", "actor", "observability", "summary", "checked_by"} <= row.keys()
    by_id = {r["id"]: r for r in rows}
    assert by_id["MQTT-4.7.3-1"]["checked_by"] == ["codec", "judge", "probe"]
    assert by_id["MQTT-2.2.3-four-bytes"]["checked_by"] == ["codec", "judge", "probe"]
    assert by_id["MQTT-3.1.2-24"]["checked_by"] == ["judge", "probe"]
    assert by_id["MQTT-4.6.0-6"]["checked_by"] == []


def test_rules_text_says_how_many_the_codec_checks(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "rules", "--checked")
    assert status == 0
    assert "MQTT-4.7.3-1" in out and "MQTT-3.1.2-24" in out and "MQTT-4.6.0-6" not in out
    assert "checked by the codec" in out and "numbered statements covered by probe cases" in out


def test_demo_finds_the_known_defects_and_passes_the_valid_packets(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from mqttaudit.cli.demo import EXAMPLES

    status, out, _ = run(capsys, "demo", "--no-probe")
    assert status == 0
    assert any(example[3:] == ("5.0",) for example in EXAMPLES)  # MQTT 5.0 beside 3.1.1
    for title, *_ in EXAMPLES:
        expected = "conformant" if "(valid)" in title else "VIOLATIONS"
        assert f"== {title} (from the " in out
        line = next(line for line in out.splitlines() if line.startswith(f"== {title} "))
        assert line.endswith(expected), line
    assert "MQTT-2.2.3-truncated" not in out  # every example is a whole packet
    # the first as `mqttaudit decode` prints it, the others short: their bytes and what they break
    assert out.count("frame 0 at offset 0") == 1 and out.count("  rule: ") == 1
    assert sum(line.lstrip().startswith("bytes: ") for line in out.splitlines()) == len(EXAMPLES)


@pytest.mark.parametrize("bound", ["4", "0", "-1"])
def test_a_packet_size_bound_below_a_fixed_header_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], bound: str
) -> None:
    status, _, err = run(capsys, "decode", "--hex", "c0 00", "--max-packet-size", bound)
    assert status == 2
    assert "--max-packet-size" in err


def test_every_not_assessable_tag_has_the_plain_words_the_demo_explains_it_with() -> None:
    from mqttaudit.judge import reasons

    tags = {value for name, value in vars(reasons).items() if name.isupper() and isinstance(value, str)}
    assert set(reasons.TAGS) <= tags
    assert set(reasons.EXPLANATIONS) == tags
    assert all(len(text) > 20 and not text.endswith(".") for text in reasons.EXPLANATIONS.values())

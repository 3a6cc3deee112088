"""The README is true: every ``$ mqttaudit ...`` command it shows runs against real things (a mosquitto started
here for ``mqtt://127.0.0.1:1883``, real captures in ``captures/``) and exits as its ``# exit N`` says, the
deterministic ones print what it shows, and the Python API examples run as written."""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from mqttaudit.probe.brokers import RunningBroker, start_broker

from .cli_in_process import run_mqttaudit
from .corpus import capture

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: What the README's ``captures/`` folder holds, from the third-party capture corpus: a clean capture and one with
#: a reserved packet type (MQTT-2.2.1).
CAPTURES = ("peafowl/mqtt-1.pcapng", "suricata-verify/mqtt-events-unassigned-msgtype.pcap")
README_BROKER = "127.0.0.1:1883"
COMMAND = re.compile(r"^\$ (mqttaudit .*?)\s+# exit (\d+)$")
#: The first line of a probe run: how many cases it ran.
CASES_RUN = re.compile(r"^\S+: (\d+) cases in ")


def blocks(language: str, text: str = README) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def shown_commands() -> list[tuple[str, int, list[str]]]:
    """Every ``$ mqttaudit`` line of the console blocks, in order: (command, exit status, the output shown)."""
    found = []
    for block in blocks("console"):
        lines = block.splitlines()
        for index, line in enumerate(lines):
            if not line.startswith("$ "):
                continue
            match = COMMAND.match(line)
            assert match, f"README console line without '# exit N': {line}"
            output = []
            for following in lines[index + 1 :]:
                if following.startswith("$ "):
                    break
                output.append(following)
            found.append((match.group(1), int(match.group(2)), output))
    return found


def test_the_readme_shows_commands_with_their_exit_statuses() -> None:
    commands = [command.split()[1] for command, _, _ in shown_commands()]
    assert {"decode", "rules", "probe", "audit"} <= set(commands)
    assert {status for _, status, _ in shown_commands()} >= {0, 1, 2, 4}


@pytest.fixture(scope="module")
def broker() -> Iterator[RunningBroker]:
    with start_broker("mosquitto") as running:
        yield running


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the README's commands run in: ``captures/`` and a ``notes.txt`` that is not a capture."""
    folder = tmp_path_factory.mktemp("readme")
    (folder / "captures").mkdir()
    for name in CAPTURES:
        shutil.copy(capture(name), folder / "captures" / Path(name).name)
    (folder / "notes.txt").write_text("my notes\n")
    return folder


@pytest.mark.captures
def test_every_command_the_readme_shows_exits_as_shown(
    broker: RunningBroker, workdir: Path, monkeypatch: pytest.MonkeyPatch, spark: SparkSession
) -> None:
    # Each command through main in the README's folder; its audit joins the test session's Spark.
    monkeypatch.chdir(workdir)
    for command, status, output in shown_commands():
        argv = [arg.replace(README_BROKER, f"{broker.host}:{broker.port}") for arg in shlex.split(command)]
        result = run_mqttaudit(*argv[1:])
        assert result.returncode == status, f"{command}\n{result.stdout}\n{result.stderr}"
        assert "Traceback" not in result.stderr, command
        shown = [line for line in output if line and line != "..." and not line.startswith("  ")]
        if argv[1] in ("decode", "rules"):  # deterministic: the README shows exactly what they print
            assert result.stdout.splitlines() == output, command
        elif shown and shown[0].startswith("Error: "):
            assert result.stderr.splitlines()[-1] == shown[0], command
        elif argv[1] == "audit" and shown:
            assert result.stdout.splitlines() == shown, command
        elif argv[1] == "probe" and shown and (said := CASES_RUN.match(shown[0])):  # its verdicts vary by broker
            ran = CASES_RUN.match(result.stdout.splitlines()[0])
            assert ran and ran.group(1) == said.group(1), command


@pytest.mark.captures
def test_the_python_api_examples_run_as_written(
    broker: RunningBroker,
    workdir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    spark: SparkSession,
) -> None:
    # Spark runs already, started in another working folder: the example's relative paths must still be found.
    examples = blocks("python", section("Python API"))
    assert len(examples) == 3
    monkeypatch.setenv("MQTT_URL", broker.url)
    monkeypatch.chdir(workdir)
    for example in examples:
        exec(compile(example, "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{broker.url}: exit status 0, ")
    assert "['MQTT-3.3.2-8']" in out  # the codec example, between the probe and the audit
    assert (workdir / "mqttaudit-out" / "junit.xml").is_file()
    assert out[-1] == "exit status 1: 3 connections, 1 violations"
    assert (workdir / "audit" / "findings.jsonl").is_file()

"""The package as people install it next to their own code: compatible ranges, extras for the heavy parts, typed,
and a base install (no Spark) that decodes, explains rules and probes."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import mqttaudit

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
SELF_EXTRA = re.compile(r"mqttaudit\[[a-z,]+\]")


def requirements() -> list[str]:
    return [*PROJECT["dependencies"], *(r for extra in PROJECT["optional-dependencies"].values() for r in extra)]


def test_dependencies_are_compatible_ranges_not_pins() -> None:
    for requirement in requirements():
        if SELF_EXTRA.fullmatch(requirement):
            continue
        assert "==" not in requirement, requirement
        assert ">=" in requirement and "<" in requirement, f"{requirement}: give a lower and an upper bound"


def test_the_heavy_parts_are_extras_and_the_base_install_is_light() -> None:
    base = " ".join(PROJECT["dependencies"])
    for heavy in ("pyspark", "pyarrow", "pandas", "pika", "paho-mqtt", "cryptography"):
        assert heavy not in base
    extras = PROJECT["optional-dependencies"]
    assert any(r.startswith("pyspark") for r in extras["spark"])
    assert any(r.startswith("pyarrow") for r in extras["spark"])
    assert any(r.startswith("pika") for r in extras["amqp"])
    assert any(r.startswith("cryptography") for r in extras["tls"])  # audit --keylog
    assert "mqttaudit[spark,tls,amqp,demo]" in extras["all"]


def test_the_package_declares_its_urls_status_python_versions_and_types() -> None:
    assert {"Homepage", "Source", "Issues"} <= set(PROJECT["urls"])
    classifiers = PROJECT["classifiers"]
    assert any(c.startswith("Development Status :: ") for c in classifiers)
    tested = f"Programming Language :: Python :: {sys.version_info.major}.{sys.version_info.minor}"
    assert tested in classifiers
    assert "Typing :: Typed" in classifiers
    assert (ROOT / "src" / "mqttaudit" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["mqttaudit"]
    assert PROJECT["version"] == mqttaudit.__version__


def test_ci_pins_every_requirement_in_its_constraints_file() -> None:
    pinned = {
        line.split("==")[0].lower().replace("_", "-")
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if "==" in line
    }
    for requirement in requirements():
        if SELF_EXTRA.fullmatch(requirement):
            continue
        name = re.split(r"[<>=!~\[ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        assert name in pinned, f"{name} has no pin in constraints.txt"


BASE_ONLY = """
import sys
for heavy in ("pyspark", "pyarrow", "pandas", "pika", "paho"):
    sys.modules[heavy] = None  # as on an install without the extras
from mqttaudit.cli.main import main
assert main(["decode", "--hex", "82 05 00 01 00 00 00", "--from", "client"]) == 1
assert main(["rules", "MQTT-4.7.3-1"]) == 0
assert main(["probe", "--list"]) == 0
import mqttaudit.probe
assert callable(mqttaudit.probe.run) and callable(mqttaudit.probe.run_async)
from mqttaudit.report import write_probe_reports
print("base install ok")
"""


def test_decode_rules_and_the_probe_work_without_the_spark_and_amqp_extras() -> None:
    result = subprocess.run([sys.executable, "-c", BASE_ONLY], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip().endswith("base install ok")


def test_the_compiled_modules_build_without_the_extras_installed(tmp_path: Path) -> None:
    """mypyc type-checks every module the compiled ones import, in a build environment that has setuptools and
    mypy only: none of them may reach pyspark, pyarrow, jinja2 or pika, even through the package root. Run from an
    empty folder, so no cache of an earlier check in a full environment can hide it."""
    namespace: dict[str, object] = {}
    setup = (ROOT / "setup.py").read_text()
    exec(setup.split("class OptionalBuildExt")[0], namespace)
    compiled = [str(ROOT / path) for path in namespace["COMPILED"]]  # type: ignore[attr-defined]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-site-packages",
            "--no-incremental",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            *compiled,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:]

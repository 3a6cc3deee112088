"""Every command that needs an extra says so when the extra is missing: the package, the pip command, exit 2, no
traceback, and before any work. Each runs the real command in a process of its own where the package cannot be
imported: the process starts with ``sys.modules[name] = None``, which makes ``import name`` fail as it does when the
package is not installed (a ``ModuleNotFoundError`` naming it)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from mqttaudit.extras import EXTRAS, PACKAGES

ROOT = Path(__file__).resolve().parents[1]
#: ``python -c BLOCKED name1,name2 ARGS...``: mqttaudit ARGS without those packages.
BLOCKED = """
import runpy, sys
for name in sys.argv.pop(1).split(","):
    sys.modules[name] = None
runpy.run_module("mqttaudit", run_name="__main__", alter_sys=True)
"""


def without(packages: str, *arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, "-c", BLOCKED, packages, *arguments]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


#: (packages made unimportable, the command, the extra it names, the package it names)
MISSING = {
    "probe-amqp": ("pika", ["probe", "amqp://guest:guest@127.0.0.1:1/", "--out", "out"], "amqp", "pika"),
    "matrix-amqp": ("pika", ["matrix", "amqp://127.0.0.1:1/", "mqtt://127.0.0.1:1", "--out", "out"], "amqp", "pika"),
    "demo-paho": ("paho", ["demo", "--out", "out"], "demo", "paho-mqtt"),
    "demo-pyspark": ("pyspark", ["demo", "--out", "out"], "demo", "pyspark"),
    # The Spark engine's packages: the local engine (auto's choice for a small capture) needs pyarrow alone.
    "audit-pyspark": ("pyspark", ["audit", "capture.pcap", "--engine", "spark", "--out", "out"], "spark", "pyspark"),
    "audit-pyarrow": ("pyarrow", ["audit", "capture.pcap", "--out", "out"], "spark", "pyarrow"),
    "audit-pandas": ("pandas", ["audit", "capture.pcap", "--engine", "spark", "--out", "out"], "spark", "pandas"),
    "audit-keylog": (
        "cryptography",
        ["audit", "capture.pcap", "--keylog", "keys.log", "--out", "out"],
        "tls",
        "cryptography",
    ),
}


@pytest.mark.parametrize("name", MISSING)
def test_a_missing_extra_is_named_with_its_pip_command_and_exit_2(name: str, tmp_path: Path) -> None:
    packages, arguments, extra, package = MISSING[name]
    (tmp_path / "capture.pcap").write_bytes(b"")  # never read: the missing package is found first
    (tmp_path / "keys.log").write_text("")
    ran = without(packages, *arguments, cwd=tmp_path)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    [line] = ran.stderr.strip().splitlines()[-1:]
    assert f"needs {package}, which is not installed: pip install 'mqttaudit[{extra}]'" in line, ran.stderr
    assert "Traceback" not in ran.stderr
    assert "== " not in ran.stdout  # the demo did nothing before saying so
    assert not (tmp_path / "out").exists()


def test_the_demo_without_its_probe_needs_no_extra(tmp_path: Path) -> None:
    ran = without("paho,pyspark,pika", "demo", "--no-probe", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "examples decoded" in ran.stdout


def test_every_extra_named_is_an_extra_of_the_package_holding_its_packages() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, (modules, _) in EXTRAS.items():
        requirements = " ".join(declared[extra])
        for module in modules:
            package = PACKAGES.get(module, module)
            named = package in requirements or any(
                f"mqttaudit[{inner}]" in requirements and package in " ".join(declared[inner]) for inner in declared
            )
            assert named or module == "py4j", (extra, package)  # pyspark installs py4j

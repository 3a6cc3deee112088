"""The package as people install it next to their own code: compatible ranges, extras for the heavy parts, typed,
and a base install (no Spark) that decodes, explains rules and probes."""

from __future__ import annotations

import os
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


README = (ROOT / "README.md").read_text(encoding="utf-8")
#: What a source install needs from a checkout (what `git archive` of the repository holds, less the tests).
CHECKOUT = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "Makefile", "constraints.txt", "src")
#: A new install works: it decodes, explains a rule and lists the probe's cases, reading its packaged data files.
WORKS = (
    (["decode", "--hex", "82 05 00 01 00 00 00", "--from", "client"], 1),
    (["rules", "MQTT-4.7.3-1"], 0),
    (["probe", "--list"], 0),
)


def checkout_copy(folder: Path) -> Path:
    """The files of a checkout, copied to ``folder`` without anything an earlier build left (build/, *.so)."""
    import shutil

    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info", "build")
    folder.mkdir()
    for name in CHECKOUT:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, folder / name, ignore=ignore)
        else:
            shutil.copy2(source, folder / name)
    return folder


def assert_installed_and_working(site: Path, cwd: Path) -> None:
    """mqttaudit imported from ``site`` (its dependencies from this environment) runs the way a newcomer tries it."""
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = subprocess.run(
        [sys.executable, "-c", "import mqttaudit; print(mqttaudit.__file__)"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(site), where.stdout
    for argv, status in WORKS:
        ran = subprocess.run(
            [sys.executable, "-m", "mqttaudit", *argv], cwd=cwd, env=env, capture_output=True, text=True, check=False
        )
        assert ran.returncode == status, f"{argv}: {ran.stderr[-2000:]}"
        assert "Traceback" not in ran.stderr


def test_make_wheel_builds_the_wheel_the_readme_names_and_it_installs_and_runs(tmp_path: Path) -> None:
    """`make wheel` from a checkout: a pure-Python wheel with its data files that pip installs and that runs. (The
    build uses this environment's setuptools and mypy instead of fetching them: WHEEL_OPTIONS.)"""
    source = checkout_copy(tmp_path / "checkout")
    built = subprocess.run(
        ["make", "wheel", f"PYTHON={sys.executable}", "WHEEL_OPTIONS=--no-build-isolation"],
        cwd=source,
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheels = sorted((source / "dist").glob("*.whl"))
    assert [wheel.name for wheel in wheels] == [f"mqttaudit-{mqttaudit.__version__}-py3-none-any.whl"]
    assert f"`make wheel` builds `dist/{wheels[0].name}`" in README
    site = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(site), str(wheels[0])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert not list(site.rglob("*.so"))  # pure Python: one wheel for every machine
    assert_installed_and_working(site, tmp_path)


def ci_recipes() -> list[str]:
    """The README's CI recipes (GitHub Actions, GitLab CI)."""
    return re.findall(r"^```yaml\n(.*?)^```", README, flags=re.MULTILINE | re.DOTALL)


def test_the_ci_recipes_install_from_the_projects_git_repository_and_that_install_runs(tmp_path: Path) -> None:
    """No package index has mqttaudit: the CI recipes install from the project's Git repository, without the
    compile. Their command is run here against a Git repository of this checkout (its dependencies are this
    environment's, so nothing is fetched)."""
    recipes = ci_recipes()
    assert len(recipes) == 3  # the probe's GitHub Actions and GitLab CI, serve's pytest plugin in GitHub Actions
    requirement = f'"mqttaudit @ git+{PROJECT["urls"]["Source"]}"'
    for recipe in recipes:
        installs = [line for line in recipe.splitlines() if "pip install" in line]
        assert len(installs) == 1 and requirement in installs[0], recipe
        assert "MQTTAUDIT_PURE_PYTHON" in recipe, recipe
    repository = checkout_copy(tmp_path / "repository")
    git = ["git", "-C", str(repository), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "checkout"], check=True)
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--target", str(site)]
    installed = subprocess.run(
        [*pip, f"mqttaudit @ git+file://{repository}"],
        env={**os.environ, "MQTTAUDIT_PURE_PYTHON": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert_installed_and_working(site, tmp_path)

"""Where the tests find what the repository does not hold: the third-party capture corpus (captures of other
projects' suites, with their ``INVENTORY.tsv`` and ``SOURCES.tsv``) and the spec statement lists the catalogues are
compared with.

Each is a folder beside the checkout (``../shared/captures``, ``../shared/spec``) unless its setting names another.
Without it, a test that needs it is skipped, and ``conftest.py`` counts those skips into one line at the end of the
run; with ``CI=true`` it fails instead. A test that reads the corpus carries ``@pytest.mark.captures``, so that the
skip comes before its fixtures start a broker or Spark.
"""

from __future__ import annotations

import csv
import functools
import os
from pathlib import Path

import pytest

CAPTURES_SETTING = "MQTTAUDIT_CAPTURES"
SPEC_LISTS_SETTING = "MQTTAUDIT_SPEC_LISTS"
#: The folder beside the checkout that holds both by default.
BESIDE_THE_CHECKOUT = Path(__file__).resolve().parents[2] / "shared"
#: How the reason of each skip for a missing folder begins: the terminal summary counts skips by these.
CAPTURES_MISSING = "the third-party capture corpus is missing"
SPEC_LISTS_MISSING = "the spec statement lists are missing"
#: The one parameter of a test parametrized by the corpus's captures when there is no list of them to collect.
NO_CAPTURES = "<no capture corpus>"


def captures_folder() -> Path:
    setting = os.environ.get(CAPTURES_SETTING)
    return Path(setting).expanduser() if setting else BESIDE_THE_CHECKOUT / "captures"


def spec_lists_folder() -> Path:
    setting = os.environ.get(SPEC_LISTS_SETTING)
    return Path(setting).expanduser() if setting else BESIDE_THE_CHECKOUT / "spec"


def missing(reason: str) -> None:
    """Skips the test, or fails it under CI=true, where a missing folder is a broken setup rather than a choice."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: a missing folder fails the run)", pytrace=False)
    pytest.skip(reason)


def require_captures() -> Path:
    """The capture corpus folder; the test is skipped without it (failed under CI=true)."""
    folder = captures_folder()
    if not folder.is_dir():
        missing(
            f"{CAPTURES_MISSING} (looked in {folder}; set {CAPTURES_SETTING} or put the corpus at ../shared/captures "
            "beside the repository)"
        )
    return folder


def capture(name: str) -> Path:
    """A file of the corpus by its path in it (``zeek/mqtt.pcap``); a corpus without that file fails the test."""
    folder = require_captures()
    if name == NO_CAPTURES:
        pytest.fail(f"the capture corpus in {folder} has no INVENTORY.tsv to list its captures", pytrace=False)
    path = folder / name
    if not path.is_file():
        pytest.fail(f"the capture corpus in {folder} has no {name}", pytrace=False)
    return path


@functools.cache
def inventory() -> dict[str, dict[str, str]]:
    """The ``INVENTORY.tsv`` row of each capture, by its path in the corpus; empty without the corpus, so that a
    module parametrized by it still collects."""
    table = captures_folder() / "INVENTORY.tsv"
    if not table.is_file():
        return {}
    with table.open(newline="") as rows:
        return {row["file"]: row for row in csv.DictReader(rows, delimiter="\t")}


def capture_names() -> list[str]:
    """The captures ``INVENTORY.tsv`` lists, sorted, or ``[NO_CAPTURES]``: a parameter list is never empty."""
    return sorted(inventory()) or [NO_CAPTURES]


def spec_list(name: str) -> Path:
    """A statement list (``mqtt-5.0-statements.tsv``); the test is skipped without the folder (failed under
    CI=true), and fails if the folder lacks the file."""
    folder = spec_lists_folder()
    if not folder.is_dir():
        missing(
            f"{SPEC_LISTS_MISSING} (looked in {folder}; set {SPEC_LISTS_SETTING} or put them at ../shared/spec "
            "beside the repository)"
        )
    path = folder / name
    if not path.is_file():
        pytest.fail(f"the spec statement lists in {folder} have no {name}", pytrace=False)
    return path

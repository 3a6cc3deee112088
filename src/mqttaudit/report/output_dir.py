"""An output directory that never holds a mix of two runs, and never loses files mqttaudit did not write.

A run writes into a staging directory beside ``--out`` (same filesystem, so publishing is a handful of renames)
and publishes it only when it completes: the previous run's entries are moved aside, the new ones renamed into
place, then the old ones deleted. A run that fails or is interrupted removes its staging directory and leaves
the previous complete result as it was.

A marker file in the output directory lists what mqttaudit wrote there. Only those entries are ever replaced or
removed; a directory that holds anything else is refused unless ``force`` is given, and even then the other
files are left alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

MARKER = ".mqttaudit-output.json"
STAGING_PREFIX = ".mqttaudit-staging-"
TRASH_PREFIX = ".mqttaudit-replaced-"


class OutputDirError(ValueError):
    """The output directory cannot be used as asked (a file, or a folder of someone else's files)."""


def owned_entries(out: Path) -> set[str]:
    """The names mqttaudit wrote into ``out`` last time (empty when it has no marker)."""
    try:
        recorded = json.loads((out / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    entries = recorded.get("entries") if isinstance(recorded, dict) else None
    if not isinstance(entries, list):
        return set()
    return {name for name in entries if isinstance(name, str) and name and "/" not in name and name not in {".", ".."}}


def check_output_dir(out: Path, *, force: bool = False) -> None:
    """Raises :class:`OutputDirError` when ``out`` exists and is not a folder mqttaudit may write into."""
    if not out.exists():
        return
    if not out.is_dir():
        raise OutputDirError(f"--out {out}: exists and is not a folder")
    foreign = sorted(name for name in os.listdir(out) if name != MARKER and name not in owned_entries(out))
    if foreign and not force:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise OutputDirError(
            f"--out {out}: holds files mqttaudit did not write ({shown}); choose another folder, or pass --force "
            "to write beside them (they are left alone)"
        )


@contextlib.contextmanager
def staged_output(out: Path, *, force: bool = False) -> Iterator[Path]:
    """A fresh staging folder to write the whole output into; published to ``out`` when the block completes,
    removed (and ``out`` untouched) when it raises, including KeyboardInterrupt."""
    check_output_dir(out, force=force)
    parent = out.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=parent))
    try:
        yield staging
        publish(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def publish(staging: Path, out: Path) -> None:
    """Moves every entry of ``staging`` into ``out``, replacing mqttaudit's previous entries (and only those)."""
    new = sorted(name for name in os.listdir(staging) if name != MARKER)
    out.mkdir(parents=True, exist_ok=True)
    previous = owned_entries(out)
    trash = Path(tempfile.mkdtemp(prefix=TRASH_PREFIX, dir=out.absolute().parent))
    moved_aside: list[str] = []
    placed: list[str] = []
    try:
        for name in sorted(previous | set(new)):
            if (out / name).exists() or (out / name).is_symlink():
                os.rename(out / name, trash / name)
                moved_aside.append(name)
        for name in new:
            os.rename(staging / name, out / name)
            placed.append(name)
        _write_marker(out, new)
    except BaseException:
        for name in placed:  # put the previous result back as it was
            with contextlib.suppress(OSError):
                os.rename(out / name, staging / name)
        for name in moved_aside:
            with contextlib.suppress(OSError):
                os.rename(trash / name, out / name)
        raise
    finally:
        shutil.rmtree(trash, ignore_errors=True)


def _write_marker(out: Path, entries: list[str]) -> None:
    from mqttaudit import __version__

    text = json.dumps({"written_by": "mqttaudit", "mqttaudit_version": __version__, "entries": entries}, indent=2)
    temporary = out / f"{MARKER}.tmp"
    temporary.write_text(text + "\n", encoding="utf-8")
    os.replace(temporary, out / MARKER)

"""An output directory that never holds a mix of two runs, and never loses files mqttaudit did not write.

A run writes into a staging directory beside ``--out`` (same filesystem, so publishing is a handful of renames)
and publishes it only when it completes: the previous run's entries are moved aside, the new ones renamed into
place, then the old ones deleted. A run that fails or is interrupted removes its staging directory and leaves
the previous complete result as it was.

A marker file in the output directory lists what mqttaudit wrote there. Only those entries are ever replaced or
removed; a directory that holds anything else is refused unless ``force`` is given, and even then the other
files are left alone: an entry of someone else's that has the name of one of the run's outputs (their own
``findings.md``) is never replaced, the run is refused instead (before it starts when the command says which
names it writes, else when it publishes).

An ``--out`` that cannot be used (a broken symbolic link or a loop, a path under a file, a place where no folder
can be made such as ``/sys``) is an :class:`OutputDirError` from :func:`check_output_dir`, before any work.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from .. import interrupts

MARKER = ".mqttaudit-output.json"
STAGING_PREFIX = ".mqttaudit-staging-"
TRASH_PREFIX = ".mqttaudit-replaced-"


class OutputDirError(ValueError):
    """The output directory cannot be used as asked (a file, or a folder of someone else's files)."""


def owned_entries(out: Path) -> set[str]:
    """The names mqttaudit wrote into ``out`` last time (empty when it has no marker)."""
    try:
        return marker_entries((out / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()


def marker_entries(text: str) -> set[str]:
    """The names a marker's ``text`` lists (empty when it is not one)."""
    try:
        recorded = json.loads(text)
    except ValueError:
        return set()
    entries = recorded.get("entries") if isinstance(recorded, dict) else None
    if not isinstance(entries, list):
        return set()
    return {name for name in entries if isinstance(name, str) and name and "/" not in name and name not in {".", ".."}}


def check_output_dir(out: Path, *, force: bool = False, writes: Iterable[str] = ()) -> None:
    """Raises :class:`OutputDirError` when ``out`` cannot be used: a broken symbolic link or a loop, a path under
    a file, a place where no folder can be made, an existing entry that is not a folder, a folder of someone else's
    files (unless ``force``), or one holding an entry of someone else's named like one of the names the run
    ``writes`` (even with ``force``: it is never replaced)."""
    where = usable_location(out)
    if not where.exists():
        return
    if not where.is_dir():
        raise OutputDirError(f"--out {out}: exists and is not a folder")
    refuse_foreign(out, os.listdir(where), owned_entries(where), force=force, writes=writes)


def refuse_foreign(
    out: Path | str, names: Iterable[str], owned: set[str], *, force: bool, writes: Iterable[str]
) -> None:
    """The rule of :func:`check_output_dir` on the entries ``names`` of an output, ``owned`` those its marker
    lists: an entry of someone else's named like an output is refused even with ``force``; any other only without
    it."""
    foreign = sorted(name for name in names if name != MARKER and name not in owned)
    clashes = sorted(set(foreign) & set(writes))
    if clashes:
        raise OutputDirError(_clash_message(out, clashes))
    if foreign and not force:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise OutputDirError(
            f"--out {out}: holds files mqttaudit did not write ({shown}); choose another folder, or pass --force "
            "to write beside them (they are left alone)"
        )


def usable_location(out: Path) -> Path:
    """Where ``out`` really is (symbolic links followed), once it is known that a folder can be there and that
    mqttaudit can write beside it; :class:`OutputDirError`, naming the cause, otherwise."""
    try:
        info = os.lstat(out)
    except FileNotFoundError:
        info = None
    except NotADirectoryError:
        raise OutputDirError(f"--out {out}: {_under_a_file(out)}") from None
    except OSError as exc:
        raise OutputDirError(f"--out {out}: cannot be used ({_why(exc)})") from None
    if info is not None and stat.S_ISLNK(info.st_mode):
        try:
            real = out.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            loop = isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == errno.ELOOP
            what = "a loop of symbolic links" if loop else f"a symbolic link to nothing ({os.readlink(out)})"
            raise OutputDirError(f"--out {out}: is {what}") from None
    else:
        broken = next((p for p in Path(os.path.abspath(out)).parents if p.is_symlink() and not p.exists()), None)
        if broken is not None:
            raise OutputDirError(f"--out {out}: is under {broken}, a symbolic link to nothing")
        real = Path(os.path.realpath(out))
    if info is not None and real.is_dir() and not os.access(real, os.W_OK | os.X_OK):
        why = "a read-only file system" if _read_only(real) else "permission denied"
        raise OutputDirError(f"--out {out}: mqttaudit may not write into this folder ({why})")
    _check_writable_beside(out, real)
    return real


def _check_writable_beside(out: Path, real: Path) -> None:
    """The staging folder is made beside ``out`` (in the nearest folder on its path that exists): tried once."""
    ancestor = real.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutputDirError(f"--out {out}: {_under_a_file(out)}")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=ancestor))
    except OSError as exc:
        raise OutputDirError(f"--out {out}: no folder can be made in {ancestor} ({_why(exc)})") from None


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _under_a_file(out: Path) -> str:
    parent = next((p for p in Path(os.path.abspath(out)).parents if p.exists() and not p.is_dir()), None)
    return f"is under {parent}, which is a file, not a folder" if parent else "is under a file, not a folder"


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _clash_message(out: Path | str, clashes: list[str]) -> str:
    shown = ", ".join(clashes[:5]) + (f" and {len(clashes) - 5} more" if len(clashes) > 5 else "")
    return (
        f"--out {out}: holds {shown}, which mqttaudit did not write and would replace; move it away or choose another "
        "folder (--force writes beside other files, never over them)"
    )


@contextlib.contextmanager
def staged_output(out: Path, *, force: bool = False, writes: Iterable[str] = ()) -> Iterator[Path]:
    """A fresh staging folder to write the whole output into; published to ``out`` when the block completes,
    removed (and ``out`` untouched) when it raises, including KeyboardInterrupt."""
    check_output_dir(out, force=force, writes=writes)
    real = usable_location(out)
    parent = real.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=parent))
    except OSError as exc:
        raise OutputDirError(f"--out {out}: no folder can be made in {parent} ({_why(exc)})") from None
    try:
        yield staging
        if interrupts.seen():  # interrupted, though the signal's exception was lost: publish nothing
            raise KeyboardInterrupt
        publish(staging, real)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def publish(staging: Path, out: Path) -> None:
    """Moves every entry of ``staging`` into ``out``, replacing mqttaudit's previous entries (and only those). An
    entry of someone else's with the name of a new one is never replaced: :class:`OutputDirError`, nothing moved."""
    new = sorted(name for name in os.listdir(staging) if name != MARKER)
    out.mkdir(parents=True, exist_ok=True)
    previous = owned_entries(out)
    clashes = [name for name in new if name not in previous and ((out / name).exists() or (out / name).is_symlink())]
    if clashes:
        raise OutputDirError(_clash_message(out, clashes))
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

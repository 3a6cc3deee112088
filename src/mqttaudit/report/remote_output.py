"""An output on another filesystem than this machine's (``s3://``, ``gs://``, ``hdfs://``, ...; see
:mod:`mqttaudit.locations`), kept to the rules of :mod:`.output_dir` as far as a store without rename allows.

The same marker (:data:`~.output_dir.MARKER`) lists what mqttaudit wrote there, and the same refusals apply before
any work: a prefix that holds anything mqttaudit did not write is refused unless ``force`` is given; even then an
entry of someone else's named like an output is never replaced, and the other entries are left alone.

An object store cannot swap a folder whole, so publication is by the marker, written last. When a run starts, the
marker is rewritten with ``"complete": false`` and the previous run's entries are removed; the tables are written
in place by the tasks, the reports uploaded when the audit completes, and the marker then rewritten with
``"complete": true``, the entries and every file of the output. What the publication guarantees: an output whose
marker says ``complete: true`` holds exactly the files it lists, each written whole by one accepted task attempt or
by the driver. A run that fails or is interrupted removes what it wrote and leaves the marker at
``complete: false`` (the previous result is gone from the moment the run started: a reader must check the marker,
as readers of Spark's outputs check ``_SUCCESS``).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from .. import interrupts, locations
from .output_dir import MARKER, OutputDirError, marker_entries, refuse_foreign


def _entries(out: str) -> list[str]:
    """The names directly under ``out`` (files and folders)."""
    import pyarrow.fs as pafs

    filesystem, path = locations.resolve(out)
    listing = filesystem.get_file_info(pafs.FileSelector(path, recursive=False, allow_not_found=True))
    return sorted(info.base_name for info in listing if info.base_name)


def _owned(out: str) -> set[str]:
    try:
        return marker_entries(locations.read_bytes(locations.join(out, MARKER)).decode("utf-8"))
    except (OSError, ValueError):
        return set()


def check_remote_output(out: str, *, force: bool = False, writes: Iterable[str] = ()) -> None:
    """:func:`~.output_dir.check_output_dir` for a URL: :class:`OutputDirError` when its filesystem cannot be
    reached, or it holds entries of someone else's (see :func:`~.output_dir.refuse_foreign`)."""
    try:
        names = _entries(out)
        owned = _owned(out) if MARKER in names else set()
    except (OSError, locations.LocationError) as exc:
        raise OutputDirError(f"--out {out}: cannot be used ({exc})") from None
    refuse_foreign(out, names, owned, force=force, writes=writes)


def check_output(out: Path | str, *, force: bool = False, writes: Iterable[str] = ()) -> None:
    """:func:`check_remote_output` for a URL, :func:`~.output_dir.check_output_dir` for a local folder."""
    from .output_dir import check_output_dir

    if isinstance(out, str) and locations.is_remote(out):
        check_remote_output(out, force=force, writes=writes)
    else:
        check_output_dir(locations.local_path(out), force=force, writes=writes)


@contextlib.contextmanager
def remote_output(out: str, *, force: bool = False, writes: Iterable[str] = ()) -> Iterator[Path]:
    """Prepares ``out`` for a run (see the module's text) and yields a local folder for what the driver writes
    (the reports); the tasks write the tables into ``out`` themselves. When the block completes the folder's files
    are uploaded and the marker written complete; when it raises (KeyboardInterrupt too) every entry named in
    ``writes`` is removed from ``out`` and the marker says incomplete."""
    check_remote_output(out, force=force, writes=writes)
    ours = set(writes)
    previous = _owned(out)
    try:
        _write_marker(out, sorted(previous), complete=False)
        for name in sorted(previous):
            locations.delete_tree(locations.join(out, name))
    except OSError as exc:
        raise OutputDirError(f"--out {out}: cannot be written ({exc})") from None
    local = Path(tempfile.mkdtemp(prefix="mqttaudit-remote-out-"))
    try:
        yield local
        if interrupts.seen():  # interrupted, though the signal's exception was lost: publish nothing
            raise KeyboardInterrupt
        for file in sorted(local.iterdir()):
            locations.upload(file, locations.join(out, file.name))
        entries = [name for name in _entries(out) if name in ours]
        files = [path for path in locations.files_under(out) if path.split("/")[0] in entries]
        _write_marker(out, entries, complete=True, files=files)
    except BaseException:
        with contextlib.suppress(OSError):
            for name in sorted(ours & set(_entries(out))):
                locations.delete_tree(locations.join(out, name))
            _write_marker(out, [], complete=False)
        raise
    finally:
        shutil.rmtree(local, ignore_errors=True)


def _write_marker(out: str, entries: list[str], *, complete: bool, files: list[str] | None = None) -> None:
    from mqttaudit import __version__

    recorded: dict[str, object] = {
        "written_by": "mqttaudit",
        "mqttaudit_version": __version__,
        "complete": complete,
        "entries": entries,
    }
    if files is not None:
        recorded["files"] = files
    locations.write_bytes(locations.join(out, MARKER), (json.dumps(recorded, indent=2) + "\n").encode("utf-8"))

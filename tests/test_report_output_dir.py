"""The output folder: staged, published whole, never a mix of two runs, never anyone else's files lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqttaudit.report.output_dir import (
    MARKER,
    STAGING_PREFIX,
    TRASH_PREFIX,
    OutputDirError,
    check_output_dir,
    owned_entries,
    staged_output,
)


def write_run(out: Path, files: dict[str, str], *, force: bool = False) -> None:
    with staged_output(out, force=force) as staging:
        for name, text in files.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            (staging / name).write_text(text)


def leftovers(parent: Path) -> list[str]:
    return [p.name for p in parent.iterdir() if p.name.startswith((STAGING_PREFIX, TRASH_PREFIX))]


def test_a_completed_run_is_published_with_a_marker_of_what_it_wrote(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_run(out, {"summary.json": "{}", "packets/part-0.parquet": "p"})
    assert sorted(p.name for p in out.iterdir()) == sorted([MARKER, "packets", "summary.json"])
    assert owned_entries(out) == {"packets", "summary.json"}
    assert json.loads((out / MARKER).read_text())["written_by"] == "mqttaudit"
    assert leftovers(tmp_path) == []


def test_a_new_run_replaces_the_previous_one_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_run(out, {"summary.json": "old", "packets/part-0.parquet": "old", "report.html": "old"})
    write_run(out, {"summary.json": "new", "packets/part-1.parquet": "new"})
    assert (out / "summary.json").read_text() == "new"
    assert sorted(p.name for p in (out / "packets").iterdir()) == ["part-1.parquet"]
    assert not (out / "report.html").exists()  # the previous run's entry, not written again
    assert leftovers(tmp_path) == []


def test_a_failed_or_interrupted_run_leaves_the_previous_output_untouched(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_run(out, {"summary.json": "complete"})
    for error in (RuntimeError("a task failed"), KeyboardInterrupt()):
        with pytest.raises(type(error)), staged_output(out) as staging:
            (staging / "summary.json").write_text("half")
            (staging / "packets").mkdir()
            raise error
        assert (out / "summary.json").read_text() == "complete"
        assert sorted(p.name for p in out.iterdir()) == [MARKER, "summary.json"]
        assert leftovers(tmp_path) == []


def test_a_folder_of_someone_elses_files_is_refused_and_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "packets").mkdir(parents=True)
    (out / "packets" / "my-notes.txt").write_text("mine")
    with pytest.raises(OutputDirError, match="holds files mqttaudit did not write \\(packets\\)"):
        write_run(out, {"packets/part-0.parquet": "p"})
    assert (out / "packets" / "my-notes.txt").read_text() == "mine"
    assert leftovers(tmp_path) == []


def test_force_writes_beside_other_files_and_never_removes_them(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    write_run(out, {"summary.json": "one"}, force=True)
    write_run(out, {"summary.json": "two"}, force=True)
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "summary.json").read_text() == "two"
    # Without --force the folder is still refused: notes.txt is not mqttaudit's.
    with pytest.raises(OutputDirError, match=r"notes\.txt"):
        check_output_dir(out)


def test_an_out_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("a file")
    with pytest.raises(OutputDirError, match="exists and is not a folder"):
        check_output_dir(tmp_path / "out")


def test_a_marker_cannot_make_mqttaudit_delete_outside_its_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "precious").write_text("keep")
    (out / MARKER).write_text(json.dumps({"entries": ["../precious", "..", "", 7, "summary.json"]}))
    assert owned_entries(out) == {"summary.json"}
    write_run(out, {"summary.json": "new"})
    assert (tmp_path / "precious").read_text() == "keep"


def test_an_empty_existing_folder_is_used(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    write_run(out, {"summary.json": "{}"})
    assert (out / "summary.json").exists()

"""The fixed cost of an audit (issue 31, point 8): a small capture runs few Spark jobs (the summary and the report
data each come from one query of bounded parts), a small input is judged in one task, and neither changes a table,
the summary or the report data."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest

from mqttaudit.pipeline import audit
from mqttaudit.pipeline.audit import TABLES, flow_partitions, run_audit
from mqttaudit.pipeline.bounded import collect_parts
from mqttaudit.pipeline.spark import (
    CLASS_ARCHIVE_SETTING,
    CLASS_ARCHIVE_SETTLED_S,
    MALLOC_ARENAS,
    _jvm_environment,
    class_archive_folder,
    class_archive_options,
)

from .child import child_env, run_child
from .corpus import capture

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Spark jobs of the audit of the corpus's "18-packet capture" (19 frames, 20 MQTT packets) on the test session: 36
#: with the summary and the report data each one query of bounded parts; a query per figure ran 63.
MAX_JOBS = 45

SMALL_CAPTURES = (
    "peafowl/mqtt-1.pcapng",
    "arkime/mqtt_synthetic.pcap",
    "suricata-verify/mqtt5-sub-mosquittoprops.pcap",
    "suricata-verify/mqtt-limit-2.pcap",
)


def _outputs(out: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """What an audit wrote, in a form that does not depend on how many files a table was written in."""
    kept = {key: value for key, value in summary.items() if key not in ("duration", "routing_replays")}
    return {
        "tables": {
            name: sorted(json.dumps(row, sort_keys=True) for row in pq.read_table(out / name).to_pylist())
            for name in TABLES
        },
        "summary": kept,
        "report_data": json.loads((out / "report_data.json").read_text()),
        "findings": (out / "findings.md").read_text(),
    }


@pytest.mark.captures
def test_the_audit_of_the_18_packet_capture_runs_few_spark_jobs(spark: SparkSession, tmp_path: Path) -> None:
    group = f"fixed-cost-{uuid.uuid4()}"
    spark.sparkContext.setJobGroup(group, "the audit of an 18-packet capture")
    try:
        result = run_audit([str(capture("peafowl/mqtt-1.pcapng"))], tmp_path / "out", spark=spark)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(group)
    assert (result.summary["records"], result.summary["counts"]["packets"]) == (19, 20)
    assert 0 < len(jobs) <= MAX_JOBS, len(jobs)
    print(f"{len(jobs)} Spark jobs")


@pytest.mark.captures
def test_a_small_input_judged_in_one_task_gives_what_sixteen_tasks_give(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [str(capture(name)) for name in SMALL_CAPTURES]
    total = sum(Path(path).stat().st_size for path in paths)
    parallelism = spark.sparkContext.defaultParallelism
    assert flow_partitions(total, parallelism) == 1
    one = run_audit(paths, tmp_path / "one", spark=spark)
    monkeypatch.setattr(audit, "FLOW_PARTITION_BYTES", 1)
    assert flow_partitions(total, parallelism) == parallelism * audit.FLOW_PARTITIONS_PER_CORE > 1
    many = run_audit(paths, tmp_path / "many", spark=spark)
    assert many.summary["counts"]["violations"] > 0 and many.summary["not_assessable"]["rows"] > 0
    assert _outputs(tmp_path / "one", one.summary) == _outputs(tmp_path / "many", many.summary)


def test_judging_tasks_grow_with_the_input_up_to_eight_per_core() -> None:
    mib = 1024 * 1024
    assert flow_partitions(0, 2) == flow_partitions(2228, 2) == 1
    assert flow_partitions(9 * mib, 2) == 3
    assert flow_partitions(579 * mib, 2) == 16
    assert flow_partitions(579 * mib, 64) == 145


def test_the_jvm_and_the_executors_get_the_malloc_arena_cap(spark: SparkSession) -> None:
    """The JVM the session started (whose environment its Python workers inherit) and a cluster's executors cap the
    C library's memory arenas, at the environment's own cap when it sets one."""
    expected = os.environ.get("MALLOC_ARENA_MAX", MALLOC_ARENAS)
    jvm = spark.sparkContext._gateway.proc.pid  # type: ignore[attr-defined]
    environment = Path(f"/proc/{jvm}/environ").read_bytes().split(b"\0")
    assert f"MALLOC_ARENA_MAX={expected}".encode() in environment
    assert spark.conf.get("spark.executorEnv.MALLOC_ARENA_MAX") == expected


def test_the_arena_cap_is_set_only_while_the_jvm_starts_and_never_overrides_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    with _jvm_environment():
        assert os.environ["MALLOC_ARENA_MAX"] == MALLOC_ARENAS
    assert "MALLOC_ARENA_MAX" not in os.environ  # this process's environment is left as it was
    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")
    with _jvm_environment():
        assert os.environ["MALLOC_ARENA_MAX"] == "8"
    assert os.environ["MALLOC_ARENA_MAX"] == "8"


def test_bounded_parts_come_back_as_each_query_collects_them(spark: SparkSession) -> None:
    from pyspark.sql import functions as F

    rows = spark.createDataFrame(
        [
            ("b", 2, 0.5, ["x"]),
            ("a", 3, math.nan, []),
            ("c", None, math.inf, None),
            ("a", 1, None, ["y", "z"]),
            ("d", 7, -math.inf, ["\u00e9\u2026"]),
        ],
        "name string, n bigint, t double, tags array<string>",
    ).repartition(3)
    parts = {
        "sorted": rows.orderBy(F.desc("n"), "name"),
        "limited": rows.orderBy("name", "n").limit(3),
        "counted": rows.groupBy("name").agg(F.count("*").alias("count")).orderBy("name"),
        "none": rows.where("n > 100"),
        "totals": rows.agg(F.sum("n").alias("n"), F.min("t").alias("t")),
    }
    got = collect_parts(parts)
    assert list(got) == list(parts)
    for name, frame in parts.items():
        expected = [row.asDict() for row in frame.collect()]
        assert [_comparable(row) for row in got[name]] == [_comparable(row) for row in expected], name
    assert got["none"] == [] and got["counted"][0] == {"name": "a", "count": 2}
    assert math.isinf(got["sorted"][-1]["t"]) and got["sorted"][-1]["name"] == "c"


def _comparable(row: dict[str, Any]) -> dict[str, Any]:
    return {key: "nan" if isinstance(value, float) and math.isnan(value) else value for key, value in row.items()}


def test_the_jvm_writes_its_class_archive_once_then_maps_it(tmp_path: Path) -> None:
    java = sys.executable  # any file stands for the Java binary: the archive is named by its path and time
    folder = tmp_path / "cache"
    first = class_archive_options(folder, java)
    assert len(first) == 1 and first[0].startswith("-XX:ArchiveClassesAtExit=")
    written = Path(first[0].split("=", 1)[1])
    assert written.parent == folder and written.suffix == f".{os.getpid()}"
    written.write_bytes(b"archive")
    # While the process that writes it lives, nobody else writes or maps one.
    assert class_archive_options(folder, java) == []
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    dead = written.with_suffix(f".{int(ended.stdout)}")
    written.rename(dead)
    assert class_archive_options(folder, java) == []  # just written: the JVM may still be writing it
    later = time.time() + CLASS_ARCHIVE_SETTLED_S + 1
    other = dead.with_suffix(".999999999")  # a second one, of an audit that started beside the first
    other.write_bytes(b"another")
    mapped = class_archive_options(folder, java, now=later)
    archive = folder / dead.stem
    assert mapped == [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]
    assert archive.read_bytes() in (b"archive", b"another")
    assert sorted(folder.iterdir()) == [archive, folder / f"{archive.stem}.lock"]  # the writers' lock stays, empty
    assert class_archive_options(folder, java, now=later) == mapped


#: A session's archive step in a process of its own: prints its JVM options, then lives until its input ends.
ARCHIVE_STEP = (
    "import json, sys\n"
    "from pathlib import Path\n"
    "from mqttaudit.pipeline.spark import class_archive_options\n"
    "print(json.dumps(class_archive_options(Path(sys.argv[1]), sys.executable)), flush=True)\n"
    "sys.stdin.read()\n"
)


def archive_steps(folder: Path, count: int) -> list[subprocess.Popen[str]]:
    """``count`` sessions' archive steps started together on ``folder``, all alive until their input is closed."""
    return [
        subprocess.Popen(
            [sys.executable, "-c", ARCHIVE_STEP, str(folder)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        for _ in range(count)
    ]


def test_audits_that_start_together_write_one_class_archive_and_a_dead_writer_blocks_no_one(tmp_path: Path) -> None:
    """Before, each of them had its JVM write an archive (190 MB each) since none was there yet: one takes the
    lock and writes, the others run without writing one. The lock dies with its process: killed before its JVM
    wrote anything, the next audit writes the archive."""
    folder = tmp_path / "cache"
    steps = archive_steps(folder, 3)
    try:
        said = [json.loads(step.stdout.readline()) for step in steps]  # each has decided, and all are alive
        writers = [options for options in said if options]
        assert len(writers) == 1 and writers[0][0].startswith("-XX:ArchiveClassesAtExit="), said
        (writer,) = [step for step, options in zip(steps, said, strict=True) if options]
        writer.kill()
        writer.wait(timeout=30)
        steps += archive_steps(folder, 1)
        after = json.loads(steps[-1].stdout.readline())
        assert len(after) == 1 and after[0].startswith("-XX:ArchiveClassesAtExit="), after
    finally:
        for step in steps:
            step.kill()
            step.wait(timeout=30)


def test_the_class_archive_can_be_turned_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(CLASS_ARCHIVE_SETTING, "off")
    assert class_archive_folder() is None and class_archive_options(None, sys.executable) == []
    monkeypatch.setenv(CLASS_ARCHIVE_SETTING, str(tmp_path))
    assert class_archive_folder() == tmp_path
    monkeypatch.delenv(CLASS_ARCHIVE_SETTING)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert class_archive_folder() == tmp_path / "mqttaudit"
    assert class_archive_options(tmp_path / "cache", None) == []


@pytest.mark.captures
def test_a_jvm_writing_its_class_archive_leaves_the_json_document_alone(tmp_path: Path) -> None:
    """The first audit with an empty archive folder has its JVM write the archive as it exits; the JVM's warnings
    about the classes it skips (thousands of lines) once went to standard output after the ``--format json``
    document. Standard output is now the document alone, and the archive is being written."""
    folder = tmp_path / "archive"
    done = run_child(
        "audit",
        str(capture("peafowl/mqtt-1.pcapng")),
        "--out",
        str(tmp_path / "out"),
        "--format",
        "json",
        "--engine",
        "spark",  # the JVM's archive: an audit this small would run without Spark by default
        timeout=600,
        env=child_env(MQTTAUDIT_CLASS_ARCHIVE=str(folder)),
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)  # one document, nothing after it
    assert document["exit_status"] == 0
    assert "[cds]" not in done.stdout + done.stderr
    assert [path.name for path in folder.iterdir()], "no archive was started: the case this test is about did not arise"

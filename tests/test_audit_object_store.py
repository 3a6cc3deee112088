"""Captures read from an object store and tables written to it (issue 31, point 6): a real S3-compatible server
(moto's server mode) on 127.0.0.1, the real ``mqttaudit audit`` with ``s3://`` inputs and ``--out``, and the same
tables, summary and exit status as an audit of the same captures into a local folder; and the same audit on a real
Spark standalone cluster of two workers that share no disk (point 5)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from mqttaudit.pipeline.audit import OUTPUTS, run_audit
from mqttaudit.pipeline.tables import TABLES
from mqttaudit.report.output_dir import MARKER

from .child import child_env, run_child
from .corpus import capture
from .s3_server import S3Server, s3_server
from .spark_cluster import environment_without_spark, standalone_cluster

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Captures with routing, violations, malformed packets and one-sided sessions (not assessable rules).
CAPTURES = (
    "zeek/mqtt.pcap",
    "suricata-verify/mqtt-events-unassigned-msgtype.pcap",
    "suricata-verify/mqtt5-excessiveproplen.pcap",
    "arkime/mqtt_synthetic.pcap",
)
BUCKET = "fleet"
#: What differs between two runs of the same captures: the time taken, where the captures were, the master.
RUN_ONLY = {"duration", "captures", "spark_master", "routing_replays"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("s3") / "moto.log") as running:
        running.filesystem().create_dir(BUCKET)
        yield running


@pytest.fixture(scope="module")
def runs(server: S3Server, spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The captures audited twice: from a local folder into a local folder (in this process), and from the bucket
    into the bucket by the command, as a user runs it."""
    local = tmp_path_factory.mktemp("local")
    for name in CAPTURES:
        server.upload(capture(name), f"{BUCKET}/captures/{name}")
        (local / "captures" / name).parent.mkdir(parents=True, exist_ok=True)
        (local / "captures" / name).write_bytes(capture(name).read_bytes())
    here = run_audit([str(local / "captures")], local / "out", spark=spark)
    there = run_child(
        "audit",
        f"s3://{BUCKET}/captures",
        "--out",
        f"s3://{BUCKET}/out",
        "--master",
        "local[2]",
        "--engine",
        "spark",  # the tasks' way of reaching a bucket (the local engine's is the same code, in one process)
        "--format",
        "json",
        timeout=600,
        env=child_env(**server.environment()),
    )
    return {"local": here, "local_out": local / "out", "s3": there}


@pytest.mark.captures
def test_a_standalone_cluster_of_two_workers_without_a_shared_disk_gives_the_tables_of_local_2(
    server: S3Server, runs: dict[str, Any], tmp_path: Path
) -> None:
    """A master and two workers (1 core, their own working and temporary folders each), the captures and the
    output on the S3 server: the tables of ``local[2]``, tasks on both workers, nothing of the tables or the
    transcripts written to a worker's folders, and the executors' JVMs started with the audit's JVM options."""
    import pyarrow.parquet as pq

    from mqttaudit.pipeline.spark import DEFAULT_DRIVER_JAVA_OPTIONS

    env = {**environment_without_spark(child_env(**server.environment())), "PYSPARK_PYTHON": sys.executable}
    with standalone_cluster(tmp_path, workers=2, env=env, memory="768m") as cluster:
        result = run_child(
            "audit",
            f"s3://{BUCKET}/captures",
            "--out",
            f"s3://{BUCKET}/cluster-out",
            "--master",
            cluster.master,
            "--format",
            "json",
            timeout=800,
            env={
                **env,
                "SPARK_LOCAL_IP": "127.0.0.1",
                "MQTTAUDIT_DRIVER_MEMORY": "1g",
                "PYSPARK_SUBMIT_ARGS": "--conf spark.executor.memory=512m --conf spark.cores.max=2 pyspark-shell",
            },
        )
    assert result.returncode == runs["local"].exit_status, result.stderr
    assert json.loads(result.stdout)["summary"]["spark_master"] == cluster.master
    for table in TABLES:
        there = _s3_table(server, table, "cluster-out")
        assert _rows(there) == _rows(pq.read_table(runs["local_out"] / table)), table
    for worker in cluster.workers:
        logs = list(worker.work_dir.glob("app-*/*/stderr"))
        assert len(logs) == 1, logs  # one executor per worker
        log = logs[0].read_text(errors="replace")
        assert "Running task" in log  # both workers took part
        command = next(line for line in log.splitlines() if line.startswith("Spark Executor Command"))
        assert all(f'"{option}"' in command for option in DEFAULT_DRIVER_JAVA_OPTIONS.split())
        written = [
            path
            for folder in (worker.work_dir, worker.local_dir)
            for path in folder.rglob("*")
            if path.suffix in {".parquet", ".arrow", ".tmp"}
        ]
        assert written == []


def _rows(table: Any) -> list[str]:
    """A table's rows in a canonical order (the order tasks write them in is not part of the result)."""
    return sorted(json.dumps(row, sort_keys=True, default=repr) for row in table.to_pylist())


def _s3_table(server: S3Server, name: str, out: str = "out") -> Any:
    import pyarrow.dataset as ds

    return ds.dataset(f"{BUCKET}/{out}/{name}", filesystem=server.filesystem(), format="parquet").to_table()


@pytest.mark.captures
def test_an_audit_from_and_to_s3_gives_the_tables_of_a_local_audit(server: S3Server, runs: dict[str, Any]) -> None:
    import pyarrow.parquet as pq

    result = runs["s3"]
    assert result.returncode == runs["local"].exit_status, result.stderr
    document = json.loads(result.stdout)
    assert document["out_dir"] == f"s3://{BUCKET}/out"
    assert sorted(document["outputs"]) == sorted(OUTPUTS)
    for table in TABLES:
        there = _s3_table(server, table)
        here = pq.read_table(runs["local_out"] / table)
        assert there.schema.names == here.schema.names, table
        assert _rows(there) == _rows(here), table
    assert sum(_s3_table(server, table).num_rows for table in TABLES) > 0
    expected = {k: v for k, v in runs["local"].summary.items() if k not in RUN_ONLY}
    assert {k: v for k, v in document["summary"].items() if k not in RUN_ONLY} == expected
    assert runs["local"].summary["counts"]["violations"] > 0  # the comparison covers findings, not only empty tables
    stored = json.loads(_read(server, f"{BUCKET}/out/summary.json"))
    assert {k: v for k, v in stored.items() if k not in RUN_ONLY} == expected
    assert [c["path"] for c in stored["captures"]] == [f"s3://{BUCKET}/captures/{name}" for name in sorted(CAPTURES)]


@pytest.mark.captures
def test_the_s3_output_is_published_by_a_marker_that_lists_every_file_and_holds_no_secret(
    server: S3Server, runs: dict[str, Any]
) -> None:
    import pyarrow.fs as pafs

    filesystem = server.filesystem()
    listing = filesystem.get_file_info(pafs.FileSelector(f"{BUCKET}/out", recursive=True))
    files = sorted(info.path.removeprefix(f"{BUCKET}/out/") for info in listing if info.type == pafs.FileType.File)
    marker = json.loads(_read(server, f"{BUCKET}/out/{MARKER}"))
    assert marker["complete"] is True
    assert sorted(marker["entries"]) == sorted(OUTPUTS)
    assert sorted(marker["files"]) == [name for name in files if name != MARKER]
    assert not [name for name in files if name.startswith("_transcripts")]  # handed to the replay, then removed
    for name in files:  # the credentials the executors used are written nowhere
        assert server.secret_key.encode() not in _read(server, f"{BUCKET}/out/{name}").encode(errors="replace"), name


@pytest.mark.captures
def test_a_local_out_holds_what_it_held_before_object_stores(runs: dict[str, Any]) -> None:
    """The local folder: the same entries, the table folders holding Parquet files only (no attempt's hidden file,
    no transcripts), and the marker of a local output (no ``complete`` flag: publication there is by rename)."""
    out = runs["local_out"]
    assert sorted(path.name for path in out.iterdir()) == sorted([*OUTPUTS, MARKER])
    for table in TABLES:
        assert all(path.suffix == ".parquet" and not path.name.startswith(".") for path in (out / table).iterdir())
    assert "complete" not in json.loads((out / MARKER).read_text())


def test_an_s3_prefix_holding_files_mqttaudit_did_not_write_is_refused_before_anything_is_read(
    server: S3Server, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    server.upload(tmp_path / "notes.txt", f"{BUCKET}/theirs/notes.txt")
    server.upload(tmp_path / "notes.txt", f"{BUCKET}/clash/summary.json")
    env = child_env(**server.environment())
    refused = run_child("audit", f"s3://{BUCKET}/nothing-here", "--out", f"s3://{BUCKET}/theirs", env=env)
    assert refused.returncode == 2
    assert "holds files mqttaudit did not write (notes.txt)" in refused.stderr
    clash = run_child("audit", f"s3://{BUCKET}/nothing-here", "--out", f"s3://{BUCKET}/clash", "--force", env=env)
    assert clash.returncode == 2
    assert "holds summary.json, which mqttaudit did not write and would replace" in clash.stderr
    assert _read(server, f"{BUCKET}/clash/summary.json") == "mine"


def test_only_the_files_of_accepted_task_attempts_are_kept_on_s3(
    server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed attempt's file (its upload completed before the task failed) is removed when the driver keeps the
    attempts Spark accepted; of two accepted attempts of one task (a lost partition computed again), one is kept."""
    import pyarrow.parquet as pq

    from mqttaudit import locations
    from mqttaudit.pipeline.tables import table_schema
    from mqttaudit.pipeline.task_files import accepted_entries, remove_unaccepted

    filesystem = server.filesystem()
    names = ["part-00000-t1.parquet", "part-00000-t7.parquet", "part-00001-t2.parquet", "part-00001-t5.parquet"]
    for name in names:
        pq.write_table(table_schema("gaps").empty_table(), f"{BUCKET}/attempts/gaps/{name}", filesystem=filesystem)
    published = [("gaps/part-00000.parquet", "gaps/part-00000-t7.parquet")]  # attempt 1 failed
    published += [("gaps/part-00001.parquet", f"gaps/{name}") for name in names[2:]]  # both accepted
    for key, value in server.environment().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(locations, "_filesystem", locations._filesystem.__wrapped__)  # this server's settings
    removed = remove_unaccepted(f"s3://{BUCKET}/attempts", ["gaps"], accepted_entries(published))
    assert sorted(removed) == ["gaps/part-00000-t1.parquet", "gaps/part-00001-t5.parquet"]
    assert locations.files_under(f"s3://{BUCKET}/attempts/gaps") == ["part-00000-t7.parquet", "part-00001-t2.parquet"]


def _read(server: S3Server, path: str) -> str:
    with server.filesystem().open_input_stream(path) as source:
        return bytes(source.read()).decode("utf-8", errors="replace")


def test_an_s3_run_that_fails_leaves_no_output_and_a_marker_that_says_incomplete(
    server: S3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The publication of a remote --out: a completed run's marker lists its files; the next run on the same prefix
    (mqttaudit's own) is not refused; when it fails, what it wrote is removed and the marker says incomplete."""
    from mqttaudit import locations
    from mqttaudit.report.remote_output import remote_output

    for key, value in server.environment().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(locations, "_filesystem", locations._filesystem.__wrapped__)  # this server's settings
    out = f"s3://{BUCKET}/runs"
    writes = ("packets", "summary.json")
    with remote_output(out, writes=writes) as local:
        locations.write_bytes(f"{out}/packets/part-0.parquet", b"first run")
        (local / "summary.json").write_text("{}")
    marker = json.loads(_read(server, f"{BUCKET}/runs/{MARKER}"))
    assert (marker["complete"], marker["entries"]) == (True, ["packets", "summary.json"])
    assert marker["files"] == ["packets/part-0.parquet", "summary.json"]
    with pytest.raises(RuntimeError, match="a task failed"), remote_output(out, writes=writes) as local:
        locations.write_bytes(f"{out}/packets/part-1.parquet", b"second run")
        raise RuntimeError("a task failed")
    marker = json.loads(_read(server, f"{BUCKET}/runs/{MARKER}"))
    assert (marker["complete"], marker["entries"]) == (False, [])
    assert locations.files_under(out) == [MARKER]


class CountingFile:
    """A file opened on the object store, counting the bytes read from it (what a reader asks of the remote
    object: pyarrow's S3 files read ranges)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.read_bytes = 0
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        data = bytes(self.inner.read(size))
        self.read_bytes += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self.inner.seek(offset, whence))

    def tell(self) -> int:
        return int(self.inner.tell())

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True


def test_the_replay_reads_of_a_remote_transcript_file_only_the_record_batches_it_needs(
    server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow as pa

    from mqttaudit import locations
    from mqttaudit.pipeline.task_files import (
        TRANSCRIPTS_DIR,
        TranscriptFiles,
        TranscriptWriter,
        read_rows,
        transcript_blobs,
    )

    for key, value in server.environment().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(locations, "_filesystem", locations._filesystem.__wrapped__)  # this server's settings
    monkeypatch.setattr(TranscriptWriter, "BATCH", 4)
    out = f"s3://{BUCKET}/transcripts"
    writer = TranscriptWriter(out, "00000")
    written = [bytes([n]) * 100_000 for n in range(12)]  # three record batches of 4 rows
    for transcript in written:
        writer.add_transcript(transcript)
    writer.close()
    wanted = [(writer.name, 6, "transcript"), (writer.name, 9, "transcript")]
    blobs = [blob.to_pybytes() for blob in transcript_blobs(out, wanted)]
    assert blobs == [written[6], written[9]]
    files = TranscriptFiles(out)  # the sliced replay's reader: the object opened once, read a blob at a time
    try:
        assert [files.blob(*each) for each in wanted] == blobs
    finally:
        files.close()
    path = f"{BUCKET}/transcripts/{TRANSCRIPTS_DIR}/{writer.name}"
    size = server.filesystem().get_file_info(path).size
    with server.filesystem().open_input_file(path) as remote:
        counted = CountingFile(remote)
        (blob,) = read_rows(pa.PythonFile(counted, mode="r"), [(5, "transcript")], copy=True)
    assert blob.to_pybytes() == written[5]
    # One batch of three (and the footer) read: about a third of the object, never the whole of it.
    assert 4 * 100_000 < counted.read_bytes < size / 2, (counted.read_bytes, size)

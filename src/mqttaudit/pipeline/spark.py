"""The Spark session of an audit: the embedded ``local[*]`` master by default, any master URL otherwise.

Loopback only for the embedded master (driver host and bind address 127.0.0.1, no UI), the executors' Python is
the driver's, and Arrow carries every batch between the JVM and Python.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
#: The JVM heap of the driver (and, in local mode, of the executors). The tasks write the tables and the replay's
#: transcripts themselves, so the JVM holds only runs of segments being shuffled and sorted (it spills to disk)
#: and a small row per connection: a 4,000,000-packet capture was audited with 1 GB (about 5% slower, one run).
DEFAULT_DRIVER_MEMORY = os.environ.get("MQTTAUDIT_DRIVER_MEMORY", "2g")
#: The driver JVM's options. Its optimising compiler (C2) spent as much CPU compiling Spark's generated code as the
#: JVM spent on the audit's data; the quick compiler alone halved the JVM's CPU time (the data work is Python's).
DEFAULT_DRIVER_JAVA_OPTIONS = os.environ.get("MQTTAUDIT_DRIVER_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")


def spark_session(
    master: str = DEFAULT_MASTER,
    app_name: str = "mqttaudit",
    shuffle_partitions: int | None = None,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
) -> SparkSession:
    """A Spark session for ``master`` (one per process: an existing one is reused and reconfigured).
    ``driver_memory`` sizes the driver's JVM heap, which in local mode is also the executors' (it takes effect
    when this call starts the JVM)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local = master.startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # A row may carry a run of segments of up to 8 MiB: batches are bounded by bytes as well as rows.
        .config("spark.sql.execution.arrow.maxBytesPerBatch", str(64 * 1024 * 1024))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.driver.memory", driver_memory)
        .config("spark.driver.extraJavaOptions", DEFAULT_DRIVER_JAVA_OPTIONS)
    )
    if local:
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    if shuffle_partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session

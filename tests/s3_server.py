"""A real S3-compatible server on 127.0.0.1 for the tests: moto's server mode (``moto[server]``, in the test extra),
started as a child process on a free port, ready when it answers HTTP, stopped by its PID; and the S3 settings a
child ``mqttaudit`` reads from its environment (pyarrow's S3 client reads the standard AWS variables)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqttaudit.probe.brokers import free_port

HOST = "127.0.0.1"
#: Seconds the server may take to answer its first request (it imports Flask and botocore on start).
READY_WITHIN = 60.0


def _command() -> list[str]:
    """moto's server as installed with the test extra (this interpreter's), else a ``moto_server`` on the PATH."""
    if importlib.util.find_spec("moto") is not None:
        return [sys.executable, "-m", "moto.server"]
    found = shutil.which("moto_server")
    if found is None:
        raise RuntimeError("moto's server is not installed: it comes with the test extra (pip install '.[test]')")
    return [found]


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str
    region: str = "us-east-1"

    def environment(self) -> dict[str, str]:
        """The standard variables that point an S3 client (pyarrow's, in mqttaudit's driver and executors) here."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": self.region,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def filesystem(self) -> Any:
        """pyarrow's S3 filesystem on this server (may create buckets)."""
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(
            access_key=self.access_key,
            secret_key=self.secret_key,
            endpoint_override=self.endpoint,
            region=self.region,
            allow_bucket_creation=True,
            allow_bucket_deletion=True,
        )

    def upload(self, local: Path, path: str) -> None:
        """Copies a local file to ``path`` (``bucket/key``)."""
        import pyarrow.fs as pafs

        pafs.copy_files(
            str(local), path, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=self.filesystem()
        )


@contextlib.contextmanager
def s3_server(log: Path) -> Iterator[S3Server]:
    """moto's server on a free port of 127.0.0.1 (its output in ``log``), until the block ends."""
    port = free_port()
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*_command(), "-H", HOST, "-p", str(port)], stdout=output, stderr=subprocess.STDOUT, env=os.environ.copy()
        )
    endpoint = f"http://{HOST}:{port}"
    try:
        deadline = time.monotonic() + READY_WITHIN
        while True:
            try:
                with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    said = log.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"moto's server did not start: {said}") from None
                time.sleep(0.2)
        yield S3Server(endpoint, access_key="mqttaudit-test-key", secret_key=f"mqttaudit-test-secret-{port}")
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

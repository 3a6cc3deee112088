"""Fixtures shared across test files: one Spark session (``local[2]``) for every test that needs Spark."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from mqttaudit.pipeline.spark import spark_session

    session = spark_session("local[2]", app_name="mqttaudit-tests", shuffle_partitions=4)
    yield session
    session.stop()

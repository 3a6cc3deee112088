"""Fixtures shared across test files: one Spark session (``local[2]``) for every test that needs Spark, and a
mosquitto and an mqttools broker per test module that probes them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from mqttaudit.probe.brokers import RunningBroker


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from mqttaudit.pipeline.spark import spark_session

    session = spark_session("local[2]", app_name="mqttaudit-tests", shuffle_partitions=4)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def mosquitto() -> Iterator[RunningBroker]:
    """mosquitto (Debian's, 2.0.11 here) on a free port of 127.0.0.1, for the tests of one module."""
    from mqttaudit.probe.brokers import start_broker

    with start_broker("mosquitto") as broker:
        yield broker


@pytest.fixture(scope="module")
def mqttools() -> Iterator[RunningBroker]:
    """mqttools (an MQTT 5.0-only broker) on a free port of 127.0.0.1, for the tests of one module."""
    from mqttaudit.probe.brokers import start_broker

    with start_broker("mqttools") as broker:
        yield broker

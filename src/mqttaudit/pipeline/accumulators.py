"""What the Spark engine's tasks tell the driver beside their rows (the local engine, :mod:`.local`, needs none of
it: it runs every task itself, once)."""

from __future__ import annotations

from pyspark.accumulators import AccumulatorParam

from .task_files import Published


class PublishedFiles(AccumulatorParam[Published]):
    """Adds up the files the task attempts published. Spark merges the updates of the attempts it accepted only: the
    files of a failed attempt are never in the sum (see :func:`~.task_files.accepted_entries`)."""

    def zero(self, value: Published) -> Published:
        return []

    def addInPlace(self, value1: Published, value2: Published) -> Published:
        return value1 + value2

"""What a broker's sliced replay task (:func:`mqttaudit.pipeline.slicing.replay_sliced`) is handed, made from
transcripts without the reading and judging stages: each connection's head and pieces written as the judging stage
writes them (:func:`mqttaudit.pipeline.slicing.write_pieces`), and the task's rows, one per connection, saying
where its head is. The tests hold the sliced replay against the whole model on it, and ``bench/audit_bench.py``
times and profiles the replay on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa

from mqttaudit.judge.transcript import Transcript
from mqttaudit.pipeline.replaying import REPLAY_TABLES
from mqttaudit.pipeline.slicing import PIECE_BYTES, write_pieces
from mqttaudit.pipeline.task_files import TRANSCRIPTS_DIR, TranscriptWriter

#: The broker endpoint the tests' connections are to.
BROKER = "10.0.0.1:1883"


def piece_table(
    transcripts: Mapping[str, Transcript],
    folder: Path,
    piece_bytes: int = PIECE_BYTES,
    *,
    broker: str = BROKER,
    capture: str = "capture.pcap",
) -> pa.Table:
    """The heads and pieces of ``transcripts`` (by flow, every connection to ``broker``, read from ``capture``)
    written in ``folder`` as the judging stage writes them (pieces of ``piece_bytes``), with the folders the replay
    writes its tables to; returns the rows the sliced replay task of ``broker`` is handed."""
    for table in (*REPLAY_TABLES, TRANSCRIPTS_DIR):
        (folder / table).mkdir(parents=True)
    writer = TranscriptWriter(str(folder), "judging")
    rows = [write_pieces(writer, transcript, None, piece_bytes) for transcript in transcripts.values()]
    writer.close()
    names = list(transcripts)
    return pa.table(
        {
            "server": [broker] * len(names),
            "flow": names,
            "capture": [capture] * len(names),
            "transcripts": [writer.name] * len(names),
            "transcript_row": rows,
        }
    )

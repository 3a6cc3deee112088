"""What an audit tells its tasks: the broker ports, the tolerance, where the tables go, the key log and the seal key
(pickled into every task's closure; the key log's secrets are not in it, see :mod:`.keylog`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mqttaudit.capture import FlowOptions
from mqttaudit.capture.budgets import DEFAULT_BUDGETS, Budgets
from mqttaudit.capture.detect import KNOWN_MQTT_PORTS
from mqttaudit.judge import JudgeConfig

from .keylog import KeyLogFile

if TYPE_CHECKING:
    from pyspark.accumulators import Accumulator

    from .task_files import Published


#: Bytes of a broker's messages per slice of the sliced replay at most (payload and topic bytes).
SLICE_BYTES = 256 * 1024


@dataclass(frozen=True)
class AuditOptions:
    #: The ports whose flows are MQTT: ``--ports``, or the known MQTT port and the proven ones.
    broker_ports: frozenset[int] = KNOWN_MQTT_PORTS
    #: Seconds a receiver may take to answer or close, and the broker to deliver (the routing tolerance).
    tolerance: float = 5.0
    #: Where observation of each capture ended (ns), by capture name: an open connection is quiet until the end of
    #: the last capture that holds it (rotated captures continue each other).
    end_times: tuple[tuple[str, int], ...] = ()
    #: Where the tasks write the tables: a local directory or a URL every executor reaches (each table is a folder
    #: of Parquet files).
    out_dir: str = ""
    #: Hears which files the accepted task attempts published (:class:`~.task_files.PublishedFiles`); None outside
    #: an audit.
    published: Accumulator[Published] | None = field(default=None, repr=False, compare=False)
    #: The ports ``--ports`` restricts the audit to; None: MQTT is recognised on any port.
    requested_ports: frozenset[int] | None = None
    #: Server ports on which a stream started with a CONNECT (found when ``requested_ports`` is None).
    proven_ports: frozenset[int] = frozenset()
    #: How each proven port was proven, (port, proof), the proofs named in :mod:`mqttaudit.capture.detect`.
    port_proofs: tuple[tuple[int, str], ...] = ()
    #: The key log of ``--keylog``: where each executor reads it, never its secrets (see :mod:`.keylog`).
    keylog: KeyLogFile | None = None
    #: With a key log, the run's key that seals what the tasks hand each other (see :mod:`.sealed`); never written.
    seal_key: bytes | None = field(default=None, repr=False)
    #: The per-message, out-of-order and per-flow budgets (``--max-message-bytes`` and the others).
    budgets: Budgets = DEFAULT_BUDGETS
    #: Seconds past its deadline a delivery is still matched to the message it copies (``--late-window``; see
    #: :attr:`~mqttaudit.judge.config.JudgeConfig.late_window`).
    late_window: float = 60.0
    #: The routing replay's bytes of messages per slice at most, once the slice spans :attr:`slice_span` (one task
    #: per broker walks its traffic in time slices, :mod:`.slicing`).
    slice_bytes: int = SLICE_BYTES
    #: Seconds of traffic a slice of the sliced replay spans at least (None: a third of the judge's
    #: :func:`~mqttaudit.judge.stream.reach`, how far before a slice it looks at deliveries,
    #: :data:`.slicing.SPAN_OF_REACH`; 0: by bytes alone).
    slice_span: float | None = None

    @property
    def judge_config(self) -> JudgeConfig:
        # A broker seen accepting MQTT 5.0 supports it: those connections follow another specification and are
        # not judged against 3.1.1 (rather than blaming the broker for not refusing them).
        return JudgeConfig(
            close_grace=self.tolerance,
            answer_timeout=self.tolerance,
            late_window=self.late_window,
            supported_protocol_levels=frozenset({4, 5}),
            wall_clock=True,  # a capture's times are seconds since the epoch
        )

    @property
    def flow_options(self) -> FlowOptions:
        return FlowOptions(
            broker_ports=self.broker_ports,
            keylog=self.keylog,
            mqtt_ports_named=self.requested_ports is not None,
            budgets=self.budgets,
        )

"""mqttaudit: an MQTT conformance auditor.

Layers (each imports only from the ones before it): spec, codec, topics, then the tools built on them.

The Python API, beside the ``mqttaudit`` command:

- :func:`mqttaudit.probe.run` (and ``run_async``): probe a live broker, get a ``ProbeResult``;
- :func:`mqttaudit.audit`: audit captures on Spark, get an ``AuditResult`` (needs ``mqttaudit[spark]``);
- :mod:`mqttaudit.codec`: decode and encode MQTT bytes with every rule checked.

Each result has the ``exit_status`` the command would exit with (:mod:`mqttaudit.status`).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "audit"]


def __getattr__(name: str) -> Any:
    # Loaded on first use, by name: the audit needs the spark extra, and the compiled build (mypyc checks every
    # module the package root imports, even inside a function) must not follow it into pyspark.
    if name == "audit":
        return importlib.import_module(".pipeline.api", __name__).audit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Live probing: real brokers on loopback, and the conversations the auditor holds with them.

``run(target, ...)`` and ``run_async(target, ...)`` probe one broker and return a :class:`ProbeResult`
(see :mod:`mqttaudit.probe.api`); they load on first use, so importing a submodule stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import ProbeProgress, ProbeResult, ProbeUsageError, run, run_async

__all__ = ["ProbeProgress", "ProbeResult", "ProbeUsageError", "run", "run_async"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

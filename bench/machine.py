"""What every benchmark reports about the machine it ran on, and how it pins itself to one core."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def pin_to_one_cpu() -> int | None:
    """Pins this process to its lowest allowed CPU (where the platform allows it); returns that CPU."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware", "cpu model"):
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()

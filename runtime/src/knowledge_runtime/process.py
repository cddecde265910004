"""A process's place on its machine: the CPU cores it may use (ingest sizes its workers and the
extraction child its page readers from them), and dying with the process that started it."""

from __future__ import annotations

import ctypes
import math
import os
import signal
from pathlib import Path

PR_SET_PDEATHSIG = 1


def usable_cores(cgroup_cpu_max: Path = Path("/sys/fs/cgroup/cpu.max")) -> int:
    """The CPU cores this process may run on: its affinity, bounded by a cgroup v2 CPU quota (a
    container's CPU limit, which the affinity does not show), rounded up."""
    affinity = getattr(os, "sched_getaffinity", None)
    cores = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    try:
        quota, period = cgroup_cpu_max.read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return cores


def die_with_parent(signal_number: int = signal.SIGTERM) -> None:
    """In a child: get ``signal_number`` when the parent dies (even by SIGKILL), so the child does
    not outlive it (Linux; elsewhere a no-op). Takes no lock: safe between fork and exec."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal_number)
    except (OSError, AttributeError):
        pass

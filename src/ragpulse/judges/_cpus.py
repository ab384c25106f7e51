"""The CPUs this process may use: its affinity, within a container's CPU limit."""

from __future__ import annotations

import contextlib
import math
import os

__all__ = ["available_cpus"]


CGROUP_ROOT = "/sys/fs/cgroup"
"""Where a container's own cgroup is mounted (its namespace's root)."""


def available_cpus(cgroup_root: str = CGROUP_ROOT) -> int:
    """The CPUs this process may use: those it may run on (its affinity where the platform
    tells it), and no more than its cgroup's CPU limit (a container's ``limits.cpu``,
    rounded up) where one is set."""
    cpus = os.cpu_count() or 1
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        with contextlib.suppress(OSError):
            cpus = len(affinity(0))
    limit = _cgroup_cpu_limit(cgroup_root)
    if limit is not None:
        cpus = min(cpus, math.ceil(limit))
    return max(1, cpus)


def _cgroup_cpu_limit(root: str) -> float | None:
    """CPUs' worth of time the cgroup at ``root`` may use (quota / period); None: no limit,
    or none that can be read (cgroup v2 ``cpu.max``, else v1 ``cpu.cfs_quota_us``)."""
    try:
        with open(os.path.join(root, "cpu.max"), encoding="ascii") as file:
            quota, period = file.read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    for directory in ("cpu", "cpu,cpuacct"):
        try:
            base = os.path.join(root, directory)
            with open(os.path.join(base, "cpu.cfs_quota_us"), encoding="ascii") as file:
                quota_us = int(file.read())
            with open(os.path.join(base, "cpu.cfs_period_us"), encoding="ascii") as file:
                period_us = int(file.read())
        except (OSError, ValueError):
            continue
        return None if quota_us <= 0 or period_us <= 0 else quota_us / period_us
    return None

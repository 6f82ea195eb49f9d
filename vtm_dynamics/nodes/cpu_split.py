"""The node's threads and its prediction process on separate CPUs (Linux), so that continuous predictions never
compute on a CPU the E-stop path runs on. Plain Python (no node).

Why: the prediction process (``prediction_process``) runs in Linux's idle scheduling class and is stopped while
E-stop work runs, yet with it computing beside the node the E-stop latency still grew (median +1.9 to +4 ms, p95
up to +5 ms in ``bench/bench_estop_latency.py --phases c`` on a 2-CPU machine). The same continuous rounds with a
child that only slept instead of computing added 0.9 ms to the median: most of the cost was the child's computing
on the CPUs the node's threads run on (their caches and wake-ups), not the node's own continuous work. With the
child on one CPU and the node's threads on the others, the E-stop median and p95 with continuous mode on were no
worse than with it off in the same run (docs/ros.md, "Continuous mode").

The split: of the CPUs the node may use (its affinity when the first child starts), the highest-numbered one is
the child's and the others are the node's; with fewer than two CPUs nothing changes. The node's threads are all
confined (every thread of the process, also those of the middleware; threads started later inherit it) while any
prediction process runs, and given back their former CPUs when the last one closes. A user who starts the node
with its own affinity (``taskset``, a container's CPU set) keeps it: the split is made inside it.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class CpuSplit:
    """The CPUs of the prediction process (``child``) and of the node's threads (``node``)."""

    child: frozenset[int]
    node: frozenset[int]


def split_cpus(allowed: Iterable[int]) -> CpuSplit | None:
    """The highest-numbered of ``allowed`` for the child, the rest for the node; None with fewer than two."""
    cpus = sorted(set(int(c) for c in allowed))
    if len(cpus) < 2:
        return None
    return CpuSplit(frozenset(cpus[-1:]), frozenset(cpus[:-1]))


_lock = threading.Lock()
_users = 0  # prediction processes holding the node's threads on their CPUs
_original: frozenset[int] | None = None  # the node's CPUs before the first of them


def _affinity_api() -> bool:
    return hasattr(os, "sched_setaffinity") and os.path.isdir("/proc/self/task")


def _set_threads(cpus: frozenset[int]) -> None:
    for name in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(name), cpus)
        except (OSError, ValueError):
            pass  # a thread that ended meanwhile


def current_split() -> CpuSplit | None:
    """The split of the node's CPUs as they were before any prediction process (module docstring)."""
    if not _affinity_api():
        return None
    with _lock:
        base = _original if _original is not None else frozenset(os.sched_getaffinity(0))
    return split_cpus(base)


def pin_child(pid: int) -> CpuSplit | None:
    """Put the prediction process ``pid`` (our own child) on its CPU; returns the split used, None if none."""
    split = current_split()
    if split is None:
        return None
    try:
        os.sched_setaffinity(pid, split.child)
    except OSError:
        return None
    return split


def confine_node(split: CpuSplit) -> None:
    """Hold every thread of this process on ``split.node`` until the matching :func:`release_node`."""
    global _users, _original
    with _lock:
        if _users == 0:
            _original = frozenset(os.sched_getaffinity(0))
        _users += 1
        _set_threads(split.node)


def release_node() -> None:
    """One holder less; the last gives every thread of this process its former CPUs back."""
    global _users, _original
    with _lock:
        if _users == 0:
            return
        _users -= 1
        if _users == 0 and _original is not None:
            _set_threads(_original)
            _original = None


def describe(split: CpuSplit | None) -> str:
    """One line for logs and diagnostics."""
    if split is None:
        return "shared (fewer than two CPUs, or no CPU affinity on this system)"
    return (f"prediction process on CPU {','.join(map(str, sorted(split.child)))}, node threads on CPU "
            f"{','.join(map(str, sorted(split.node)))}")

"""The node's threads kept off one CPU (Linux), which is left to its prediction process, so that continuous
predictions compute where the E-stop path does not run. Plain Python (no node).

Why: the prediction process (``prediction_process``) runs in Linux's idle scheduling class and is stopped while
E-stop work runs, yet with it computing beside the node the E-stop latency still grew (median +1.9 to +4 ms, p95
up to +5 ms in ``bench/bench_estop_latency.py --phases c`` on a 2-CPU machine). The same continuous rounds with a
child that only slept instead of computing added 0.9 ms to the median: most of the cost was the child's computing
on the CPUs the node's threads run on, not the node's own continuous work. With the node's threads off the CPU the
child computes on, the E-stop median and p95 with continuous mode on were no worse than with it off in the same run
(docs/ros.md, "Continuous mode").

The child itself is not pinned: pinned to its CPU it starved whenever another busy process took that CPU (0.0 Hz of
continuous outputs beside one CPU hog, 23 Hz before the split), while unpinned and in the idle class it computes on
the CPU left to it and on any other CPU nothing else wants (29 Hz beside the hog, the E-stop p95 on/off 0.79).

The split: of the CPUs the node may use (its affinity when the first child starts), the highest-numbered one is
left to the child and the others are the node's; with fewer than two CPUs nothing changes. The node's threads are
all confined (every thread of the process, also those of the middleware; threads started later inherit it) while
any prediction process runs, and given back their former CPUs when the last one closes. A user who starts the node
with its own affinity (``taskset``, a container's CPU set) keeps it: the split is made inside it.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class CpuSplit:
    """The CPU left to the prediction process (``child``; it may also use the others when they are idle) and the
    CPUs of the node's threads (``node``)."""

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
    return (f"node threads on CPU {','.join(map(str, sorted(split.node)))}, CPU "
            f"{','.join(map(str, sorted(split.child)))} left to the prediction process")

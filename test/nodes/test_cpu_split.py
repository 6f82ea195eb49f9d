"""The node's threads kept off one CPU, left to its prediction process (nodes/cpu_split.py): the highest-numbered
CPU the node may use is left to the child, the node's threads keep to the others and get their CPUs back when the
last prediction process closes; the child itself stays free to use any CPU (pinned, it starved beside a busy
process); with fewer than two CPUs nothing changes.

Why: with the child computing on the CPUs the node's threads run on, the E-stop median grew by 1.9-4 ms with
continuous mode on (bench_estop_latency --phases c); with the node's threads off its CPU it no longer did.
"""

from __future__ import annotations

import os

from vtm_dynamics.nodes import cpu_split
from vtm_dynamics.nodes.cpu_split import CpuSplit, split_cpus
from vtm_dynamics.nodes.prediction_process import PredictionProcess
from vtm_dynamics.nodes.stop_worker import PredictionSettings

SETTINGS = PredictionSettings(category=0, horizon=5.0, step=1e-3, deceleration=1.0, deadline=5.0,
                              tcp_frame="tool0")


def test_the_child_gets_the_last_cpu_and_the_node_the_others():
    assert split_cpus([0, 1]) == CpuSplit(frozenset({1}), frozenset({0}))
    assert split_cpus({5, 0, 2}) == CpuSplit(frozenset({5}), frozenset({0, 2}))
    assert split_cpus([3]) is None and split_cpus([]) is None


def _thread_cpus() -> dict[int, frozenset[int]]:
    out = {}
    for name in os.listdir("/proc/self/task"):
        try:
            out[int(name)] = frozenset(os.sched_getaffinity(int(name)))
        except OSError:
            pass
    return out


def test_the_nodes_threads_keep_off_the_cpu_left_to_a_prediction_process():
    before = frozenset(os.sched_getaffinity(0))
    split = split_cpus(before)
    first, second = PredictionProcess(SETTINGS, 20.0), PredictionProcess(SETTINGS, 20.0)
    try:
        first.start()
        second.start()  # a second holder (a restart, another node in the process) keeps the same split
        child = frozenset(os.sched_getaffinity(first.pid))
        if split is None:  # one CPU: nothing to split, nothing changed
            assert child == before and set(_thread_cpus().values()) == {before}
            assert first.cpus.startswith("shared")
            return
        assert child == before  # free to use any CPU nothing else wants (pinned, a busy process starved it)
        assert set(_thread_cpus().values()) == {split.node}  # every thread of this process, middleware's too
        assert first.cpus == cpu_split.describe(split)
        first.close()
        assert set(_thread_cpus().values()) == {split.node}  # the second still holds the split
    finally:
        first.close()
        second.close()
    assert set(_thread_cpus().values()) == {before}  # all CPUs back after the last one

"""Warm-up of the compiled E-stop engine, so that the first prediction of a process is as fast as the hundredth.

The engine's kernels (:mod:`.compiled_steps`, :mod:`.compiled_events`, :mod:`.compiled_decision`) are compiled by
Numba on first use and cached on disk (``cache=True``): the first process after an installation compiles them
(tens of seconds; ``make setup`` does it once, :func:`compile_kernels`), every later process loads them from the
cache on its first prediction (about half a second). :func:`warm_up` does that loading ahead of time and runs one
prediction on the loaded model (Pinocchio's data, the engine's tables), e.g. at a predictor's start-up. ROS-free.
"""

from __future__ import annotations

import time

import numpy as np

from vtm_dynamics.core.estop import compiled_events as ce
from vtm_dynamics.core.estop import compiled_steps as cs
from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.estop.compiled_checks import inside_limits, positive_definite
from vtm_dynamics.core.robot.model import RobotModel


def compile_kernels() -> float:
    """Call every compiled entry point once on dummy tables (compiling or loading it); returns the seconds taken."""
    start = time.perf_counter()
    nv = 2
    X, Z, R = cs.new_tables(nv)
    X[cs.MC:cs.MC + nv] = np.eye(nv)
    X[cs.BRAKES + 6] = 1.0  # a holding torque
    Z[cs.HNEXT] = Z[cs.MAXSTEP] = Z[cs.H] = 1e-3
    Z[cs.RTOL] = Z[cs.ATOL] = Z[cs.ATOLV] = 1.0
    M, h = np.eye(nv), np.zeros(nv)
    force, zero = np.zeros(nv, dtype=bool), np.zeros(nv, dtype=bool)
    cs.set_state(X, Z, 0.0, 0.0, M, h)
    cs.refresh(X, Z)
    cs.record(X, Z, R)
    cs.begin_step(X, Z, 1e-3, 1e-3)
    for s in range(1, 7):
        cs.stage(X, Z, M, h, s)
    cs.end_step(X, Z, R)
    cs.restart_step(X, Z, 1e-3)
    cs.decide_at_start(X, Z, force, np.zeros(nv, dtype=np.int64))
    ce.locate_crossing(X, Z, 1e-9, zero)
    ce.extension_to_evaluate(X)
    ce.dense_to_evaluate(X, Z, 0.5)
    ce.polish_crossing(X, Z, zero)
    ce.release_margin(X, Z, M, h, 0.0)
    ce.start_margin(X, Z)
    ce.release_force(X, 0.0, force)
    positive_definite(np.eye(nv), np.zeros(nv))  # the start state's check (prediction._check_mass_matrix)
    inside_limits(np.zeros((2, nv)), np.zeros(nv), np.ones(nv), 1e-6)  # the result's (prediction._limit_crossings)
    return time.perf_counter() - start


def warm_up(robot: RobotModel | None = None, brakes: BrakeSet | None = None) -> float:
    """Load the compiled kernels and, given a model and its brakes, predict one stop from a moving state (half
    the velocity limits, the middle of the joint ranges); returns the seconds taken."""
    start = time.perf_counter()
    compile_kernels()
    if robot is not None and brakes is not None:
        from vtm_dynamics.core.estop.prediction import predict_stop

        lo, hi = robot.model.lowerPositionLimit, robot.model.upperPositionLimit
        q = np.where(np.isfinite(lo) & np.isfinite(hi) & (hi > lo), 0.5 * (lo + hi), robot.neutral())
        limit = np.asarray(robot.model.velocityLimit, dtype=float)
        v = np.where(np.isfinite(limit) & (limit > 0), 0.5 * limit, 1.0)
        if robot.nq == robot.nv:
            predict_stop(robot, brakes, q, v)
    return time.perf_counter() - start


if __name__ == "__main__":
    print(f"compiled E-stop kernels ready in {compile_kernels():.1f} s")

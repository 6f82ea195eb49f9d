"""Simulation of constrained robots with the projection formulation (Aghili, Sec. 6).

Glue between the robot model / constraint objects (``model.py``, ``constraints.py``) and the matrix-level
projection dynamics (``projection.py``):

* ``ConstraintSet`` - the core's :class:`~vtm_dynamics.core.switching.topology.Topology` under the name used by Aghili's
  formulation: an ordered, immutable set of constraints that stacks their rows A(q), drifts A'(q, v) v and
  position residuals Phi(q) (Aghili, eq. (11)).
* :func:`constrained_step` - one step of the simulation recipe of Aghili, Sec. 6: (i) accelerations from eq. (25),
  (ii) classical Runge-Kutta 4 integration of (q, v) on the configuration manifold, (iii) pseudo-inverse Newton
  correction of positions (eq. (39)) and projection of the velocity onto N(A) (eq. (12)).

Units: SI (rad, m, s, N m, N).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.projection.projector import (
    DEFAULT_TOLERANCE,
    ConstrainedAccelerations,
    Method,
    ProjectionInputError,
    RankTolerance,
    constrained_accelerations,
    correct_positions,
    project_velocity,
)
from vtm_dynamics.core.switching.topology import Topology


# The projection formulation works on the same immutable active set as the switching code: adding or removing a
# constraint gives a new set of the same type, so the projector needs no other change when the topology changes.
ConstraintSet = Topology

#: Default longest Runge-Kutta sub-step [s] of :func:`constrained_step`. RK4's global error scales with h^4: the
#: slider-crank of Aghili Sec. 8 turning at up to 10 rad/s through 18 singular passages in 10 s stays within
#: 2e-7 rad of an independent reference at 1 ms, and drifts 4.5e-6 rad at 2 ms (test_slider_crank_accuracy.py).
#: A step dt longer than this costs ceil(dt / max_step) times the work; ``bench/bench_projection.py`` measures it.
DEFAULT_MAX_STEP = 1e-3

#: Default residual [m, rad] at which the Newton correction of eq. (39) stops. 0: it always runs, until the
#: residual no longer decreases (rounding level) or ``max_newton`` steps. A threshold such as 1e-12 skips the
#: correction while the drift is below it, and that sub-threshold drift is enough to leave the branch near a
#: singular crossing: 1.1e-4 rad after 10 s of the slider-crank with 1e-12 against 1.8e-7 rad with 0.
DEFAULT_POSITION_TOL = 0.0


def constrained_dynamics(
    robot: RobotModel,
    constraints: ConstraintSet,
    q: object,
    v: object,
    tau: object | None = None,
    method: Method = "Mc",
    tolerance: RankTolerance = DEFAULT_TOLERANCE,
) -> ConstrainedAccelerations:
    """Accelerations and constraint force of ``robot`` under ``constraints`` (Aghili, eqs. (25), (32))."""
    qq, vv = robot.check_q(q), robot.check_v(v)
    t = np.zeros(robot.nv) if tau is None else robot.check_v(tau, "tau")
    return constrained_accelerations(
        robot.mass_matrix(qq),
        robot.bias_forces(qq, vv),
        t,
        constraints.jacobian(robot, qq),
        constraints.drift(robot, qq, vv),
        method=method,
        tolerance=tolerance,
    )


@dataclass(frozen=True)
class StepResult:
    """State after :func:`constrained_step`.

    Attributes:
        q, v: corrected configuration and velocity.
        residual_norm: ||Phi(q)|| after the Newton correction [m, rad].
        velocity_residual_norm: ||A(q) v|| after the velocity projection [m/s, rad/s].
        newton_iterations: Newton steps of eq. (39) used.
        rank: rank of A at the start of the step.
        substeps: Runge-Kutta sub-steps the step was split into (see ``max_step``).
    """

    q: np.ndarray
    v: np.ndarray
    residual_norm: float
    velocity_residual_norm: float
    newton_iterations: int
    rank: int
    substeps: int = 1


def constrained_step(
    robot: RobotModel,
    constraints: ConstraintSet,
    q: object,
    v: object,
    tau: object | Callable[[np.ndarray, np.ndarray, float], np.ndarray] | None,
    dt: float,
    method: Method = "Mc",
    tolerance: RankTolerance = DEFAULT_TOLERANCE,
    position_tol: float = DEFAULT_POSITION_TOL,
    max_newton: int = 5,
    velocity_metric: str = "mass",
    max_step: float | None = DEFAULT_MAX_STEP,
) -> StepResult:
    """One simulation step, Aghili Sec. 6 steps (i)-(iii).

    ``tau`` is either a force held over the step (zero-order hold, as a sampled controller applies it) or a
    callable ``tau(q, v, s)`` evaluated at every Runge-Kutta stage (s in [0, dt] the time into the step), which
    simulates a continuous-time control law.

    Integration is classical RK4 on the configuration manifold (``robot.integrate``), split into equal sub-steps
    of at most ``max_step`` [s] (None: one RK4 step of dt); then positions are corrected
    by eq. (39) until ||Phi|| <= ``position_tol`` (or ``max_newton`` steps) and the velocity is projected onto
    N(A(q)) - in the kinetic-energy metric (``velocity_metric="mass"``, the admissible velocity with the least
    kinetic-energy change) or the Euclidean one (``"euclidean"``, v <- P v, eq. (12)).
    """
    if not (np.isfinite(dt) and dt > 0):
        raise ProjectionInputError("dt: expected a positive time step [s]")
    if max_step is not None and not (np.isfinite(max_step) and max_step > 0):
        raise ProjectionInputError("max_step: expected a positive sub-step [s] or None")
    if velocity_metric not in ("mass", "euclidean"):
        raise ProjectionInputError("velocity_metric: must be 'mass' or 'euclidean'")
    q0, v0 = robot.check_q(q), robot.check_v(v)
    held = None if callable(tau) else (np.zeros(robot.nv) if tau is None else robot.check_v(tau, "tau"))

    def acc(qq: np.ndarray, vv: np.ndarray, s: float) -> tuple[np.ndarray, int]:
        t = held if held is not None else robot.check_v(tau(qq, vv, s), "tau")  # type: ignore[operator]
        r = constrained_dynamics(robot, constraints, qq, vv, t, method, tolerance)
        return r.qdd, r.rank

    substeps = max(1, int(np.ceil(dt / max_step - 1e-9))) if max_step is not None else 1
    h = dt / substeps
    q_new, v_new, rank = q0, v0, 0
    for i in range(substeps):
        q_new, v_new, r = _rk4(robot, acc, q_new, v_new, i * h, h)
        rank = r if i == 0 else rank

    iterations = 0
    residual_norm = 0.0
    if len(constraints):
        corr = correct_positions(
            q_new,
            lambda x: constraints.residual(robot, x),
            lambda x: constraints.residual_jacobian(robot, x),
            integrate=lambda x, d: robot.integrate(x, d),
            tol=position_tol,
            max_iterations=max_newton,
            tolerance=tolerance,
        )
        q_new, residual_norm, iterations = corr.q, corr.residual_norm, corr.iterations
        A = constraints.jacobian(robot, q_new)
        W = robot.mass_matrix(q_new) if velocity_metric == "mass" else None
        v_new = project_velocity(v_new, A, W=W, tolerance=tolerance)
        vel_res = float(np.linalg.norm(A @ v_new))
    else:
        vel_res = 0.0
    return StepResult(q_new, v_new, residual_norm, vel_res, iterations, rank, substeps)


def _rk4(robot: RobotModel, acc: Callable[[np.ndarray, np.ndarray, float], tuple[np.ndarray, int]],
         q0: np.ndarray, v0: np.ndarray, s0: float, h: float) -> tuple[np.ndarray, np.ndarray, int]:
    """One classical Runge-Kutta 4 step of length h [s] from time s0 into the step, on the manifold."""
    a1, rank = acc(q0, v0, s0)
    k1q, k1v = v0, a1
    q2 = robot.integrate(q0, k1q, 0.5 * h)
    k2q = v0 + 0.5 * h * k1v
    k2v = acc(q2, k2q, s0 + 0.5 * h)[0]
    q3 = robot.integrate(q0, k2q, 0.5 * h)
    k3q = v0 + 0.5 * h * k2v
    k3v = acc(q3, k3q, s0 + 0.5 * h)[0]
    q4 = robot.integrate(q0, k3q, h)
    k4q = v0 + h * k3v
    k4v = acc(q4, k4q, s0 + h)[0]
    q_new = robot.integrate(q0, (k1q + 2 * k2q + 2 * k3q + k4q) / 6.0, h)
    v_new = v0 + h * (k1v + 2 * k2v + 2 * k3v + k4v) / 6.0
    return q_new, v_new, rank

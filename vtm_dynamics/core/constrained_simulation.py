"""Simulation of constrained robots with the projection formulation (Aghili, Sec. 6).

Glue between the robot model / constraint objects (``model.py``, ``constraints.py``) and the matrix-level
projection dynamics (``projection.py``):

* :class:`ConstraintSet` - an ordered, immutable set of constraints (joint locks, loop closures, knife edges) that
  stacks their rows A(q), drifts A'(q, v) v and position residuals Phi(q). Adding or removing a constraint gives a
  new set of the same type: the projector formulation needs no other change when the topology changes.
* :func:`constrained_step` - one step of the simulation recipe of Aghili, Sec. 6: (i) accelerations from eq. (25),
  (ii) classical Runge-Kutta 4 integration of (q, v) on the configuration manifold, (iii) pseudo-inverse Newton
  correction of positions (eq. (39)) and projection of the velocity onto N(A) (eq. (12)).

Units: SI (rad, m, s, N m, N).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from vtm_dynamics.core.constraints import Constraint, JointLock
from vtm_dynamics.core.model import RobotModel
from vtm_dynamics.core.projection import (
    DEFAULT_TOLERANCE,
    ConstrainedAccelerations,
    Method,
    ProjectionInputError,
    RankTolerance,
    constrained_accelerations,
    correct_positions,
    project_velocity,
)


@dataclass(frozen=True)
class ConstraintSet:
    """An ordered set of constraints acting together; rows are stacked in this order (Aghili, eq. (11))."""

    constraints: tuple[Constraint, ...] = ()

    def __post_init__(self) -> None:
        names = [c.name for c in self.constraints]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ProjectionInputError(f"constraints: duplicate constraint names {', '.join(dup)}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.constraints)

    def __len__(self) -> int:
        return len(self.constraints)

    def with_constraint(self, constraint: Constraint) -> "ConstraintSet":
        """This set plus ``constraint`` (appended last)."""
        return ConstraintSet(self.constraints + (constraint,))

    def without(self, name: str) -> "ConstraintSet":
        """This set without the constraint called ``name``."""
        if name not in self.names:
            raise ProjectionInputError(f"name: no active constraint called {name!r}")
        return ConstraintSet(tuple(c for c in self.constraints if c.name != name))

    def with_joint_lock(self, robot: RobotModel, joints: str | Sequence[str], q: object, name: str = "") -> "ConstraintSet":
        """This set plus a lock of ``joints`` at their current values in ``q`` [rad, m]."""
        return self.with_constraint(JointLock(joints, name=name).bind(robot, robot.check_q(q)))

    def dim(self, robot: RobotModel) -> int:
        return int(sum(c.dim(robot) for c in self.constraints))

    def jacobian(self, robot: RobotModel, q: object) -> np.ndarray:
        """Stacked rows A(q) (m x nv)."""
        qq = robot.check_q(q)
        if not self.constraints:
            return np.zeros((0, robot.nv))
        return np.vstack([c.jacobian(robot, qq) for c in self.constraints])

    def drift(self, robot: RobotModel, q: object, v: object) -> np.ndarray:
        """Stacked drift A'(q, v) v (m)."""
        qq, vv = robot.check_q(q), robot.check_v(v)
        if not self.constraints:
            return np.zeros(0)
        return np.concatenate([c.drift(robot, qq, vv) for c in self.constraints])

    def holonomic_rows(self, robot: RobotModel, q: object) -> tuple[np.ndarray, np.ndarray]:
        """(Phi(q), A_h(q)) of the holonomic constraints only (nonholonomic rows have no position residual)."""
        qq = robot.check_q(q)
        hol = [c for c in self.constraints if c.holonomic]
        if not hol:
            return np.zeros(0), np.zeros((0, robot.nv))
        return (
            np.concatenate([np.asarray(c.residual(robot, qq), dtype=float) for c in hol]),
            np.vstack([c.jacobian(robot, qq) for c in hol]),
        )

    def residual(self, robot: RobotModel, q: object) -> np.ndarray:
        """Position residual Phi(q) of the holonomic constraints [m, rad]."""
        return self.holonomic_rows(robot, q)[0]

    def residual_jacobian(self, robot: RobotModel, q: object, step: float = 1e-6) -> np.ndarray:
        """d Phi / d q on the velocity tangent space, by central differences (error O(step^2)).

        The Newton correction (Aghili, eq. (39)) needs the Jacobian of the residual itself. The velocity rows of
        a constraint span the same space but may be expressed in another frame than its residual (for
        instance a residual in the pair frame, rows in the world frame), so this adapter differentiates the
        residual instead of assuming the two agree.
        """
        qq = robot.check_q(q)
        phi0 = self.residual(robot, qq)
        J = np.zeros((phi0.size, robot.nv))
        for i in range(robot.nv):
            d = np.zeros(robot.nv)
            d[i] = step
            J[:, i] = (self.residual(robot, robot.integrate(qq, d)) - self.residual(robot, robot.integrate(qq, -d))) / (2 * step)
        return J


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
    """

    q: np.ndarray
    v: np.ndarray
    residual_norm: float
    velocity_residual_norm: float
    newton_iterations: int
    rank: int


def constrained_step(
    robot: RobotModel,
    constraints: ConstraintSet,
    q: object,
    v: object,
    tau: object | Callable[[np.ndarray, np.ndarray, float], np.ndarray] | None,
    dt: float,
    method: Method = "Mc",
    tolerance: RankTolerance = DEFAULT_TOLERANCE,
    position_tol: float = 1e-12,
    max_newton: int = 5,
    velocity_metric: str = "mass",
) -> StepResult:
    """One simulation step, Aghili Sec. 6 steps (i)-(iii).

    ``tau`` is either a force held over the step (zero-order hold, as a sampled controller applies it) or a
    callable ``tau(q, v, s)`` evaluated at every Runge-Kutta stage (s in [0, dt] the time into the step), which
    simulates a continuous-time control law.

    Integration is classical RK4 on the configuration manifold (``robot.integrate``); then positions are corrected
    by eq. (39) until ||Phi|| <= ``position_tol`` (or ``max_newton`` steps) and the velocity is projected onto
    N(A(q)) - in the kinetic-energy metric (``velocity_metric="mass"``, the admissible velocity with the least
    kinetic-energy change) or the Euclidean one (``"euclidean"``, v <- P v, eq. (12)).
    """
    if not (np.isfinite(dt) and dt > 0):
        raise ProjectionInputError("dt: expected a positive time step [s]")
    if velocity_metric not in ("mass", "euclidean"):
        raise ProjectionInputError("velocity_metric: must be 'mass' or 'euclidean'")
    q0, v0 = robot.check_q(q), robot.check_v(v)
    held = None if callable(tau) else (np.zeros(robot.nv) if tau is None else robot.check_v(tau, "tau"))

    def acc(qq: np.ndarray, vv: np.ndarray, s: float) -> tuple[np.ndarray, int]:
        t = held if held is not None else robot.check_v(tau(qq, vv, s), "tau")  # type: ignore[operator]
        r = constrained_dynamics(robot, constraints, qq, vv, t, method, tolerance)
        return r.qdd, r.rank

    a1, rank = acc(q0, v0, 0.0)
    k1q, k1v = v0, a1
    q2 = robot.integrate(q0, k1q, 0.5 * dt)
    k2q = v0 + 0.5 * dt * k1v
    k2v = acc(q2, k2q, 0.5 * dt)[0]
    q3 = robot.integrate(q0, k2q, 0.5 * dt)
    k3q = v0 + 0.5 * dt * k2v
    k3v = acc(q3, k3q, 0.5 * dt)[0]
    q4 = robot.integrate(q0, k3q, dt)
    k4q = v0 + dt * k3v
    k4v = acc(q4, k4q, dt)[0]
    q_new = robot.integrate(q0, (k1q + 2 * k2q + 2 * k3q + k4q) / 6.0, dt)
    v_new = v0 + dt * (k1v + 2 * k2v + 2 * k3v + k4v) / 6.0

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
    return StepResult(q_new, v_new, residual_norm, vel_res, iterations, rank)

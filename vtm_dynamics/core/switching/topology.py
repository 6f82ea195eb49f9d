"""The active constraint set of a variable topology mechanism (Müller 2026, Sec. 2, eqs. (1)-(2), (23), (38)).

Between switching events the constraints h_i(q) = 0 are fixed; a ``Topology`` is that set. It is immutable: an
event produces a new ``Topology`` (``activate``), so a trajectory can keep the topology of every phase.
Stacking follows the paper's partition J_+ = (J_1; J_2): persistent rows first, then the activated ones, each
constraint contributing its rows in the order the constraints were activated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from vtm_dynamics.core.robot.constraints import Constraint, ConstraintError, JointLock
from vtm_dynamics.core.robot.model import RobotModel


@dataclass(frozen=True)
class Topology:
    """An immutable, ordered set of active constraints (holonomic and Pfaffian).

    ``constraints`` are already bound (a joint lock knows its lock angle) when created through ``activate``.
    """

    constraints: tuple[Constraint, ...] = ()

    def __post_init__(self) -> None:
        names = [c.name for c in self.constraints]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConstraintError(f"constraints: duplicate names {', '.join(dup)}")

    @classmethod
    def of(cls, constraints: "Topology | Iterable[Constraint] | None") -> "Topology":
        """Coerce a Topology, a sequence of constraints or None (empty) to a Topology."""
        if constraints is None:
            return cls()
        if isinstance(constraints, Topology):
            return constraints
        return cls(tuple(constraints))

    # ---------------------------------------------------------------- events
    def activate(self, robot: RobotModel, q: np.ndarray, new: Sequence[Constraint]) -> "Topology":
        """The topology after activating ``new`` at configuration q (each new constraint bound at q)."""
        return Topology(self.constraints + tuple(c.bind(robot, q) for c in new))

    def with_constraint(self, constraint: Constraint) -> "Topology":
        """This set plus ``constraint`` appended last, as given (not re-bound)."""
        return Topology(self.constraints + (constraint,))

    def without(self, name: str) -> "Topology":
        """This set without the constraint called ``name``."""
        return self.release([name])

    def release(self, names: Iterable[str]) -> "Topology":
        """The topology without the named constraints (a brake that opens again)."""
        drop = set(names)
        unknown = drop - set(self.names)
        if unknown:
            raise ConstraintError(f"names: not active: {', '.join(sorted(unknown))}")
        return Topology(tuple(c for c in self.constraints if c.name not in drop))

    # ---------------------------------------------------------------- queries
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.constraints)

    def __len__(self) -> int:
        return len(self.constraints)

    def dim(self, robot: RobotModel) -> int:
        """Number of stacked rows m."""
        return sum(c.dim(robot) for c in self.constraints)

    @property
    def is_joint_locks_only(self) -> bool:
        """True when every active constraint is a joint lock (then J is a row selection and J' v = 0)."""
        return all(isinstance(c, JointLock) for c in self.constraints)

    @property
    def locked_joints(self) -> tuple[str, ...]:
        """Joint names held by the active joint locks, in activation order."""
        out: list[str] = []
        for c in self.constraints:
            if isinstance(c, JointLock):
                out.extend(c.joints)
        return tuple(out)

    def locked_v_indices(self, robot: RobotModel) -> np.ndarray:
        return robot.v_indices(self.locked_joints) if self.locked_joints else np.zeros(0, dtype=int)

    def free_v_indices(self, robot: RobotModel) -> np.ndarray:
        """Velocity indices not held by a joint lock (the unlocked joints)."""
        locked = set(self.locked_v_indices(robot).tolist())
        return np.array([i for i in range(robot.nv) if i not in locked], dtype=int)

    def jacobian(self, robot: RobotModel, q: object) -> np.ndarray:
        """Stacked m x nv Jacobian (0 x nv when nothing is active)."""
        if not self.constraints:
            return np.zeros((0, robot.nv))
        qq = robot.check_q(q)
        return np.vstack([c.jacobian(robot, qq) for c in self.constraints])

    def drift(self, robot: RobotModel, q: object, v: object) -> np.ndarray:
        """Stacked J'(q, v) v (Müller 2026, eq. (4)), length m."""
        if not self.constraints:
            return np.zeros(0)
        qq, vv = robot.check_q(q), robot.check_v(v)
        return np.concatenate([c.drift(robot, qq, vv) for c in self.constraints])

    def residual(self, robot: RobotModel, q: object) -> np.ndarray:
        """Concatenated position residuals Phi(q) of the holonomic constraints [m, rad] (Pfaffian rows have none)."""
        qq = robot.check_q(q)
        parts = [r for c in self.constraints if (r := c.residual(robot, qq)) is not None]
        return np.concatenate(parts) if parts else np.zeros(0)

    def residual_jacobian(self, robot: RobotModel, q: object, step: float = 1e-6) -> np.ndarray:
        """d Phi / d q on the velocity tangent space, by central differences (error O(step^2)).

        The Newton drift correction (Aghili, eq. (39)) wants the exact derivative of the residual. The velocity
        rows equal it at assembled poses only (constraints.py orients residuals so); away from them the
        difference quotient keeps Newton's quadratic convergence.
        """
        qq = robot.check_q(q)
        phi0 = self.residual(robot, qq)
        J = np.zeros((phi0.size, robot.nv))
        for i in range(robot.nv):
            d = np.zeros(robot.nv)
            d[i] = step
            J[:, i] = (self.residual(robot, robot.integrate(qq, d)) - self.residual(robot, robot.integrate(qq, -d))) / (
                2 * step
            )
        return J

    def velocity_residual(self, robot: RobotModel, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """J(q) v, which vanishes on admissible velocities."""
        return self.jacobian(robot, q) @ robot.check_v(v)

"""Invariants for checking a variable topology simulation (Müller 2026, Sec. 6, Figs. 2 and 4).

* generalized momentum of the unlocked joints P = F^T M(q) v (Fig. 4a), continuous across a momentum-consistent
  activation because F^T J_+^T = 0 in eq. (21);
* kinetic, potential and total energy (Fig. 4b): constant between events of a conservative system, dropping at
  each activation;
* constraint residuals (position and velocity level) of the active topology.

Units: momentum [N m s] (revolute) / [N s] (prismatic); energy [J]; residuals [rad, m] and [rad/s, m/s].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.switching.transitions import orthogonal_complement
from vtm_dynamics.core.switching.topology import Topology


@dataclass(frozen=True)
class EnergyReport:
    """Kinetic, potential and total energy [J] of one state."""

    kinetic: float
    potential: float

    @property
    def total(self) -> float:
        return self.kinetic + self.potential


def free_motion_basis(robot: RobotModel, topology: Topology, q: np.ndarray) -> np.ndarray:
    """F (nv x k) spanning the admissible velocities of ``topology`` at q (Müller 2026, eq. (10)).

    For joint locks F selects the unlocked joints (the paper's F_1 of Sec. 6) so that F^T M v are the momenta of
    the unlocked joints; otherwise F is eq. (10) with independent coordinates chosen by pivoted QR.
    """
    if topology.is_joint_locks_only:
        free = topology.free_v_indices(robot)
        F = np.zeros((robot.nv, free.size))
        F[free, np.arange(free.size)] = 1.0
        return F
    F, _ = orthogonal_complement(topology.jacobian(robot, q))
    return F


def generalized_momentum(robot: RobotModel, topology: Topology, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """P = F^T M(q) v, the momenta conjugate to the free (unlocked) coordinates (Müller 2026, Sec. 6, Fig. 4a)."""
    return free_motion_basis(robot, topology, q).T @ (robot.mass_matrix(q) @ robot.check_v(v))


def energy(robot: RobotModel, q: np.ndarray, v: np.ndarray) -> EnergyReport:
    """Kinetic 1/2 v^T M v and gravitational potential energy [J] (Müller 2026, Fig. 4b)."""
    return EnergyReport(robot.kinetic_energy(q, v), robot.potential_energy(q))


def total_energy(robot: RobotModel, q: np.ndarray, v: np.ndarray) -> float:
    return energy(robot, q, v).total


@dataclass(frozen=True)
class ConstraintResiduals:
    """max |h(q)| over holonomic rows [rad, m] and max |J v| over all rows [rad/s, m/s]."""

    position: float
    velocity: float


def constraint_residuals(robot: RobotModel, topology: Topology, q: np.ndarray, v: np.ndarray) -> ConstraintResiduals:
    pos = topology.residual(robot, q)
    vel = topology.velocity_residual(robot, q, v)
    return ConstraintResiduals(
        position=float(np.max(np.abs(pos))) if pos.size else 0.0,
        velocity=float(np.max(np.abs(vel))) if vel.size else 0.0,
    )


def trajectory_energy(robot: RobotModel, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Total energy [J] at every sample of arrays q (N, nq), v (N, nv)."""
    return np.array([total_energy(robot, qi, vi) for qi, vi in zip(q, v)])

"""Series derived from a stop prediction for plots and checks: energies, generalized momenta (Müller 2026, Sec. 6
plots F^T M v), a dense series refined between samples, and the joint positions along the stop (continuous joints
counted in full turns). Units: SI (J, N m s, rad, rad/s, s; m, m/s, N s for prismatic joints)."""

from __future__ import annotations

import numpy as np

from vtm_dynamics.core.estop.results import StopPrediction
from vtm_dynamics.core.robot.model import RobotModel


def energy_series(robot: RobotModel, prediction: StopPrediction,
                  armature: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(kinetic, potential) energy [J] at every sample of ``prediction`` (Pinocchio; for plots and checks).
    ``armature`` [kg m^2] (the brakes' reflected rotor inertias, ``BrakeSet.armature``) adds the rotors' kinetic
    energy 0.5 sum armature_i v_i^2."""
    T = np.array([robot.kinetic_energy(q, v) for q, v in zip(prediction.q, prediction.v)])
    if armature is not None:
        T = T + 0.5 * (prediction.v * prediction.v) @ np.asarray(armature, dtype=float)
    V = np.array([robot.potential_energy(q) for q in prediction.q])
    return T, V


def generalized_momenta(robot: RobotModel, prediction: StopPrediction) -> np.ndarray:
    """Generalized momenta p = M(q) v [N m s] at every sample (rows of locked joints included; Müller 2026,
    Sec. 6 plots F^T M v, the free rows)."""
    return np.array([robot.mass_matrix(q) @ v for q, v in zip(prediction.q, prediction.v)])


def dense_series(prediction: StopPrediction, per_interval: int = 8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t, angles, v) refined between samples by cubic Hermite interpolation (q with v, v with a) for plots and
    animations; ``angles`` are q for models whose q is a vector (nq == nv), else the velocity-space displacement is
    not available and q samples are repeated. Accuracy O(step^4)."""
    t, q, v, a = prediction.t, prediction.q, prediction.v, prediction.a
    ts, qs, vs = [t[:1]], [q[:1]], [v[:1]]
    x = np.linspace(0.0, 1.0, per_interval + 1)[1:]
    h00, h10, h01, h11 = 2 * x**3 - 3 * x**2 + 1, x**3 - 2 * x**2 + x, -2 * x**3 + 3 * x**2, x**3 - x**2
    vector = q.shape[1] == v.shape[1]
    for k in range(len(t) - 1):
        h = t[k + 1] - t[k]
        if h <= 0:
            ts.append(t[k + 1:k + 2])
            qs.append(q[k + 1:k + 2])
            vs.append(v[k + 1:k + 2])
            continue
        ts.append(t[k] + h * x)
        vs.append(np.outer(h00, v[k]) + np.outer(h10 * h, a[k]) + np.outer(h01, v[k + 1]) + np.outer(h11 * h, a[k + 1]))
        if vector:
            qs.append(np.outer(h00, q[k]) + np.outer(h10 * h, v[k]) + np.outer(h01, q[k + 1])
                      + np.outer(h11 * h, v[k + 1]))
        else:
            qs.append(np.repeat(q[k + 1:k + 2], len(x), axis=0))
    return np.concatenate(ts), np.concatenate(qs), np.concatenate(vs)


def travelled(robot: RobotModel, q: np.ndarray) -> np.ndarray:
    """(K x nv) displacement of every joint since the first sample of the configuration series ``q`` (K x nq)
    [rad; m for prismatic joints]: the sum of the tangent steps q_k (-) q_k-1 between consecutive samples. For a
    continuous joint (q holds (cos, sin)) the difference of the two end points alone is only known modulo 2 pi
    (it is wrapped to (-pi, pi]); summed over samples a fraction of a turn apart, a joint that turns further than
    pi during the stop is counted in full. Where q is a vector this is q - q[0]."""
    q = np.asarray(q, dtype=float)
    if q.shape[1] == robot.nv:
        return q - q[0]
    steps = np.array([robot.difference(a, b) for a, b in zip(q[:-1], q[1:])]).reshape(-1, robot.nv)
    return np.vstack([np.zeros((1, robot.nv)), np.cumsum(steps, axis=0)])


def position_series(robot: RobotModel, q: np.ndarray) -> np.ndarray:
    """(K x nv) position of every joint along the configuration series ``q`` (K x nq), one value per joint:
    revolute [rad], prismatic [m], continuous [rad] starting at its angle in (-pi, pi] at the first sample and
    continuous from there (a rest angle past +-pi is not wrapped back); see
    :meth:`~vtm_dynamics.core.robot.model.RobotModel.joint_positions`."""
    q = np.asarray(q, dtype=float)
    return robot.joint_positions(q[0]) + travelled(robot, q)


def configuration_of(robot: RobotModel, positions: np.ndarray) -> np.ndarray:
    """The configuration (nq) of one position per joint (nv) [rad; m for prismatic joints]: ``positions`` itself
    where q is a vector, else a continuous joint's angle as its (cos, sin)
    (:meth:`~vtm_dynamics.core.robot.model.RobotModel.configuration_from_angles`; whole turns are lost)."""
    positions = np.asarray(positions, dtype=float)
    return positions if robot.nq == robot.nv else robot.configuration_from_angles(positions)

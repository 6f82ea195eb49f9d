"""Huang et al. (seed paper 003), Sect. 11, written out for the planar double pendulum and nothing else.

An independent check of ``core/reactions/taylor_reactions.py``: plain 2-D vectors and absolute angles, no rotation
matrices, no pair frames, no shared code. Per step (Fig. 7):

* unknowns Q = [R1, R2] [N], world axes: R1 the ground's force on link 1 at joint 1, R2 link 1's force on link 2
  at joint 2 (link 1 receives −R2, eqs. (34)-(35));
* accelerations from eqs. (9)-(11), each force acting at the link's own joint point d (link coordinates ±0.61 m
  from the centre of mass): a = ΣR/m + g, α = Σ d × R / J;
* joint-point increments over Δt from eq. (12): Δr = (v + ω k×d) Δt + ½ (a + α k×d − ω² d) Δt²;
* eq. (21)/(22): the two copies of each joint point coincide at t + Δt; for joint 1 the ground's copy is the fixed
  pivot (0, 0). Affine in Q (eq. (23)); solved exactly (eq. (36), Gaussian elimination);
* advance (the implementation's stated choice for "Eqs. (5)-(10)"): r ← r + vΔt + ½aΔt², v ← v + aΔt,
  θ ← θ + ωΔt + ½αΔt², ω ← ω + αΔt.

Fig. 8 data: m = 14.59 kg, J = 1.36 kg m², joint points at ±0.61 m; gravity (0, −9.81) m/s².
"""

from __future__ import annotations

import numpy as np

M, J, D = 14.59, 1.36, 0.61
GRAVITY = np.array([0.0, -9.81])


def _rot(theta: float) -> np.ndarray:
    return np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])


def _k_cross(d: np.ndarray) -> np.ndarray:  # k × d for the world z axis k
    return np.array([-d[1], d[0]])


def _cross(a: np.ndarray, b: np.ndarray) -> float:
    return float(a[0] * b[1] - a[1] * b[0])


def simulate(theta1: float, theta2: float, dt: float, steps: int, every: int, gap=(0.0, 0.0)):
    """Release from rest at absolute angles (θ1, θ2) [rad], both centres of mass shifted by ``gap`` [m] (a position
    gap at the ground pivot); returns samples (t, Q (4,), centres of mass (2, 2), angles (2,)) every ``every``
    steps, Q of the step taken at t."""
    th = np.array([theta1, theta2], dtype=float)
    r = np.array([_rot(th[0]) @ [D, 0.0], _rot(th[0]) @ [2 * D, 0.0] + _rot(th[1]) @ [D, 0.0]]) + np.asarray(gap)
    v, w = np.zeros((2, 2)), np.zeros(2)
    out = []
    for k in range(steps + 1):
        d10, d12, d22 = _rot(th[0]) @ [-D, 0.0], _rot(th[0]) @ [D, 0.0], _rot(th[1]) @ [-D, 0.0]

        def accelerations(Q):
            R1, R2 = Q[:2], Q[2:]
            a = np.array([(R1 - R2) / M + GRAVITY, R2 / M + GRAVITY])
            al = np.array([(_cross(d10, R1) + _cross(d12, -R2)) / J, _cross(d22, R2) / J])
            return a, al

        def residual(Q):  # increments of (joint 1 on link 1) and (joint 2 on link 2 minus on link 1)
            a, al = accelerations(Q)
            inc = [(v[i] + w[i] * _k_cross(d)) * dt + 0.5 * (a[i] + al[i] * _k_cross(d) - w[i] ** 2 * d) * dt * dt
                   for i, d in ((0, d10), (0, d12), (1, d22))]
            return np.concatenate([inc[0], inc[2] - inc[1]])

        gap_t = np.concatenate([r[0] + d10, r[1] + d22 - r[0] - d12])  # the copies at t (ground pivot at 0)
        f0 = residual(np.zeros(4))
        A = np.column_stack([residual(e) - f0 for e in np.eye(4)])
        Q = np.linalg.solve(A, -(gap_t + f0))
        a, al = accelerations(Q)
        if k % every == 0:
            out.append((k * dt, Q, r.copy(), th.copy()))
        r = r + v * dt + 0.5 * a * dt * dt
        v = v + a * dt
        th = th + w * dt + 0.5 * al * dt * dt
        w = w + al * dt
    return out


def in_link_axes(Q: np.ndarray, angles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """R1 in link 1's axes and R2 in link 2's (the pair frames of the URDF's joint1 and joint2)."""
    return _rot(angles[0]).T @ Q[:2], _rot(angles[1]).T @ Q[2:]

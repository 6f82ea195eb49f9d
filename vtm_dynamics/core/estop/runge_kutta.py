"""Explicit Runge-Kutta steps of the braking dynamics between events, their continuous extension and crossing roots.

Between events the state (q, v) and the brake work W = integral tau_b . v dt [J] are advanced with a fixed maximum
step by an explicit Runge-Kutta method: Dormand-Prince 5 by default (the 5th-order solution of the Dormand-Prince
5(4) pair, J. R. Dormand and P. J. Prince 1980), or the classical RK4 of Müller 2026, Sec. 6. W uses the same
stages, so E(t) - E(0) = W(t) (plus jump losses) checks the integration.

Zero crossings of sliding joint velocities are located on the step's continuous extension: DP5 uses Shampine's
quartic (stages and the derivative at the step end, both computed anyway), RK4 the cubic Hermite interpolant of v.
DP5 steps are shortened to end just past the crossing predicted at constant deceleration (``AIM``), so that a
crossing usually falls into a short step whose embedded error estimate (``DP5_ERROR``, which bounds the
extension's error) lets the event loop take the state at the crossing from the extension.

:class:`RungeKuttaSteps` is a part of the braking engine (:class:`.event_loop.BrakingEngine`); it uses the
engine's tableau (``A``, ``B``, ``ns``), model data and its right-hand side ``_acc`` (:mod:`.held_dynamics`).
With the extended brake model (Stribeck friction, brake rise time: :mod:`.brakes`) the brake torque depends on
the stage velocity and time; each stage then evaluates it at its own time t0 + c_s h (the engine's ``_clock``,
step start ``_t0``) and the brake power of the stage is that stage's torque times its velocity.
Units: SI (rad, rad/s, rad/s^2, J, s).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pinocchio as pin

# Butcher tableaus (A, b) of the explicit methods: classical RK4, and Dormand-Prince 5 (the 5th-order solution of
# the Dormand-Prince 5(4) pair, J. R. Dormand and P. J. Prince 1980).
TABLEAUS = {
    "rk4": (np.array([[0, 0, 0, 0], [0.5, 0, 0, 0], [0, 0.5, 0, 0], [0, 0, 1.0, 0]], dtype=float),
            np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6])),
    "dp5": (np.array([
        [0, 0, 0, 0, 0, 0],
        [1 / 5, 0, 0, 0, 0, 0],
        [3 / 40, 9 / 40, 0, 0, 0, 0],
        [44 / 45, -56 / 15, 32 / 9, 0, 0, 0],
        [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0, 0],
        [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656, 0],
    ], dtype=float), np.array([35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84])),
}

# Continuous extension of Dormand-Prince 5(4) (L. F. Shampine, "Some practical Runge-Kutta formulas", Math. Comp.
# 46 (1986)): y(t0 + theta h) = y0 + h sum_s k_s (P[s] . (theta, theta^2, theta^3, theta^4)), over the six stages
# and the seventh stage k_7 = f(y1) (first-same-as-last: the derivative at the step end, which the next step needs
# anyway). Fourth order in theta; P[s] summed over its columns gives the weight b_s, so theta = 1 is y1 exactly.
DP5_DENSE = np.array([
    [1, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432],
    [0, 0, 0, 0],
    [0, 131558114200 / 32700410799, -68118460800 / 10900136933, 87487479700 / 32700410799],
    [0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072],
    [0, 127303824393 / 49829197408, -318862633887 / 49829197408, 701980252875 / 199316789632],
    [0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844],
    [0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423],
])
# b - b* of Dormand-Prince 5(4) over the seven stages (b*: the embedded 4th-order weights, Dormand and Prince 1980):
# h (b - b*) . k estimates the local error of the 4th-order solution, which bounds the continuous extension's
# error (measured on UR5 braking steps: the interpolant's velocity error is 0.3-0.5 x this estimate).
DP5_ERROR = np.array([35 / 384 - 5179 / 57600, 0.0, 500 / 1113 - 7571 / 16695, 125 / 192 - 393 / 640,
                      -2187 / 6784 + 92097 / 339200, 11 / 84 - 187 / 2100, -1 / 40])
# Steps are aimed at the earliest zero crossing predicted at constant deceleration, -v_i / a_i, overshooting it by
# this factor: the crossing then falls into a short step whose continuous extension is accurate enough to give the
# state at the event without re-integration (tried 1.1 and 1.3 on the bench states: same evaluation counts).
AIM = 1.1


class RungeKuttaSteps:
    """Runge-Kutta steps of (q, v, W) for the braking engine; the stages of the last step stay in ``_K`` (and the
    stage velocities and brake powers in ``_VP``) for the continuous extension."""

    def _advance(self, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """q (+) dq: plain addition for vector-space models, else Pinocchio's integrate on the configuration space."""
        if self.vector_space:
            return q + dq
        return pin.integrate(self.m, q, dq)

    def _step(self, q, v, W, h, k1):
        """One explicit Runge-Kutta step of (q, v, W) over h [s] with the engine's tableau; k1 = (a, power) at the
        start. Returns (q1, v1, W1). The step is fixed: DP5's embedded 4th-order estimate is not used here."""
        if self.vector_space:
            return self._step_vector(q, v, W, h, k1)
        A, B, ns = self.A, self.B, self.ns
        KA = np.empty((ns, self.nv))
        KV = np.empty((ns, self.nv))
        P = np.empty(ns)
        KA[0] = k1[0]
        KV[0] = v
        P[0] = k1[1]
        for s_ in range(1, ns):
            row = A[s_, :s_]
            vs = v + h * (row @ KA[:s_])
            qs = self._advance(q, h * (row @ KV[:s_]))
            self._clock = self._t0 + h * self._nodes[s_]  # stage time (the extended brake model depends on t)
            a_s, t_s = self._acc(qs, vs)
            KA[s_] = a_s
            KV[s_] = vs
            P[s_] = t_s @ vs
        self._K = (KV, KA, P)
        return self._advance(q, h * (B @ KV)), v + h * (B @ KA), W + h * (B @ P)

    def _step_vector(self, q, v, W, h, k1):
        """:meth:`_step` for models whose q is a vector (revolute/prismatic joints), written for q' = v, v' = a:
        with c = A 1, the stage state is q_s = q + h c_s v + h^2 (A A)[s] . a, v_s = v + h A[s] . a, so that one
        small matrix product of the rows (q, v, a_1, ..., a_s) gives (q_s, v_s) (the same method, fewer numpy
        calls). The brake work needs no stages of its own: P_s = tau_b(v_s) . v_s = cs . v_s + cv . v_s^2."""
        n, ns = self.nv, self.ns
        G = self._scaled_tableau(h)
        X = np.zeros((2 + ns, n))  # rows q, v, a_1 .. a_ns
        X[0] = q
        X[1] = v
        X[2] = k1[0]
        acc = self._acc
        if self.general:  # time- and speed-dependent brake torques: the stages' own torques give the power
            T = np.empty((ns, n))
            for s_ in range(1, ns):
                Y = G[s_].dot(X)
                self._clock = self._t0 + h * self._nodes[s_]
                X[2 + s_], T[s_] = acc(Y[0], Y[1])
            V = G[:ns, 1].dot(X)
            P = np.einsum("ij,ij->i", T, V)
            P[0] = k1[1]
        else:
            for s_ in range(1, ns):
                Y = G[s_].dot(X)
                X[2 + s_] = acc(Y[0], Y[1])[0]
            V = G[:ns, 1].dot(X)  # stage velocities v_s (row 0: v)
            P = V.dot(self.cs) + (V * V).dot(self.cv) if self.viscous else V.dot(self.cs)
        Y = G[ns].dot(X)
        self._K = X[2:]
        self._VP = (V, P)
        return Y[0], Y[1], W + float(G[ns, 1, 2:].dot(P))  # h b . P

    def _scaled_tableau(self, h: float) -> np.ndarray:
        """G ((ns + 1) x 2 x (2 + ns)) of :meth:`_step_vector` for step h: G[s] maps the rows (q, v, a_1..) to
        (q_s, v_s) (zero columns for the stages not yet computed), G[ns] to the step's result (q_1, v_1), so that
        G[ns, 1, 2:] = h b; cached for the default step."""
        if h == self.st.step and self._tableau_h is not None:
            return self._tableau_h
        if self._tableau_0 is None:  # h-free parts: G = G0 * (powers of h)
            A, B, ns = self.A, self.B, self.ns
            G0 = np.zeros((ns + 1, 2, 2 + ns))
            G0[:, 0, 0] = G0[:, 1, 1] = 1.0
            G0[:ns, 0, 1] = A.sum(axis=1)
            G0[:ns, 0, 2:] = A @ A
            G0[:ns, 1, 2:] = A
            G0[ns, 0, 1] = B.sum()
            G0[ns, 0, 2:] = B @ A
            G0[ns, 1, 2:] = B
            self._tableau_0 = G0
        G = self._tableau_0 * np.array([[1.0, h] + [h * h] * self.ns, [1.0, 1.0] + [h] * self.ns])
        if h == self.st.step:
            self._tableau_h = G
        return G

    def _dense_state(self, q, v, W, h, v_end, k_end, theta: float):
        """(q, v, W) at t0 + theta h on the DP5 continuous extension of the last step (vector-space models), with
        the seventh stage (v_end, a_end = k_end[0], tau_b(v_end) . v_end)."""
        w = h * DP5_DENSE.dot((theta, theta * theta, theta ** 3, theta ** 4))
        w6, w7 = w[:6], w[6]
        V, P = self._VP
        return (q + w6.dot(V) + w7 * v_end, v + w6.dot(self._K) + w7 * k_end[0],
                W + float(w6.dot(P)) + w7 * float(k_end[2].dot(v_end)))

    def _dense_velocity_coefficients(self, h, k_end, idx) -> np.ndarray:
        """(len(idx), 4) coefficients of theta^1..theta^4 in v_i(t0 + theta h) - v_i(t0) on the DP5 continuous
        extension of the last step."""
        KA = self._K if self.vector_space else self._K[1]
        return h * (KA[:, idx].T @ DP5_DENSE[:6] + np.outer(k_end[0][idx], DP5_DENSE[6]))


def hermite_root(v0: float, v1: float, a0: float, a1: float, h: float, s: float) -> float:
    """First time in (0, h] [s] where the cubic Hermite interpolant of a velocity (values v0, v1, slopes a0, a1)
    reaches zero from the side of sign s (see :func:`first_root`). Only a starting value: the caller polishes it
    on the integrator itself."""
    c = (v0, h * a0, -3 * v0 - 2 * h * a0 + 3 * v1 - h * a1, 2 * v0 + h * a0 - 2 * v1 + h * a1)
    return first_root(c, s) * h


def first_root(c: Sequence[float], s: float) -> float:
    """First theta in (0, 1] where the polynomial sum_j c[j] theta^j (c[0] of sign s) reaches zero: bracket on a
    16-point grid, then safeguarded Newton to 1e-13 (if no grid point has changed sign, the bracket is the last
    cell)."""
    c = [float(ck) for ck in c]  # Python floats: the Newton loop is scalar arithmetic
    cr = c[::-1]
    dc = [k * c[k] for k in range(len(c) - 1, 0, -1)]
    vals = _GRID_POWERS[:, :len(c)].dot(c)
    k = int(np.argmax(vals * s <= 0.0))  # the first grid point at or past zero (the last one if none is)
    if k == 0 and vals[0] * s > 0.0:
        k = len(_GRID) - 1
    hi = float(_GRID[k])
    lo, f_lo = (float(_GRID[k - 1]), float(vals[k - 1])) if k > 0 else (0.0, c[0])
    f_hi = float(vals[k])
    x = lo + (hi - lo) * f_lo / (f_lo - f_hi) if f_lo != f_hi else hi  # secant start inside the bracket
    if not (lo < x <= hi):
        x = hi
    for _ in range(30):
        fx = dfx = 0.0
        for ck in cr:
            fx = fx * x + ck
        for ck in dc:
            dfx = dfx * x + ck
        if fx * s > 0:
            lo = x
        else:
            hi = x
        xn = x - fx / dfx if dfx != 0 else 0.5 * (lo + hi)
        if not (lo < xn <= hi):
            xn = 0.5 * (lo + hi)
        if abs(xn - x) < 1e-13 or hi - lo < 1e-13:
            x = xn
            break
        x = xn
    return max(x, 1e-12)


_GRID = np.linspace(0.0, 1.0, 17)[1:]
_GRID_POWERS = _GRID[:, None] ** np.arange(5)[None, :]


def illinois_step(a: float, ga: float, b: float, gb: float, c: float, gc: float,
                  side: int) -> tuple[float, float, float, float, int]:
    """One step of regula falsi with the Illinois modification on a bracket [a, b] of g (g(a) = ga <= 0 < g(b) =
    gb) after evaluating g(c) = gc at c = (a gb - b ga) / (gb - ga): the end on c's side moves to c, and the other
    end's value is halved when the same end moved last time (``side``: -1 b moved, 1 a moved, 0 none yet). Returns
    (a, ga, b, gb, side). Plain Python that Numba also compiles (the compiled event loop's release location)."""
    if gc > 0:
        b, gb = c, gc
        if side == -1:
            ga *= 0.5
        side = -1
    else:
        a, ga = c, gc
        if side == 1:
            gb *= 0.5
        side = 1
    return a, ga, b, gb, side

"""An independent category-0 stop for checking the E-stop engine: SciPy's ``solve_ivp`` (DOP853, tight tolerances)
on a right-hand side written here from Pinocchio's mass matrix (CRBA) and bias (nonLinearEffects) only, with its own
event handling. It shares none of the engine's code: no held-set dynamics, no crossing location, no stick/slip
decisions.

Brake model (the one the brake YAML documents): brake i engages at its delay, its level rises linearly over its rise
time; while joint i slides the brake exerts -r(t) (sign(v_i) sliding_i + viscous_i v_i); a joint whose velocity
reaches zero after its brake engaged is locked (a row of the KKT system with a_i = 0), and stays locked: the
caller checks the returned ``max_hold_ratio`` (largest |needed holding force| / capacity seen at the locks) is
below 1, else this reference does not apply. Reflected drive inertias (armature) are added to the diagonal of M.
No Stribeck term. Units: SI; prismatic joints m, m/s, N.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from scipy.integrate import solve_ivp


@dataclass(frozen=True)
class ReferenceStop:
    joint_stop_times: np.ndarray  # [s] per velocity index
    q_final: np.ndarray
    max_hold_ratio: float


def reference_stop(model: pin.Model, brakes: dict[str, dict], q0: np.ndarray, v0: np.ndarray,
                   t_end: float = 2.0) -> ReferenceStop:
    """``brakes``: joint name -> the brake YAML's fields (engage_delay, rise_time, sliding_torque, holding_torque,
    viscous, armature); q must be a vector (nq == nv)."""
    assert model.nq == model.nv
    data = model.createData()
    nv = model.nv
    idx = {model.names[j]: model.joints[j].idx_v for j in range(1, model.njoints)}
    delay, rise = np.full(nv, np.inf), np.zeros(nv)
    slide, hold, visc, arm = np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(nv)
    for name, b in brakes.items():
        i = idx[name]
        delay[i], rise[i] = b.get("engage_delay", 0.0), b.get("rise_time", 0.0)
        slide[i], hold[i] = b["sliding_torque"], b["holding_torque"]
        visc[i], arm[i] = b.get("viscous", 0.0), b.get("armature", 0.0)

    def level(t: float) -> np.ndarray:
        on = t >= delay - 1e-15
        r = np.where(rise > 0, (t - delay) / np.where(rise > 0, rise, 1.0), 1.0)
        return np.where(on, np.clip(r, 0.0, 1.0), 0.0)

    def solve(t, q, v, locked, sign):
        M = pin.crba(model, data, q)
        M = np.triu(M) + np.triu(M, 1).T + np.diag(arm)
        h = pin.nonLinearEffects(model, data, q, v)
        tau = np.where(locked, 0.0, -level(t) * (sign * slide + visc * v))
        rows = np.flatnonzero(locked)
        E = np.eye(nv)[rows]
        K = np.block([[M, E.T], [E, np.zeros((rows.size, rows.size))]])
        x = np.linalg.solve(K, np.concatenate([tau - h, np.zeros(rows.size)]))
        return x[:nv], np.abs(x[nv:]), rows

    t, q, v = 0.0, np.array(q0, float), np.array(v0, float)
    locked = np.zeros(nv, dtype=bool)
    stop = np.full(nv, np.nan)
    sign = np.sign(v)
    bounds = sorted({float(x) for x in np.concatenate([delay, delay + rise]) if np.isfinite(x)})
    ratio = 0.0
    while t < t_end and not locked.all():
        for i in np.flatnonzero(~locked & (level(t) > 0) & (v == 0.0)):
            locked[i], stop[i] = True, t
        if locked.any():
            _, lam, rows = solve(t, q, v, locked, sign)
            cap = level(t)[rows] * hold[rows]
            ratio = max(ratio, float(np.max(lam / np.maximum(cap, 1e-300))))
        if locked.all():
            break
        sign = np.where(v != 0.0, np.sign(v), sign)
        t_next = min([b for b in bounds if b > t + 1e-15] + [t_end])
        watched = np.flatnonzero(~locked & (level(0.5 * (t + t_next)) > 0))

        def rhs(tt, y):
            return np.concatenate([y[nv:], solve(tt, y[:nv], y[nv:], locked, sign)[0]])

        def crossing(i):
            def g(tt, y):
                return y[nv + i]
            g.terminal, g.direction = True, -sign[i]
            return g

        sol = solve_ivp(rhs, (t, t_next), np.concatenate([q, v]), method="DOP853", rtol=1e-11, atol=1e-12,
                        events=[crossing(i) for i in watched], max_step=1e-3)
        t, q, v = float(sol.t[-1]), sol.y[:nv, -1].copy(), sol.y[nv:, -1].copy()
        for k, i in enumerate(watched):
            if sol.t_events[k].size:
                v[i] = 0.0
    return ReferenceStop(stop, q, ratio)

"""Category-1 stop ramp (IEC 60204-1): controlled deceleration by the drives before power is removed.

A straight line in joint space, v(t) = v0 (1 - t/T), a = -v0/T, with T = max_i |v0_i| / decel_i from the per-joint
deceleration limits; with torque limits, T is lengthened (doubling, then bisection) until the drive torques
tau = RNEA(q, v, a) fit at 21 points of the ramp. Power is removed at standstill (the drives hold until the brakes
have engaged) or at ``max_duration`` (then the rest is a category-0 stop from that state, :mod:`.event_loop`).
Units: SI (rad, rad/s, rad/s^2, N m, s).
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.estop.inputs import CategoryOne, StopInputError, StopSettings, stop_vector
from vtm_dynamics.core.robot.model import RobotModel


def controlled_ramp(robot: RobotModel, q0: np.ndarray, v0: np.ndarray, c1: CategoryOne, settings: StopSettings,
                    samples: dict) -> tuple[float, np.ndarray, np.ndarray, bool]:
    """Category-1 ramp from (q0 [rad], v0 [rad/s]) (module docstring); appends its samples every ``settings.step``.
    Returns (t_off [s], q_off, v_off, standstill)."""
    nv = robot.nv
    dec = np.broadcast_to(np.asarray(c1.deceleration, dtype=float), (nv,)).copy() \
        if np.ndim(c1.deceleration) == 0 else stop_vector(c1.deceleration, nv, "category_one.deceleration")
    if not np.all(np.isfinite(dec)) or np.any(dec <= 0):
        raise StopInputError("category_one.deceleration: must be positive and finite")
    if c1.max_duration is not None and not (math.isfinite(float(c1.max_duration)) and float(c1.max_duration) >= 0.0):
        # a negative time would cut the power before the stop begins (the ramp extrapolated backwards)
        raise StopInputError(f"category_one.max_duration: must be a finite number >= 0 s, got {c1.max_duration!r}")
    T = float(np.max(np.abs(v0) / dec)) if np.any(v0 != 0) else 0.0
    lim = None
    if c1.torque_limits == "urdf":
        lim = np.array(robot.model.effortLimit, dtype=float)
    elif c1.torque_limits is not None:
        lim = stop_vector(c1.torque_limits, nv, "category_one.torque_limits")
    m, d = robot.model, robot.data

    def state(t, T):
        if T == 0.0:
            return q0.copy(), np.zeros(nv), np.zeros(nv)
        tt = min(t, T)
        return robot.integrate(q0, v0 * (tt - tt * tt / (2 * T))), v0 * (1 - tt / T), -v0 / T

    def usage(T):
        worst = 0.0
        for t in np.linspace(0.0, T, 21):
            qq, vv, aa = state(t, T)
            tq = pin.rnea(m, d, qq, vv, aa)
            worst = max(worst, float(np.max(np.abs(tq) / np.where(lim > 0, lim, np.inf))))
        return worst

    if lim is not None and T > 0 and usage(T) > 1.0:
        lo, hi = T, T
        for _ in range(40):
            hi *= 2.0
            if usage(hi) <= 1.0:
                break
        else:
            raise StopInputError("category_one.torque_limits: the drives cannot hold the arm against gravity")
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            if usage(mid) <= 1.0:
                hi = mid
            else:
                lo = mid
        T = hi
    t_off = T if c1.max_duration is None else min(T, float(c1.max_duration))
    n = max(int(math.ceil(t_off / settings.step)), 1)
    for t in np.linspace(0.0, t_off, n + 1):
        qq, vv, aa = state(t, T)
        samples["t"].append(float(t))
        samples["q"].append(qq)
        samples["v"].append(vv)
        samples["a"].append(aa if t < T else np.zeros(nv))
        samples["tau"].append(np.zeros(nv))
        samples["drive"].append(np.array(pin.rnea(m, d, qq, vv, aa)))
        samples["locked"].append(np.zeros(nv, dtype=bool))
        samples["W"].append(0.0)
        samples["J"].append(0.0)
    qq, vv, _ = state(t_off, T)
    standstill = t_off >= T
    if standstill:
        vv = np.zeros(nv)
    return t_off, qq, vv, standstill

"""Category-1 stop ramp (IEC 60204-1): controlled deceleration by the drives before power is removed.

A straight line in joint space, v(t) = v0 (1 - t/T), a = -v0/T, with T = max_i |v0_i| / decel_i from the per-joint
deceleration limits; with torque limits, T is lengthened (doubling, then bisection) until the drive torques
tau = RNEA(q, v, a) + armature * a fit at 21 points of the ramp (Müller 2026, eq. (3) with the rotor inertia of
the braked phase on the diagonal of M: the drives decelerate the rotors too). Power is removed at standstill (the
drives hold until the brakes have engaged, :func:`vtm_dynamics.core.estop.prediction.predict_with`) or at
``max_duration`` (then the rest is a category-0 stop from that state, :mod:`.event_loop`). T is lengthened to no
more than ``CategoryOne.longest_ramp`` (default :data:`~.defaults.CATEGORY1_LONGEST_RAMP`); a ramp that no length
up to it fits is refused, naming the joint, its torque and its limit, and the cause (gravity at the start pose, or
the motion's own Coriolis and centrifugal torques at the trigger, which a slower ramp cannot remove, or the
torques along the longest ramp). Units: SI (rad, rad/s, rad/s^2, N m, s).
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.estop.inputs import CategoryOne, StopInputError, StopSettings, stop_vector
from vtm_dynamics.core.robot.model import RobotModel


def controlled_ramp(robot: RobotModel, q0: np.ndarray, v0: np.ndarray, c1: CategoryOne, settings: StopSettings,
                    samples: dict, armature: np.ndarray | None = None) -> tuple[float, np.ndarray, np.ndarray, bool]:
    """Category-1 ramp from (q0 [rad], v0 [rad/s]) (module docstring); appends its samples every ``settings.step``.
    ``armature`` [kg m^2] (nv): the rotor inertias the drives decelerate with the arm (the brakes' ``armature``).
    Returns (t_off [s], q_off, v_off, standstill)."""
    nv = robot.nv
    rotor = np.zeros(nv) if armature is None else np.asarray(armature, dtype=float)
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
    longest = float(c1.longest_ramp)
    if lim is not None and not (math.isfinite(longest) and longest > 0.0):
        raise StopInputError(f"category_one.longest_ramp: must be a finite number > 0 s, got {c1.longest_ramp!r}")
    m, d = robot.model, robot.data

    def state(t, T):
        if T == 0.0:
            return q0.copy(), np.zeros(nv), np.zeros(nv)
        tt = min(t, T)
        return robot.integrate(q0, v0 * (tt - tt * tt / (2 * T))), v0 * (1 - tt / T), -v0 / T

    def drive(qq, vv, aa):
        return np.array(pin.rnea(m, d, qq, vv, aa)) + rotor * aa

    def usage(T):
        worst = 0.0
        for t in np.linspace(0.0, T, 21):
            worst = max(worst, float(np.max(np.abs(drive(*state(t, T))) / np.where(lim > 0, lim, np.inf))))
        return worst

    if lim is not None and T > 0 and usage(T) > 1.0:
        lo, hi = T, T
        while hi < longest:  # doubling up to the longest ramp: at most log2(longest / T) + 1 steps
            hi = min(2.0 * hi, longest)
            if usage(hi) <= 1.0:
                break
        else:
            raise StopInputError(_no_ramp_text(robot, q0, v0, lim, longest, lambda t: drive(*state(t, longest))))
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
        samples["drive"].append(drive(qq, vv, aa if t < T else np.zeros(nv)))
        samples["locked"].append(np.zeros(nv, dtype=bool))
        samples["W"].append(0.0)
        samples["J"].append(0.0)
    qq, vv, _ = state(t_off, T)
    standstill = t_off >= T
    if standstill:
        vv = np.zeros(nv)
    return t_off, qq, vv, standstill


def _no_ramp_text(robot: RobotModel, q0: np.ndarray, v0: np.ndarray, lim: np.ndarray, longest: float,
                  drive_at) -> str:
    """Why no ramp fits the torque limits ``lim`` [N m], in one line naming the joint, its torque and its limit:
    gravity at the start pose, else the motion's gravity, Coriolis and centrifugal torques h(q0, v0) at the trigger
    (the ramp's torque tends to them as it is made slower), else the longest ramp allowed (``longest`` [s];
    ``drive_at(t)``: its drive torques [N m] at t [s]) at its worst instant."""
    scale = np.where(lim > 0, lim, np.inf)
    where = "category_one.torque_limits: no ramp fits the drive torque limits: "
    for torque, cause in ((robot.gravity_torques(q0), "gravity at the start pose"),
                          (robot.bias_forces(q0, v0), "gravity and the motion's Coriolis and centrifugal torques at the trigger")):
        use = np.abs(torque) / scale
        i = int(np.argmax(use))
        if use[i] > 1.0:
            return (f"{where}{cause} need {abs(torque[i]):.6g} N m at joint '{robot.joint_names[i]}' "
                    f"(limit {lim[i]:.6g} N m)")
    times = np.linspace(0.0, longest, 21)
    torques = np.array([drive_at(t) for t in times])
    use = np.abs(torques) / scale
    k, i = np.unravel_index(int(np.argmax(use)), use.shape)
    return (f"{where}even the longest ramp predicted, {longest:g} s, needs {abs(torques[k, i]):.6g} N m at joint "
            f"'{robot.joint_names[i]}' {times[k]:.6g} s into it (limit {lim[i]:.6g} N m)")

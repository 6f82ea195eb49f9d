"""Inputs of a stop prediction and their checks: the stop scenario, abrupt locks, category-1 parameters, numerics.

Stop categories follow IEC 60204-1 (Müller 2026, Sec. 1 and Sec. 7 for the scenario): category 0 removes the
drive torque at t = 0 and each brake engages after its delay; category 1 decelerates under the drives first
(:mod:`.ramp`). Abrupt locks are joint locks activated with the momentum-consistent jump of eq. (22).
Errors are one line naming the field (:class:`StopInputError`). Units: SI (rad, rad/s, rad/s^2, N m, s).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from vtm_dynamics.core.estop.defaults import (
    CATEGORY1_DECELERATION, CATEGORY1_LONGEST_RAMP, CATEGORY1_TORQUE_LIMITS, HORIZON, INTEGRATION_STEP,
)
from vtm_dynamics.core.validation import finite_vector

if TYPE_CHECKING:  # annotations only: the inputs' checks need no Pinocchio
    from vtm_dynamics.core.robot.model import RobotModel


class StopInputError(ValueError):
    """Bad input to a stop prediction; the message is one line naming the field (e.g. ``q[elbow_joint]``)."""


@dataclass(frozen=True)
class LockEvent:
    """An abrupt lock of ``joints`` at ``time`` [s] (a pawl or an external command), momentum-consistent jump
    (Müller 2026, eq. (22)); the lock then holds up to ``holding_torque`` [N m] (inf: rigid). A joint named twice
    is locked once (``joints`` keeps the first mention of each)."""

    time: float
    joints: tuple[str, ...]
    holding_torque: float = math.inf

    def __init__(self, time: float, joints: str | Sequence[str], holding_torque: float = math.inf) -> None:
        object.__setattr__(self, "time", float(time))
        object.__setattr__(self, "joints", (joints,) if isinstance(joints, str) else tuple(dict.fromkeys(joints)))
        object.__setattr__(self, "holding_torque", float(holding_torque))


@dataclass(frozen=True)
class CategoryOne:
    """Category-1 stop parameters: per-joint deceleration limits ``deceleration`` [rad/s^2] (scalar or nv values),
    optional ``torque_limits`` [N m] (nv values, or "urdf" for the model's effort limits) that lengthen the ramp
    until the drive torques fit, but to no more than ``longest_ramp`` [s] (else the prediction is refused), and
    ``max_duration`` [s] after which power is cut regardless (None: never; else finite and >= 0, checked when the
    ramp is computed)."""

    deceleration: float | tuple[float, ...] = CATEGORY1_DECELERATION
    torque_limits: str | tuple[float, ...] | None = CATEGORY1_TORQUE_LIMITS
    max_duration: float | None = None
    longest_ramp: float = CATEGORY1_LONGEST_RAMP


@dataclass(frozen=True)
class StopSettings:
    """Numerics: maximum ``step`` [s] of the explicit Runge-Kutta ``method`` (``dp5``: 5th order, 6 evaluations per
    step, steps shortened to end just past predicted zero crossings; ``rk4``: classical, 4 per step, fixed), horizon
    ``t_max`` [s] (of the braked phase: counted from the power cut, after a category-1 ramp), ``simultaneity_tol``
    [s] (zero crossings closer than this are decided together), ``event_tol`` [s] (Newton tolerance on crossing
    times of the Python engine), ``jump_method`` (``closed_form`` or a
    :mod:`~vtm_dynamics.core.switching.transitions` method), ``max_events``; ``rtol``, ``atol`` [rad] and
    ``atol_velocity`` [rad/s]: the local error tolerances of the compiled engine's step-size control (the 5th-order
    solution it advances is far more accurate than these bound: on the UR5 bench states 2e-9 rad and 2e-8 s against
    a 1e-13 tolerance run); ``engine``: ``compiled`` (DP5 with error control on compiled kernels,
    :mod:`.compiled_engine`; models whose q is a vector, method dp5) or ``python`` (:mod:`.event_loop`: fixed
    maximum steps; every model and method; the compiled engine falls back to it where it does not apply)."""

    step: float = INTEGRATION_STEP
    method: str = "dp5"
    t_max: float = HORIZON
    simultaneity_tol: float = 1e-9
    event_tol: float = 1e-9
    jump_method: str = "closed_form"
    max_events: int = 500
    rtol: float = 1e-6
    atol: float = 1e-6
    atol_velocity: float = 1e-5
    engine: str = "compiled"


def torque_limits_from_text(text: str | Sequence[str] | None) -> str | tuple[float, ...] | None:
    """The drives' torque limits of a category-1 ramp as a user gives them, the one reading of the command lines'
    ``--torque-limits`` (words) and the node's ``category1_torque_limits`` (one string, words apart): none given
    (None, no words, an empty string) is :data:`~.defaults.CATEGORY1_TORQUE_LIMITS`; ``urdf``: the model's effort
    limits; else one number per joint [N m; N for a prismatic joint], finite and >= 0 (0: no limit on that joint,
    as a URDF's effort 0). Their count is checked against the model when the ramp is computed. Raises
    :class:`StopInputError` (``torque_limits: ...``)."""
    words = text.split() if isinstance(text, str) else list(text or ())
    if not words:
        return CATEGORY1_TORQUE_LIMITS
    if [w.lower() for w in words] == ["urdf"]:
        return "urdf"
    try:
        values = tuple(float(w) for w in words)
    except ValueError:
        raise StopInputError(f"torque_limits: {' '.join(words)[:80]!r} is neither 'urdf' nor numbers") from None
    bad = [w for w, x in zip(words, values) if not (math.isfinite(x) and x >= 0.0)]
    if bad:
        raise StopInputError(f"torque_limits: {bad[0]!r} is not a finite torque >= 0 N m (0: no limit)")
    return values


def torque_limits_text(limits: str | Sequence[float] | None) -> str:
    """The torque limits a prediction used, in words for a report (``torque_limits_from_text``'s values, or the
    list a JSON file holds)."""
    if limits is None:
        return "none (the drives deliver the ramp's deceleration whatever torque it takes)"
    if limits == "urdf":
        return "the URDF's effort limits"
    return " ".join(f"{x:g}" for x in limits) + " N m (per joint, model order; 0: none)"


#: largest |norm - 1| of a continuous joint's (cos, sin) pair accepted as a configuration (float64 angles converted
#: by cos and sin are within 1e-15; 1e-6 leaves room for values sent as float32)
UNIT_CIRCLE_TOL = 1e-6


def stop_vector(x: object, n: int, field: str) -> np.ndarray:
    """``x`` as n finite floats (:func:`~vtm_dynamics.core.validation.finite_vector`), else :class:`StopInputError`
    naming the field and the first non-finite entry (``q[2]: not a finite number (nan)``)."""
    return finite_vector(x, n, field, StopInputError)


def check_stop_state(robot: RobotModel, q: object, v: object, field_q: str = "q",
                     field_v: str = "v") -> tuple[np.ndarray, np.ndarray]:
    """Validated (q [rad], v [rad/s]; m, m/s for prismatic joints): right sizes, finite, q within the model's
    position limits and |v| within its velocity limits (where the model has finite positive limits), a continuous
    joint's (cos, sin) on the unit circle (to ``UNIT_CIRCLE_TOL``). Raises :class:`StopInputError` naming the
    entry."""
    qa = stop_vector(q, robot.nq, field_q)
    va = stop_vector(v, robot.nv, field_v)
    if robot.nq != robot.nv:
        # Pinocchio builds a continuous joint's rotation from (cos, sin) as given: off the unit circle it is no
        # rotation (a (2, 0) or (0, 0) pair predicted a stop of 0.076 s where the arm takes 0.069 s)
        for j in robot.joints:
            if j.nq == 2 and j.nv == 1:
                c, s = qa[j.idx_q], qa[j.idx_q + 1]
                if abs(math.hypot(c, s) - 1.0) > UNIT_CIRCLE_TOL:
                    raise StopInputError(
                        f"{field_q}[{j.name}]: ({c:.6g}, {s:.6g}) is not a (cos, sin) pair on the unit circle "
                        f"(norm {math.hypot(c, s):.6g}); give the angle (RobotModel.configuration_from_angles)")
    lo, hi = robot.model.lowerPositionLimit, robot.model.upperPositionLimit
    vmax = robot.model.velocityLimit
    # a screen (a superset of the violations below: infinite or nan limits compare False, a degenerate range or a
    # zero velocity limit only sends the state to the loop, which names the first offending joint or passes it)
    if not ((qa < lo - 1e-9).any() or (qa > hi + 1e-9).any() or (np.abs(va) > vmax * (1 + 1e-9)).any()):
        return qa, va
    for j in robot.joints:
        if j.nq == j.nv:
            for k in range(j.nq):
                i = j.idx_q + k
                if np.isfinite(lo[i]) and np.isfinite(hi[i]) and hi[i] > lo[i]:
                    if not (lo[i] - 1e-9 <= qa[i] <= hi[i] + 1e-9):
                        raise StopInputError(
                            f"{field_q}[{j.name}]: {qa[i]:.6g} outside the joint limits [{lo[i]:.6g}, {hi[i]:.6g}]"
                        )
        for k in range(j.nv):
            i = j.idx_v + k
            if np.isfinite(vmax[i]) and vmax[i] > 0 and abs(va[i]) > vmax[i] * (1 + 1e-9):
                raise StopInputError(f"{field_v}[{j.name}]: |{va[i]:.6g}| exceeds the velocity limit {vmax[i]:.6g}")
    return qa, va


def states_pass_checks(robot: RobotModel, q: object, v: object) -> tuple[np.ndarray, np.ndarray] | None:
    """The states of a batch as float arrays Q (n x nq) [rad, m] and V (n x nv) [rad/s, m/s] when every one of them
    passes :func:`check_stop_state`, decided for all at once (a batch of thousands pays one check, not thousands);
    None when any might not (a ragged or non-numeric input, a non-finite entry, an entry beyond a limit, a model with
    continuous joints), and the caller checks each state with :func:`check_stop_state`, which names the first."""
    if robot.nq != robot.nv:
        return None
    try:
        Q, V = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        return None
    if Q.ndim != 2 or Q.shape[1:] != (robot.nq,) or V.shape != (len(Q), robot.nv):
        return None
    if not (np.isfinite(Q).all() and np.isfinite(V).all()):
        return None
    lo, hi, vmax = robot.model.lowerPositionLimit, robot.model.upperPositionLimit, robot.model.velocityLimit
    if (Q < lo - 1e-9).any() or (Q > hi + 1e-9).any() or (np.abs(V) > vmax * (1 + 1e-9)).any():
        return None
    return Q, V


def state_from_joint_names(
    robot: RobotModel, names: Sequence[str], positions: Sequence[float], velocities: Sequence[float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(q, v) in model order from a JointState-like message (``names``, ``positions`` [rad], ``velocities``
    [rad/s], any order; velocities may be empty = zero). Every movable joint must be present (one-DOF joints;
    a continuous joint's angle becomes (cos, sin)); unknown names are an error naming them."""
    names = list(names)
    pos = list(positions)
    vel = list(velocities) if velocities is not None and len(velocities) else [0.0] * len(names)
    if len(pos) != len(names) or len(vel) != len(names):
        raise StopInputError(f"joint_state: {len(names)} names but {len(pos)} positions and {len(vel)} velocities")
    index = {n: k for k, n in enumerate(names)}
    unknown = [n for n in names if n not in robot.joint_names]
    if unknown:
        raise StopInputError(f"joint_state.name: unknown joint {unknown[0]!r} for {robot.name!r}")
    missing = [n for n in robot.joint_names if n not in index]
    if missing:
        raise StopInputError(f"joint_state.name: joint {missing[0]!r} is missing")
    angles = np.array([float(pos[index[n]]) for n in robot.joint_names])
    v = np.array([float(vel[index[n]]) for n in robot.joint_names])
    if not np.all(np.isfinite(angles)):
        bad = robot.joint_names[int(np.flatnonzero(~np.isfinite(angles))[0])]
        raise StopInputError(f"joint_state.position[{bad}]: not a finite number")
    if not np.all(np.isfinite(v)):
        bad = robot.joint_names[int(np.flatnonzero(~np.isfinite(v))[0])]
        raise StopInputError(f"joint_state.velocity[{bad}]: not a finite number")
    if any(j.nv != 1 for j in robot.joints):
        raise StopInputError("joint_state: only models with one-DOF joints are supported")
    q = robot.configuration_from_angles(angles)
    return q, v

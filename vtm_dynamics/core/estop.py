"""Emergency-stop prediction: braking, stick/slip, joint locks and the momentum-consistent jumps of Müller 2026.

Scenario (Müller 2026, Sec. 1 and Sec. 7): at an emergency stop the brakes engage; the joints first slide against
the brakes' sliding friction, then lock one after another. Stop categories follow IEC 60204-1:

* **category 0** -- drive torque removed at t = 0; each brake engages after its delay (:mod:`brakes`);
* **category 1** -- controlled deceleration by the drives (straight line in joint space, per-joint deceleration
  limits, optional torque limits), power removed at standstill (the drives hold until the brakes have engaged) or
  at ``max_duration`` (then the rest is a category-0 stop from that state).

Equations between events (Müller 2026, eq. (3) with joint locks, eq. (39): J = unit rows). With the locked set L,
the free set F and the brake torques tau_b of the free joints (sign of the sliding part fixed between events),

    M(q) a + h(q, v) = tau_b + E_L lambda,      a_L = 0,

solved as a = a_0 + M^-1 E_L lambda with a_0 = ABA(q, v, tau_b) and lambda = -(M^-1)_LL^-1 (a_0)_L. lambda is the
torque each locked joint's brake must supply to hold it [N m] (the constraint force of eq. (3)). Computed this way
for one held joint (one row of M^-1); with two or more, equivalently and cheaper, from the free rows
M_FF a_F = (tau_b - h)_F (CRBA, Cholesky) and lambda_L = M_LF a_F - (tau_b - h)_L.

Stick/slip decision (when sliding joints reach zero velocity, at brake engagement of a resting joint, after an
abrupt lock, or when a held joint's needed torque reaches its capacity): all joints whose brake is engaged and whose
velocity is zero form the candidate set C and are decided jointly. The admissible outcome is a split C = S u R with
|lambda_i| <= capacity_i for i in S (stick) and, for i in R, a slip direction d_i with brake torque -d_i * sliding_i
and acceleration d_i a_i > 0 (the joint really leaves rest in the direction it slides). It is found by an active-set
iteration: start with S = C; while some i in S exceeds its capacity, move the one with the largest ratio
|lambda_i| / capacity_i to R with d_i = -sign(lambda_i) (it yields to the load it cannot hold); while some i in R
is inconsistent (d_i a_i <= 0), put it back into S. Each iterate is re-solved with the full constrained dynamics. If
the iteration revisits a split, all 3^|C| splits are enumerated and the consistent one with the most sticking
joints is taken (ties: smallest total capacity usage). For a single joint with holding >= sliding capacity the
first step is always consistent. The decision is exact (no regularisation, no velocity threshold).

Abrupt locks (a pawl, or a ``LockEvent`` at a given time) activate joint-lock rows with the momentum-consistent
jump of Müller 2026, eq. (22). For joint locks it has the closed form (rows F' of M v conserved, eq. (21) with
U = 0): with the new locked set L' = L u N and F' its complement,

    v+_F' = v-_F' + M_F'F'^-1 M_F'N v-_N,     v+_L' = 0,     Lambda_L' = -(M (v+ - v-))_L'

(Lambda with the sign convention of eq. (21), M dv + J^T Lambda = 0). ``StopSettings.jump_method`` can instead
call :func:`vtm_dynamics.core.switching.transition` with any of its methods (eqs. (22)/(24), (32), (37)).

Integration: explicit Runge-Kutta with a fixed maximum step between events (Dormand-Prince 5 by default, classical
RK4 as in Müller 2026, Sec. 6); time events (brake engagement, pawls, lock events, power off) are step boundaries;
zero crossings of sliding joint velocities are located on the step's continuous extension (DP5: Shampine's
quartic, which uses the stages and the derivative at the step end, both computed anyway; RK4: the cubic Hermite
interpolant of v). DP5 steps are shortened to end just past the crossing predicted at constant deceleration, so
that a crossing usually falls into a short step: when that step's embedded error estimate (Dormand-Prince 5(4),
which bounds the extension's error) is below the velocity residual the Newton polish accepts, the state at the
crossing is taken from the extension; otherwise the step is recomputed to the located time. The time is then
polished by Newton on v_i = 0 (a Newton correction dt so short that the Taylor extrapolation q + v dt + a dt^2/2,
v + a dt stays within the tolerance is applied by extrapolation, longer ones by re-integration) and the crossing
velocity set to zero exactly.
Release of a held joint is located by regula falsi (Illinois) on re-computed steps. Locked joints stay exactly at
their lock angles (their v and a are exactly zero). The brake work W = integral tau_b . v dt is integrated with
the same RK4 stages, so E(t) - E(0) = W(t) (plus jump losses) checks the integration.

Units: SI (rad, rad/s, rad/s^2, N m, N m s, J, s, m). Spatial forces are (linear [N], angular [N m]) in each
joint's local frame (Pinocchio ``data.f``).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import pinocchio as pin
import scipy.linalg.lapack

from vtm_dynamics.core.brakes import BrakeSet
from vtm_dynamics.core.model import RobotModel
from vtm_dynamics.core import switching

JUMP_METHODS = ("closed_form",) + tuple(m for m in switching.METHODS if m != "naive")
_EMPTY = np.zeros(0)
_dposv = scipy.linalg.lapack.dposv

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
_EMPTY_I = np.zeros(0, dtype=int)
# Phase data (see _Engine._phase) shared by all predictions: keyed by the brake torques and the active set, so that
# a prediction running every control cycle finds its phases already built (bounded: cleared at 4096 entries).
_PHASES: dict = {}

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


class StopInputError(ValueError):
    """Bad input to a stop prediction; the message is one line naming the field (e.g. ``q[elbow_joint]``)."""


# ---------------------------------------------------------------------------------------------------- inputs
@dataclass(frozen=True)
class LockEvent:
    """An abrupt lock of ``joints`` at ``time`` [s] (a pawl or an external command), momentum-consistent jump
    (Müller 2026, eq. (22)); the lock then holds up to ``holding_torque`` [N m] (inf: rigid)."""

    time: float
    joints: tuple[str, ...]
    holding_torque: float = math.inf

    def __init__(self, time: float, joints: str | Sequence[str], holding_torque: float = math.inf) -> None:
        object.__setattr__(self, "time", float(time))
        object.__setattr__(self, "joints", (joints,) if isinstance(joints, str) else tuple(joints))
        object.__setattr__(self, "holding_torque", float(holding_torque))


@dataclass(frozen=True)
class CategoryOne:
    """Category-1 stop parameters: per-joint deceleration limits ``deceleration`` [rad/s^2] (scalar or nv values),
    optional ``torque_limits`` [N m] (nv values, or "urdf" for the model's effort limits) that lengthen the ramp
    until the drive torques fit, and ``max_duration`` [s] after which power is cut regardless (None: never)."""

    deceleration: float | tuple[float, ...] = 3.0
    torque_limits: str | tuple[float, ...] | None = None
    max_duration: float | None = None


@dataclass(frozen=True)
class StopSettings:
    """Numerics: maximum ``step`` [s] of the explicit Runge-Kutta ``method`` (``dp5``: 5th order, 6 evaluations per
    step, steps shortened to end just past predicted zero crossings; ``rk4``: classical, 4 per step, fixed), horizon ``t_max`` [s], ``simultaneity_tol`` [s] (zero crossings closer than
    this are decided together), ``event_tol`` [s] (Newton tolerance on crossing times), ``jump_method`` (``closed_form`` or a :mod:`switching` method), ``max_events``."""

    step: float = 0.005
    method: str = "dp5"
    t_max: float = 5.0
    simultaneity_tol: float = 1e-9
    event_tol: float = 1e-9
    jump_method: str = "closed_form"
    max_events: int = 500


# ---------------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class StopEvent:
    """One event. ``kind``: engage | stick | slip | release | lock | power_off. ``joints``: joints it concerns.
    ``v_minus``/``v_plus``/``dv`` [rad/s] (dv nonzero only for abrupt locks); ``impulses`` Lambda of the locked
    rows [N m s] (``impulse_joints`` names them; Müller 2026, eq. (21) sign); ``energy_loss`` [J] of the jump;
    ``holding_torques`` [N m] needed by each locked joint after the event (nan for free joints); ``wrenches``
    (njoints x 6) spatial force transmitted by each joint right after the event (RNEA with the post-event
    acceleration); ``impulse_wrenches`` (njoints x 6) impulsive spatial force of the jump [N s, N m s]."""

    time: float
    kind: str
    joints: tuple[str, ...]
    q: np.ndarray
    v_minus: np.ndarray
    v_plus: np.ndarray
    dv: np.ndarray
    impulses: np.ndarray
    impulse_joints: tuple[str, ...]
    energy_loss: float
    holding_torques: np.ndarray
    wrenches: np.ndarray
    impulse_wrenches: np.ndarray | None


@dataclass(frozen=True)
class StopPrediction:
    """Predicted stop. Time series (K samples, events appear twice: before and after): ``t`` [s], ``q`` (K x nq),
    ``v`` (K x nv) [rad/s], ``a`` (K x nv) [rad/s^2], ``tau_brake`` (K x nv) brake torque on each joint [N m] (sliding torque while
    sliding, needed holding torque while locked), ``tau_drive`` (K x nv) drive torque (category 1 ramp),
    ``locked`` (K x nv, bool) active set, ``brake_work`` (K) cumulative brake work [J] (<= 0), ``impulse_loss`` (K)
    cumulative kinetic energy lost in abrupt-lock jumps [J] (>= 0): E(t) - E(0) = brake_work - impulse_loss.

    Summary: ``stopped`` (all joints held before ``t_max``), ``stop_time`` [s] (last joint comes to rest; nan if
    not stopped), ``joint_stop_times`` [s] (per joint, when it came to rest for good), ``stopping_angles`` [rad]
    (q_final - q_0), ``q_final``, ``brake_energy`` [J] dissipated by the brakes, ``impulse_energy`` [J] lost in
    jumps, ``holding_torques`` [N m] at rest, ``rest_wrenches`` (njoints x 6) at rest, ``pre_stop_wrenches``
    (from the caller's acceleration or torque, else None), TCP: ``tcp_frame``, ``tcp_positions`` (K x 3) [m],
    ``tcp_path_length`` [m] (integral of the TCP speed, see ``_tcp_path``), ``tcp_straight_distance`` [m]."""

    joint_names: tuple[str, ...]
    category: int
    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    tau_brake: np.ndarray
    tau_drive: np.ndarray
    locked: np.ndarray
    brake_work: np.ndarray
    impulse_loss: np.ndarray
    events: tuple[StopEvent, ...]
    stopped: bool
    stop_time: float
    joint_stop_times: np.ndarray
    stopping_angles: np.ndarray
    q_final: np.ndarray
    brake_energy: float
    impulse_energy: float
    holding_torques: np.ndarray
    rest_wrenches: np.ndarray
    pre_stop_wrenches: np.ndarray | None
    tcp_frame: str | None
    tcp_positions: np.ndarray | None
    tcp_path_length: float
    tcp_straight_distance: float
    power_off_time: float = 0.0
    n_steps: int = field(default=0, compare=False)
    n_evaluations: int = field(default=0, compare=False)


# ---------------------------------------------------------------------------------------------------- validation
def check_stop_state(robot: RobotModel, q: object, v: object, field_q: str = "q", field_v: str = "v") -> tuple[np.ndarray, np.ndarray]:
    """Validated (q, v): right sizes, finite, q within the model's position limits and |v| within its velocity
    limits (where the model has finite positive limits). Raises :class:`StopInputError` naming the entry."""
    qa = _finite_vector(q, robot.nq, field_q)
    va = _finite_vector(v, robot.nv, field_v)
    lo, hi = robot.model.lowerPositionLimit, robot.model.upperPositionLimit
    vmax = robot.model.velocityLimit
    # vectorised screen (a superset of the violations below); the loop names the first offending joint
    suspect_q = np.isfinite(lo) & np.isfinite(hi) & (hi > lo) & ((qa < lo - 1e-9) | (qa > hi + 1e-9))
    suspect_v = np.isfinite(vmax) & (vmax > 0) & (np.abs(va) > vmax * (1 + 1e-9))
    if not (suspect_q.any() or suspect_v.any()):
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


def _finite_vector(x: object, n: int, name: str) -> np.ndarray:
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise StopInputError(f"{name}: expected {n} numbers") from None
    if arr.shape != (n,):
        raise StopInputError(f"{name}: expected {n} values, got shape {arr.shape}")
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise StopInputError(f"{name}[{bad[0]}]: not a finite number ({arr[bad[0]]})")
    return arr


# ---------------------------------------------------------------------------------------------------- engine
class _Engine:
    """Event-driven RK4 integration of one braking phase (see the module docstring)."""

    def __init__(self, robot: RobotModel, brakes: BrakeSet, settings: StopSettings) -> None:
        self.robot = robot
        self.m = robot.model
        self.d = robot.data
        self.nv = robot.nv
        self.brakes = brakes
        self.st = settings
        self.vector_space = robot.nq == robot.nv and all(j.nq == j.nv for j in robot.joints)
        self.n_eval = 0
        self.n_steps = 0
        self.A, self.B = TABLEAUS[settings.method]
        self.ns = len(self.B)
        self.ts = brakes.sliding_torque
        self.c = brakes.viscous
        self.hold = brakes.holding_torque
        self.engaged = np.zeros(self.nv, dtype=bool)
        self.locked = np.zeros(self.nv, dtype=bool)
        self.cap = np.zeros(self.nv)  # holding capacity of locked joints
        self.s = np.zeros(self.nv)  # slip direction of engaged free joints (frozen between events)
        self.events: list[StopEvent] = []
        self.rest_since = np.full(self.nv, np.nan)
        self.impulse_energy = 0.0
        self._brake_key = self.ts.tobytes() + self.c.tobytes()
        self.names = robot.joint_names
        self._tableau_h = None
        self._tableau_0 = None
        self._set_phase()

    # ---------------------------------------------------------------- dynamics
    def _set_phase(self) -> None:
        """Install the phase data of the current active set (see :meth:`_phase`)."""
        self._use_phase(self._phase(self.locked, self.s))

    def _phase(self, locked: np.ndarray, s: np.ndarray) -> tuple:
        """Torque coefficients and index sets of the active set (``locked``, slip directions ``s``, the engaged
        brakes), cached per set: tau_b = cs + cv * v on the free engaged joints; the held set L and the free set F;
        flat indices of M_FF and of M_LF in the upper triangle that ``pin.crba`` fills; the sliding joints with their
        slip directions; the held joints that can release and their rows in lambda_L."""
        key = (self._brake_key, locked.tobytes(), self.engaged.tobytes(), s.tobytes(), np.isfinite(self.cap).tobytes())
        hit = _PHASES.get(key)
        if hit is None:
            n = self.nv
            slide = self.engaged & ~locked
            L = np.flatnonzero(locked)
            F = np.flatnonzero(~locked)
            hit = (
                np.where(slide, -s * self.ts, 0.0), np.where(slide, -self.c, 0.0), L, len(L), F, len(F),
                (F[:, None] * n + F[None, :]).ravel(),
                (np.minimum(L[:, None], F[None, :]) * n + np.maximum(L[:, None], F[None, :])).ravel(),
                np.flatnonzero(slide & ((self.ts > 0) | (self.c > 0))),
                np.flatnonzero(locked & np.isfinite(self.cap)),
            )
            hit = hit + (bool(np.any(hit[1] != 0.0)), s[hit[8]], np.searchsorted(L, hit[9]))
            for arr in hit:
                if isinstance(arr, np.ndarray):
                    arr.flags.writeable = False
            if len(_PHASES) >= 4096:
                _PHASES.clear()
            _PHASES[key] = hit
        return hit

    def _use_phase(self, hit: tuple) -> None:
        self._phase_data = hit
        (self.cs, self.cv, self.L, self.nL, self.F, self.nF, self._flat_FF, self._flat_LF, self.slide_idx,
         self.release_idx, self.viscous, self._slide_s, self._release_pos) = hit

    def _f(self, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(a, lambda_L, tau_b) for the current phase (module docstring equations).

        No held joint: a = ABA(q, v, tau_b). Held set L: with a_L = 0 the free rows of eq. (3) read
        M_FF a_F = (tau_b - h)_F (Cholesky of M_FF from CRBA, h from Pinocchio's nonLinearEffects), and the held
        rows give lambda_L = (M a + h - tau_b)_L = M_LF a_F - (tau_b - h)_L. Exact: v_L = 0 in the held phase."""
        self.n_eval += 1
        tau = self.cs + self.cv * v if self.viscous else self.cs
        if self.nL == 0:
            return pin.aba(self.m, self.d, q, v, tau), _EMPTY, tau
        if self.nL == 1 and self.nF:
            a, lam = self._one_held(q, v, tau)
            return a, np.array((lam,)), tau
        M = pin.crba(self.m, self.d, q)
        r = tau - pin.nonLinearEffects(self.m, self.d, q, v)
        a = np.zeros(self.nv)
        if self.nF == 0:
            return a, -r.take(self.L), tau
        x = _solve_spd(M, self._flat_FF, self.nF, r.take(self.F))
        a[self.F] = x
        return a, M.take(self._flat_LF).reshape(self.nL, self.nF).dot(x) - r.take(self.L), tau

    def _one_held(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, float]:
        """(a, lambda) with one held joint i: a = a_0 + lambda M^-1 e_i, lambda = -(a_0)_i / (M^-1)_ii with
        a_0 = ABA(q, v, tau_b) (the module docstring's formula with |L| = 1; cheaper than CRBA + Cholesky here)."""
        i = self.L[0]
        a = pin.aba(self.m, self.d, q, v, tau)
        col = pin.computeMinverse(self.m, self.d, q)[i]  # row i = column i (symmetric)
        lam = -a.item(i) / col.item(i)
        a += lam * col
        a[i] = 0.0
        return a, lam

    def _acc(self, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(a, tau_b) of :meth:`_f` without lambda (Runge-Kutta stages need no holding torques)."""
        self.n_eval += 1
        tau = self.cs + self.cv * v if self.viscous else self.cs
        if self.nL == 0:
            return pin.aba(self.m, self.d, q, v, tau), tau
        if self.nL == 1:
            return self._one_held(q, v, tau)[0], tau
        a = np.zeros(self.nv)
        if self.nF:
            M = pin.crba(self.m, self.d, q)
            r = (tau - pin.nonLinearEffects(self.m, self.d, q, v)).take(self.F)
            a.put(self.F, _solve_spd(M, self._flat_FF, self.nF, r))
        return a, tau

    def _advance(self, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        if self.vector_space:
            return q + dq
        return pin.integrate(self.m, q, dq)

    def _step(self, q, v, W, h, k1):
        """One explicit Runge-Kutta step of (q, v, W) with the engine's tableau; k1 = (a, power) at the start.

        Returns (q1, v1, W1). RK4 is the classical method of Müller 2026, Sec. 6; DP5 is the 5th-order
        Dormand-Prince solution (its embedded 4th-order estimate is not used: the step is fixed)."""
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
        for s_ in range(1, ns):
            Y = G[s_].dot(X)
            X[2 + s_] = acc(Y[0], Y[1])[0]
        Y = G[ns].dot(X)
        self._K = X[2:]
        V = G[:ns, 1].dot(X)  # stage velocities v_s (row 0: v)
        P = V.dot(self.cs) + (V * V).dot(self.cv) if self.viscous else V.dot(self.cs)
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

    # ---------------------------------------------------------------- decisions
    def _solve_split(self, q, v, S: np.ndarray, R: np.ndarray, d: np.ndarray):
        """Dynamics with locked set S and slipping-from-rest set R (directions d); returns (a, lambda_S)."""
        locked = np.zeros(self.nv, dtype=bool)
        locked[S] = True
        s = self.s.copy()
        s[R] = d[R]
        current = self._phase_data
        self._use_phase(self._phase(locked, s))
        k = self._f(q, v)
        self._use_phase(current)
        self._k_split = k
        return k[0], k[1]

    def _decide(self, t: float, q: np.ndarray, v: np.ndarray, force: frozenset = frozenset()) -> tuple[list[int], list[int], list[int]]:
        """Joint stick/slip decision over all engaged or held joints at rest (module docstring).

        Returns (newly stuck, slipping from rest, released) velocity indices and updates the active set."""
        C = np.flatnonzero((self.engaged | self.locked) & (v == 0.0))
        self._k_after = None
        if C.size == 0:
            return [], [], []
        cap = np.where(self.locked, self.cap, self.hold)
        C_list = C.tolist()
        S = set(C_list)
        d = np.zeros(self.nv)
        seen = {(frozenset(C_list), (0.0,) * len(C_list))}  # the first split: all stick, d = 0
        result = None
        for it in range(4 * len(C) + 4):
            if it == 0:  # all stick
                Sa, Ra = C, _EMPTY_I
            else:
                key = (frozenset(S), tuple(d[C]))
                if key in seen:
                    break
                seen.add(key)
                Sa = np.array([i for i in C_list if i in S], dtype=int)
                Ra = np.array([i for i in C_list if i not in S], dtype=int)
            a, lam = self._solve_split(q, v, Sa, Ra, d)
            if Sa.size:
                ratio = np.abs(lam) / np.maximum(cap[Sa], 1e-300)
                # ``force``: held joints whose release was located at this instant (their ratio is 1 to rounding)
                limit = np.array([1.0 - 1e-9 if i in force else 1.0 + 1e-12 for i in Sa]) if force else 1.0 + 1e-12
                over = np.flatnonzero(ratio > limit)
            else:
                ratio, over = _EMPTY, _EMPTY_I
            bad_R = [i for i in Ra if d[i] * a[i] <= 0.0] if Ra.size else []
            if over.size == 0 and not bad_R:
                result = (Sa, Ra)
                k_final = self._k_split
                break
            if over.size:
                k = int(over[np.argmax(ratio[over])])
                i = int(Sa[k])
                S.discard(i)
                d[i] = -np.sign(lam[k]) if lam[k] != 0 else 1.0
            else:
                i = bad_R[0]
                S.add(i)
                d[i] = 0.0
        result_from_iteration = result is not None
        if result is None:
            result = self._enumerate(q, v, C, cap)
        Sa, Ra = result
        newly = [i for i in Sa if not self.locked[i]]
        released = [i for i in Ra if self.locked[i]]
        slipping = [i for i in Ra if not self.locked[i]]
        for i in Sa:
            if not self.locked[i]:
                self.locked[i] = True
                self.cap[i] = self.hold[i]
                self.rest_since[i] = t
        for i in Ra:
            if self.locked[i]:
                self.locked[i] = False
                self.rest_since[i] = np.nan
            self.s[i] = d[i] if d[i] != 0 else self.s[i]
        self._set_phase()
        if result_from_iteration:
            self._k_after = k_final  # the accepted split's dynamics are those of the committed phase
        return newly, slipping, released

    def _enumerate(self, q, v, C, cap):
        """All 3^|C| splits; the consistent one with most sticking joints (ties: least capacity usage)."""
        best = None
        for choice in itertools.product((0, 1, -1), repeat=len(C)):
            Sa = np.array([C[k] for k, c in enumerate(choice) if c == 0], dtype=int)
            Ra = np.array([C[k] for k, c in enumerate(choice) if c != 0], dtype=int)
            d = np.zeros(self.nv)
            for k, c in enumerate(choice):
                d[C[k]] = c
            a, lam = self._solve_split(q, v, Sa, Ra, d)
            usage = np.abs(lam) / np.maximum(cap[Sa], 1e-300) if Sa.size else _EMPTY
            if np.any(usage > 1.0 + 1e-12) or any(d[i] * a[i] <= 0.0 for i in Ra):
                continue
            score = (-len(Sa), float(usage.sum()) if usage.size else 0.0)
            if best is None or score < best[0]:
                best = (score, Sa, Ra)
        if best is None:
            raise RuntimeError("stick/slip decision: no consistent split found (check brake capacities)")
        return best[1], best[2]

    # ---------------------------------------------------------------- events
    def _holding(self, q, v) -> tuple[np.ndarray, np.ndarray]:
        a, lam, tau = self._f(q, v)
        hold = np.full(self.nv, np.nan)
        hold[self.L] = lam
        return a, hold

    def _wrenches(self, q, v, a) -> np.ndarray:
        pin.rnea(self.m, self.d, q, v, a)
        return _joint_forces(self.d, self.m.njoints)

    def _record_event(self, t, kind, idx, q, v_minus, v_plus, dv=None, impulses=_EMPTY, imp_idx=(), loss=0.0,
                      imp_wrench=None, k=None) -> None:
        if k is None:
            a, hold = self._holding(q, v_plus)
        else:
            a = k[0]
            hold = np.full(self.nv, np.nan)
            hold[self.L] = k[1]
        names = self.names
        self.events.append(StopEvent(
            time=float(t), kind=kind, joints=tuple(names[i] for i in idx), q=q.copy(), v_minus=v_minus.copy(),
            v_plus=v_plus.copy(), dv=np.zeros(self.nv) if dv is None else dv, impulses=impulses,
            impulse_joints=tuple(names[i] for i in imp_idx), energy_loss=float(loss), holding_torques=hold,
            wrenches=self._wrenches(q, v_plus, a), impulse_wrenches=imp_wrench,
        ))
        if len(self.events) > self.st.max_events:
            raise RuntimeError(f"more than {self.st.max_events} events (chattering?); raise StopSettings.max_events")

    def _record_decision(self, t, newly, slipping, released, q, v_minus, v_plus, k) -> None:
        """One event per kind of a stick/slip decision at ``t``: joints that stick, joints that start slipping from
        rest, held joints released (a joint appears in exactly one of them), so the record says which joint did
        what when several change at the same instant."""
        for kind, idx in (("stick", newly), ("slip", slipping), ("release", released)):
            if idx:
                self._record_event(t, kind, idx, q, v_minus, v_plus, k=k)

    def _abrupt_lock(self, t, q, v, idx: np.ndarray, capacity: np.ndarray) -> np.ndarray:
        """Momentum-consistent jump for locking joints ``idx`` (Müller 2026, eq. (22); closed form for locks)."""
        new = np.array([i for i in idx if not self.locked[i]], dtype=int)
        if new.size == 0:
            return v
        M = pin.crba(self.m, self.d, q).copy()
        M = np.triu(M) + np.triu(M, 1).T
        Lp = np.union1d(self.L, new)
        Fp = np.setdiff1d(np.arange(self.nv), Lp)
        method = self.st.jump_method
        if method == "closed_form":
            v_plus = v.copy()
            v_plus[Lp] = 0.0
            if Fp.size:
                v_plus[Fp] = v[Fp] + np.linalg.solve(M[np.ix_(Fp, Fp)], M[np.ix_(Fp, new)] @ v[new])
        else:
            J1 = np.eye(self.nv)[self.L]
            J2 = np.eye(self.nv)[new]
            v_plus = switching.transition(M, J1, J2, v, method=method).v_plus
            v_plus[Lp] = 0.0  # exact zero (the solvers leave rounding-level residuals)
        dv = v_plus - v
        impulses = -(M @ dv)[Lp]
        loss = 0.5 * v @ M @ v - 0.5 * v_plus @ M @ v_plus
        self.impulse_energy += loss
        f_imp = self._wrenches(q, np.zeros(self.nv), dv) - self._wrenches(q, np.zeros(self.nv), np.zeros(self.nv))
        for k, i in enumerate(new):
            self.locked[i] = True
            self.cap[i] = max(capacity[k], self.hold[i] if self.engaged[i] else 0.0)
            self.rest_since[i] = t
        self._set_phase()
        self._record_event(t, "lock", new, q, v, v_plus, dv, impulses, Lp, loss, f_imp)
        return v_plus

    # ---------------------------------------------------------------- main loop
    def run(self, t0, q0, v0, engage_times: np.ndarray, locks: list[tuple[float, np.ndarray, np.ndarray]],
            samples: dict) -> tuple[float, np.ndarray, np.ndarray, float]:
        """Integrate from (t0, q0, v0) until every joint is held or t_max. Appends samples; returns final state."""
        st = self.st
        t, q, v, W = float(t0), q0.copy(), v0.copy(), 0.0
        W_base = samples["W"][-1] if samples["W"] else 0.0
        timed: list[tuple[float, str, object]] = []
        for i in np.flatnonzero(np.isfinite(engage_times)):
            timed.append((float(engage_times[i]), "engage", int(i)))
        for (tl, idx, cap) in locks:
            timed.append((float(tl), "lock", (idx, cap)))
        timed.sort(key=lambda e: e[0])
        t_end = t0 + st.t_max
        dense = st.method == "dp5"
        aim = dense and self.vector_space and AIM > 0

        no_drive = np.zeros(self.nv)
        no_drive.flags.writeable = False

        def record(tq, qq, vv, a_hold=None):
            a, lam, tau = self._f(qq, vv) if a_hold is None else a_hold
            if self.nL:
                tb = tau.copy()
                tb[self.L] = lam
            else:
                tb = tau  # the series are copied into arrays at the end
            samples["t"].append(tq)
            samples["q"].append(qq.copy())
            samples["v"].append(vv.copy())
            samples["a"].append(a.copy())
            samples["tau"].append(tb)
            samples["drive"].append(no_drive)
            samples["locked"].append(self.locked.copy())
            samples["W"].append(W_base + W)
            samples["J"].append(self.impulse_energy)
            return a, lam, tau

        k = record(t, q, v)
        while True:
            # time events due now (all events at the same instant are handled together)
            due = []
            while timed and timed[0][0] <= t + 1e-12:
                due.append(timed.pop(0))
            if due:
                eng = [p for _, kind, p in due if kind == "engage"]
                if eng:
                    for i in eng:
                        self.engaged[i] = True
                        if self.locked[i]:
                            self.cap[i] = max(self.cap[i], self.hold[i])
                        elif v[i] != 0.0:
                            self.s[i] = np.sign(v[i])
                    self._set_phase()
                    newly, slip, rel = self._decide(t, q, v)
                    k = record(t, q, v, self._k_after)
                    self._record_event(t, "engage", eng + [i for i in newly if i not in eng], q, v, v, k=k)
                for idx, cap in (p for _, kind, p in due if kind == "lock"):
                    v = self._abrupt_lock(t, q, v, idx, cap)
                    free_eng = self.engaged & ~self.locked
                    self.s = np.where(free_eng & (v != 0), np.sign(v), self.s)
                    self._set_phase()
                    newly, slip, rel = self._decide(t, q, v)
                    k = record(t, q, v, self._k_after)
                    self._record_decision(t, newly, slip, rel, q, v, v, k)
            if self.nF == 0 or t >= t_end - 1e-12:
                break
            t_next = timed[0][0] if timed else math.inf
            h = min(st.step, t_next - t, t_end - t)
            if aim and self.slide_idx.size:
                vs_, as_ = v.take(self.slide_idx), k[0].take(self.slide_idx)
                dec = vs_ * as_ < 0.0
                if dec.any():
                    t_pred = AIM * float(np.min(-vs_[dec] / as_[dec]))
                    if t_pred < h:
                        h = t_pred
            q1, v1, W1 = self._step(q, v, W, h, (k[0], k[2].dot(v)))
            self.n_steps += 1
            k1 = self._f(q1, v1)
            # zero crossings of sliding joints
            sl = self.slide_idx
            cross = sl[v1.take(sl) * self._slide_s <= 0.0] if sl.size else _EMPTY_I
            tau_c = math.inf
            taus = {}
            if cross.size:
                if dense:
                    C = self._dense_velocity_coefficients(h, k1, cross)
                    for j, i in enumerate(cross):
                        taus[i] = _first_root((v[i], *C[j]), self.s[i]) * h
                else:
                    for i in cross:
                        taus[i] = _hermite_root(v[i], v1[i], k[0][i], k1[0][i], h, self.s[i])
                tau_c = min(taus.values())
            K_step = self._K
            tau_r = math.inf
            ri = self.release_idx
            if ri.size:
                if (np.abs(k1[1].take(self._release_pos)) > self.cap.take(ri)).any():
                    tau_r = self._locate_release(q, v, W, h, k, ri, min(tau_c, h))
            if tau_c == math.inf and tau_r == math.inf:
                t = t_next if h == t_next - t else t + h  # land exactly on time events
                q, v, W, k = q1, v1, W1, k1
                record(t, q, v, k)
                continue
            tau = max(min(tau_c, tau_r), 0.0)
            k0 = (k[0], k[2].dot(v))
            if dense and self.vector_space and tau_c <= tau_r and tau > 0:
                # the state at the crossing from the continuous extension when the step's embedded error estimate
                # (which bounds the extension's error) is below the velocity residual the Newton polish accepts
                self._K = K_step
                i0 = min(taus, key=taus.get)
                err = h * np.abs(DP5_ERROR[:6].dot(K_step) + DP5_ERROR[6] * k1[0]).max()
                if err <= st.event_tol * abs(k1[0][i0]):
                    qe, ve, We = self._dense_state(q, v, W, h, v1, k1, tau / h)
                else:
                    qe, ve, We = self._step(q, v, W, tau, k0)
            else:
                qe, ve, We = self._step(q, v, W, tau, k0) if tau > 0 else (q, v, W)
            ke = self._f(qe, ve)
            if tau_c <= tau_r:
                # polish the crossing time on the integrator itself: Newton on v_i(tau) = 0 with a_i(tau)
                i0 = min(taus, key=taus.get)
                t_first = tau
                # Newton steps shorter than the tolerance allows for a second-order Taylor extrapolation (its velocity
                # error jerk dt^2 / 2, with the step's mean jerk and a safety factor 10, below the velocity residual
                # event_tol |a_i| that ends the iteration) extrapolate the
                # state (1 evaluation); longer ones re-integrate from the step start.
                jerk = None
                for _ in range(4):
                    vi, ai = ve[i0], ke[0][i0]
                    if ai == 0.0 or abs(vi) <= st.event_tol * abs(ai):
                        break
                    dt_ = -vi / ai
                    if not (0.0 < tau + dt_ <= h):
                        break
                    if jerk is None:
                        jerk = float(np.max(np.abs(k1[0] - k[0]))) / h
                    if 5.0 * jerk * dt_ * dt_ <= st.event_tol * abs(ai):
                        a_e = ke[0]
                        We = We + float(ke[2] @ ve) * dt_ + (0.5 * dt_ * dt_) * float(ke[2] @ a_e + self.cv @ (a_e * ve))
                        qe = self._advance(qe, dt_ * ve + (0.5 * dt_ * dt_) * a_e)
                        ve = ve + dt_ * a_e
                    else:
                        qe, ve, We = self._step(q, v, W, tau + dt_, k0)
                    tau = tau + dt_
                    ke = self._f(qe, ve)
                for i in taus:
                    taus[i] += tau - t_first
            q, v, W = qe, ve, We
            t = t + tau
            v_minus = v.copy()
            if tau_c <= tau_r:
                zero = [i for i, ti in taus.items() if ti <= tau + st.simultaneity_tol]
                v[zero] = 0.0
                v_minus[zero] = 0.0
            record(t, q, v_minus, ke)
            force = frozenset()
            if tau_r < tau_c:
                lf = np.zeros(self.nv)
                lf[self.L] = ke[1]
                force = frozenset(int(i) for i in ri if abs(lf[i]) >= self.cap[i] * (1 - 1e-9))
            newly, slip, rel = self._decide(t, q, v, force)
            k = record(t, q, v, self._k_after)
            self._record_decision(t, newly, slip, rel, q, v_minus, v, k)
        self.W = W
        return t, q, v, W

    def _locate_release(self, q, v, W, h, k, ri, h_max) -> float:
        """Earliest time in (0, h_max] where a held joint's needed torque reaches its capacity (Illinois)."""
        def g(tau):
            qq, vv, _ = self._step(q, v, W, tau, (k[0], k[2] @ v))
            _, lam, _ = self._f(qq, vv)
            lf = np.zeros(self.nv)
            lf[self.L] = lam
            return float(np.max(np.abs(lf[ri]) - self.cap[ri]))
        a, b = 0.0, h_max
        lf = np.zeros(self.nv)
        lf[self.L] = k[1]
        ga = float(np.max(np.abs(lf[ri]) - self.cap[ri]))
        gb = g(b)
        if gb <= 0:
            return math.inf
        side = 0
        for _ in range(60):
            c = (a * gb - b * ga) / (gb - ga)
            gc = g(c)
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
            if b - a < 1e-12:
                break
        return b


def _tcp_path(robot: RobotModel, frame_id: int, t: np.ndarray, q: np.ndarray, v: np.ndarray,
              a: np.ndarray) -> tuple[np.ndarray, float]:
    """TCP positions (K x 3) [m] at the samples and the length [m] of the path it travels, the integral of its speed
    s = |p'| over time. Between two samples s is integrated by the cubic Hermite rule
    h (s0 + s1) / 2 + h^2 (s0' - s1') / 12 with s' = p'.p'' / |p'| from the frame's linear velocity and classical
    acceleration (exact for cubic s; the sum of chords between the samples was short by up to 1e-3 on short stops).
    Where the TCP comes to rest or reverses inside an interval (s not smooth there) the trapezoid h (s0 + s1) / 2
    is used; zero-length intervals (the two samples of an event) add nothing."""
    model, data = robot.model, robot.data
    K = len(t)
    pos, speed, dspeed = np.empty((K, 3)), np.empty(K), np.empty(K)
    world = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
    for n in range(K):
        pin.forwardKinematics(model, data, q[n], v[n], a[n])
        pos[n] = pin.updateFramePlacement(model, data, frame_id).translation
        vel = pin.getFrameVelocity(model, data, frame_id, world).linear
        acc = pin.getFrameClassicalAcceleration(model, data, frame_id, world).linear
        speed[n] = math.sqrt(float(vel @ vel))
        dspeed[n] = float(vel @ acc) / speed[n] if speed[n] > 0.0 else math.nan
    h = np.diff(t)
    trapezoid = 0.5 * h * (speed[:-1] + speed[1:])
    correction = h * h * (dspeed[:-1] - dspeed[1:]) / 12.0
    smooth = np.isfinite(correction) & (np.abs(correction) < 0.5 * np.abs(trapezoid))
    return pos, float(np.sum(trapezoid + np.where(smooth, correction, 0.0)))


def _joint_forces(data: pin.Data, njoints: int) -> np.ndarray:
    """(njoints - 1) x 6 spatial forces transmitted by the joints, from ``data.f`` after RNEA (the attribute is
    fetched once: each ``data.f`` access costs more than reading one force)."""
    f = data.f
    return np.array([f[i].vector for i in range(1, njoints)])


def _solve_spd(M: np.ndarray, flat: np.ndarray, n: int, r: np.ndarray) -> np.ndarray:
    """x with M_FF x = r, M_FF the n x n block of the symmetric positive definite M at the flat indices ``flat``
    of its upper triangle (row-major): closed form for n <= 2 (Cramer), else LAPACK Cholesky (dposv)."""
    if n == 1:
        return r / M.item(flat[0])
    if n == 2:
        m00, m01, _, m11 = M.take(flat).tolist()
        r0, r1 = r.tolist()
        det = m00 * m11 - m01 * m01
        return np.array(((m11 * r0 - m01 * r1) / det, (m00 * r1 - m01 * r0) / det))
    return _dposv(M.take(flat).reshape(n, n), r)[1]


def _hermite_root(v0: float, v1: float, a0: float, a1: float, h: float, s: float) -> float:
    """First time in (0, h] where the cubic Hermite interpolant of a velocity (values v0, v1, slopes a0, a1)
    reaches zero from the side of sign s (see :func:`_first_root`). Only a starting value: the caller polishes it
    on the integrator itself."""
    c = (v0, h * a0, -3 * v0 - 2 * h * a0 + 3 * v1 - h * a1, 2 * v0 + h * a0 - 2 * v1 + h * a1)
    return _first_root(c, s) * h


def _first_root(c: Sequence[float], s: float) -> float:
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


# ---------------------------------------------------------------------------------------------------- API
def predict_stop(
    robot: RobotModel,
    brakes: BrakeSet,
    q: object,
    v: object,
    *,
    a: object | None = None,
    tau: object | None = None,
    category: int = 0,
    category_one: CategoryOne | None = None,
    lock_events: Iterable[LockEvent] = (),
    tcp_frame: str | None = None,
    settings: StopSettings = StopSettings(),
) -> StopPrediction:
    """Predict the stop of ``robot`` from the pre-stop state (q [rad], v [rad/s]; optional acceleration a
    [rad/s^2] or joint torque tau [N m], used for the pre-stop reaction wrenches) with ``brakes``.

    Category 0 or 1 (IEC 60204-1, see the module docstring); ``lock_events`` add abrupt locks at given times
    (momentum-consistent jump, Müller 2026, eq. (22)); pawls configured in ``brakes`` are added automatically.
    ``tcp_frame`` names the frame whose stopping distance is reported. Pure: numpy in, a frozen dataclass out;
    uses ``robot.data`` as workspace (one RobotModel per thread).
    """
    q0, v0 = check_stop_state(robot, q, v)
    if brakes.joint_names != robot.joint_names:
        raise StopInputError("brakes: built for another robot (joint names differ)")
    if category not in (0, 1):
        raise StopInputError(f"category: must be 0 or 1, got {category!r}")
    if settings.jump_method not in JUMP_METHODS:
        raise StopInputError(f"jump_method: must be one of {', '.join(JUMP_METHODS)}, got {settings.jump_method!r}")
    if settings.method not in TABLEAUS:
        raise StopInputError(f"settings.method: must be one of {', '.join(TABLEAUS)}, got {settings.method!r}")
    if not (settings.step > 0 and settings.t_max > 0):
        raise StopInputError("settings.step: step and t_max must be positive")
    pre = None
    if a is not None or tau is not None:
        if a is not None:
            acc = _finite_vector(a, robot.nv, "a")
        else:
            acc = np.array(pin.aba(robot.model, robot.data, q0, v0, _finite_vector(tau, robot.nv, "tau")))
        pin.rnea(robot.model, robot.data, q0, v0, acc)
        pre = _joint_forces(robot.data, robot.model.njoints)
    frame_id = robot.frame_id(tcp_frame) if tcp_frame is not None else None

    engine = _Engine(robot, brakes, settings)
    samples: dict[str, list] = {k: [] for k in ("t", "q", "v", "a", "tau", "drive", "locked", "W", "J")}
    t_off = 0.0
    q_start, v_start = q0, v0
    engage = brakes.engage_delay.copy()
    if category == 1:
        c1 = category_one or CategoryOne()
        t_off, q_start, v_start, standstill = _controlled_ramp(robot, q0, v0, c1, settings, samples)
        if standstill:
            engage = np.zeros(robot.nv)  # the drives hold until the brakes have engaged
        engage = engage + t_off
    engage = np.where(brakes.braked, engage, np.inf)
    locks = []
    for i in np.flatnonzero(np.isfinite(brakes.pawl_delay)):
        locks.append((t_off + brakes.pawl_delay[i], np.array([i]), np.array([brakes.pawl_holding_torque[i]])))
    for ev in lock_events:
        if not isinstance(ev, LockEvent):
            raise StopInputError("lock_events: expected LockEvent items")
        try:
            idx = robot.v_indices(ev.joints)
        except ValueError:
            raise StopInputError(f"lock_events.joints: unknown joint in {ev.joints}") from None
        if not (np.isfinite(ev.time) and ev.time >= 0):
            raise StopInputError(f"lock_events.time: must be finite and >= 0, got {ev.time}")
        locks.append((ev.time, idx, np.full(idx.size, ev.holding_torque)))
    t_fin, q_fin, v_fin, W = engine.run(t_off, q_start, v_start, engage, locks, samples)

    t_arr = np.array(samples["t"])
    q_arr = np.array(samples["q"])
    v_arr = np.array(samples["v"])
    stopped = bool(engine.locked.all())
    joint_stop = engine.rest_since.copy()
    if category == 1 and t_off > 0:
        joint_stop = np.where(np.isfinite(joint_stop), np.maximum(joint_stop, 0.0), joint_stop)
    stop_time = float(np.max(joint_stop)) if stopped else math.nan
    if category == 1 and stopped:
        # at standstill the controlled ramp already stopped the joints; brakes only hold
        stop_time = float(max(stop_time if np.isfinite(stop_time) else 0.0, 0.0))
    pin.rnea(robot.model, robot.data, q_fin, np.zeros(robot.nv), np.zeros(robot.nv))
    rest_w = _joint_forces(robot.data, robot.model.njoints)
    holding = np.array(pin.computeGeneralizedGravity(robot.model, robot.data, q_fin)) if stopped else \
        np.full(robot.nv, np.nan)
    tcp_pos = None
    path = straight = math.nan
    if frame_id is not None:
        tcp_pos, path = _tcp_path(robot, frame_id, t_arr, q_arr, v_arr, np.array(samples["a"]))
        straight = float(np.linalg.norm(tcp_pos[-1] - tcp_pos[0]))
    W_arr = np.array(samples["W"])
    return StopPrediction(
        joint_names=robot.joint_names, category=category, t=t_arr, q=q_arr, v=v_arr, a=np.array(samples["a"]),
        tau_brake=np.array(samples["tau"]), tau_drive=np.array(samples["drive"]), locked=np.array(samples["locked"]),
        brake_work=W_arr, impulse_loss=np.array(samples["J"]), events=tuple(engine.events), stopped=stopped, stop_time=stop_time,
        joint_stop_times=joint_stop, stopping_angles=robot.difference(q0, q_fin), q_final=q_fin,
        brake_energy=float(-W_arr[-1]), impulse_energy=engine.impulse_energy, holding_torques=holding,
        rest_wrenches=rest_w, pre_stop_wrenches=pre, tcp_frame=tcp_frame, tcp_positions=tcp_pos,
        tcp_path_length=path, tcp_straight_distance=straight, power_off_time=t_off, n_steps=engine.n_steps,
        n_evaluations=engine.n_eval,
    )


def _controlled_ramp(robot: RobotModel, q0, v0, c1: CategoryOne, settings: StopSettings, samples: dict):
    """Category-1 ramp: v(t) = v0 (1 - t/T), a = -v0/T, T = max_i |v0_i| / decel_i, lengthened until the drive
    torques tau = RNEA(q, v, a) fit the torque limits. Returns (t_off, q_off, v_off, standstill)."""
    nv = robot.nv
    dec = np.broadcast_to(np.asarray(c1.deceleration, dtype=float), (nv,)).copy() \
        if np.ndim(c1.deceleration) == 0 else _finite_vector(c1.deceleration, nv, "category_one.deceleration")
    if not np.all(np.isfinite(dec)) or np.any(dec <= 0):
        raise StopInputError("category_one.deceleration: must be positive and finite")
    T = float(np.max(np.abs(v0) / dec)) if np.any(v0 != 0) else 0.0
    lim = None
    if c1.torque_limits == "urdf":
        lim = np.array(robot.model.effortLimit, dtype=float)
    elif c1.torque_limits is not None:
        lim = _finite_vector(c1.torque_limits, nv, "category_one.torque_limits")
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


def energy_series(robot: RobotModel, prediction: StopPrediction) -> tuple[np.ndarray, np.ndarray]:
    """(kinetic, potential) energy [J] at every sample of ``prediction`` (Pinocchio; for plots and checks)."""
    T = np.array([robot.kinetic_energy(q, v) for q, v in zip(prediction.q, prediction.v)])
    V = np.array([robot.potential_energy(q) for q in prediction.q])
    return T, V


def generalized_momenta(robot: RobotModel, prediction: StopPrediction) -> np.ndarray:
    """Generalized momenta p = M(q) v [N m s] at every sample (rows of locked joints included; Müller 2026,
    Sec. 6 plots F^T M v, the free rows)."""
    return np.array([robot.mass_matrix(q) @ v for q, v in zip(prediction.q, prediction.v)])


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
            qs.append(np.outer(h00, q[k]) + np.outer(h10 * h, v[k]) + np.outer(h01, q[k + 1]) + np.outer(h11 * h, v[k + 1]))
        else:
            qs.append(np.repeat(q[k + 1:k + 2], len(x), axis=0))
    return np.concatenate(ts), np.concatenate(qs), np.concatenate(vs)

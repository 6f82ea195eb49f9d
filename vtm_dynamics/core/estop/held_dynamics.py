"""Braking dynamics with held joints: Müller 2026, eq. (3) with joint-lock rows (eq. (39): J = unit rows).

With the held (locked) set L, the free set F and the brake torques tau_b of the free engaged joints (the sign of
the sliding part fixed between events, tau_b = -s sliding - viscous v),

    M(q) a + h(q, v) = tau_b + E_L lambda,      a_L = 0,

solved as a = a_0 + M^-1 E_L lambda with a_0 = ABA(q, v, tau_b) and lambda = -(M^-1)_LL^-1 (a_0)_L. lambda is the
torque each held joint's brake must supply to hold it [N m] (the constraint force of eq. (3)). Computed this way
for one held joint (one row of M^-1, cheaper than CRBA + Cholesky); with two or more, equivalently and cheaper,
from the free rows M_FF a_F = (tau_b - h)_F (CRBA, Cholesky) and lambda_L = M_LF a_F - (tau_b - h)_L. Held joints
stay exactly at their lock angles: their v and a are exactly zero.

:class:`HeldSetDynamics` is a part of the braking engine (:class:`.event_loop.BrakingEngine`): it installs the
:class:`HeldPhase` of the current active set as plain attributes (the right-hand side runs ~100 times per
prediction, so it reads locals, not a phase object). Units: SI (rad/s, rad/s^2, N m, kg m^2).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import pinocchio as pin
import scipy.linalg.lapack

_EMPTY = np.zeros(0)
_dposv = scipy.linalg.lapack.dposv

# Phases shared by all predictions: keyed by the brake torques and the active set, so that a prediction running
# every control cycle finds its phases already built (bounded: cleared at 4096 entries).
_PHASES: dict[tuple, "HeldPhase"] = {}


@dataclass(frozen=True, eq=False, slots=True)
class HeldPhase:
    """Coefficients and index sets of one active set (held joints, slip directions, engaged brakes); read-only.

    Brake torque on the free engaged joints tau_b = ``brake_constant`` + ``brake_viscous`` * v [N m, N m s/rad]
    (``viscous``: whether the second part is nonzero); the held set ``held`` (L, ``n_held``) and the free set
    ``free`` (F, ``n_free``); ``flat_free_free`` and ``flat_held_free``: flat indices of M_FF and of M_LF in the
    upper triangle that ``pin.crba`` fills; ``sliding``: free engaged joints with a brake torque or a holding
    torque (their zero crossings are events), with their slip directions ``slide_directions`` (+-1);
    ``releasable``: held joints with a finite capacity, and their rows ``release_rows`` in lambda_L;
    ``brake_stribeck`` [N m]: amplitude -s (breakaway - sliding) of the Stribeck term on the free engaged joints
    (None when no brake has one), multiplied by exp(-(v / v_s)^2)."""

    brake_constant: np.ndarray
    brake_viscous: np.ndarray
    held: np.ndarray
    n_held: int
    free: np.ndarray
    n_free: int
    flat_free_free: np.ndarray
    flat_held_free: np.ndarray
    sliding: np.ndarray
    releasable: np.ndarray
    viscous: bool
    slide_directions: np.ndarray
    release_rows: np.ndarray
    brake_stribeck: np.ndarray | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                value.flags.writeable = False


class HeldSetDynamics:
    """Right-hand side of the braking dynamics for the engine's current :class:`HeldPhase` (module docstring)."""

    def _set_phase(self) -> None:
        """Install the phase of the current active set (see :meth:`_phase`)."""
        self._use_phase(self._phase(self.locked, self.s))

    def _phase(self, locked: np.ndarray, s: np.ndarray) -> HeldPhase:
        """The :class:`HeldPhase` of the active set (``locked``, slip directions ``s``, the engaged brakes, the
        held joints with finite capacity), cached in ``_PHASES``."""
        key = (self._brake_key, locked.tobytes(), self.engaged.tobytes(), s.tobytes(), np.isfinite(self.cap).tobytes())
        hit = _PHASES.get(key)
        if hit is None:
            n = self.nv
            slide = self.engaged & ~locked
            L = np.flatnonzero(locked)
            F = np.flatnonzero(~locked)
            cv = np.where(slide, -self.c, 0.0)
            # watched for coming to rest: a brake torque while sliding, or a brake that can hold the joint
            sliding = np.flatnonzero(slide & ((self.ts > 0) | (self.c > 0) | (self.dbr > 0) | (self.hold > 0)))
            releasable = np.flatnonzero(locked & np.isfinite(self.cap))
            stribeck = np.where(slide, -s * self.dbr, 0.0) if self.has_stribeck else None
            hit = HeldPhase(
                brake_constant=np.where(slide, -s * self.ts, 0.0), brake_viscous=cv, held=L, n_held=len(L), free=F,
                n_free=len(F), flat_free_free=(F[:, None] * n + F[None, :]).ravel(),
                flat_held_free=(np.minimum(L[:, None], F[None, :]) * n + np.maximum(L[:, None], F[None, :])).ravel(),
                sliding=sliding, releasable=releasable, viscous=bool(np.any(cv != 0.0)),
                slide_directions=s[sliding], release_rows=np.searchsorted(L, releasable), brake_stribeck=stribeck,
            )
            if len(_PHASES) >= 4096:
                _PHASES.clear()
            _PHASES[key] = hit
        return hit

    def _use_phase(self, phase: HeldPhase) -> None:
        """Copy the phase into the attributes the right-hand side reads."""
        self._phase_data = phase
        self.cs, self.cv = phase.brake_constant, phase.brake_viscous
        self.L, self.nL, self.F, self.nF = phase.held, phase.n_held, phase.free, phase.n_free
        self._flat_FF, self._flat_LF = phase.flat_free_free, phase.flat_held_free
        self.slide_idx, self.release_idx = phase.sliding, phase.releasable
        self.viscous, self._slide_s, self._release_pos = phase.viscous, phase.slide_directions, phase.release_rows
        self.cst = phase.brake_stribeck

    def _torque(self, v: np.ndarray) -> np.ndarray:
        """Brake torques [N m] of the extended model at the engine's ``_clock`` [s] (brakes module docstring):
        r(t) (cs + cv v + cst exp(-(v / v_s)^2)), with the phase's constant, viscous and Stribeck parts."""
        tau = self.cs + self.cv * v
        if self.cst is not None:
            x = v * self.inv_vs
            tau = tau + self.cst * np.exp(-x * x)
        if self.has_rise:
            tau = tau * self._ramp(self._clock)
        return tau

    def _ramp(self, t: float) -> np.ndarray:
        """The brakes' rise factors r(t) in [0, 1] (1 for brakes without a rise time)."""
        return np.where(self.rise > 0.0, np.clip((t - self.engage_t) / self.rise_safe, 0.0, 1.0), 1.0)

    def _capacity(self, idx, t: float) -> np.ndarray:
        """Holding capacities [N m] of the velocity indices ``idx`` (None: all joints) at time t [s]:
        max(lock capacity, r_i(t) holding_i if joint i's brake is engaged else 0). The capacity of a pawl or lock
        event (``lock_cap``, 0 where none) is not scaled; the brake's rises with its torque and is zero until its
        rise begins, whatever its size (inf x 0 is not a number). Without rise times this is ``cap``, the capacity
        of the held joints at the end of every rise.

        Only held joints and engaged joints at rest are asked for (a joint that is not held has no lock capacity)."""
        if not self.has_rise:
            if idx is not None:
                return self.cap.take(idx)
            return np.maximum(self.lock_cap, np.where(self.engaged, self.hold, 0.0))
        r = self._ramp(t)
        with np.errstate(invalid="ignore"):  # inf x 0 where a rise has not begun: replaced by 0
            brake = np.where(self.engaged & (r > 0.0), self.hold * r, 0.0)
        c = np.maximum(self.lock_cap, brake)
        return c if idx is None else c.take(idx)

    def _f(self, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(a [rad/s^2], lambda_L [N m], tau_b [N m]) for the current phase (eq. (3) with held joints).

        No held joint: a = ABA(q, v, tau_b). Held set L: with a_L = 0 the free rows of eq. (3) read
        M_FF a_F = (tau_b - h)_F (Cholesky of M_FF from CRBA, h from Pinocchio's nonLinearEffects), and the held
        rows give lambda_L = (M a + h - tau_b)_L = M_LF a_F - (tau_b - h)_L. Exact: v_L = 0 in the held phase."""
        self.n_eval += 1
        if self.general:
            tau = self._torque(v)
        else:
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
        x = solve_spd(M, self._flat_FF, self.nF, r.take(self.F))
        a[self.F] = x
        return a, M.take(self._flat_LF).reshape(self.nL, self.nF).dot(x) - r.take(self.L), tau

    def _one_held(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, float]:
        """(a, lambda) with one held joint i: a = a_0 + lambda M^-1 e_i, lambda = -(a_0)_i / (M^-1)_ii with
        a_0 = ABA(q, v, tau_b) (the module docstring's formula with |L| = 1)."""
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
        if self.general:
            tau = self._torque(v)
        else:
            tau = self.cs + self.cv * v if self.viscous else self.cs
        if self.nL == 0:
            return pin.aba(self.m, self.d, q, v, tau), tau
        if self.nL == 1:
            return self._one_held(q, v, tau)[0], tau
        a = np.zeros(self.nv)
        if self.nF:
            M = pin.crba(self.m, self.d, q)
            r = (tau - pin.nonLinearEffects(self.m, self.d, q, v)).take(self.F)
            a.put(self.F, solve_spd(M, self._flat_FF, self.nF, r))
        return a, tau


def solve_spd(M: np.ndarray, flat: np.ndarray, n: int, r: np.ndarray) -> np.ndarray:
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

"""Stick/slip decisions of the braked joints at rest (the active set of Müller 2026, eq. (3) with joint locks).

When sliding joints reach zero velocity, at brake engagement of a resting joint, after an abrupt lock, or when a
held joint's needed torque reaches its capacity, all joints whose brake is engaged and whose velocity is zero form
the candidate set C and are decided jointly. The admissible outcome is a split C = S u R with
|lambda_i| <= capacity_i for i in S (stick) and, for i in R, a slip direction d_i with brake torque -d_i * sliding_i
and acceleration d_i a_i > 0 (the joint really leaves rest in the direction it slides). It is found by an active-set
iteration: start with S = C; while some i in S exceeds its capacity, move the one with the largest ratio
|lambda_i| / capacity_i to R with d_i = -sign(lambda_i) (it yields to the load it cannot hold); while some i in R
is inconsistent (d_i a_i <= 0), put it back into S. Each iterate is re-solved with the full constrained dynamics
(:mod:`.held_dynamics`). If the iteration revisits a split, all 3^|C| splits are enumerated and the consistent one
with the most sticking joints is taken (ties: smallest total capacity usage). For a single joint with holding >=
sliding capacity the first step is always consistent. A slipping joint meets the friction at v = 0 (the
breakaway torque with a Stribeck term, :mod:`.brakes`); a held joint whose release was located at this instant
(demand = capacity, with holding = breakaway its acceleration is zero to rounding) slips unless its acceleration
clearly opposes the slip. The decision is exact (no regularisation, no velocity threshold).

:class:`StickSlipDecisions` is a part of the braking engine (:class:`.event_loop.BrakingEngine`).
Units: lambda and capacities [N m], a [rad/s^2].
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

_EMPTY = np.zeros(0)
_EMPTY_I = np.zeros(0, dtype=int)


class StickSlipOutcome(NamedTuple):
    """Velocity indices of one decision: joints that newly ``stuck``, joints ``slipping`` from rest, held joints
    ``released`` (a joint appears in at most one of them)."""

    stuck: list[int]
    slipping: list[int]
    released: list[int]


class StickSlipDecisions:
    """The decision over the engine's resting joints; commits the outcome to the engine's active set."""

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

    def _decide(self, t: float, q: np.ndarray, v: np.ndarray, force: frozenset = frozenset()) -> StickSlipOutcome:
        """Joint stick/slip decision at time t [s] over all engaged or held joints at rest (module docstring);
        updates the active set. ``force``: held joints whose release was located at this instant. When the
        iteration found the split, ``_k_after`` holds its dynamics (a, lambda, tau_b), else None."""
        C = np.flatnonzero((self.engaged | self.locked) & (v == 0.0))
        self._k_after = None
        if C.size == 0:
            return StickSlipOutcome([], [], [])
        cap = self._capacity(None, t)  # a lock's capacity, or the brake's as it rises (r(t) hold)
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
            if Ra.size and force:
                # a held joint whose release was located at this instant starts to slip with the acceleration
                # that the growing demand gives it: zero at the instant when the friction at rest (breakaway)
                # equals the capacity, so only a clearly opposite acceleration makes its slip inconsistent
                tol = 1e-9 * (1.0 + float(np.max(np.abs(a))))
                bad_R = [i for i in Ra if d[i] * a[i] <= (-tol if i in force else 0.0)]
            else:
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
                self.lock_cap[i] = 0.0
                self.rest_since[i] = t
        for i in Ra:
            if self.locked[i]:
                self.locked[i] = False
                self.lock_cap[i] = 0.0  # a released lock does not hold again
                self.rest_since[i] = np.nan
            self.s[i] = d[i] if d[i] != 0 else self.s[i]
        self._set_phase()
        if result_from_iteration:
            self._k_after = k_final  # the accepted split's dynamics are those of the committed phase
        return StickSlipOutcome(newly, slipping, released)

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

"""Compiled stick/slip decision of the braked joints at rest, from M(q) and h(q, v) of one evaluation (Müller 2026,
eq. (3) with joint-lock rows; the rule of :mod:`vtm_dynamics.core.estop.stick_slip`).

All joints whose brake is engaged or that are held, and whose velocity is zero, form the candidate set C. An
admissible split C = S u R has |lambda_i| <= capacity_i for i in S (stick) and, for i in R, a slip direction d_i
with the friction at rest (the breakaway torque) opposing it and d_i a_i > 0. Active-set iteration from "all
stick": while some i in S exceeds its capacity, the one with the largest |lambda_i| / capacity_i moves to R with
d_i = -sign(lambda_i); while some i in R is inconsistent, it returns to S. A split seen before ends the iteration
and all 3^|C| splits are enumerated (the consistent one with most sticking joints, ties: least capacity usage).
Joints in ``force`` (held joints whose release was located at this instant) count as over capacity at ratio
1 - 1e-9 and slip unless their acceleration clearly opposes the slip. Every split is solved on the same M and h
(the state does not change at a decision), so a decision costs no evaluation. Units: N m, rad/s^2, s.
"""

from __future__ import annotations

import numpy as np

from vtm_dynamics.core.estop.compiled_dynamics import BRAKE_ROWS, braked_dynamics, capacity, jit

# outcome codes per velocity index
UNCHANGED, STUCK, SLIPPING, RELEASED = 0, 1, 2, 3
# rows of the decision's table (the right-hand side reads rows of one table): velocities, brake engaged, the split's
# held set, its slip directions, accelerations, holding and brake torques, the brake table, then nv + 2 rows of
# scratch
_V, _ENGAGED, _SPLIT, _S, _A, _LAM, _TAU, _B = range(8)
_WORK = _B + BRAKE_ROWS


@jit
def _table(v, B, engaged, locked):
    """The decision's table with the state's velocities, brake table and engaged mask; the split starts as
    ``locked``."""
    n = v.shape[0]
    T = np.zeros((_WORK + n + 2, n))
    for i in range(n):
        T[_V, i] = v[i]
        T[_ENGAGED, i] = engaged[i]
        T[_SPLIT, i] = locked[i]
        for r in range(BRAKE_ROWS):
            T[_B + r, i] = B[r, i]
    return T


@jit
def _split_dynamics(M, h, t, T, s, d, slip):
    """Dynamics of one split (rows _A, _LAM, _TAU of T): row _SPLIT held, ``slip`` joints slipping from rest in
    direction d, the others in their directions ``s``."""
    for i in range(T.shape[1]):
        T[_S, i] = d[i] if slip[i] else s[i]
    return braked_dynamics(T, M, h, t, _B, _V, _ENGAGED, _SPLIT, _S, _A, _LAM, _TAU, _WORK)


@jit
def _consistent(candidates, S_mask, d, a, lam, cap_now, force, use_force):
    """(over-capacity joint with the largest ratio or -1, first inconsistent slipping joint or -1)."""
    worst, worst_ratio = -1, 0.0
    bad = -1
    amax = 0.0
    for i in range(a.shape[0]):
        if abs(a[i]) > amax:
            amax = abs(a[i])
    tol = 1e-9 * (1.0 + amax)
    for i in candidates:
        if S_mask[i]:
            ratio = abs(lam[i]) / max(cap_now[i], 1e-300)
            limit = 1.0 - 1e-9 if (use_force and force[i]) else 1.0 + 1e-12
            if ratio > limit and (worst < 0 or ratio > worst_ratio):
                worst, worst_ratio = i, ratio
        elif bad < 0:
            threshold = -tol if (use_force and force[i]) else 0.0
            if d[i] * a[i] <= threshold:
                bad = i
    return worst, bad


@jit
def decide(M, h, v, t, B, engaged, locked, s, cap, force, outcome, a, lam, tau):
    """The decision at time t [s] (module docstring). Commits it to ``locked``, ``s`` and the lock capacities ``cap``
    (none for a joint that sticks or is released), writes ``outcome`` per joint (UNCHANGED, STUCK, SLIPPING,
    RELEASED) and the committed split's dynamics (a, lambda, tau). Returns the number of candidates (0: nothing
    to decide, dynamics not computed), or -1 when no split is consistent."""
    n = v.shape[0]
    for i in range(n):
        outcome[i] = UNCHANGED
    count = 0
    for i in range(n):
        if (engaged[i] > 0.5 or locked[i] > 0.5) and v[i] == 0.0:
            count += 1
    if count == 0:
        return 0
    C = np.empty(count, dtype=np.int64)
    k = 0
    for i in range(n):
        if (engaged[i] > 0.5 or locked[i] > 0.5) and v[i] == 0.0:
            C[k] = i
            k += 1
    cap_now = np.zeros(n)
    for i in C:
        cap_now[i] = capacity(B, cap[i] if locked[i] > 0.5 else 0.0, engaged[i], i, t)
    use_force = False
    for i in range(n):
        if force[i]:
            use_force = True
    S_mask = np.zeros(n, dtype=np.bool_)
    for i in C:
        S_mask[i] = True
    d = np.zeros(n)
    T = _table(v, B, engaged, locked)
    split_locked, a_split, lam_split = T[_SPLIT], T[_A], T[_LAM]
    slip = np.zeros(n, dtype=np.bool_)
    max_iter = 4 * count + 4
    seen_S = np.zeros((max_iter + 1, n), dtype=np.bool_)
    seen_d = np.zeros((max_iter + 1, n))
    n_seen = 1
    seen_S[0] = S_mask
    found = False
    for it in range(max_iter):
        if it > 0:
            repeated = False
            for m in range(n_seen):
                same = True
                for i in C:
                    if seen_S[m, i] != S_mask[i] or seen_d[m, i] != d[i]:
                        same = False
                        break
                if same:
                    repeated = True
                    break
            if repeated:
                break
            seen_S[n_seen] = S_mask
            seen_d[n_seen] = d
            n_seen += 1
        for i in C:
            split_locked[i] = 1.0 if S_mask[i] else 0.0
            slip[i] = not S_mask[i]
        if not _split_dynamics(M, h, t, T, s, d, slip):
            return -1
        worst, bad = _consistent(C, S_mask, d, a_split, lam_split, cap_now, force, use_force)
        if worst < 0 and bad < 0:
            found = True
            break
        if worst >= 0:
            S_mask[worst] = False
            d[worst] = -np.sign(lam_split[worst]) if lam_split[worst] != 0.0 else 1.0
        else:
            S_mask[bad] = True
            d[bad] = 0.0
    if not found:
        if not _enumerate(M, h, t, T, s, C, cap_now, S_mask, d):
            return -1
        for i in C:
            split_locked[i] = 1.0 if S_mask[i] else 0.0
            slip[i] = not S_mask[i]
        _split_dynamics(M, h, t, T, s, d, slip)
    for i in range(n):
        a[i] = T[_A, i]
        lam[i] = T[_LAM, i]
        tau[i] = T[_TAU, i]
    for i in C:
        if S_mask[i]:
            if locked[i] < 0.5:
                locked[i] = 1.0
                cap[i] = 0.0  # held by its brake alone
                outcome[i] = STUCK
        else:
            outcome[i] = RELEASED if locked[i] > 0.5 else SLIPPING
            locked[i] = 0.0
            cap[i] = 0.0  # a released lock does not hold again
            if d[i] != 0.0:
                s[i] = d[i]
    return count


@jit
def _enumerate(M, h, t, T, s, C, cap_now, S_best, d_best):
    """All 3^|C| splits (digit 0: stick, 1: slip +, 2: slip -; the first candidate is the slowest digit); the
    consistent one with the most sticking joints, ties: least capacity usage. Writes it to S_best, d_best. (Row
    _SPLIT of T changes only at the candidates, so it is the held set with each split.)"""
    n = T.shape[1]
    m = C.shape[0]
    split_locked, a, lam = T[_SPLIT], T[_A], T[_LAM]
    slip = np.zeros(n, dtype=np.bool_)
    d = np.zeros(n)
    best_stuck, best_usage, have = -1, 0.0, False
    total = 3 ** m
    for code in range(total):
        rest = code
        for k in range(m - 1, -1, -1):
            digit = rest % 3
            rest //= 3
            i = C[k]
            split_locked[i] = 1.0 if digit == 0 else 0.0
            slip[i] = digit != 0
            d[i] = 0.0 if digit == 0 else (1.0 if digit == 1 else -1.0)
        if not _split_dynamics(M, h, t, T, s, d, slip):
            continue
        ok = True
        usage = 0.0
        stuck = 0
        for i in C:
            if split_locked[i] > 0.5:
                stuck += 1
                u = abs(lam[i]) / max(cap_now[i], 1e-300)
                if u > 1.0 + 1e-12:
                    ok = False
                    break
                usage += u
            elif d[i] * a[i] <= 0.0:
                ok = False
                break
        if not ok:
            continue
        if not have or stuck > best_stuck or (stuck == best_stuck and usage < best_usage):
            have, best_stuck, best_usage = True, stuck, usage
            for i in C:
                S_best[i] = split_locked[i] > 0.5
                d_best[i] = d[i]
    return have

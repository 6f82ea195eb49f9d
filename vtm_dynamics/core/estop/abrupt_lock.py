"""Abrupt joint locks during a stop (a pawl, or a ``LockEvent`` at a given time): Müller 2026, eq. (22).

The joints that lock are added to the held set with the momentum-consistent velocity jump of eq. (22) for joint
locks, computed by :func:`vtm_dynamics.core.switching.transitions.joint_lock_jump` (the closed form, or with
``StopSettings.jump_method`` one of the general methods, eqs. (22)/(24), (32), (37)). The impulses Lambda have the
sign convention of eq. (21), M dv + J^T Lambda = 0; the kinetic energy the jump dissipates is booked in
``impulse_energy`` [J], and the impulsive spatial force each joint transmits is RNEA with the acceleration dv and
no velocity, minus the static part [N s, N m s].

:class:`AbruptLock` is a part of the braking engine (:class:`.event_loop.BrakingEngine`).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.switching import transitions as switching

JUMP_METHODS = ("closed_form",) + tuple(m for m in switching.METHODS if m != "naive")


class AbruptLock:
    """Lock joints at an instant with the momentum-consistent jump; records the ``lock`` event."""

    def _abrupt_lock(self, t: float, q: np.ndarray, v: np.ndarray, idx: np.ndarray, capacity: np.ndarray) -> np.ndarray:
        """Lock the velocity indices ``idx`` (holding ``capacity`` [N m] each) at time t [s]; returns v+ [rad/s].

        The joints not yet held lock with the jump of eq. (22); a joint already held (v_i = 0, no jump) gains the
        lock's capacity beside its brake's. One ``lock`` event names all of ``idx``."""
        idx = np.asarray(idx, dtype=int)
        capacity = np.broadcast_to(np.asarray(capacity, dtype=float), idx.shape)
        held = self.locked[idx]
        for i, c in zip(idx[held], capacity[held]):
            self.lock_cap[i] = max(self.lock_cap[i], c)
            self.cap[i] = max(self.cap[i], c)
        new, capacity = idx[~held], capacity[~held]
        zero = np.zeros(self.nv)
        if not new.size:
            self._set_phase()  # a rigid lock makes a held joint unreleasable
            static = self._wrenches(q, zero, zero)
            self._record_event(t, "lock", idx, q, v, v, zero, np.zeros(self.nL), self.L, 0.0, static - static)
            return v
        M = pin.crba(self.m, self.d, q).copy()
        M = np.triu(M) + np.triu(M, 1).T
        jump = switching.joint_lock_jump(M, self.L, new, v, self.st.jump_method)
        self.impulse_energy += jump.energy_loss
        f_imp = self._wrenches(q, zero, jump.dv) - self._wrenches(q, zero, zero)
        for k, i in enumerate(new):
            self.locked[i] = True
            self.lock_cap[i] = capacity[k]
            self.cap[i] = max(capacity[k], self.hold[i] if self.engaged[i] else 0.0)
            self.rest_since[i] = t
        self._set_phase()
        self._record_event(t, "lock", idx, q, v, jump.v_plus, jump.dv, jump.impulses, jump.locked, jump.energy_loss,
                           f_imp)
        return jump.v_plus


"""The braking engine on compiled kernels: event-driven integration of one stop from the power-off state (Müller
2026, Secs. 6-7), with Pinocchio computing M(q) (CRBA) and h(q, v) (``nonLinearEffects``) and everything else
compiled (:mod:`.compiled_dynamics`, :mod:`.compiled_decision`, :mod:`.compiled_steps`, :mod:`.compiled_events`).

The physics and the events are those of :mod:`.event_loop` (the engine in Python, kept for the classical RK4
method, for models whose configuration is not a vector, and as the reference path of the benchmarks):
eq. (3) with the held joints as unit constraint rows between events; time events (brake engagement, end of a
brake's torque rise, abrupt locks with the jump of eq. (22)) are step boundaries; a sliding joint reaching zero
velocity and a held joint whose needed torque reaches its capacity are state events, followed by the stick/slip
decision over all resting joints. What differs is the numerics: Dormand-Prince 5(4) with error control
(``StopSettings.rtol``, ``atol``, at most ``step``) instead of fixed steps shortened near the Stribeck region, and
both kinds of state events located on the step's continuous extension (crossings by polynomial roots, releases by
regula falsi on evaluations at extension states) instead of re-integrated steps.

One evaluation is two Pinocchio calls and one compiled call; the inner loop is written for that. With generated M and
h (batches) the loop runs as one compiled call (:mod:`.compiled_driver`) unless a stop has abrupt locks. Units: SI.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.estop import compiled_driver as cd
from vtm_dynamics.core.estop import compiled_events as ce
from vtm_dynamics.core.estop import compiled_steps as cs
from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.estop.compiled_decision import RELEASED, SLIPPING, STUCK
from vtm_dynamics.core.estop.compiled_dynamics import (
    ARMATURE, BRAKE_ROWS, ENGAGE, INVERSE_STRIBECK_SPEED, RISE, brake_table,
)
from vtm_dynamics.core.estop.event_loop import ScheduledLock, first_positive
from vtm_dynamics.core.estop.inputs import StopSettings
from vtm_dynamics.core.estop.results import StopEvent
from vtm_dynamics.core.estop.wrenches import joint_forces
from vtm_dynamics.core.estop.generated_dynamics import GeneratedStages
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.switching import transitions as switching

_EMPTY = np.zeros(0)
LOOP_SWITCH = "VTM_COMPILED_LOOP"  # "off": the Python loop also with generated M and h


class CompiledEngine:
    """State of one stop and its event loop (module docstring). After :meth:`run`: ``locked`` (bool, nv),
    ``rest_since`` [s], ``events``, ``impulse_energy`` [J], ``samples`` (rows t, W, J, q, v, a, tau, locked; see
    :func:`.compiled_steps.record`), ``n_steps``, ``n_eval``."""

    def __init__(self, robot: RobotModel, brakes: BrakeSet, settings: StopSettings,
                 generated: GeneratedStages | None = None, loop: str | None = None) -> None:
        self.robot = robot
        self.generated = generated  # compiled M and h inside one call per step (batches), else Pinocchio's calls
        # with generated M and h, "compiled" runs the loop in one compiled call (compiled_driver) unless the stop
        # has abrupt locks; "python": this class's loop (the reference the compiled one is tested against);
        # None: "python" when the environment says VTM_COMPILED_LOOP=off, else "compiled"
        if loop is None:
            loop = "python" if os.environ.get(LOOP_SWITCH, "").strip().lower() == "off" else "compiled"
        self.loop = loop
        self._log = np.zeros((16, cd.log_columns(robot.nv)))
        self._tables: dict[int, tuple[BrakeSet, np.ndarray]] = {}
        self._events_for: dict[bytes, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.m, self.d = robot.model, robot.data
        self.nv = robot.nv
        self.brakes = brakes
        self.st = settings
        self.names = robot.joint_names
        self.X, self.Z, self.R = cs.new_tables(self.nv)
        self._reset()

    def _reset(self) -> None:
        """A fresh stop (an engine runs one stop at a time and may be reused for the next)."""
        self.n_eval = 0
        self.n_steps = 0
        self.events: list[StopEvent] = []
        self.rest_since = np.full(self.nv, np.nan)
        self.impulse_energy = 0.0
        self.locked = np.zeros(self.nv, dtype=bool)
        self._last_event_idle = False
        self.X.fill(0.0)
        self.Z.fill(0.0)

    def _brake_table(self, brakes: BrakeSet) -> np.ndarray:
        """The brake table of ``brakes`` (engage times unset), kept per BrakeSet: a batch repeats a few."""
        kept = self._tables.get(id(brakes))
        if kept is None or kept[0] is not brakes:
            if len(self._tables) >= 64:
                self._tables.clear()
            kept = self._tables[id(brakes)] = (brakes, brake_table(brakes, np.full(self.nv, np.inf)))
        return kept[1]

    # ---------------------------------------------------------------- evaluations
    def _evaluate(self):
        """(M, h) at the state in rows QS, VST: the generated code's when the engine has it (so that every M and h
        of a stop comes from one source), else Pinocchio's."""
        self.n_eval += 1
        qs, vs = self.X[cs.QS], self.X[cs.VST]
        if self.generated is not None:
            g = self.generated
            g.mh_at(self.X, g.parameters, g.armature, g.M, g.h)
            return g.M, g.h
        return pin.crba(self.m, self.d, qs), pin.nonLinearEffects(self.m, self.d, qs, vs)

    def _set_state(self, t: float, q: np.ndarray, v: np.ndarray, W: float) -> None:
        X = self.X
        X[cs.QS] = q
        X[cs.VST] = v
        M, h = self._evaluate()
        if not cs.set_state(X, self.Z, t, W, M, h):
            raise RuntimeError(cd.failure(cd.NOT_POSITIVE_DEFINITE))

    def _ensure_room(self, rows: int) -> None:
        if self.Z[cs.NSAMP] + rows > self.R.shape[0]:  # grown to 2 R + rows, as compiled_driver's loop grows it
            self.R = np.concatenate([self.R, np.zeros((self.R.shape[0] + rows, self.R.shape[1]))])

    # ---------------------------------------------------------------- event records
    def _record_event(self, t, kind, idx, q, v_minus, v_plus, dv=None, impulses=_EMPTY, imp_idx=(), loss=0.0,
                      imp_wrench=None) -> None:
        """An event at the step-start state, whose dynamics (rows KS, LAM0) are those after the event."""
        X = self.X
        hold = np.where(X[cs.LOCKED] > 0.5, X[cs.LAM0], np.nan)
        self._append_event(t, kind, idx, q.copy(), v_minus.copy(), v_plus.copy(), hold, X[cs.KS], dv, impulses,
                           imp_idx, loss, imp_wrench)
        if len(self.events) > self.st.max_events:
            raise RuntimeError(cd.failure(cd.TOO_MANY_EVENTS, max_events=self.st.max_events))

    def _append_event(self, t, kind, idx, q, v_minus, v_plus, hold, a, dv=None, impulses=_EMPTY, imp_idx=(),
                      loss=0.0, imp_wrench=None) -> None:
        """Append a StopEvent with the wrenches the joints transmit at (q, v_plus) with the accelerations ``a``."""
        pin.rnea(self.m, self.d, q, v_plus, a)
        name = self.names.__getitem__
        self.events.append(StopEvent(
            time=float(t), kind=kind, joints=tuple(map(name, idx)), q=q, v_minus=v_minus, v_plus=v_plus,
            dv=np.zeros(self.nv) if dv is None else dv, impulses=impulses,
            impulse_joints=tuple(map(name, imp_idx)), energy_loss=float(loss), holding_torques=hold,
            wrenches=joint_forces(self.d, self.m.njoints), impulse_wrenches=imp_wrench,
        ))

    def _decide(self, force: np.ndarray) -> tuple[list[int], list[int], list[int]]:
        """Stick/slip decision at the step-start state; returns (stuck, slipping, released) joint indices. (The
        outcome is sorted in Python lists: for a handful of joints, three ``flatnonzero`` cost more than the
        decision itself.)"""
        outcome = np.zeros(self.nv, dtype=np.int64)
        if cs.decide_at_start(self.X, self.Z, force, outcome) < 0:
            raise RuntimeError(cd.failure(cd.NO_SPLIT))
        t = float(self.Z[cs.T0])
        codes = outcome.tolist()
        stuck = [i for i, c in enumerate(codes) if c == STUCK]
        slipping = [i for i, c in enumerate(codes) if c == SLIPPING]
        released = [i for i, c in enumerate(codes) if c == RELEASED]
        rest_since = self.rest_since
        for i in stuck:
            rest_since[i] = t
        for i in released:
            rest_since[i] = math.nan
        return stuck, slipping, released

    def _record_decision(self, t, stuck, slipping, released, q, v_minus, v_plus) -> None:
        for kind, idx in (("stick", stuck), ("slip", slipping), ("release", released)):
            if idx:
                self._record_event(t, kind, idx, q, v_minus, v_plus)

    # ---------------------------------------------------------------- abrupt locks (eq. (22))
    def _abrupt_lock(self, t: float, lock: ScheduledLock) -> None:
        """Lock ``lock.joints`` with the momentum-consistent jump (:mod:`.abrupt_lock`, eq. (22)) at the
        step-start state; the state becomes (q, v+). A joint already held (v_i = 0, no jump) gains the lock's
        capacity beside its brake's; one ``lock`` event names all the lock's joints."""
        X, n = self.X, self.nv
        locked = X[cs.LOCKED] > 0.5
        idx = np.asarray(lock.joints, dtype=int)
        capacity = np.broadcast_to(np.asarray(lock.capacity, dtype=float), idx.shape)
        held = locked[idx]
        for i, c in zip(idx[held], capacity[held]):
            X[cs.CAP, i] = max(X[cs.CAP, i], c)
        new, capacity = idx[~held], capacity[~held]
        q, v = X[cs.Q0].copy(), X[cs.V0].copy()
        zero = np.zeros(n)
        if not new.size:
            pin.rnea(self.m, self.d, q, zero, zero)
            static = joint_forces(self.d, self.m.njoints)
            self._record_event(t, "lock", idx, q, v, v, zero, np.zeros(int(locked.sum())), np.flatnonzero(locked),
                               0.0, static - static)
            return
        M = X[cs.MC:cs.MC + n].copy()
        M = np.triu(M) + np.triu(M, 1).T + np.diag(X[cs.BRAKES + ARMATURE])
        jump = switching.joint_lock_jump(M, np.flatnonzero(locked), new, v, self.st.jump_method)
        self.impulse_energy += jump.energy_loss
        self.Z[cs.J] = self.impulse_energy
        pin.rnea(self.m, self.d, q, zero, jump.dv)
        f_dv = joint_forces(self.d, self.m.njoints)
        pin.rnea(self.m, self.d, q, zero, zero)
        f_imp = f_dv - joint_forces(self.d, self.m.njoints)
        for k, i in enumerate(new):
            X[cs.LOCKED, i] = 1.0
            X[cs.CAP, i] = capacity[k]  # the brake's own capacity is added as it rises (compiled_dynamics.capacity)
            self.rest_since[i] = t
        self._set_state(t, q, jump.v_plus, float(self.Z[cs.W0]))
        self._record_event(t, "lock", idx, q, v, jump.v_plus, jump.dv, jump.impulses, jump.locked,
                           jump.energy_loss, f_imp)

    # ---------------------------------------------------------------- main loop
    def run(self, t0: float, q0: np.ndarray, v0: np.ndarray, engage_times: np.ndarray,
            locks: list[ScheduledLock], W0: float = 0.0) -> tuple[float, np.ndarray, np.ndarray, float]:
        """Integrate from (t0 [s], q0, v0; brake work W0 [J]) until every joint is held or t_max; brake i engages at
        ``engage_times[i]`` (inf: never). Returns the final (t, q, v, W); the samples are in ``samples``."""
        self._reset()
        st, X, Z = self.st, self.X, self.Z
        n = self.nv
        engage_times = np.asarray(engage_times, dtype=float)
        X[cs.BRAKES:cs.BRAKES + BRAKE_ROWS] = self._brake_table(self.brakes)
        X[cs.BRAKES + ENGAGE] = engage_times
        self._stribeck = X[cs.BRAKES + INVERSE_STRIBECK_SPEED] > 0.0
        Z[cs.HNEXT] = Z[cs.MAXSTEP] = st.step
        Z[cs.RTOL], Z[cs.ATOL], Z[cs.ATOLV] = st.rtol, st.atol, st.atol_velocity
        Z[cs.KAPPA], Z[cs.KPOST] = cs.STRIBECK_STEP, cs.STRIBECK_LIMIT
        Z[cs.J] = self.impulse_energy
        times, codes, joints = self._time_events(engage_times)
        t_end = t0 + st.t_max
        if self.generated is not None:
            self.generated.load_inertias()  # a payload changes them
        self._set_state(t0, q0, v0, W0)
        self._ensure_room(4)
        cs.record(X, Z, self.R)
        if self.generated is not None and not locks and self.loop == "compiled":
            return self._run_compiled(times, codes, joints, t_end)
        kinds = ("engage", "lock", "rise_end")
        timed: list[tuple[float, int, str, object]] = [
            (float(tk), int(ck), kinds[ck], int(jk)) for tk, ck, jk in zip(times, codes, joints)]
        timed += [(float(lock.time), 1, "lock", lock) for lock in locks]
        timed.sort(key=lambda e: (e[0], e[1]))
        t = float(t0)
        stalled = 0
        force = np.zeros(n, dtype=bool)
        no_force = force.copy()
        m, d = self.m, self.d
        crba, nle = pin.crba, pin.nonLinearEffects
        qs, vs = X[cs.QS], X[cs.VST]
        stage, begin, end_step = cs.stage, cs.begin_step, cs.end_step
        gen = self.generated
        g_stages, g_args = (None, ()) if gen is None else (gen.stages, (gen.parameters, gen.armature, gen.M, gen.h))
        while True:
            due = []
            while timed and timed[0][0] <= t + 1e-12:
                due.append(timed.pop(0))
            if due:
                self._time_events_due(t, due, no_force)
            if not (X[cs.LOCKED] < 0.5).any() or t >= t_end - 1e-12:
                break
            t_next = timed[0][0] if timed else math.inf
            # steps until a time event or a state event
            while True:
                if t_next - t <= st.step or t_end - t <= st.step:
                    t_limit = min(t_next, t_end)
                    limit = t_limit - t
                else:
                    limit = st.step
                    t_limit = t + limit
                self._ensure_room(4)
                h = begin(X, Z, limit, t_limit)
                if not h > 1e-15 * max(1.0, abs(t)):
                    raise RuntimeError(cd.failure(cd.UNDERFLOW, t))
                if g_stages is not None:
                    if not g_stages(X, Z, *g_args):
                        raise RuntimeError(cd.failure(cd.NOT_POSITIVE_DEFINITE))
                else:
                    for s_ in range(1, 7):
                        if not stage(X, Z, crba(m, d, qs), nle(m, d, qs, vs), s_):
                            raise RuntimeError(cd.failure(cd.NOT_POSITIVE_DEFINITE))
                self.n_eval += 6
                flags = end_step(X, Z, self.R)
                if flags == cs.REJECTED:
                    continue
                self.n_steps += 1
                if flags == cs.ACCEPTED:
                    t = float(Z[cs.T0])
                    if t >= t_next - 1e-12 or t >= t_end - 1e-12:
                        break
                    continue
                t = self._state_event(flags, force)
                stalled = stalled + 1 if self._last_event_idle else 0
                if stalled > 100:
                    raise RuntimeError(cd.failure(cd.NO_PROGRESS, t))
                if not (X[cs.LOCKED] < 0.5).any():
                    break
        self.locked = X[cs.LOCKED] > 0.5
        self.samples = self.R[:int(Z[cs.NSAMP])].copy()
        return t, X[cs.Q0].copy(), X[cs.V0].copy(), float(Z[cs.W0])

    def _time_events(self, engage_times: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:func:`.compiled_driver.time_events` of the brakes now in the table (times [s], codes, joints)."""
        rise = self.X[cs.BRAKES + RISE]
        key = engage_times.tobytes() + rise.tobytes()  # kept by content: a batch repeats a few brake sets
        kept = self._events_for.get(key)
        if kept is not None:
            return kept
        if len(self._events_for) >= 64:
            self._events_for.clear()
        kept = self._events_for[key] = cd.time_events(engage_times, rise)
        return kept

    def _run_compiled(self, event_t: np.ndarray, kinds: np.ndarray, joints: np.ndarray,
                      t_end: float) -> tuple[float, np.ndarray, np.ndarray, float]:
        """The rest of :meth:`run` (no abrupt locks) in one compiled call, :func:`.compiled_driver.drive`; the
        events are made from its log."""
        X, Z, st, g = self.X, self.Z, self.st, self.generated
        counts = np.array([0, self.n_eval, 0], dtype=np.int64)  # steps, evaluations, logged events
        status, t, self.R, self._log = g.drive(X, Z, self.R, self._log, event_t, kinds, joints, g.parameters,
                                               g.armature, g.M, g.h, self.rest_since, counts, st.step, t_end,
                                               st.simultaneity_tol, st.max_events)
        self.n_steps, self.n_eval = int(counts[0]), int(counts[1])
        log = self._log[:int(counts[2])]
        n = self.nv
        b = 3 + n
        # each event's arrays: rows of fresh copies (the engine's log is reused by its next stop)
        rows = log[:, b:b + 5 * n].copy()
        dv = np.zeros((len(rows), n))  # no jumps without abrupt locks
        head = log[:, :3].tolist()
        joints = log[:, 3:b].astype(np.int64).tolist()
        for k, (t_k, kind, count) in enumerate(head):
            q, v_minus, v_plus, hold, acc = (rows[k, i * n:(i + 1) * n] for i in range(5))
            self._append_event(t_k, cd.KINDS[int(kind)], joints[k][:int(count)], q, v_minus, v_plus, hold, acc, dv[k])
        if status != cd.DONE:
            raise RuntimeError(cd.failure(status, t, st.max_events))
        self.locked = X[cs.LOCKED] > 0.5
        self.samples = self.R[:int(Z[cs.NSAMP])].copy()
        return float(t), X[cs.Q0].copy(), X[cs.V0].copy(), float(Z[cs.W0])

    def _time_events_due(self, t: float, due: list, no_force: np.ndarray) -> None:
        """Brakes engaging and abrupt locks due at t [s]: the engagement's decision (its load may free others) and
        events, then each lock with its jump and decision."""
        X, Z = self.X, self.Z
        eng = [e[3] for e in due if e[2] == "engage"]
        if eng:
            for i in eng:
                X[cs.ENGAGED, i] = 1.0  # a held joint's capacity gains the brake's (rising) capacity
                if X[cs.LOCKED, i] < 0.5 and X[cs.V0, i] != 0.0:
                    X[cs.DIRECTION, i] = np.sign(X[cs.V0, i])
            q, v = X[cs.Q0].copy(), X[cs.V0].copy()
            stuck, slip, rel = self._decide(no_force)
            self._ensure_room(2)
            cs.record(X, Z, self.R)
            self._record_event(t, "engage", eng + [i for i in stuck if i not in eng], q, v, v)
            self._record_decision(t, [], slip, rel, q, v, v)  # the engagement's load may free others
        for lock in (e[3] for e in due if e[2] == "lock"):
            self._abrupt_lock(t, lock)
            free_eng = (X[cs.ENGAGED] > 0.5) & (X[cs.LOCKED] < 0.5)
            X[cs.DIRECTION] = np.where(free_eng & (X[cs.V0] != 0), np.sign(X[cs.V0]), X[cs.DIRECTION])
            q, v = X[cs.Q0].copy(), X[cs.V0].copy()
            stuck, slip, rel = self._decide(no_force)
            self._ensure_room(2)
            cs.record(X, Z, self.R)
            self._record_decision(t, stuck, slip, rel, q, v, v)

    def _state_event(self, flags: int, force: np.ndarray) -> float:
        """Locate the first state event of the last step on its continuous extension, move there, decide."""
        X, Z = self.X, self.Z
        n = self.nv
        h = float(Z[cs.H])
        t0 = float(Z[cs.T0])
        zero = np.zeros(n, dtype=bool)
        theta_c = ce.locate_crossing(X, Z, self.st.simultaneity_tol, zero) if flags & cs.CROSSING else math.inf
        theta_r = self._locate_release(h, min(theta_c, 1.0)) if flags & cs.RELEASE else math.inf
        crossing = theta_c <= theta_r
        theta = theta_c if crossing else theta_r
        t = t0 + theta * h
        if crossing:
            ce.locate_crossing(X, Z, self.st.simultaneity_tol, zero)
            if (zero & self._stribeck).any():
                # a crossing at the end of the Stribeck region: the extension's error inside such a step is several
                # times the step-end estimate (7e-8 s in the crossing times of the bench's UR5 states, 2e-8 s
                # with this): the step is recomputed to the crossing and its time polished by a Newton correction
                cs.restart_step(X, Z, theta * h)
                if not self._six_stages():
                    raise RuntimeError(cd.failure(cd.NOT_POSITIVE_DEFINITE))
                self.n_eval += 6
                t += ce.polish_crossing(X, Z, zero)
            ce.extension_to_evaluate(X)
        else:
            ce.dense_to_evaluate(X, Z, theta)
        M, hh = self._evaluate()
        if not cs.set_state(X, Z, t, float(Z[cs.WE]), M, hh):
            raise RuntimeError(cd.failure(cd.NOT_POSITIVE_DEFINITE))
        self._ensure_room(2)
        cs.record(X, Z, self.R)  # before the decision (the active set of the step)
        if crossing:
            force[:] = False
        else:
            ce.release_force(X, t, force)
        q, v = X[cs.Q0].copy(), X[cs.V0].copy()
        stuck, slip, rel = self._decide(force)
        self._last_event_idle = theta == 0.0 and not (stuck or slip or rel)
        cs.record(X, Z, self.R)
        self._record_decision(t, stuck, slip, rel, q, v, v)
        return t

    def _six_stages(self) -> bool:
        """The stages 1..6 of the step set up in X, Z (generated M and h when the engine has them)."""
        X, Z, gen = self.X, self.Z, self.generated
        if gen is not None:
            return bool(gen.run(X, Z))
        m, d, qs, vs = self.m, self.d, X[cs.QS], X[cs.VST]
        for s_ in range(1, 7):
            if not cs.stage(X, Z, pin.crba(m, d, qs), pin.nonLinearEffects(m, d, qs, vs), s_):
                return False
        return True

    def _locate_release(self, h: float, theta_max: float) -> float:
        """Earliest theta in (0, theta_max] where a held joint's needed torque reaches its capacity, by regula
        falsi (Illinois) on states of the continuous extension; inf if it does not within theta_max."""
        X, Z = self.X, self.Z
        t0 = float(Z[cs.T0])

        def g(theta):
            ce.dense_to_evaluate(X, Z, theta)
            M, hh = self._evaluate()
            return ce.release_margin(X, Z, M, hh, t0 + theta * h)

        return first_positive(g, theta_max, ce.start_margin(X, Z), 1e-12 / h)

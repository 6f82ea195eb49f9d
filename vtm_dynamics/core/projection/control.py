"""Projected inverse-dynamics control of constrained robots (Aghili, Sec. 7).

The constraint force never enters the motion: projecting M q'' + h = f - F onto N(A) gives P M q'' = P (f - h)
(eq. (21)). A controller built on P therefore keeps one structure whatever the constraint set is - free arm,
joints locked by brakes, closed loops, redundant or singular constraints - and only the rows of A change.

Control laws implemented here (all at the matrix level in :func:`projected_inverse_dynamics`, and statefully in
:class:`ProjectedInverseDynamicsController` over a ``RobotModel`` and a changing ``ConstraintSet``):

* motion, eqs. (45)-(46), in independent coordinates theta(q) (``task``, see ``task_coordinates``): closed loop
  e'' + G_D e' + G_P e = 0 for e = theta_d - theta exactly (Theorem 4). Joint-space form: u_p = C q' + P a_d,
  a_d = q''_d + K_D (q'_d - q') + K_P (q_d - q); its closed loop is only P (e'' + K_D e' + K_P e) = 0 for the
  joint error, the designed linear dynamics while P is constant (not Theorem 4 when P moves). Both give the
  torque of least norm producing their motion (eq. (48)).
* weighted norm, Sec. 7.2: with a metric W (e.g. :func:`projection.unit_weighting`) the same law is applied in
  the coordinates q_W = W^{1/2} q, f_W = W^{-1/2} f, and minimizes f^T W^-1 f (eq. (49)).
* passive joints, eqs. (55)-(62) (``passive_joints``): f = (I + H) f_par, H = -(I - P) Q^+ (I - B), Q^+ truncated
  at the controllability tolerance (bounded torque, unmet demand reported), condition (64) checked every cycle.
* constraint force control, eqs. (51)-(52) (with passive joints: the constraint force nearest to F_d that keeps
  the passive torques zero): f_perp = h_perp + mu (f_par - h_par + Cc q') + u_F with
  u_F = F_d + G_F e_F + G_I int e_F, e_F = F_d - F. (The text of eq. (51) reads "C q'"; substituting into eq. (32)
  shows the term must be Cc q' = M C q' for the force error dynamics (G_F + 1) e_F' + G_I e_F = 0 to hold, which
  is what we implement.)
* decoupling, Proposition 3 / Appendix D: :func:`decoupling` reports ||(I - P) M P|| and ||mu P||.
* anti-windup of the force integral (not in the paper: the actuators saturate in practice): the integral does not
  advance in a cycle whose command the caller reports saturated (``hold_integral``, conditional integration), and
  ``G_I int e_F`` is clamped per coordinate to +-``force_integral_limit`` [N m, N] (e.g. the effort limits: more
  than the actuators give cannot be commanded anyway), so a long force error cannot store a demand that keeps the
  command saturated after the error is gone.

Units: SI (rad, m, s, N m, N); gains K_P [1/s^2], K_D [1/s], G_F [-], G_I [1/s].

Size: about 440 lines because the matrix-level law and the stateful controller (its constraint set and the force
integral with its anti-windup) are one concept, the projected law of Sec. 7; passive joints and task coordinates
already live in their own modules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from vtm_dynamics.core.projection.simulation import ConstraintSet
from vtm_dynamics.core.projection.passive_joints import (  # noqa: F401 - re-exported: the control API
    DEFAULT_CONTROLLABILITY_TOLERANCE, ControllabilityReport, achievable_force_projector, bounded_passive_inversion,
    controllability, passive_mask)
from vtm_dynamics.core.projection.task_coordinates import TaskCoordinates, TaskDemand, task_acceleration, task_demand
from vtm_dynamics.core.robot.constraints import Constraint, JointLock
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.projection.projector import (
    DEFAULT_TOLERANCE, ProjectionInputError, RankTolerance, checked_constraint_matrix, checked_mass_matrix,
    checked_matrix, checked_vector, constrained_accelerations, constraint_acceleration, cross_coupling, metric_sqrt,
    null_space_projector,
)


# ---------------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class DecouplingReport:
    """Proposition 3: acceleration and constraint force are decoupled iff the cross-coupling mu vanishes on N(A).

    Attributes:
        invariance_defect: ||(I - P) M P||_2 / ||M||_2, zero iff N(A) is invariant under M (the sufficient
            condition derived in Appendix D).
        coupling: ||mu P||_2 (dimensionless), the gain from the potent force to the constraint force (eq. (76)).
        decoupled: ``coupling <= tol``.
    """

    invariance_defect: float
    coupling: float
    decoupled: bool


@dataclass(frozen=True)
class ProjectedControl:
    """One control cycle of the projected inverse-dynamics controller (Aghili, Sec. 7).

    Attributes:
        tau: commanded generalized force f^c [N m, N] (n entries; exactly 0 at passive joints).
        f_parallel: the motion part f_par^c (eq. (45)), in N(A) (W-orthogonal sense when weighted).
        f_perp: the added constraint-space part (passive joints (60) or force control (51)), in N(A)^perp.
        qdd: the accelerations the constrained plant will have under ``tau`` (= u_p of eq. (46)).
        constraint_force: predicted generalized constraint force F for ``tau`` (eq. (32)), F in R(A^T).
        multipliers: lambda = A^{+T} F (one per constraint row; minimum-norm choice when not unique).
        multipliers_unique: True iff A has full row rank (Remark 4).
        rank: rank of A; dof: n - rank.
        controllability: passive-joint report, or None without passive joints.
        force_error: F_d - F_measured used by the force loop, or None without force control.
        task_conditioning: with a task-coordinate demand, sigma_min / sigma_max of J V2 (0: theta does not
            determine the motion here, e.g. at a singular configuration); None in the joint-space form.
        forbidden_acceleration: in the joint-space form, the part of the demanded acceleration a_d that the
            constraints forbid, a_d - u_p of eq. (46) [rad/s^2, m/s^2] (about zero for a demand along the
            constraints, e.g. a desired motion that moves a locked joint leaves its demand here); None in the task
            form.
    """

    tau: np.ndarray
    f_parallel: np.ndarray
    f_perp: np.ndarray
    qdd: np.ndarray
    constraint_force: np.ndarray
    multipliers: np.ndarray
    multipliers_unique: bool
    rank: int
    dof: int
    controllability: ControllabilityReport | None = None
    force_error: np.ndarray | None = None
    task_conditioning: float | None = None
    forbidden_acceleration: np.ndarray | None = None


# ---------------------------------------------------------------------------------------------------- helpers
def _gain(g: object, n: int, field_name: str) -> np.ndarray:
    arr = np.asarray(g, dtype=float)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,) or not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ProjectionInputError(f"{field_name}: expected a scalar or {n} finite gains >= 0")
    return arr


def decoupling(M: object, P: object, tol: float = 1e-9) -> DecouplingReport:
    """Decoupling test of Proposition 3 (Aghili, Sec. 5.3, Appendix D).

    The constraint force is independent of the potent input force (mu P = 0, eq. (76)) when N(A) is invariant
    under M, i.e. (I - P) M P = 0. Both quantities are reported; ``decoupled`` is decided on ||mu P|| <= tol.
    """
    Mm = checked_mass_matrix(M)
    n = Mm.shape[0]
    Pm = checked_matrix(P, (n, n), "P")
    defect = float(np.linalg.norm((np.eye(n) - Pm) @ Mm @ Pm, 2) / np.linalg.norm(Mm, 2))
    coupling = float(np.linalg.norm(cross_coupling(Mm, Pm) @ Pm, 2))
    return DecouplingReport(defect, coupling, coupling <= tol)


# ---------------------------------------------------------------------------------------------------- control law
def projected_inverse_dynamics(
    M: object,
    h: object,
    A: object,
    Adot_qdot: object,
    position_error: object,
    velocity_error: object,
    qdd_desired: object,
    kp: object,
    kd: object,
    W: object | None = None,
    passive: Sequence[int] = (),
    force_desired: object | None = None,
    force_measured: object | None = None,
    force_integral: object | None = None,
    force_gain: float = 0.0,
    force_integral_gain: float = 0.0,
    tolerance: RankTolerance = DEFAULT_TOLERANCE,
    controllability_tol: float = DEFAULT_CONTROLLABILITY_TOLERANCE,
    task: TaskDemand | None = None,
) -> ProjectedControl:
    """Projected inverse-dynamics control law, one cycle (Aghili, eqs. (45)-(46), (51)-(52), (55)-(62)).

    Args:
        M, h: inertia matrix and bias forces at the measured state (n x n, n).
        A, Adot_qdot: stacked constraint rows (m x n; may be redundant or singular, m may be 0) and drift A' q'.
        position_error: e = q_d (-) q (n) [rad, m]; velocity_error: e' = q'_d - q' (n); qdd_desired: q''_d (n).
        kp, kd: PD gains K_P [1/s^2], K_D [1/s] (scalars or n-vectors, acting on joint coordinates).
        W: optional metric of the minimized norm (Sec. 7.2); must be diagonal together with ``passive``.
        passive: velocity indices of joints without actuator (eq. (55)).
        force_desired: desired generalized constraint force F_d = A^T lambda_d (n) [N m, N] - enables eq. (51).
        force_measured: measured (or last predicted) constraint force F (n); defaults to F_d (pure feedforward).
        force_integral: int_0^t e_F dtau (n) kept by the caller; force_gain G_F, force_integral_gain G_I.
        controllability_tol: margin of condition (64) below which the passive inversion does not invert
            (dimensionless, default :data:`DEFAULT_CONTROLLABILITY_TOLERANCE`). The passive-joint torque is then
            bounded, ||f|| <= ||f_par|| (1 + 1/controllability_tol); what it cannot meet is reported (unmet
            passive force, acceleration error) and ``qdd`` is the plant's acceleration under the returned torque.
        task: the motion demand in independent coordinates theta (eq. (46), see ``task_coordinates``); the
            joint-space arguments position_error, velocity_error, qdd_desired, kp, kd are then not used.
    """
    Mm = checked_mass_matrix(M)
    n = Mm.shape[0]
    hv = checked_vector(h, n, "h")
    Am = checked_constraint_matrix(A, n)
    drift = checked_vector(Adot_qdot, Am.shape[0], "Adot_qdot")
    e = checked_vector(position_error, n, "position_error")
    ed = checked_vector(velocity_error, n, "velocity_error")
    a_des = checked_vector(qdd_desired, n, "qdd_desired")
    a_d = a_des + _gain(kd, n, "kd") * ed + _gain(kp, n, "kp") * e
    mask = passive_mask(passive, n)
    force_on = force_desired is not None

    if W is not None:
        S, S_inv = metric_sqrt(W, n)
        if mask.any() and np.count_nonzero(S - np.diag(np.diag(S))):
            raise ProjectionInputError("W: must be diagonal when passive joints are given")
    else:
        S = S_inv = np.eye(n)
    # Everything below is in the weighted coordinates q_W = S q, f_W = S^-1 f (eq. (8), Sec. 7.2).
    M_w = S_inv @ Mm @ S_inv
    h_w = S_inv @ hv
    A_w = Am @ S_inv
    proj = null_space_projector(A_w, n, tolerance)
    P = proj.P
    Q_perp = proj.complement
    Cqd_w = constraint_acceleration(proj, drift)  # -A_W^+ A' q'  (A_W' q_W' = A' q')
    task_conditioning = forbidden = None
    if task is None:
        u_p = Cqd_w + P @ (S @ a_d)  # eq. (46), joint-space form
        forbidden = a_d - S_inv @ u_p
    else:
        ta = task_acceleration(proj, Cqd_w, task, S_inv)  # eq. (46) in independent coordinates theta
        u_p, task_conditioning = ta.u_p, ta.conditioning
    f_par = P @ h_w + P @ (M_w @ u_p)  # eq. (45)
    f_perp = np.zeros(n)
    report = force_error = None

    if force_on:
        Fd_w = S_inv @ checked_vector(force_desired, n, "force_desired")
        Fm_w = Fd_w if force_measured is None else S_inv @ checked_vector(force_measured, n, "force_measured")
        integral_w = (np.zeros(n) if force_integral is None
                      else S_inv @ checked_vector(force_integral, n, "force_integral"))
        ef_w = Fd_w - Fm_w
        u_F = Q_perp @ (Fd_w + force_gain * ef_w + force_integral_gain * integral_w)  # eq. (52), kept in R(A^T)
        mu = cross_coupling(M_w, P)
        f_perp = Q_perp @ h_w + mu @ (f_par - P @ h_w + M_w @ Cqd_w) + u_F  # eq. (51) with Cc q' = M C q'
        force_error = S @ ef_w
    if mask.any():
        # eqs. (56)-(62): f_perp += (I - P) eta, eta = -Q^+ (I - B) (f_par + f_perp), Q = (I - B)(I - P), with the
        # pseudo-inverse truncated at the controllability tolerance (see ``bounded_passive_inversion``). With force
        # control the least-norm eta is the least change of the constraint force that zeroes the passive torques.
        IB = np.diag(mask.astype(float))  # I - B
        eta = bounded_passive_inversion(IB @ Q_perp, IB @ (f_par + f_perp), controllability_tol)
        f_perp = f_perp + Q_perp @ eta
        ok, margin = controllability(proj, np.flatnonzero(mask).tolist(), controllability_tol)
        passive_unmet = S @ (IB @ (f_par + f_perp))

    tau_w = f_par + f_perp
    tau = S @ tau_w
    qdd_w = u_p
    if mask.any():
        tau[mask] = 0.0  # exactly zero; the unmet demand before zeroing is in the report
        residual = float(np.linalg.norm(passive_unmet))
        accel_error = 0.0
        scale = max(1.0, float(np.linalg.norm(tau_w)))
        if residual > 1e-12 * scale:
            # Honest prediction: the plant's accelerations under the torque actually commanded (eq. (25)).
            qdd_w = constrained_accelerations(M_w, h_w, S_inv @ tau, A_w, drift, tolerance=tolerance).qdd
            accel_error = float(np.linalg.norm(S_inv @ (qdd_w - u_p)))
        report = ControllabilityReport(ok, margin, residual, tuple(int(i) for i in np.flatnonzero(mask)),
                                       float(controllability_tol), passive_unmet, accel_error)
    # Predicted constraint force for the commanded torque: (I - P) projection of eq. (19), i.e. eq. (32).
    F_w = Q_perp @ (S_inv @ tau - h_w - M_w @ qdd_w)
    lam = proj.A_pinv.T @ F_w
    return ProjectedControl(
        tau=tau,
        f_parallel=S @ f_par,
        f_perp=S @ f_perp,
        qdd=S_inv @ qdd_w,
        constraint_force=S @ F_w,
        multipliers=lam,
        multipliers_unique=proj.multipliers_unique,
        rank=proj.rank,
        dof=proj.degrees_of_freedom,
        controllability=report,
        force_error=force_error,
        task_conditioning=task_conditioning,
        forbidden_acceleration=forbidden,
    )


# ---------------------------------------------------------------------------------------------------- controller
class ProjectedInverseDynamicsController:
    """Stateful projected inverse-dynamics controller over a robot model and a changing constraint set.

    One object serves through every topology change: locking a joint mid-motion (:meth:`lock_joints`), adding
    or removing a loop closure (:meth:`add_constraint`, :meth:`remove_constraint`) changes only the rows of A
    the next :meth:`update` stacks (Aghili, Sec. 7: "a controller does not need to change its structure
    whenever the mechanical system changes its topology"). The only state is the constraint set and the
    integral of the constraint force error (n entries, so it survives topology changes).

    Not thread-safe (it owns the model's Pinocchio workspace); use one controller per thread.
    """

    def __init__(
        self,
        robot: RobotModel,
        constraints: ConstraintSet | Sequence[Constraint] = (),
        kp: object = 100.0,
        kd: object = 20.0,
        W: object | None = None,
        passive_joints: Sequence[str] = (),
        force_gain: float = 0.0,
        force_integral_gain: float = 0.0,
        tolerance: RankTolerance = DEFAULT_TOLERANCE,
        task: TaskCoordinates | None = None,
        task_kp: object | None = None,
        task_kd: object | None = None,
        controllability_tol: float = DEFAULT_CONTROLLABILITY_TOLERANCE,
        force_integral_limit: object | None = None,
    ) -> None:
        if not isinstance(robot, RobotModel):
            raise ProjectionInputError("robot: expected a RobotModel")
        self.robot = robot
        self._constraints = constraints if isinstance(constraints, ConstraintSet) else ConstraintSet(tuple(constraints))
        n = robot.nv
        self.kp = _gain(kp, n, "kp")
        self.kd = _gain(kd, n, "kd")
        self.W = None if W is None else checked_matrix(W, (n, n), "W")
        self.passive_indices = tuple(int(i) for i in robot.v_indices(list(passive_joints))) if passive_joints else ()
        if not (np.isfinite(force_gain) and force_gain >= 0 and np.isfinite(force_integral_gain) and force_integral_gain >= 0):
            raise ProjectionInputError("force_gain: expected finite gains >= 0")
        self.force_gain = float(force_gain)
        self.force_integral_gain = float(force_integral_gain)
        self.tolerance = tolerance
        self._force_integral = np.zeros(n)
        self.force_integral_limit = None if force_integral_limit is None else _gain(force_integral_limit, n,
                                                                                    "force_integral_limit")
        if not (np.isfinite(controllability_tol) and 0.0 < controllability_tol < 1.0):
            raise ProjectionInputError("controllability_tol: expected a margin in (0, 1)")
        self.controllability_tol = float(controllability_tol)
        self.task = task
        if task is not None:
            k = len(task.names)
            self.task_kp = _gain(np.mean(self.kp) if task_kp is None else task_kp, k, "task_kp")
            self.task_kd = _gain(np.mean(self.kd) if task_kd is None else task_kd, k, "task_kd")

    # -- constraint set ---------------------------------------------------------------------------------
    @property
    def constraints(self) -> ConstraintSet:
        return self._constraints

    def add_constraint(self, constraint: Constraint, q: object | None = None) -> None:
        """Activate ``constraint`` from the next cycle on (bound at ``q`` when given, e.g. a joint lock)."""
        c = constraint.bind(self.robot, self.robot.check_q(q)) if q is not None else constraint
        self._constraints = self._constraints.with_constraint(c)

    def remove_constraint(self, name: str) -> None:
        """Deactivate the constraint called ``name``."""
        self._constraints = self._constraints.without(name)

    def lock_joints(self, joints: str | Sequence[str], q: object, name: str = "") -> None:
        """Lock ``joints`` at their values in ``q`` (a brake engaged): their velocity rows join A."""
        self.add_constraint(JointLock(joints, name=name), q)

    def _clamped_integral(self, integral: np.ndarray) -> np.ndarray:
        """The integral with G_I int e_F inside +-``force_integral_limit`` per coordinate (anti-windup)."""
        if self.force_integral_limit is None or self.force_integral_gain <= 0.0:
            return integral
        bound = self.force_integral_limit / self.force_integral_gain
        return np.clip(integral, -bound, bound)

    # -- one cycle ----------------------------------------------------------------------------------------
    def update(
        self,
        q: object,
        v: object,
        q_desired: object,
        v_desired: object,
        a_desired: object,
        force_desired: object | None = None,
        force_measured: object | None = None,
        dt: float = 0.0,
        hold_integral: bool = False,
    ) -> ProjectedControl:
        """Torques for the measured state (q, v) tracking (q_d, q'_d, q''_d) [rad, rad/s, rad/s^2].

        Joint-space form of eq. (46): the closed loop is P (e'' + K_D e' + K_P e) = 0 for the joint error, which
        is the designed linear error dynamics only while P is constant (see :meth:`update_task`).
        With ``force_desired`` (F_d = A^T lambda_d, n entries) the constraint force loop (51)-(52) runs; its
        integral advances by ``dt`` [s] with the error F_d - ``force_measured``, unless ``hold_integral`` (the
        previous command was saturated: anti-windup, see the module docstring).
        """
        r = self.robot
        qq, vv = r.check_q(q), r.check_v(v)
        e = r.difference(qq, r.check_q(q_desired, "q_desired"))
        ed = r.check_v(v_desired, "v_desired") - vv
        a = r.check_v(a_desired, "a_desired")
        return self._law(qq, vv, e, ed, a, None, force_desired, force_measured, 0.0 if hold_integral else dt)

    def update_task(
        self,
        q: object,
        v: object,
        theta_desired: object,
        theta_dot_desired: object,
        theta_ddot_desired: object,
        force_desired: object | None = None,
        force_measured: object | None = None,
        dt: float = 0.0,
        hold_integral: bool = False,
    ) -> ProjectedControl:
        """Torques tracking theta_d(t) of the task coordinates given at construction (eqs. (40)-(46)).

        Closed loop: e'' + G_D e' + G_P e = 0 for e = theta_d - theta(q) (Theorem 4), with G_P = ``task_kp``,
        G_D = ``task_kd``, as long as theta parametrizes the constrained motion (``task_conditioning`` > 0).
        ``hold_integral``: as in :meth:`update`.
        """
        if self.task is None:
            raise ProjectionInputError("task: the controller was built without task coordinates")
        r = self.robot
        qq, vv = r.check_q(q), r.check_v(v)
        demand, _ = task_demand(self.task, r, qq, vv, theta_desired, theta_dot_desired, theta_ddot_desired,
                                self.task_kp, self.task_kd)
        z = np.zeros(r.nv)
        return self._law(qq, vv, z, z, z, demand, force_desired, force_measured, 0.0 if hold_integral else dt)

    def _law(self, qq: np.ndarray, vv: np.ndarray, e: np.ndarray, ed: np.ndarray, a: np.ndarray,
             task: TaskDemand | None, force_desired: object | None, force_measured: object | None,
             dt: float) -> ProjectedControl:
        r = self.robot
        integral = None
        if force_desired is not None:
            Fd = r.check_v(force_desired, "force_desired")
            Fm = Fd if force_measured is None else r.check_v(force_measured, "force_measured")
            if dt > 0:
                ef = Fd - Fm
                if self.passive_indices:  # integrate only what the passive joints let the force reach (no windup)
                    ef = achievable_force_projector(
                        null_space_projector(self._constraints.jacobian(r, qq), r.nv, self.tolerance).range_basis,
                        self.passive_indices) @ ef
                self._force_integral = self._clamped_integral(self._force_integral + dt * ef)
            integral = self._force_integral
        return projected_inverse_dynamics(
            r.mass_matrix(qq),
            r.bias_forces(qq, vv),
            self._constraints.jacobian(r, qq),
            self._constraints.drift(r, qq, vv),
            e,
            ed,
            a,
            self.kp,
            self.kd,
            W=self.W,
            passive=self.passive_indices,
            force_desired=force_desired,
            force_measured=force_measured,
            force_integral=integral,
            force_gain=self.force_gain,
            force_integral_gain=self.force_integral_gain,
            tolerance=self.tolerance,
            controllability_tol=self.controllability_tol,
            task=task,
        )

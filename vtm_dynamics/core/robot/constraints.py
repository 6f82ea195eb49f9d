"""Constraints in velocity coordinates: rows J(q) of J v = 0 and their drift J'(q, v) v (Müller 2026, eqs. (3)-(4)).

Every constraint gives, for a model with ``nv`` velocities:

* ``jacobian(robot, q)`` -- the m x nv rows J(q) of the velocity constraint J(q) v = 0;
* ``drift(robot, q, v)`` -- the m-vector J'(q, v) v, so that the acceleration constraint reads J a + J' v = 0
  (Müller 2026, eq. (4)); it is the constraint acceleration obtained with a = 0;
* ``residual(robot, q)`` -- a position-level residual that vanishes iff a holonomic constraint is satisfied
  (``None`` for Pfaffian/nonholonomic rows, which have no position form);
* ``bind(robot, q)`` -- the constraint with any reference value recorded at q (a joint lock remembers its lock
  angle); constraints without reference values return themselves.

Rows of loop closures and knife edges are expressed in the world frame at the pair points (Pinocchio
LOCAL_WORLD_ALIGNED Jacobians of the two pair frames); joint locks are unit rows. All classes are frozen dataclasses
and hold no model state, so one constraint object can be used with any copy of the same ``RobotModel``.

Units: rows of angular type are in rad/s per unit v, translational rows in m/s; drift in rad/s^2 or m/s^2.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.numerics import cross
from vtm_dynamics.core.robot.model import ModelError, RobotModel
from vtm_dynamics.core.robot.urdf_extension import LOOP_CLOSURE_ROWS, WORLD_LINK, KnifeEdgeSpec, LoopClosureSpec, Pose


class ConstraintError(ValueError):
    """A constraint is ill-defined for the given model or state (unknown joint/link, missing lock angle...)."""


# ---------------------------------------------------------------------------------------------------- joint locks
@dataclass(frozen=True)
class JointLock:
    """Lock of one or several joints: their velocities are zero (Müller 2026, eq. (39): J = unit rows).

    ``joints`` are movable joint names; ``lock_q`` (set by :meth:`bind`) holds the locked configuration values of
    the joints' q slices, concatenated in ``joints`` order, and is what :meth:`residual` measures against.
    One row per joint velocity (a continuous joint gives one row, its configuration has two entries).
    """

    joints: tuple[str, ...]
    lock_q: tuple[float, ...] | None = None
    name: str = ""

    holonomic = True

    def __init__(self, joints: str | Sequence[str], lock_q: Sequence[float] | None = None, name: str = "") -> None:
        names = (joints,) if isinstance(joints, str) else tuple(joints)
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ConstraintError("joints: expected one or more joint names")
        if len(set(names)) != len(names):
            raise ConstraintError(f"joints: repeated joint names in {names}")
        object.__setattr__(self, "joints", names)
        object.__setattr__(self, "lock_q", None if lock_q is None else tuple(float(x) for x in lock_q))
        object.__setattr__(self, "name", name or "lock(" + ",".join(names) + ")")

    def v_indices(self, robot: RobotModel) -> np.ndarray:
        try:
            return robot.v_indices(self.joints)
        except ModelError as err:
            raise ConstraintError(f"JointLock.joints: {err}") from None

    def _q_indices(self, robot: RobotModel) -> np.ndarray:
        idx: list[int] = []
        for n in self.joints:
            s = robot.q_slice(n)
            idx.extend(range(s.start, s.stop))
        return np.array(idx, dtype=int)

    def dim(self, robot: RobotModel) -> int:
        return len(self.v_indices(robot))

    def jacobian(self, robot: RobotModel, q: np.ndarray) -> np.ndarray:
        idx = self.v_indices(robot)
        J = np.zeros((len(idx), robot.nv))
        J[np.arange(len(idx)), idx] = 1.0
        return J

    def drift(self, robot: RobotModel, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        return np.zeros(self.dim(robot))

    def bind(self, robot: RobotModel, q: np.ndarray) -> "JointLock":
        """The same lock with the lock angles taken from q [rad, m]."""
        q = robot.check_q(q)
        return JointLock(self.joints, q[self._q_indices(robot)], self.name)

    def residual(self, robot: RobotModel, q: np.ndarray) -> np.ndarray:
        """Joint displacement from the lock angle, one entry per locked velocity [rad, m]."""
        if self.lock_q is None:
            raise ConstraintError(f"{self.name}: lock angle not recorded (call bind(robot, q) at the lock event)")
        q = robot.check_q(q)
        qidx = self._q_indices(robot)
        if len(qidx) != len(self.lock_q):
            raise ConstraintError(f"{self.name}: lock_q has {len(self.lock_q)} entries, the joints have {len(qidx)}")
        q_ref = q.copy()
        q_ref[qidx] = self.lock_q
        return robot.difference(q_ref, q)[self.v_indices(robot)]


# ---------------------------------------------------------------------------------------------------- pair frames
@dataclass(frozen=True)
class _PairKinematics:
    """World position/rotation, world-aligned Jacobians, velocities and (a = 0) accelerations of a pair frame."""

    p: np.ndarray
    R: np.ndarray
    Jv: np.ndarray
    Jw: np.ndarray
    vel: np.ndarray
    omega: np.ndarray
    acc: np.ndarray  # classical acceleration of the point with a = 0 (world) = Jv' v
    alpha: np.ndarray  # angular acceleration with a = 0 (world) = Jw' v


def _frame_on_link(robot: RobotModel, link: str, origin: Pose) -> tuple[int, pin.SE3]:
    """(joint id, placement of the pair frame in that joint's frame) for a pair frame given on a URDF link."""
    if link == WORLD_LINK and not robot.model.existFrame(WORLD_LINK):
        return 0, pin.SE3(origin.rotation(), np.array(origin.xyz))
    try:
        fid = robot.frame_id(link)
    except ModelError as err:
        raise ConstraintError(f"link: {err}") from None
    frame = robot.model.frames[fid]
    return int(frame.parentJoint), frame.placement * pin.SE3(origin.rotation(), np.array(origin.xyz))


def _pair_kinematics(robot: RobotModel, jid: int, jMp: pin.SE3, nv: int) -> _PairKinematics:
    """Needs forwardKinematics(q, v, 0) and computeJointJacobians(q) already run on robot.data."""
    data = robot.data
    oMp = data.oMi[jid] * jMp
    R = np.array(oMp.rotation)
    if jid == 0:
        z3 = np.zeros(3)
        Z = np.zeros((3, nv))
        return _PairKinematics(np.array(oMp.translation), R, Z, Z.copy(), z3, z3, z3, z3)
    J_local = pin.getJointJacobian(robot.model, data, jid, pin.ReferenceFrame.LOCAL)
    Jp = jMp.toActionMatrixInverse() @ J_local  # pair-frame local Jacobian
    v_p = jMp.actInv(data.v[jid])
    a_p = jMp.actInv(data.a[jid])
    w_loc = np.array(v_p.angular)
    acc_loc = np.array(a_p.linear) + cross(w_loc, np.array(v_p.linear))
    return _PairKinematics(
        p=np.array(oMp.translation),
        R=R,
        Jv=R @ Jp[:3],
        Jw=R @ Jp[3:],
        vel=R @ np.array(v_p.linear),
        omega=R @ w_loc,
        acc=R @ acc_loc,
        alpha=R @ np.array(a_p.angular),
    )


@lru_cache(maxsize=256)
def _perpendicular_basis(axis: tuple[float, float, float]) -> np.ndarray:
    """Two unit vectors (rows) completing ``axis`` to a right-handed orthonormal basis (n1, n2, axis); computed once
    per axis (read-only: it is shared between calls)."""
    a = np.array(axis, dtype=float)
    a /= np.linalg.norm(a)
    helper = np.array([1.0, 0.0, 0.0]) if abs(a[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    n1 = cross(a, helper)
    n1 /= np.linalg.norm(n1)
    n2 = cross(a, n1)
    basis = np.vstack([n1, n2])
    basis.flags.writeable = False
    return basis


def _rows(robot: RobotModel, q: np.ndarray, v: np.ndarray | None, pairs) -> list[_PairKinematics]:
    q = robot.check_q(q)
    vv = np.zeros(robot.nv) if v is None else robot.check_v(v)
    pin.forwardKinematics(robot.model, robot.data, q, vv, np.zeros(robot.nv))
    pin.computeJointJacobians(robot.model, robot.data, q)
    return [_pair_kinematics(robot, jid, jMp, robot.nv) for jid, jMp in pairs]


@dataclass(frozen=True)
class LoopClosure:
    """A holonomic pair between two links that the kinematic tree does not contain (Müller 2026, Sec. 2/3).

    Built from a ``<loop_closure>`` extension element (``LoopClosureSpec``). Pair frame A sits on the parent link
    at ``parent_origin``, pair frame B on the child link at ``child_origin``; assembled, they coincide up to the
    pair's own motion about/along ``axis`` (given in frame A). Rows, all in world-aligned coordinates:

    * spherical (3): v_B - v_A = 0 (velocities of the two pair points);
    * revolute (5): v_B - v_A = 0 and n_k . (w_B - w_A) = 0 for the two directions n_k of A perpendicular to axis;
    * prismatic (5): w_B - w_A = 0 and d/dt [n_k . (p_B - p_A)] = 0 with n_k fixed in A, perpendicular to axis;
    * cylindrical (4): d/dt [n_k . (p_B - p_A)] = 0 and n_k . (w_B - w_A) = 0 (slides along and turns about axis);
    * point_on_line (2): d/dt [n_k . (p_B - p_A)] = 0: point B stays on the line through A along axis, B turns freely
      (Aghili's slider-crank: the piston pin on its guide line);
    * point_on_plane (1): d/dt [a . (p_B - p_A)] = 0 with a = axis (the plane normal) fixed in A: point B stays in
      the plane through A normal to axis (the slider of a planar slider-crank as one row);
    * fixed (6): v_B - v_A = 0 and w_B - w_A = 0.

    The translational rows of the axis-type pairs are d/dt [d_k . (p_B - p_A)] = d_k . (v_B - v_A) + (d_k x (p_B -
    p_A)) . w_A for directions d_k fixed in A (:func:`_rows_along`); they hold for any distance p_B - p_A along the
    free directions, so a point-contact pair is exact wherever B sits on the line or plane.

    Drift terms are the exact time derivatives of these rows along the motion with a = 0, computed from the
    frames' classical accelerations (Pinocchio forward kinematics with zero joint acceleration).
    Residuals: p_B - p_A (translational rows; for the axis-type pairs d_k . (p_B - p_A)), R_A log3(R_A^T R_B)
    (fixed, prismatic), and (-n_2 . a_B, n_1 . a_B) with a_B the axis carried by B (revolute, cylindrical) -- zero iff
    the pair is
    assembled, ordered and oriented so that at the assembled pose d(residual)/dt = J v (a Newton step with J
    removes position drift).
    """

    spec: LoopClosureSpec

    holonomic = True

    @property
    def name(self) -> str:
        return self.spec.name

    def _pairs(self, robot: RobotModel):
        return [
            _frame_on_link(robot, self.spec.parent, self.spec.parent_origin),
            _frame_on_link(robot, self.spec.child, self.spec.child_origin),
        ]

    def dim(self, robot: RobotModel) -> int:
        return LOOP_CLOSURE_ROWS[self.spec.type]

    def _directions(self, A: _PairKinematics) -> np.ndarray:
        """World rows d_k, fixed in pair frame A, of the translational rows of the axis-type pairs."""
        if self.spec.type == "point_on_plane":
            return (A.R @ np.array(self.spec.axis))[None, :] / np.linalg.norm(self.spec.axis)
        return self._basis(A)

    def _basis(self, A: _PairKinematics) -> np.ndarray:
        """Rows n_1, n_2 (world) of two directions fixed in pair frame A and perpendicular to the axis."""
        return _perpendicular_basis(tuple(float(x) for x in self.spec.axis)) @ A.R.T

    def jacobian(self, robot: RobotModel, q: np.ndarray) -> np.ndarray:
        A, B = _rows(robot, q, None, self._pairs(robot))
        kind = self.spec.type
        dJv, dJw = B.Jv - A.Jv, B.Jw - A.Jw
        if kind == "spherical":
            return dJv
        if kind == "fixed":
            return np.vstack([dJv, dJw])
        N = self._basis(A)
        if kind == "revolute":
            return np.vstack([dJv, N @ dJw])
        # axis-type pairs: d/dt[n . d] = n . (v_B - v_A) + (w_A x n) . d = n . dv + (n x d) . w_A
        D = self._directions(A)
        rows = D @ dJv + cross(D, B.p - A.p) @ A.Jw
        if kind == "prismatic":
            return np.vstack([rows, dJw])
        if kind == "cylindrical":
            return np.vstack([rows, N @ dJw])
        return rows  # point_on_line, point_on_plane

    def drift(self, robot: RobotModel, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        A, B = _rows(robot, q, v, self._pairs(robot))
        kind = self.spec.type
        dacc = B.acc - A.acc
        dw = B.omega - A.omega
        dalpha = B.alpha - A.alpha
        if kind == "spherical":
            return dacc
        if kind == "fixed":
            return np.concatenate([dacc, dalpha])
        N = self._basis(A)
        Ndot = cross(A.omega, N)  # n_k fixed in A rotate with w_A
        if kind == "revolute":
            return np.concatenate([dacc, N @ dalpha + Ndot @ dw])
        d = B.p - A.p
        dd = B.vel - A.vel
        # d2/dt2 [n . d] with a = 0 = n . dacc + 2 n' . dd + n'' . d, n'' = alpha_A x n + w_A x (w_A x n)
        D = self._directions(A)
        Ddot = cross(A.omega, D)
        Dddot = cross(A.alpha, D) + cross(A.omega, Ddot)
        translational = D @ dacc + 2.0 * Ddot @ dd + Dddot @ d
        if kind == "prismatic":
            return np.concatenate([translational, dalpha])
        if kind == "cylindrical":
            return np.concatenate([translational, N @ dalpha + Ndot @ dw])
        return translational  # point_on_line, point_on_plane

    def bind(self, robot: RobotModel, q: np.ndarray) -> "LoopClosure":
        return self

    def residual(self, robot: RobotModel, q: np.ndarray) -> np.ndarray:
        A, B = _rows(robot, q, None, self._pairs(robot))
        kind = self.spec.type
        d = B.p - A.p
        # Rotation error as a world-aligned rotation vector: its derivative at the assembled pose is w_B - w_A,
        # the same rows as the Jacobian (the frame-A vector log3(R_A^T R_B) would be rotated by R_A^T).
        rot = A.R @ np.array(pin.log3(A.R.T @ B.R))
        if kind == "spherical":
            return d
        if kind == "fixed":
            return np.concatenate([d, rot])
        N = self._basis(A)
        # With (n1, n2, a) right-handed: d/dt(n1 . a_B) = n2 . (w_B - w_A) and d/dt(n2 . a_B) = -n1 . (w_B - w_A)
        # at the assembled pose, so (-n2 . a_B, n1 . a_B) differentiates to the Jacobian rows N (w_B - w_A).
        a_B = B.R @ np.array(self.spec.axis)
        tilt = np.array([-(N[1] @ a_B), N[0] @ a_B])
        if kind == "revolute":
            return np.concatenate([d, tilt])
        along = self._directions(A) @ d
        if kind == "prismatic":
            return np.concatenate([along, rot])
        if kind == "cylindrical":
            return np.concatenate([along, tilt])
        return along  # point_on_line, point_on_plane


@dataclass(frozen=True)
class KnifeEdge:
    """Pfaffian (nonholonomic) row: the point ``spec.point`` of ``spec.link`` has no velocity along ``spec.axis``.

    Row: a_w . v_P with a_w = R_link a the blocked direction in the world (a knife edge or a non-slipping wheel).
    Drift: d/dt(a_w . v_P) at zero acceleration = a_w . acc_P + (w x a_w) . v_P. No position residual.
    """

    spec: KnifeEdgeSpec

    holonomic = False

    @property
    def name(self) -> str:
        return self.spec.name

    def _pair(self, robot: RobotModel):
        return [_frame_on_link(robot, self.spec.link, Pose(xyz=self.spec.point))]

    def dim(self, robot: RobotModel) -> int:
        return 1

    def jacobian(self, robot: RobotModel, q: np.ndarray) -> np.ndarray:
        (P,) = _rows(robot, q, None, self._pair(robot))
        a = P.R @ np.array(self.spec.axis)
        return (a @ P.Jv)[None, :]

    def drift(self, robot: RobotModel, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        (P,) = _rows(robot, q, v, self._pair(robot))
        a = P.R @ np.array(self.spec.axis)
        return np.array([a @ P.acc + cross(P.omega, a) @ P.vel])

    def bind(self, robot: RobotModel, q: np.ndarray) -> "KnifeEdge":
        return self

    def residual(self, robot: RobotModel, q: np.ndarray) -> None:
        return None


Constraint = JointLock | LoopClosure | KnifeEdge


def constraints_from_extension(robot: RobotModel) -> tuple[Constraint, ...]:
    """All constraints that the URDF extension of ``robot`` declares: loop closures, then knife edges.

    ``<driving_constraint>`` elements prescribe a joint's motion (rheonomic, J v = s'(t) rather than 0) and are
    not returned here; a drive held at a constant set point is ``JointLock(joint)``.
    """
    ext = robot.extension
    if ext is None:
        return ()
    return tuple(LoopClosure(s) for s in ext.loop_closures) + tuple(KnifeEdge(s) for s in ext.knife_edges)

"""Independent (task) coordinates theta(q) of a constrained robot and the motion demand of eq. (46) in them.

Aghili, Sec. 7.1: a mechanism with k = n - rank(A) degrees of freedom has k independent coordinates theta, with
q' = Lambda theta' and q'' = Lambda theta'' + Lambda' theta' (eqs. (40)-(41)) and R(Lambda) = N(A) (eq. (43)).
The control law (45)-(46) with u_p = Lambda' theta' + Lambda (theta''_d + G_D e' + G_P e), e = theta_d - theta,
gives the closed loop theta-error dynamics e'' + G_D e' + G_P e = 0 exactly (Theorem 4), whatever the motion of
the projector P(q) - unlike the joint-space form u_p = C q' + P a_d, whose closed loop is only the projected
P (e_q'' + K_D e_q' + K_P e_q) = 0 of the joint error and is not the designed linear system when P moves.

Here theta is given by its values and its Jacobian J = d theta / d q (k x n, on velocities) and bias J' q'
(k). On the constraint manifold theta' = J q', so Lambda is the right inverse of J restricted to N(A):

    Lambda = V2 (J V2)^-1        (V2 an orthonormal basis of N(A); A Lambda = 0, J Lambda = I),

and u_p is the unique acceleration with A u_p = -A' q' and J u_p = a_theta - J' q' (derived from eqs. (13),
(41) and theta'' = J q'' + J' q'; the paper does not spell out Lambda for an implicit theta(q)):

    u_p = C q' + Lambda (a_theta - J' q' - J C q'),  C q' = -A^+ A' q' (eq. (16)).

Maps provided for common choices: :class:`SelectedJoints` (theta = chosen joint coordinates) and
:class:`FramePoint` (position components of a point on a frame and, for planar motion, the frame's rotation
angle about one world axis) through Pinocchio.

Units: SI (m, rad, s); a_theta [m/s^2 or rad/s^2 per component].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.projection.projector import NullSpaceProjector, ProjectionInputError
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.validation import finite_vector

#: Task coordinates whose Jacobian on N(A) is this ill-conditioned (smallest over largest singular value of
#: J V2) are reported as singular: Lambda then amplifies by more than 1e8.
TASK_SINGULAR = 1e-8


@dataclass(frozen=True)
class TaskDemand:
    """The motion demand of one cycle in task coordinates (eq. (46)).

    Attributes:
        jacobian: J = d theta / d q on velocities (k x n) [m/rad, 1].
        bias: J' q' (k) [m/s^2, rad/s^2].
        acceleration: a_theta = theta''_d + G_D e' + G_P e (k) [m/s^2, rad/s^2].
    """

    jacobian: np.ndarray
    bias: np.ndarray
    acceleration: np.ndarray

    def __post_init__(self) -> None:
        J = np.asarray(self.jacobian, dtype=float)
        if J.ndim != 2 or J.shape[0] == 0 or not np.all(np.isfinite(J)):
            raise ProjectionInputError("task.jacobian: expected a finite k x n matrix with k >= 1")
        k = J.shape[0]
        object.__setattr__(self, "jacobian", J)
        object.__setattr__(self, "bias", finite_vector(self.bias, k, "task.bias", ProjectionInputError))
        object.__setattr__(self, "acceleration",
                           finite_vector(self.acceleration, k, "task.acceleration", ProjectionInputError))


@dataclass(frozen=True)
class TaskAcceleration:
    """u_p of eq. (46) and how well theta parametrizes the constrained motion here.

    Attributes:
        u_p: the designed generalized acceleration (n).
        conditioning: sigma_min / sigma_max of J V2 (1 = well posed, 0 = theta does not fix the motion);
            1.0 when N(A) = {0}.
        square: True iff k equals the instantaneous degrees of freedom n - rank(A) (Lambda exists as in eq. (40)).
    """

    u_p: np.ndarray
    conditioning: float
    square: bool


def task_acceleration(projector: NullSpaceProjector, normal_acceleration: np.ndarray, demand: TaskDemand,
                      S_inv: np.ndarray | None = None) -> TaskAcceleration:
    """u_p = C q' + Lambda (a_theta - J' q' - J C q'), Lambda = V2 (J V2)^+ (see the module docstring).

    ``projector`` and ``normal_acceleration`` (C q') are those of the (possibly weighted, x_W = W^{1/2} x)
    problem; ``S_inv`` = W^{-1/2} maps its coordinates back (J_W = J W^{-1/2}). With k != n - rank(A) (a
    singular configuration adds a degree of freedom, or theta is not a full set) the least-squares, least-norm
    Lambda of the pseudo-inverse is used and ``square`` is False.
    """
    n = projector.n
    J = demand.jacobian
    if J.shape[1] != n:
        raise ProjectionInputError(f"task.jacobian: expected {n} columns, got {J.shape[1]}")
    Jw = J if S_inv is None else J @ S_inv
    V2 = projector.null_basis
    k, dof = J.shape[0], V2.shape[1]
    target = demand.acceleration - demand.bias - Jw @ normal_acceleration
    if dof == 0:
        return TaskAcceleration(np.array(normal_acceleration, dtype=float), 1.0, k == 0)
    JV = Jw @ V2
    U, s, Vt = np.linalg.svd(JV, full_matrices=False)
    cut = TASK_SINGULAR * float(s[0]) if s.size and s[0] > 0 else np.inf
    keep = s > cut
    coeff = (Vt[keep].T / s[keep]) @ (U[:, keep].T @ target)
    conditioning = float(s[-1] / s[0]) if s.size and s[0] > 0 and k == dof else 0.0
    return TaskAcceleration(normal_acceleration + V2 @ coeff, conditioning, k == dof)


def wrap_angles(e: np.ndarray, angular: np.ndarray) -> np.ndarray:
    """Angle components of an error wrapped to [-pi, pi) [rad]; other components unchanged."""
    out = np.array(e, dtype=float)
    out[angular] = (out[angular] + np.pi) % (2.0 * np.pi) - np.pi
    return out


class TaskCoordinates(Protocol):
    """A map theta(q) with its Jacobian and bias on a ``RobotModel`` (k components)."""

    names: tuple[str, ...]
    angular: np.ndarray  # k booleans: which components are angles (errors are wrapped)

    def value(self, robot: RobotModel, q: np.ndarray) -> np.ndarray: ...

    def jacobian(self, robot: RobotModel, q: np.ndarray) -> np.ndarray: ...

    def bias(self, robot: RobotModel, q: np.ndarray, v: np.ndarray) -> np.ndarray: ...

    def evaluate(self, robot: RobotModel, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(theta, J, J' q') in one pass."""
        ...


class SelectedJoints:
    """theta = the coordinates of chosen one-degree-of-freedom joints (revolute, prismatic) [rad, m]."""

    def __init__(self, robot: RobotModel, joints: Sequence[str]) -> None:
        if not joints or len(set(joints)) != len(joints):
            raise ProjectionInputError("task.joints: expected distinct joint names")
        self.names = tuple(joints)
        self._v = np.array(robot.v_indices(list(joints)), dtype=int)
        self._q = []
        for j in joints:
            qs = robot.q_slice(j)
            if qs.stop - qs.start != 1:
                raise ProjectionInputError(f"task.joints: {j!r} is not a one-coordinate joint")
            self._q.append(qs.start)
        self._q = np.array(self._q, dtype=int)
        self.angular = np.array([not robot.joint(j).prismatic for j in joints], dtype=bool)
        self._n = robot.nv

    def value(self, robot: RobotModel, q: np.ndarray) -> np.ndarray:
        return np.asarray(q, dtype=float)[self._q]

    def jacobian(self, robot: RobotModel, q: np.ndarray) -> np.ndarray:
        J = np.zeros((len(self._v), self._n))
        J[np.arange(len(self._v)), self._v] = 1.0
        return J

    def bias(self, robot: RobotModel, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        return np.zeros(len(self._v))

    def evaluate(self, robot: RobotModel, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.value(robot, q), self.jacobian(robot, q), self.bias(robot, q, v)


_POSITION = {"x": 0, "y": 1, "z": 2}
_ANGLE = {"angle_x": 0, "angle_y": 1, "angle_z": 2}


class FramePoint:
    """theta = world position components of a point fixed on a frame, and rotation angles about world axes.

    ``components`` from ``x``, ``y``, ``z`` [m] (of the point ``offset`` [m] given in the frame) and ``angle_x``,
    ``angle_y``, ``angle_z`` [rad]. An angle component is the rotation of the frame about that fixed world axis,
    measured from the frame's orientation at q = neutral; it is an exact coordinate only while the frame
    rotates about that axis alone (planar mechanisms) - in 3-D rotation, components of the angular velocity are
    not derivatives of any angle, and a pose task needs a different parametrization.
    """

    def __init__(self, robot: RobotModel, frame: str, components: Sequence[str],
                 offset: Sequence[float] = (0.0, 0.0, 0.0)) -> None:
        if not components or len(set(components)) != len(components):
            raise ProjectionInputError("task.components: expected distinct components")
        bad = [c for c in components if c not in _POSITION and c not in _ANGLE]
        if bad:
            raise ProjectionInputError(f"task.components: unknown {bad} (x, y, z, angle_x, angle_y, angle_z)")
        self.frame = frame
        self._fid = robot.frame_id(frame)
        self.names = tuple(f"{frame}.{c}" for c in components)
        self.components = tuple(components)
        self.angular = np.array([c in _ANGLE for c in components], dtype=bool)
        self.offset = finite_vector(offset, 3, "task.offset", ProjectionInputError)
        self._R0 = robot.frame_placement(robot.neutral(), self._fid).rotation.copy()

    def _point_placement(self, robot: RobotModel, q: np.ndarray) -> pin.SE3:
        return robot.frame_placement(q, self._fid) * pin.SE3(np.eye(3), self.offset)

    def value(self, robot: RobotModel, q: np.ndarray) -> np.ndarray:
        X = self._point_placement(robot, q)
        R = X.rotation @ self._R0.T  # rotation since the neutral configuration, in world axes
        out = []
        for c in self.components:
            if c in _POSITION:
                out.append(X.translation[_POSITION[c]])
            else:
                a = _ANGLE[c]
                i, j = (a + 1) % 3, (a + 2) % 3
                out.append(np.arctan2(R[j, i], R[i, i]))
        return np.array(out)

    def _point_jacobian(self, robot: RobotModel, q: np.ndarray) -> np.ndarray:
        J = robot.frame_jacobian(q, self._fid, "local_world_aligned")  # 6 x n at the frame origin
        r = robot.frame_placement(q, self._fid).rotation @ self.offset
        lin = J[:3] - pin.skew(r) @ J[3:]  # v_point = v_origin + omega x r
        return np.vstack([lin, J[3:]])

    def _rows(self) -> list[int]:
        return [_POSITION[c] if c in _POSITION else 3 + _ANGLE[c] for c in self.components]

    def jacobian(self, robot: RobotModel, q: np.ndarray) -> np.ndarray:
        return self._point_jacobian(robot, q)[self._rows()]

    def bias(self, robot: RobotModel, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """J' q': the point's classical acceleration at zero joint acceleration [m/s^2, rad/s^2]."""
        a0 = robot.frame_acceleration(q, v, np.zeros(robot.nv), self._fid, "local_world_aligned", classical=True)
        w = robot.frame_velocity(q, v, self._fid, "local_world_aligned")[3:]
        r = robot.frame_placement(q, self._fid).rotation @ self.offset
        lin = a0[:3] + np.cross(a0[3:], r) + np.cross(w, np.cross(w, r))
        return np.concatenate([lin, a0[3:]])[self._rows()]

    def evaluate(self, robot: RobotModel, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(theta, J, J' q') with one kinematics pass of Pinocchio (the control cycle's path)."""
        model, data = robot.model, robot.data
        pin.forwardKinematics(model, data, q, v, np.zeros(robot.nv))
        pin.computeJointJacobians(model, data, q)
        X = pin.updateFramePlacement(model, data, self._fid)
        ref = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        J6 = pin.getFrameJacobian(model, data, self._fid, ref)
        a0 = pin.getFrameClassicalAcceleration(model, data, self._fid, ref).vector
        w = pin.getFrameVelocity(model, data, self._fid, ref).angular
        r = X.rotation @ self.offset
        J = np.vstack([J6[:3] - pin.skew(r) @ J6[3:], J6[3:]])
        lin = a0[:3] + np.cross(a0[3:], r) + np.cross(w, np.cross(w, r))
        bias = np.concatenate([lin, a0[3:]])
        R = X.rotation @ self._R0.T
        value = []
        for c in self.components:
            if c in _POSITION:
                value.append(X.translation[_POSITION[c]] + r[_POSITION[c]])
            else:
                a = _ANGLE[c]
                i, j = (a + 1) % 3, (a + 2) % 3
                value.append(np.arctan2(R[j, i], R[i, i]))
        rows = self._rows()
        return np.array(value), J[rows], bias[rows]


def task_demand(coords: TaskCoordinates, robot: RobotModel, q: np.ndarray, v: np.ndarray, theta_d: object,
                theta_dot_d: object, theta_ddot_d: object, kp: np.ndarray,
                kd: np.ndarray) -> tuple[TaskDemand, np.ndarray]:
    """The demand of eq. (46) at (q, v) for the desired (theta_d, theta'_d, theta''_d); returns it and e."""
    k = len(coords.names)
    theta, J, bias = coords.evaluate(robot, q, v)
    e = wrap_angles(finite_vector(theta_d, k, "theta_desired", ProjectionInputError) - theta, coords.angular)
    ed = finite_vector(theta_dot_d, k, "theta_dot_desired", ProjectionInputError) - J @ v
    a = finite_vector(theta_ddot_d, k, "theta_ddot_desired", ProjectionInputError) + kd * ed + kp * e
    return TaskDemand(J, bias, a), e

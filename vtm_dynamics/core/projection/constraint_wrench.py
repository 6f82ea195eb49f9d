"""Constraint wrenches of loop closures as generalized constraint forces F (Aghili, eqs. (19), (32), (51)-(53)).

Force control (eqs. (51)-(52)) sets the generalized constraint force F = A^T lambda of M q'' + h = f - F. A user
states it per loop closure as a wrench w = [f; m] (force [N] and moment [N m], world axes) that the closure
exerts on its child link at the child's pair point, the parent receiving -w at the coincident point of its own
body. With D = J_B - J_A (the world-aligned 6 x n Jacobians [v; w] of that point fixed on the child and on the
parent, so D v is the relative twist of the pair), every closure's rows read A_c = B^T D, B the 6 x k blocked
directions (unit force directions for translational rows, unit moment directions for rotational ones; for the
sliding types the parent point is the one coincident with the child's pair point, which is what the extra
(n x d) . w_A term of their rows says). The closure's multipliers and generalized force are then

    lambda_c = B^T w = A_c D^+ w,   F_c(w) = -A_c^T lambda_c   (the sign of eq. (19): F enters as -F),

(B^T = A_c D^+ on R(D); components of w outside R(D) do no work on any motion of the mechanism). Components
along free directions of the pair are dropped; ``transmitted`` reports the fraction of w that the closure
carries. :func:`closure_wrench` is the inverse (least-norm w for a given F_c, unique when the rows are
independent).

Units: SI (N, N m).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.projection.projector import ProjectionInputError
from vtm_dynamics.core.robot.constraints import LoopClosure
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.robot.urdf_extension import WORLD_LINK
from vtm_dynamics.core.validation import finite_vector


def _point_jacobian(robot: RobotModel, link: str, point: np.ndarray, q: np.ndarray) -> np.ndarray:
    """6 x n world-aligned Jacobian [v; w] of the point of ``link``'s body that is at world position ``point``."""
    if link == WORLD_LINK and not robot.model.existFrame(WORLD_LINK):
        return np.zeros((6, robot.nv))
    fid = robot.frame_id(link)
    J = robot.frame_jacobian(q, fid, "local_world_aligned")
    r = point - robot.frame_placement(q, fid).translation
    return np.vstack([J[:3] - pin.skew(r) @ J[3:], J[3:]])


def _pair_point(robot: RobotModel, closure: LoopClosure, q: np.ndarray) -> np.ndarray:
    spec = closure.spec
    X = robot.frame_placement(q, spec.child) * pin.SE3(spec.child_origin.rotation(), np.array(spec.child_origin.xyz))
    return np.array(X.translation)


def wrench_map(robot: RobotModel, closure: LoopClosure, q: object) -> np.ndarray:
    """D = J_B - J_A at q: 6 x n, the relative twist of the pair per unit velocity (module docstring)."""
    qq = robot.check_q(q)
    p = _pair_point(robot, closure, qq)
    return _point_jacobian(robot, closure.spec.child, p, qq) - _point_jacobian(robot, closure.spec.parent, p, qq)


def _blocked_directions(robot: RobotModel, closure: LoopClosure, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(A_c, B^T = A_c D^+): the closure rows and the wrench components they carry (k x 6)."""
    Ac = closure.jacobian(robot, q)
    return Ac, Ac @ np.linalg.pinv(wrench_map(robot, closure, q), rcond=1e-10)


@dataclass(frozen=True)
class ClosureForce:
    """F_c of one closure wrench. ``force``: generalized constraint force (n) [N m, N]; ``multipliers``: the
    closure's lambda_c = B^T w (one per row); ``transmitted``: ||lambda_c|| / ||w|| (1: all of w is carried);
    ``exact``: every row's recovered direction B^T = A_c D^+ is a unit vector or zero (a vanishing or redundant
    row). False when a blocked direction is not a relative twist the open chain can produce (e.g. a point contact
    closing a chain with fewer coordinates than the pair's twist space): the map is then not the closure's."""

    force: np.ndarray
    multipliers: np.ndarray
    transmitted: float
    exact: bool


def constraint_force_of_wrench(robot: RobotModel, closure: LoopClosure, q: object, wrench: object) -> ClosureForce:
    """F_c(w) = -A_c^T A_c D^+ w (module docstring)."""
    w = finite_vector(wrench, 6, "wrench", ProjectionInputError)
    qq = robot.check_q(q)
    Ac, Bt = _blocked_directions(robot, closure, qq)
    lam = Bt @ w
    norm = float(np.linalg.norm(w))
    row_norms = np.linalg.norm(Bt, axis=1)
    exact = bool(np.all((row_norms < 1e-6) | (np.abs(row_norms - 1.0) < 1e-6)))
    return ClosureForce(-(Ac.T @ lam), lam, float(np.linalg.norm(lam) / norm) if norm > 0 else 1.0, exact)


def closure_wrench(robot: RobotModel, closure: LoopClosure, q: object, force: object) -> np.ndarray:
    """The wrench [f; m] [N, N m] a closure exerts on its child when it carries the generalized force
    ``force`` = F_c (least-norm multipliers when its rows are dependent)."""
    F = robot.check_v(force, "force")
    qq = robot.check_q(q)
    Ac, Bt = _blocked_directions(robot, closure, qq)
    lam = -np.linalg.pinv(Ac.T, rcond=1e-10) @ F
    return Bt.T @ lam

"""Joint reactions by the second-order Taylor formulation of Huang, Yan, Jeng & Cheing (seed paper 003).

Every moving link is a free rigid body (absolute coordinates, as in :mod:`absolute_coordinates`): centre of mass
``x`` [m], rotation ``R`` of the link frame, velocity ``v`` of the centre of mass [m/s], angular velocity ``ω``
[rad/s], all in world axes. The unknowns of one step Δt [s] are the reactions of every pair, held constant over
the step: ``λ_X`` are the components of the reaction wrench on the pair's child along the pair's constraint wrench
basis ``W`` (the same basis, labels and sign as the KKT reactions of :mod:`solvability`), applied at the pair point
p; the parent receives the opposite wrench (action = −reaction, eqs. (34)-(35), built in).

Per step (Fig. 7):

1. accelerations affine in λ: ``a = (F + Σ f)/m`` (eq. (9)), ``α = I_w⁻¹(τ + Σ(n + (p − x) × f) − ω × I_w ω)``
   (eqs. (10)-(11), written in world axes: I_w = R I' Rᵀ, so J' need not be diagonal);
2. second-order Taylor motion over Δt of every body-fixed point ``P = p + ṗ Δt + ½ p̈ Δt²`` (eqs. (12)-(13)) and
   body-fixed unit vector ``e + ė Δt + ½ ë Δt²`` (eqs. (18)-(19)); both affine in λ (eqs. (14), (20));
3. one scalar constraint at t + Δt per column of W, linearised in λ by dropping the λ·λ term (O(Δt⁴)), exactly as
   eqs. (26)-(27) drop Ĥ_i H_j:

   * force column n, pair without relative translation (spherical, revolute, fixed): ``n·(P_c − P_p) = 0`` with n
     fixed in the world over the step (eqs. (21)-(23); the spatial pairs keep all three world components, the
     planar ones the two in-plane ones, the same span as the paper's);
   * force column n, pair with relative translation (prismatic, cylindrical and the point-on-line/plane pairs):
     ``n_p·(P_c − P_p) = 0`` with n carried by the parent body; these are the two components of eq. (28)
     ``q_i × d = 0`` normal to the axis (eqs. (29)-(31)), i.e. the cross product's rank-2 part. For the point
     contacts P_c is the child's contact point (``child_origin``), where the reaction acts;
   * moment column m, pair with a free rotation axis u (revolute, cylindrical): ``(u × m)_p·u_c = 0``, the component
     of eq. (25) ``q_i × q_j = 0`` along m. Choice: of the three components of the cross product only the two normal
     to the axis are kept; the third is identically of second order and makes the paper's 3-row block singular;
   * moment column m otherwise (prismatic, fixed): ``a_p·(m × a)_c = 0`` with a ⟂ m, the dot-product condition
     eq. (32)-(33) (h_i·h_j = 0);
   * driving constraint (zero prescribed acceleration, as the KKT reactions use): ``u·(α_c − α_p) = 0``.

4. one linear system ``G λ = −g₀`` (eq. (36)), solved by SVD least squares; if G is rank-deficient at a step the
   minimum-norm λ is used, the step is counted in ``rank_deficient_steps``, and the pairs whose reactions are not
   unique (Wojtyra-Frączek solvability of the same C) are flagged ``unique = False`` and their non-unique
   components are reported empty (NaN), never silently picked;
5. advance (the paper says only "using Eqs. (5)-(10)"; our choice, second order per step and orthogonal):
   ``x ← x + vΔt + ½aΔt²``, ``v ← v + aΔt``, ``R ← exp([ωΔt + ½αΔt²]×) R`` (matches eq. (5.b) to O(Δt²)),
   ``ω ← ω + αΔt``.

Corrections (not in the paper; docs/reactions.md has the measurements):

* ``correction="project"``: after step 5 the twists are projected onto the velocity constraints in the
  kinetic-energy metric, ``ν ← ν − M⁻¹Cᵀ(C M⁻¹ Cᵀ)⁺ C ν``. Reason: step 3 zeroes the position gap at t + Δt but
  not its rate; the literal scheme maps the velocity gap ġ to −ġ − 2g/Δt every step, so it never decays;
* ``correction="heun"``: the velocity update of step 5 is the explicit Euler step v ← v + aΔt, first order, and it
  pumps energy into fast rotation (the Stewart platform diverges after 1.6 s at Δt = 2 ms). Heun's update
  v ← v + ½(a + a*)Δt, with a* from a second solve of eq. (36) at the predicted state, makes the motion second
  order; the projection above follows. The reactions stay first order in every variant: λ is the reaction held
  constant over [t, t + Δt], not its value at t.

Relation to the Lagrange/KKT formulation: divided by ½Δt², ``G`` tends to ``C M⁻¹ Cᵀ`` (the KKT Schur complement,
same M and C) as Δt → 0, and the right-hand side adds the terms ``2g/Δt² + 2ġ/Δt`` (a Baumgarte stabilisation
with gains fixed by Δt). Because the reactions enter the bodies through ``C(q)ᵀ`` at time t, ``G`` is singular
wherever C loses row rank: the formulation is not regular at a configuration that is genuinely singular.

Size: about 685 lines: the body state, the affine Taylor prediction, the four constraint forms, the step, the
velocity projection and the run loop share one set of per-pair anchors and one reaction convention.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.excerpt import excerpt
from vtm_dynamics.core.reactions.absolute_coordinates import (
    GROUND,
    AbsoluteModel,
    AbsoluteModelError,
    body_poses,
    body_twists,
    constraint_matrix,
)

ROTATION_PAIRS = ("revolute", "continuous", "spherical", "fixed")  # no relative translation: world-fixed rows
DEFAULT_MAX_STEPS = 2_000_000  # a run longer than this is refused (memory: the time series are stored)
_TOL = 1e-9


class TaylorError(AbsoluteModelError):
    """Bad input to the Taylor formulation (one line, names the field)."""


def _skew(x: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a × b of two 3-vectors (np.cross costs ~15 µs a call: it dominated a step)."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def _unit_perpendicular(m: np.ndarray) -> np.ndarray:
    a = np.cross(m, np.eye(3)[int(np.argmin(np.abs(m)))])
    return a / np.linalg.norm(a)


@dataclass(frozen=True)
class _Row:
    """One scalar constraint of a pair. kind: 'point_world', 'point_body', 'vectors' or 'drive'."""

    kind: str
    direction: np.ndarray  # pair-frame unit vector (force direction, a, or the drive axis)
    other: np.ndarray  # pair-frame unit vector carried by the child (b), unused otherwise


@dataclass(frozen=True)
class _Pair:
    name: str
    type: str
    parent: int  # body index, −1 = ground
    child: int
    frame_body: int  # the body whose frame carries the pair frame (as in constraint_matrix), −1 = ground
    frame_rot: np.ndarray  # pair frame in the frame body's link frame
    rot_in_parent: np.ndarray  # pair frame in the parent / child link frames at the start
    rot_in_child: np.ndarray
    point_in_parent: np.ndarray  # pair point in the parent / child link frames [m]
    point_in_child: np.ndarray
    W: np.ndarray  # 6 x k, pair frame
    at_child: bool  # the reaction's point is the child's copy of the pair point (else the parent's)
    labels: tuple[str, ...]
    rows: tuple[_Row, ...]
    cols: slice


@dataclass(frozen=True)
class TaylorMechanism:
    """An :class:`AbsoluteModel` prepared for the Taylor formulation: inertias, pair anchors and rows."""

    model: AbsoluteModel = field(repr=False)
    bodies: tuple[str, ...]
    mass: np.ndarray = field(repr=False)  # (B,) [kg]
    com_local: np.ndarray = field(repr=False)  # (B, 3) centre of mass in the link frame [m]
    inertia_local: np.ndarray = field(repr=False)  # (B, 3, 3) about the centre of mass, link axes [kg m²]
    pairs: tuple[_Pair, ...] = field(repr=False)
    n_unknowns: int
    gravity: np.ndarray = field(repr=False)

    @property
    def pair_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.pairs)

    def pair_columns(self, name: str) -> slice:
        for p in self.pairs:
            if p.name == name:
                return p.cols
        raise KeyError(name)


@dataclass
class BodyState:
    """Absolute state of all moving bodies (world axes): x (B,3) [m], R (B,3,3), v (B,3) [m/s], w (B,3) [rad/s]."""

    x: np.ndarray
    R: np.ndarray
    v: np.ndarray
    w: np.ndarray

    def copy(self) -> "BodyState":
        return BodyState(self.x.copy(), self.R.copy(), self.v.copy(), self.w.copy())


def prepare_mechanism(model: AbsoluteModel, q, gravity=(0.0, 0.0, -9.81)) -> TaylorMechanism:
    """Anchors of every pair on its two bodies at the assembled configuration ``q`` (Pinocchio order)."""
    if model.extension.knife_edges:
        raise TaylorError("knife_edge: the Taylor formulation covers holonomic pairs only (paper Sects. 5-8)")
    poses = body_poses(model, q)
    bodies = model.bodies
    index = {b: i for i, b in enumerate(bodies)}
    index[GROUND] = -1
    mass = np.array([model.inertias[b].mass for b in bodies])
    inertia = np.array([np.asarray(model.inertias[b].inertia) for b in bodies]).reshape(len(bodies), 3, 3)
    for b, m, J in zip(bodies, mass, inertia):
        if m <= 0 or np.min(np.linalg.eigvalsh(J)) <= 0:
            raise TaylorError(f"<link name={excerpt(b)}> inertial: every moving link needs a positive mass and a "
                              "positive definite inertia for the Taylor formulation (eq. (10) inverts J')")
    pairs, col = [], 0
    for spec in model.pairs:
        W = spec.wrench_basis
        k = W.shape[1]
        if k == 0:
            continue
        Rf, of = poses[spec.frame_link]
        R_pair = Rf @ spec.frame_offset.rotation()
        p = of + Rf @ np.asarray(spec.frame_offset.xyz)
        Rp, op = poses[spec.parent]
        Rc, oc = poses[spec.child]
        Wf, Wm = W[:3], W[3:]
        rows = []
        if spec.kind == "driving_constraint":
            rows.append(_Row("drive", Wm[:, 0] / np.linalg.norm(Wm[:, 0]), np.zeros(3)))
        else:
            free_axis = None
            s = np.linalg.svd(Wm, compute_uv=False) if Wm.shape[1] else np.zeros(0)
            if int(np.sum(s > _TOL)) == 2:
                free_axis = np.linalg.svd(Wm.T)[2][-1]
            for j in range(k):
                f, m = Wf[:, j], Wm[:, j]
                if np.linalg.norm(f) > _TOL and np.linalg.norm(m) > _TOL:
                    raise TaylorError(f"pair {excerpt(spec.name)}: constraint wrench mixes force and moment")
                if np.linalg.norm(f) > _TOL:
                    kind = "point_world" if spec.type in ROTATION_PAIRS else "point_body"
                    rows.append(_Row(kind, f / np.linalg.norm(f), np.zeros(3)))
                else:
                    m = m / np.linalg.norm(m)
                    if free_axis is not None:
                        a, b = np.cross(free_axis, m), free_axis
                    else:
                        a = _unit_perpendicular(m)
                        b = np.cross(m, a)
                    rows.append(_Row("vectors", a, b))
        # point contacts (point_on_line / point_on_plane): the child's point is its own contact point, which
        # slides over the parent's line or plane; the reaction acts there (as in constraint_matrix)
        contact = getattr(spec, "contact_offset", None)
        in_child = Rc.T @ (p - oc) if contact is None else np.asarray(contact.xyz, dtype=float)
        pairs.append(_Pair(
            spec.name, spec.type, index[spec.parent], index[spec.child], index[spec.frame_link],
            spec.frame_offset.rotation(), Rp.T @ R_pair, Rc.T @ R_pair, Rp.T @ (p - op), in_child, W,
            contact is not None or spec.frame_link == spec.child, spec.labels, tuple(rows), slice(col, col + k)))
        col += k
    return TaylorMechanism(model, bodies, mass, np.array([model.inertias[b].com for b in bodies]).reshape(-1, 3),
                           inertia, tuple(pairs), col, np.asarray(gravity, dtype=float))


def state_from_joints(mech: TaylorMechanism, q, v) -> BodyState:
    """Body state from Pinocchio joint positions and velocities (assembled and consistent)."""
    poses = body_poses(mech.model, q)
    nu = body_twists(mech.model, q, v).reshape(-1, 3 if mech.model.planar else 6)
    B = len(mech.bodies)
    x, R, vv, w = np.zeros((B, 3)), np.zeros((B, 3, 3)), np.zeros((B, 3)), np.zeros((B, 3))
    for i, b in enumerate(mech.bodies):
        Ri, oi = poses[b]
        t = np.zeros(6)
        t[[0, 1, 5] if mech.model.planar else slice(None)] = nu[i]
        c = Ri @ mech.com_local[i]
        x[i], R[i], w[i] = oi + c, Ri, t[3:]
        vv[i] = t[:3] + np.cross(t[3:], c)
    return BodyState(x, R, vv, w)


# ------------------------------------------------------------------------------------ affine motion of the bodies
class _Motion:
    """Accelerations of all bodies at one state, affine in λ: a = a0 + A λ, α = α0 + Bα λ (eqs. (9)-(11))."""

    def __init__(self, mech: TaylorMechanism, s: BodyState, wrenches: np.ndarray):
        n = mech.n_unknowns
        B = len(mech.bodies)
        self.mech, self.s = mech, s
        self.cache: dict = {}
        self.Iw = np.einsum("bij,bjk,blk->bil", s.R, mech.inertia_local, s.R)
        self.Iw_inv = np.linalg.inv(self.Iw)
        F = np.zeros((B, 3, n))
        T = np.zeros((B, 3, n))
        for pr in mech.pairs:
            Rw = self.pair_rotation(pr)
            p = self.pair_point(pr)
            Fw = Rw @ pr.W[:3]
            Mw = Rw @ pr.W[3:]
            # eq. (11): a pair without relative translation acts on each link at that link's own copy of the joint
            # point (d'^k); they differ by the position gap. Translating pairs act at the pair point.
            own = pr.type in ROTATION_PAIRS
            for body, sign, local in ((pr.child, 1.0, pr.point_in_child), (pr.parent, -1.0, pr.point_in_parent)):
                if body < 0:
                    continue
                arm = (self._origin(body) + s.R[body] @ local if own else p) - s.x[body]
                F[body][:, pr.cols] += sign * Fw
                T[body][:, pr.cols] += sign * (Mw + _skew(arm) @ Fw)
        f0, t0 = wrenches[:, :3], wrenches[:, 3:]
        self.a0 = (f0 + mech.mass[:, None] * mech.gravity) / mech.mass[:, None]
        self.A = F / mech.mass[:, None, None]
        gyro = np.cross(s.w, np.einsum("bij,bj->bi", self.Iw, s.w))
        self.al0 = np.einsum("bij,bj->bi", self.Iw_inv, t0 - gyro)
        self.Bal = np.einsum("bij,bjk->bik", self.Iw_inv, T)

    def pair_rotation(self, pr: _Pair) -> np.ndarray:
        if pr.frame_body < 0:
            return pr.frame_rot
        return self.s.R[pr.frame_body] @ pr.frame_rot

    def pair_point(self, pr: _Pair) -> np.ndarray:
        """Where the reaction acts: the pair point of the body that carries the pair frame, as in
        ``absolute_coordinates.constraint_matrix`` (the child's contact point for point contacts)."""
        b, local = (pr.child, pr.point_in_child) if pr.at_child else (pr.parent, pr.point_in_parent)
        if b < 0:
            return local  # the ground: link frame = world
        return self._origin(b) + self.s.R[b] @ local

    def _origin(self, b: int) -> np.ndarray:
        return self.s.x[b] - self.s.R[b] @ self.mech.com_local[b]

    def point(self, b: int, local: np.ndarray):
        """Body-fixed point given in link coordinates: value, rate, acceleration (const, Jacobian).

        The ground's copy of a pair point is its own fixed point (``local``: the ground's link frame is the world),
        never the moving body's copy: eq. (21) equates the two bodies' copies at t + Δt, so a position gap at a
        ground pair enters the right-hand side of eq. (23) and is corrected like any other pair's.
        """
        n = self.mech.n_unknowns
        if b < 0:
            return local, np.zeros(3), np.zeros(3), np.zeros((3, n))
        s = self.s
        d = s.R[b] @ (local - self.mech.com_local[b])
        w = s.w[b]
        acc0 = self.a0[b] + _cross(self.al0[b], d) + _cross(w, _cross(w, d))
        accJ = self.A[b] - _skew(d) @ self.Bal[b]
        return s.x[b] + d, s.v[b] + _cross(w, d), acc0, accJ

    def vector(self, b: int, local: np.ndarray):
        """Body-fixed vector given in link coordinates: value, rate, acceleration (const, Jacobian)."""
        n = self.mech.n_unknowns
        if b < 0:
            return local, np.zeros(3), np.zeros(3), np.zeros((3, n))
        s = self.s
        e = s.R[b] @ local
        w = s.w[b]
        return e, _cross(w, e), _cross(self.al0[b], e) + _cross(w, _cross(w, e)), -_skew(e) @ self.Bal[b]


def _predict(item, dt: float):
    """Taylor prediction over dt (eqs. (12), (18)): value at t+dt as (const, Jacobian in λ)."""
    val, rate, acc0, accJ = item
    return val + rate * dt + 0.5 * dt * dt * acc0, 0.5 * dt * dt * accJ


def _pair_items(motion: _Motion, pr: _Pair, row: _Row):
    key = (pr.name, row.kind)
    if row.kind == "point_world" or row.kind == "point_body":  # the two points are shared by a pair's rows
        points = motion.cache.get(key)
        if points is None:
            points = motion.cache[key] = (motion.point(pr.child, pr.point_in_child),
                                          motion.point(pr.parent, pr.point_in_parent))
        pc, pp = points
        if row.kind == "point_world":
            return motion.pair_rotation(pr) @ row.direction, pc, pp
        return motion.vector(pr.parent, pr.rot_in_parent @ row.direction), pc, pp
    if row.kind == "drive":
        u = motion.pair_rotation(pr) @ row.direction
        return u
    return (motion.vector(pr.parent, pr.rot_in_parent @ row.direction),
            motion.vector(pr.child, pr.rot_in_child @ row.other))


def assemble_system(mech: TaylorMechanism, s: BodyState, dt: float, wrenches: np.ndarray | None = None):
    """The linear system of eq. (36): returns (G, rhs, motion) with G λ = rhs.

    ``dt = 0`` returns the acceleration-level limit ``G/(½Δt²) → C M⁻¹ Cᵀ`` (the KKT matrix) and its right-hand side.
    ``wrenches`` (B, 6): known force [N] at the centre of mass and torque [N m] on each body (world axes).
    """
    B, n = len(mech.bodies), mech.n_unknowns
    motion = _Motion(mech, s, np.zeros((B, 6)) if wrenches is None else wrenches)
    G = np.zeros((n, n))
    rhs = np.zeros(n)
    scale = 1.0 if dt == 0 else 0.5 * dt * dt
    i = 0
    for pr in mech.pairs:
        for row in pr.rows:
            items = _pair_items(motion, pr, row)
            if row.kind == "drive":
                u = items
                G[i] = u @ ((motion.Bal[pr.child] if pr.child >= 0 else 0) - (motion.Bal[pr.parent] if pr.parent >= 0 else 0)) * scale
                rhs[i] = -u @ ((motion.al0[pr.child] if pr.child >= 0 else 0) - (motion.al0[pr.parent] if pr.parent >= 0 else 0)) * scale
            elif row.kind == "point_world":
                n_w, pc, pp = items
                if dt == 0:
                    G[i] = n_w @ (pc[3] - pp[3])
                    rhs[i] = -n_w @ (pc[2] - pp[2])
                else:
                    (c0, cJ), (p0, pJ) = _predict(pc, dt), _predict(pp, dt)
                    G[i] = n_w @ (cJ - pJ)
                    rhs[i] = -n_w @ (c0 - p0)
            else:
                if row.kind == "point_body":
                    u_item, pc, pp = items
                    w_item = (pc[0] - pp[0], pc[1] - pp[1], pc[2] - pp[2], pc[3] - pp[3])
                else:
                    u_item, w_item = items
                if dt == 0:  # second derivative of u·w: ü·w + 2 u̇·ẇ + u·ẅ
                    u, ud, ua, uJ = u_item
                    w, wd, wa, wJ = w_item
                    G[i] = u @ wJ + w @ uJ
                    rhs[i] = -(ua @ w + 2 * ud @ wd + u @ wa)
                else:  # eq. (27)/(31)/(33): (u0 + U λ)·(w0 + V λ) ≈ u0·w0 + (u0ᵀV + w0ᵀU) λ
                    (u0, U), (w0, V) = _predict(u_item, dt), _predict(w_item, dt)
                    G[i] = u0 @ V + w0 @ U
                    rhs[i] = -(u0 @ w0)
            i += 1
    return G, rhs, motion


# ------------------------------------------------------------------------------ velocity rows, gaps and energy
def velocity_rows(mech: TaylorMechanism, s: BodyState) -> np.ndarray:
    """C (n × 6B): rates of the constraint rows w.r.t. the body twists [v_com; ω] (world axes)."""
    motion = _Motion(mech, s, np.zeros((len(mech.bodies), 6)))
    C = np.zeros((mech.n_unknowns, 6 * len(mech.bodies)))
    i = 0

    def put(b: int, lin: np.ndarray, ang: np.ndarray) -> None:
        if b >= 0:
            C[i, 6 * b: 6 * b + 3] += lin
            C[i, 6 * b + 3: 6 * b + 6] += ang

    for pr in mech.pairs:
        for row in pr.rows:
            items = _pair_items(motion, pr, row)
            if row.kind == "drive":
                put(pr.child, np.zeros(3), items)
                put(pr.parent, np.zeros(3), -items)
            elif row.kind in ("point_world", "point_body"):
                u, pc, pp = items
                u = u if row.kind == "point_world" else u[0]
                dc = pc[0] - (s.x[pr.child] if pr.child >= 0 else pc[0])
                dp = pp[0] - (s.x[pr.parent] if pr.parent >= 0 else pp[0])
                put(pr.child, u, _cross(dc, u))
                put(pr.parent, -u, -_cross(dp, u))
                if row.kind == "point_body":  # the direction turns with the parent: ω_p·(u × gap)
                    put(pr.parent, np.zeros(3), _cross(u, pc[0] - pp[0]))
            else:
                (u, *_), (w, *_) = items
                put(pr.parent, np.zeros(3), _cross(u, w))
                put(pr.child, np.zeros(3), _cross(w, u))
            i += 1
    return C


def constraint_gaps(mech: TaylorMechanism, s: BodyState) -> tuple[float, float]:
    """Largest position gap [m] and orientation gap [rad] of the pair rows at the state (drives excluded)."""
    motion = _Motion(mech, s, np.zeros((len(mech.bodies), 6)))
    lin, ang = 0.0, 0.0
    for pr in mech.pairs:
        for row in pr.rows:
            if row.kind == "drive":
                continue
            items = _pair_items(motion, pr, row)
            if row.kind in ("point_world", "point_body"):
                u, pc, pp = items
                u = u if row.kind == "point_world" else u[0]
                lin = max(lin, abs(float(u @ (pc[0] - pp[0]))))
            else:
                ang = max(ang, abs(float(items[0][0] @ items[1][0])))
    return lin, ang


def mechanical_energy(mech: TaylorMechanism, s: BodyState) -> float:
    """Kinetic plus gravitational potential energy [J] (potential zero at the world origin)."""
    Iw = np.einsum("bij,bjk,blk->bil", s.R, mech.inertia_local, s.R)
    kin = 0.5 * np.sum(mech.mass * np.sum(s.v * s.v, axis=1)) + 0.5 * np.einsum("bi,bij,bj->", s.w, Iw, s.w)
    return float(kin - np.sum(mech.mass * (s.x @ mech.gravity)))


def _mass_blocks(mech: TaylorMechanism, s: BodyState) -> np.ndarray:
    Iw = np.einsum("bij,bjk,blk->bil", s.R, mech.inertia_local, s.R)
    B = len(mech.bodies)
    Minv = np.zeros((6 * B, 6 * B))
    for b in range(B):
        Minv[6 * b: 6 * b + 3, 6 * b: 6 * b + 3] = np.eye(3) / mech.mass[b]
        Minv[6 * b + 3: 6 * b + 6, 6 * b + 3: 6 * b + 6] = np.linalg.inv(Iw[b])
    return Minv


def project_twists(mech: TaylorMechanism, s: BodyState, target: np.ndarray) -> None:
    """ν ← ν − M⁻¹Cᵀ(C M⁻¹Cᵀ)⁺(C ν − target), in place: the admissible twist nearest in kinetic energy."""
    C = velocity_rows(mech, s)
    if C.shape[0] == 0:
        return
    nu = np.concatenate([np.concatenate([v, w]) for v, w in zip(s.v, s.w)])
    Minv = _mass_blocks(mech, s)
    S = C @ Minv @ C.T
    nu = nu - Minv @ C.T @ (np.linalg.pinv(S, rcond=1e-12) @ (C @ nu - target))
    nu = nu.reshape(-1, 6)
    s.v[:], s.w[:] = nu[:, :3], nu[:, 3:]


# ------------------------------------------------------------------------------------------------- applied loads
def joint_wrenches(mech: TaylorMechanism, s: BodyState, efforts: Mapping[str, float]) -> np.ndarray:
    """Body wrenches (B, 6) [N at the centre of mass; N m] of motor efforts on tree joints (torque or force
    along the joint axis on the child, the opposite on the parent)."""
    out = np.zeros((len(mech.bodies), 6))
    if not efforts:
        return out
    joints = {j.name: j for j in mech.model.tree_joints}
    index = {b: i for i, b in enumerate(mech.bodies)}
    for name, tau in efforts.items():
        j = joints.get(name)
        if j is None or j.type not in ("revolute", "continuous", "prismatic"):
            raise TaylorError(f"torques: {excerpt(name)} is not a revolute or prismatic joint of the model")
        if not np.isfinite(tau):
            raise TaylorError(f"torques: {excerpt(name)} must be a finite number")
        c = index.get(j.child, -1)
        p = index.get(j.parent, -1)
        u = s.R[c] @ np.asarray(j.axis)
        if j.type == "prismatic":
            point = s.x[c] - s.R[c] @ mech.com_local[c]
            for b, sign in ((c, 1.0), (p, -1.0)):
                if b >= 0:
                    out[b, :3] += sign * tau * u
                    out[b, 3:] += sign * tau * np.cross(point - s.x[b], u)
        else:
            for b, sign in ((c, 1.0), (p, -1.0)):
                if b >= 0:
                    out[b, 3:] += sign * tau * u
    return out


# -------------------------------------------------------------------------------------------------------- stepping
def solve_reactions(G: np.ndarray, rhs: np.ndarray, rcond: float = 1e-10) -> tuple[np.ndarray, int]:
    """Least-squares λ of eq. (36) and the numerical rank of G (minimum-norm λ when G is singular)."""
    if G.shape[0] == 0:
        return np.zeros(0), 0
    U, sv, Vt = np.linalg.svd(G)
    keep = sv > rcond * sv[0] if sv[0] > 0 else np.zeros_like(sv, dtype=bool)
    lam = Vt[keep].T @ ((U[:, keep].T @ rhs) / sv[keep])
    return lam, int(np.sum(keep))


def _accelerations(mech: TaylorMechanism, s: BodyState, dt: float, wrenches: np.ndarray | None):
    G, rhs, motion = assemble_system(mech, s, dt, wrenches)
    lam, rank = solve_reactions(G, rhs)
    a = motion.a0 + np.einsum("bij,j->bi", motion.A, lam)
    al = motion.al0 + np.einsum("bij,j->bi", motion.Bal, lam)
    return a, al, lam, rank


def taylor_step(mech: TaylorMechanism, s: BodyState, dt: float, wrenches: np.ndarray | None = None,
                heun: bool = False) -> tuple[BodyState, np.ndarray, int]:
    """One step (module docstring, steps 1-5): new state, λ, rank of G.

    ``heun``: the velocity update uses the mean of the accelerations at t and at the predicted state at t + Δt
    (the second solve of eq. (36) at the predicted state), v ← v + ½(a + a*)Δt, instead of v ← v + aΔt.
    """
    a, al, lam, rank = _accelerations(mech, s, dt, wrenches)
    new = s.copy()
    new.x = s.x + s.v * dt + 0.5 * a * dt * dt
    new.v = s.v + a * dt
    for b in range(len(mech.bodies)):
        new.R[b] = pin.exp3(s.w[b] * dt + 0.5 * al[b] * dt * dt) @ s.R[b]
    new.w = s.w + al * dt
    if heun:
        a2, al2, _, _ = _accelerations(mech, new, dt, wrenches)
        new.v = s.v + 0.5 * (a + a2) * dt
        new.w = s.w + 0.5 * (al + al2) * dt
    return new, lam, rank


CORRECTIONS = ("none", "project", "heun")


@dataclass(frozen=True)
class ReactionRun:
    """Time series of one formulation on one model (shared by the Taylor and KKT runs).

    ``reactions[k, c]``: component c (pair-frame wrench basis, on the child [N, N m]) at ``times[k]``; NaN where the
    formulation gives no value. ``columns[pair] = (start, stop)``; ``labels[pair]`` names the components;
    ``unique[pair]``: the reaction is uniquely determined (Wojtyra-Frączek test on the same C). Positions ``x`` (K,B,3)
    [m] and rotations ``R`` (K,B,3,3) of the centres of mass / link frames; ``energy`` [J]; ``gap_position`` [m]
    (KKT runs: the largest loop-closure residual, m or rad),
    ``gap_angle`` [rad]; ``rank_deficient_steps``: steps whose system matrix was singular (minimum-norm λ used).
    """

    formulation: str
    dt: float
    times: np.ndarray = field(repr=False)
    reactions: np.ndarray = field(repr=False)
    columns: dict = field(repr=False)
    labels: dict = field(repr=False)
    unique: dict = field(repr=False)
    bodies: tuple[str, ...]
    x: np.ndarray = field(repr=False)
    R: np.ndarray = field(repr=False)
    energy: np.ndarray = field(repr=False)
    gap_position: np.ndarray = field(repr=False)
    gap_angle: np.ndarray = field(repr=False)
    rank_deficient_steps: int
    cpu_seconds: float
    diverged_at: float | None = None  # [s] the run stopped there: the state or the reactions became non-finite

    def pair(self, name: str) -> np.ndarray:
        a, b = self.columns[name]
        return self.reactions[:, a:b]


Efforts = Mapping[str, float] | Callable[[float], Mapping[str, float]] | None


def efforts_at(efforts: Efforts, t: float) -> Mapping[str, float]:
    """The motor efforts [N m, N] in force at time ``t`` [s] (constant mapping or a function of time)."""
    if efforts is None:
        return {}
    return efforts(t) if callable(efforts) else efforts


def check_run_size(dt: float, duration: float, max_steps: int) -> int:
    """Number of steps, refusing a step that is not positive or a run longer than ``max_steps``."""
    if not (np.isfinite(dt) and dt > 0):
        raise TaylorError(f"dt: expected a positive step [s], got {dt}")
    if not (np.isfinite(duration) and duration >= 0):
        raise TaylorError(f"duration: expected a non-negative time [s], got {duration}")
    n = int(round(duration / dt))
    if n > max_steps:
        raise TaylorError(f"duration: {n} steps exceed max_steps = {max_steps}")
    return n


def simulate_taylor(
    mech: TaylorMechanism, q0, v0, dt: float, duration: float, efforts: Efforts = None,
    correction: str = "none", every: int = 1, progress: Callable[[float], None] | None = None,
    max_steps: int = DEFAULT_MAX_STEPS, reactions_at: str = "step",
) -> ReactionRun:
    """Run the Taylor formulation from the joint state (q0, v0) for ``duration`` [s] with step ``dt`` [s].

    ``efforts``: motor torques/forces per tree joint [N m, N], constant or a function of time (held over a step).
    ``correction``: "none" (the paper), "project" or "heun" (module docstring). Samples every ``every`` steps.
    Reported components that are not unique (Wojtyra-Frączek analysis of C at q0, as the KKT run) are NaN: the
    minimum-norm λ still moves the bodies, but it is one of infinitely many and not reported as physics.
    ``reactions_at``: "step" reports λ of eq. (36), the reaction held over [t, t + Δt] (first order in Δt: it
    absorbs the truncation error of the second-order prediction divided by ½Δt²); "state" reports the reactions of
    the sampled state itself, from the acceleration-level limit Δt → 0 of the same system (C M⁻¹Cᵀ λ = ..., the
    KKT reactions with this formulation's M and C), which are as accurate as the state.
    """
    import time

    from vtm_dynamics.core.reactions.solvability import analyze_constraint_matrix, unique_components

    if reactions_at not in ("step", "state"):
        raise TaylorError(f"reactions_at: must be 'step' or 'state', got {excerpt(str(reactions_at))}")
    if correction not in CORRECTIONS:
        raise TaylorError(f"correction: must be one of {', '.join(CORRECTIONS)}, got {excerpt(str(correction))}")
    n_steps = check_run_size(dt, duration, max_steps)
    every = max(1, int(every))
    fixed = body_poses(mech.model, q0)  # ground and the root link keep theirs; the bodies' come from the state
    unique = {pr.name: True for pr in mech.pairs}

    def unique_mask(s: BodyState) -> np.ndarray:
        """The components unique at the state ``s`` (the rest are NaN, never picked: which they are depends on the
        configuration, so C is analysed at every sample); each pair's verdict is kept as the AND over samples."""
        poses = dict(fixed)
        for i, b in enumerate(mech.bodies):
            poses[b] = (s.R[i], s.x[i] - s.R[i] @ mech.com_local[i])
        C = constraint_matrix(mech.model, poses=poses)
        report = analyze_constraint_matrix(C)
        components = unique_components(report, C)
        for p in report.pairs:
            unique[p.name] = unique.get(p.name, True) and p.solvable
        keep = np.zeros(mech.n_unknowns, dtype=bool)
        for pr in mech.pairs:
            keep[pr.cols] = components.get(pr.name, (True,) * (pr.cols.stop - pr.cols.start))
        return keep

    s = state_from_joints(mech, q0, v0)
    drive_target = velocity_rows(mech, s) @ np.concatenate([np.concatenate([v, w]) for v, w in zip(s.v, s.w)])
    is_drive = np.array([r.kind == "drive" for pr in mech.pairs for r in pr.rows], dtype=bool)
    drive_target = np.where(is_drive, drive_target, 0.0)
    rows: list = []
    deficient = 0
    diverged = None
    t0 = time.process_time()
    for k in range(n_steps + 1):
        t = k * dt
        wr = joint_wrenches(mech, s, efforts_at(efforts, t))
        try:
            with np.errstate(all="ignore"):
                new, lam, rank = taylor_step(mech, s, dt, wr, heun=correction == "heun")
        except np.linalg.LinAlgError:
            lam, new, rank = np.full(mech.n_unknowns, np.nan), s, 0
        if not (np.all(np.isfinite(lam)) and np.all(np.isfinite(new.x)) and np.all(np.isfinite(new.w))):
            diverged = t
            break
        if k < n_steps and rank < mech.n_unknowns:
            deficient += 1
        if k % every == 0 or k == n_steps:
            if reactions_at == "state":
                G0, rhs0, _ = assemble_system(mech, s, 0.0, wr)
                lam = solve_reactions(G0, rhs0)[0]
            rows.append((t, np.where(unique_mask(s), lam, np.nan), s.x.copy(), s.R.copy(), mechanical_energy(mech, s),
                         *constraint_gaps(mech, s)))
            if progress is not None:
                progress(t)
        if k == n_steps:
            break
        if correction in ("project", "heun"):
            project_twists(mech, new, drive_target)
        s = new
    cpu = time.process_time() - t0
    cols, labels = {}, {}
    for pr in mech.pairs:
        cols[pr.name] = (pr.cols.start, pr.cols.stop)
        labels[pr.name] = pr.labels
    return ReactionRun(
        {"none": "taylor", "project": "taylor-projected", "heun": "taylor-heun"}[correction]
        + ("" if reactions_at == "step" else "/state"), dt,
        np.array([r[0] for r in rows]), np.array([r[1] for r in rows]).reshape(len(rows), mech.n_unknowns), cols, labels,
        {n: unique.get(n, True) for n in cols}, mech.bodies, np.array([r[2] for r in rows]).reshape(len(rows), -1, 3),
        np.array([r[3] for r in rows]).reshape(len(rows), -1, 3, 3), np.array([r[4] for r in rows]), np.array([r[5] for r in rows]),
        np.array([r[6] for r in rows]), deficient, cpu, diverged)

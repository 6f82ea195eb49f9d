"""The constraint matrix of a URDF model in absolute coordinates (every link's twist is its own coordinates).

Wojtyra & Frączek 2013 (Multibody Syst Dyn 30:153-171), Sect. 2.1 and 4.1: in absolute coordinates every kinematic
pair is a subset of the velocity-level constraints ``C q̇ = 0`` (eq. (4)): holonomic pairs contribute the rows of
their constraint Jacobian Φ_q (eq. (2)), Pfaffian pairs (knife edges) the rows of Ψ (eq. (3), eq. (30)).

Coordinates. Every URDF link except the root link (the ground) is a body ``i`` with the velocity coordinates

* spatial mode: ``ν_i = [v_i; ω_i]`` (6), the velocity [m/s] of the link frame origin ``o_i`` and the angular velocity
  [rad/s], both in world axes;
* planar mode: ``ν_i = [ẋ_i, ẏ_i, φ̇_i]`` (3), the in-plane part of the same twist (world xy-plane), which is the
  paper's choice ``q_i = [r_i^T φ_i]^T`` (Sect. 4.1, eq. (32)) with the reference point at the link frame origin.

Pair rows. A pair joins a parent body ``a`` and a child body ``b`` (either may be the ground) at a pair frame with
origin ``p`` and rotation ``R`` (world). The relative twist at ``p`` in world axes is
``t = [v_b + ω_b × (p − o_b) − v_a − ω_a × (p − o_a); ω_b − ω_a]``. The pair allows the twists of a subspace
``T`` (pair frame: revolute ``(0, a)``, prismatic ``(a, 0)``, ...); its constraint wrench basis ``W`` is an
orthonormal basis of the complement of ``T`` (wrench · twist duality at the same point), and its rows are
``C_X = (blockdiag(R, R) W)^T J_t``. The multiplier ``λ_X`` of these rows is then the reaction wrench on the child,
``w = W λ_X`` ([N] for force rows, [N m] for torque rows, pair frame, at ``p``). Knife edges: ``a`` = ground, ``W``
= the blade normal as a force (eq. (30)). Driving constraints: ``W`` = the joint's own motion direction (one row).

Planar mode keeps, for every pair, the wrenches of ``span(W)`` that lie in the plane (``F_x, F_y, M_z``); a pair whose
wrench space does not split into an in-plane and an out-of-plane part is not planar and is rejected.
Where the constraint depends on configuration the rows are evaluated at the poses Pinocchio's forward kinematics gives
for ``q`` (loop closures must be assembled: see :func:`assemble_loops`); at the neutral configuration (``q=None``)
they are the URDF joint origins composed from the root (:func:`neutral_poses`), without building Pinocchio's model.

Size: about 690 lines: the body poses, twists, dynamics and the rows of every pair type (revolute, prismatic,
fixed, continuous, loop closures, knife edges) in spatial and planar form belong to one coordinate convention,
which each function relies on.
"""

from __future__ import annotations

import functools
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin
import scipy.linalg

from vtm_dynamics.core.excerpt import excerpt, first_line
from vtm_dynamics.core.robot.urdf_extension import (
    DEFAULT_MAX_DOF,
    DEFAULT_MAX_LINKS,
    DEFAULT_MAX_URDF_BYTES,
    DEFAULT_MAX_XML_DEPTH,
    WORLD_LINK,
    Pose,
    URDFExtension,
    URDFExtensionError,
    numbers,
    extension_from_root,
    parse_urdf_xml,
)

GROUND = "<ground>"
TREE_JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")
_AXIS_LABELS = ("Fx", "Fy", "Fz", "Mx", "My", "Mz")
_PLANAR_WRENCH = np.zeros((6, 3))
_PLANAR_WRENCH[0, 0] = _PLANAR_WRENCH[1, 1] = _PLANAR_WRENCH[5, 2] = 1.0
_OUT_OF_PLANE_WRENCH = np.zeros((6, 3))  # its orthogonal complement: Fz, Mx, My
_OUT_OF_PLANE_WRENCH[2, 0] = _OUT_OF_PLANE_WRENCH[3, 1] = _OUT_OF_PLANE_WRENCH[4, 2] = 1.0
_SPAN_TOL = 1e-9


class AbsoluteModelError(URDFExtensionError):
    """The model cannot be expressed in absolute coordinates (unknown joint type, non-planar pair in planar mode, ...)."""


@dataclass(frozen=True)
class TreeJoint:
    """A URDF ``<joint>``: the pair between ``parent`` and ``child`` links; its pair frame is the child link frame."""

    name: str
    type: str
    parent: str
    child: str
    origin: Pose
    axis: tuple[float, float, float]


@dataclass(frozen=True)
class BodyInertia:
    """URDF ``<inertial>`` of one link: mass [kg], centre of mass [m] and inertia about it [kg m²] in the link frame."""

    mass: float
    com: tuple[float, float, float]
    inertia: tuple[tuple[float, float, float], ...]


@dataclass(frozen=True)
class PairSpec:
    """One kinematic pair before evaluation: its bodies, where its frame is, and its constraint wrench basis.

    ``wrench_basis`` is 6×k (pair frame, [F; M]), orthonormal; ``labels`` name its columns ("Fx", "Mz", ...).
    ``frame_link``/``frame_offset`` place the pair frame: a link name (or ``GROUND``) and the pose in that link.
    """

    name: str
    kind: str  # "joint", "loop_closure", "knife_edge", "driving_constraint"
    type: str
    parent: str
    child: str
    frame_link: str
    frame_offset: Pose
    wrench_basis: np.ndarray = field(repr=False)
    labels: tuple[str, ...]
    holonomic: bool
    # Point contacts (point_on_line, point_on_plane): the pair point on the child link where the reaction acts.
    # The pair's directions stay those of the parent's frame; its point is the child's, which slides over the line
    # or plane, so the rows are evaluated there (at the parent's pair point they would miss a moment arm).
    contact_offset: Pose | None = None


@dataclass(frozen=True)
class AbsoluteModel:
    """A URDF model prepared for absolute coordinates: bodies, pairs (in file order) and, on first use, its
    Pinocchio model.

    The Pinocchio model is built only when a configuration other than the neutral one is needed (a given ``q``,
    loop assembly, velocities, dynamics): building it costs more than linear time in the number of joints (measured
    0.22 / 0.98 / 4.9 s at 2,500 / 5,000 / 10,000 bodies), more than the sparse analysis of an assembled model.
    """

    name: str
    urdf: str = field(repr=False)  # the URDF text, for Pinocchio
    root_link: str
    bodies: tuple[str, ...]
    pairs: tuple[PairSpec, ...]
    planar: bool
    extension: URDFExtension = field(repr=False)
    tree_joints: tuple[TreeJoint, ...] = field(repr=False)
    inertial_elements: dict = field(repr=False)  # link name -> its <inertial> element (or None), read on first use

    @functools.cached_property
    def pin_model(self) -> pin.Model:
        """Pinocchio's model of the URDF tree (built on first use; raises :class:`AbsoluteModelError`)."""
        try:
            return pin.buildModelFromXML(self.urdf)
        except Exception as err:  # pinocchio raises RuntimeError/ValueError with multi-line text
            first = first_line(err)
            raise AbsoluteModelError(f"Pinocchio cannot load the URDF tree: {first[:160]}") from None

    @functools.cached_property
    def inertias(self) -> dict[str, BodyInertia]:
        """Link name -> :class:`BodyInertia` (read on first use: the solvability analysis needs none;
        raises :class:`AbsoluteModelError` on a bad ``<inertial>``)."""
        return {name: _inertia(name, el) for name, el in self.inertial_elements.items()}

    @functools.cached_property
    def frame_ids(self) -> dict[str, int]:
        """Link name -> Pinocchio BODY frame id."""
        out: dict[str, int] = {}
        for i, frame in enumerate(self.pin_model.frames):
            if frame.type == pin.BODY:
                out.setdefault(frame.name, i)
        return out

    @property
    def coordinates_per_body(self) -> int:
        return 3 if self.planar else 6

    @property
    def n_coordinates(self) -> int:
        return self.coordinates_per_body * len(self.bodies)


@dataclass(frozen=True)
class PairRows:
    """The rows of one pair in the constraint matrix and their labels (wrench components in the pair frame)."""

    name: str
    kind: str
    type: str
    parent: str
    child: str
    rows: tuple[int, ...]
    labels: tuple[str, ...]
    wrench_basis: np.ndarray = field(repr=False)  # 6 x k, pair frame
    holonomic: bool


@dataclass(frozen=True)
class AbsoluteConstraintMatrix:
    """The constraint matrix C (eq. (5)) at one configuration, with the row ranges of every pair.

    ``matrix`` is m×n (rows: pairs in model order; columns: bodies in ``bodies`` order, ``coordinates`` names them).
    ``free_pairs`` are pairs with no rows (floating joints; planar joints in planar mode).
    ``closure_residual`` is the largest loop-closure assembly error at ``q`` [m or rad].
    """

    matrix: np.ndarray = field(repr=False)
    bodies: tuple[str, ...]
    coordinates: tuple[str, ...]
    pairs: tuple[PairRows, ...]
    free_pairs: tuple[str, ...]
    planar: bool
    q: np.ndarray | None = field(repr=False)  # None: the neutral configuration
    closure_residual: float


# --------------------------------------------------------------------------------------------- small linear algebra
def _skew(x: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


def preferred_basis(A: np.ndarray, tol: float = _SPAN_TOL) -> np.ndarray:
    """Orthonormal basis of span(A) (columns) that uses coordinate axes wherever they lie in the span.

    Coordinate axes first (so a revolute joint about z gets the labels Fx, Fy, Fz, Mx, My), then an orthonormal
    completion. Any basis of the span gives the same solvability verdicts; this one gives readable labels.
    """
    dim = A.shape[0]
    if A.size == 0:
        return np.zeros((dim, 0))
    U, s, _ = np.linalg.svd(A, full_matrices=False)
    k = int(np.sum(s > tol * max(1.0, s[0] if s.size else 0.0)))
    U = U[:, :k]
    chosen: list[np.ndarray] = []
    for j in range(dim):
        e = np.zeros(dim)
        e[j] = 1.0
        if np.linalg.norm(U @ (U.T @ e) - e) < tol:
            chosen.append(e)
    basis = np.array(chosen).T if chosen else np.zeros((dim, 0))
    for u in U.T:
        if basis.shape[1] == k:
            break
        r = u - basis @ (basis.T @ u)
        if np.linalg.norm(r) > 1e-6:
            basis = np.column_stack([basis, r / np.linalg.norm(r)])
    return basis


def orthogonal_complement(T: np.ndarray) -> np.ndarray:
    """Orthonormal basis (coordinate axes preferred) of the orthogonal complement of span(T) in R^6."""
    if T.shape[1] == 0:
        return np.eye(6)
    return preferred_basis(scipy.linalg.null_space(T.T))


def _intersection(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Basis of span(A) ∩ span(B) (A, B with orthonormal columns)."""
    if A.shape[1] == 0 or B.shape[1] == 0:
        return np.zeros((A.shape[0], 0))
    ns = scipy.linalg.null_space(np.hstack([A, -B]), rcond=_SPAN_TOL)
    return preferred_basis(A @ ns[: A.shape[1]]) if ns.size else np.zeros((A.shape[0], 0))


def _label(w: np.ndarray) -> str:
    nz = np.flatnonzero(np.abs(w) > 1e-9)
    if len(nz) == 1:
        return ("-" if w[nz[0]] < 0 else "") + _AXIS_LABELS[nz[0]]
    return "[" + " ".join(f"{x:.3g}" for x in w) + "]"


def allowed_twists(kind: str, axis: np.ndarray) -> np.ndarray:
    """6×d basis of the relative twists [v; ω] (pair frame, at the pair point) that a pair of type ``kind`` allows."""
    a = np.asarray(axis, dtype=float)
    z = np.zeros(3)
    if kind in ("revolute", "continuous"):
        return np.concatenate([z, a])[:, None]
    if kind == "prismatic":
        return np.concatenate([a, z])[:, None]
    if kind == "fixed":
        return np.zeros((6, 0))
    if kind == "floating":
        return np.eye(6)
    if kind == "spherical":
        return np.vstack([np.zeros((3, 3)), np.eye(3)])
    if kind == "planar":
        perp = scipy.linalg.null_space(a[None, :])
        return np.column_stack([np.vstack([perp, np.zeros((3, 2))]), np.concatenate([z, a])])
    if kind == "cylindrical":
        return np.column_stack([np.concatenate([a, z]), np.concatenate([z, a])])
    if kind == "point_on_line":  # slides along the line, turns freely about the point
        return np.column_stack([np.concatenate([a, z]), np.vstack([np.zeros((3, 3)), np.eye(3)])])
    if kind == "point_on_plane":  # slides in the plane normal to a, turns freely about the point
        perp = scipy.linalg.null_space(a[None, :])
        return np.column_stack([np.vstack([perp, np.zeros((3, 2))]), np.vstack([np.zeros((3, 3)), np.eye(3)])])
    raise AbsoluteModelError(f"unknown pair type {excerpt(kind)}")


POINT_CONTACT_TYPES = ("point_on_line", "point_on_plane")


# --------------------------------------------------------------------------------------------------- URDF reading
_ERR = AbsoluteModelError  # what the one URDF number reader (urdf_extension.numbers) raises here


def _tree_joints(root: ET.Element) -> tuple[TreeJoint, ...]:
    joints = []
    for el in root.findall("joint"):
        name = el.get("name", "")
        kind = el.get("type", "")
        what = f"<joint name={excerpt(name)}>"
        if kind not in TREE_JOINT_TYPES:
            raise AbsoluteModelError(f"{what}: type must be one of {', '.join(TREE_JOINT_TYPES)}, got {excerpt(kind)}")
        parent, child = el.find("parent"), el.find("child")
        if parent is None or child is None or not parent.get("link") or not child.get("link"):
            raise AbsoluteModelError(f"{what}: missing <parent link=...> or <child link=...>")
        o = el.find("origin")
        origin = Pose(
            xyz=numbers(None if o is None else o.get("xyz"), (0.0, 0.0, 0.0), f"{what} origin xyz", _ERR),  # type: ignore[arg-type]
            rpy=numbers(None if o is None else o.get("rpy"), (0.0, 0.0, 0.0), f"{what} origin rpy", _ERR),  # type: ignore[arg-type]
        )
        ax_el = el.find("axis")
        axis = np.array(numbers(None if ax_el is None else ax_el.get("xyz"), (1.0, 0.0, 0.0), f"{what} axis", _ERR))
        if np.linalg.norm(axis) < 1e-12:
            raise AbsoluteModelError(f"{what} axis: the axis must not be zero")
        joints.append(TreeJoint(name, kind, parent.get("link"), child.get("link"), origin,  # type: ignore[arg-type]
                                tuple(axis / np.linalg.norm(axis))))  # type: ignore[arg-type]
    return tuple(joints)


def _inertial_elements(root: ET.Element) -> dict[str, ET.Element | None]:
    return {link.get("name", ""): link.find("inertial") for link in root.findall("link")}


def _inertia(name: str, el: ET.Element | None) -> BodyInertia:
    """URDF ``<inertial>`` of link ``name`` (None: massless), the inertia turned into the link frame."""
    if el is None:
        return BodyInertia(0.0, (0.0, 0.0, 0.0), ((0.0,) * 3,) * 3)
    what = f"<link name={excerpt(name)}> inertial"
    m_el, o_el, i_el = el.find("mass"), el.find("origin"), el.find("inertia")
    mass = numbers(None if m_el is None else m_el.get("value"), (0.0,), f"{what} mass", _ERR)[0]
    if mass < 0:
        raise AbsoluteModelError(f"{what} mass: must not be negative, got {mass}")
    pose = Pose(
        xyz=numbers(None if o_el is None else o_el.get("xyz"), (0.0, 0.0, 0.0), f"{what} origin", _ERR),  # type: ignore[arg-type]
        rpy=numbers(None if o_el is None else o_el.get("rpy"), (0.0, 0.0, 0.0), f"{what} origin", _ERR),  # type: ignore[arg-type]
    )
    g = {k: 0.0 for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
    if i_el is not None:
        for k in g:
            g[k] = numbers(i_el.get(k), (0.0,), f"{what} {k}", _ERR)[0]
    inertia = np.array([[g["ixx"], g["ixy"], g["ixz"]], [g["ixy"], g["iyy"], g["iyz"]], [g["ixz"], g["iyz"], g["izz"]]])
    R = pose.rotation()
    inertia = R @ inertia @ R.T
    return BodyInertia(mass, pose.xyz, tuple(tuple(float(x) for x in row) for row in inertia))


_BASIS_CACHE_SIZE = 1024  # distinct (type, axis, mode) triples kept; a large model repeats a few of them


@functools.lru_cache(maxsize=_BASIS_CACHE_SIZE)
def _twist_complement(kind: str, axis: tuple[float, ...]) -> np.ndarray:
    """Constraint wrench basis (pair frame, read-only) of a pair type and axis: one SVD per distinct pair shape."""
    W = orthogonal_complement(allowed_twists(kind, np.asarray(axis)))
    W.flags.writeable = False  # shared by every pair of this shape
    return W


@functools.lru_cache(maxsize=_BASIS_CACHE_SIZE)
def _cached_pair_basis(kind: str, axis: tuple[float, ...], planar: bool) -> tuple[np.ndarray, tuple[str, ...]]:
    W, labels = _planar_restrict("", _twist_complement(kind, axis), planar)
    W.flags.writeable = False
    return W, labels


def _pair_basis(name: str, kind: str, axis, planar: bool) -> tuple[np.ndarray, tuple[str, ...]]:
    """Constraint wrench basis and labels of pair ``name``; computed once per (type, axis, planar).

    Errors are not cached: on one, the basis is computed again with the name, so the message names the pair.
    """
    key = tuple(float(x) for x in axis)
    try:
        return _cached_pair_basis(kind, key, planar)
    except AbsoluteModelError:
        W = orthogonal_complement(allowed_twists(kind, np.asarray(axis)))
        return _planar_restrict(name, W, planar)


def _planar_restrict(name: str, W: np.ndarray, planar: bool) -> tuple[np.ndarray, tuple[str, ...]]:
    """Keep the in-plane wrenches of span(W) (planar mode); reject pairs that couple in- and out-of-plane motion.

    Checked in the pair frame; :func:`check_moves_in_plane` makes sure every pair frame keeps world z, so the pair
    frame's in-plane wrenches are the world's.
    """
    if planar and W.shape[1]:
        inside = _intersection(W, _PLANAR_WRENCH)
        outside = _intersection(W, _OUT_OF_PLANE_WRENCH)
        if inside.shape[1] + outside.shape[1] != W.shape[1]:
            raise AbsoluteModelError(
                f"pair {excerpt(name)} is not planar: its constraint couples in-plane and out-of-plane motion"
            )
        W = inside
    return W, tuple(_label(w) for w in W.T)


def load_absolute_model(
    urdf: str, planar: bool = False, *, max_bodies: int = DEFAULT_MAX_LINKS - 1,
    max_bytes: int = DEFAULT_MAX_URDF_BYTES, max_depth: int = DEFAULT_MAX_XML_DEPTH, max_dof: int = DEFAULT_MAX_DOF,
    root_checks: Sequence[Callable[[ET.Element], None]] = (),
) -> AbsoluteModel:
    """Read URDF XML **text** (never a path) with its extension elements into an :class:`AbsoluteModel`.

    Pairs, in order: tree joints (URDF file order), loop closures, knife edges, driving constraints.
    ``max_bodies`` caps the moving links (all links but the ground), checked while parsing, before Pinocchio;
    ``max_bytes``, ``max_depth`` and ``max_dof`` as in ``urdf_extension.parse_urdf_xml``; ``root_checks`` run on the
    parsed XML root before anything else (each raises on what it refuses), so the text is parsed once.
    Raises :class:`AbsoluteModelError` / :class:`URDFExtensionError` (ValueError) with one line on bad input.
    """
    text = urdf
    root = parse_urdf_xml(text, max_bytes=max_bytes, max_depth=max_depth, max_links=max_bodies + 1,
                          links_field=f"max_bodies = {max_bodies} moving links + the ground", max_dof=max_dof)
    for check in root_checks:
        check(root)
    ext = extension_from_root(root)
    joints = _tree_joints(root)
    children = [j.child for j in joints]
    dup = sorted(c for c, k in Counter(children).items() if k > 1)
    if dup:
        raise AbsoluteModelError(f"link {excerpt(dup[0])} is the child of more than one joint (URDF must be a tree)")
    child_set = set(children)
    roots = [link for link in ext.links if link not in child_set]
    if len(roots) != 1:
        raise AbsoluteModelError(f"URDF must have exactly one root link, found {len(roots)}")
    link_set = set(ext.links)
    for j in joints:
        for link in (j.parent, j.child):
            if link not in link_set:
                raise AbsoluteModelError(f"<joint name={excerpt(j.name)}>: link {excerpt(link)} does not exist in the URDF")
    root_link = roots[0]

    def body(link: str) -> str:
        return GROUND if link in (root_link, WORLD_LINK) else link

    pairs: list[PairSpec] = []
    by_name = {j.name: j for j in joints}
    for j in joints:
        W, labels = _pair_basis(j.name, j.type, j.axis, planar)
        pairs.append(PairSpec(j.name, "joint", j.type, body(j.parent), body(j.child), body(j.child), Pose(), W,
                              labels, True))
    for lc in ext.loop_closures:
        W, labels = _pair_basis(lc.name, lc.type, lc.axis, planar)
        contact = lc.child_origin if lc.type in POINT_CONTACT_TYPES else None
        pairs.append(PairSpec(lc.name, "loop_closure", lc.type, body(lc.parent), body(lc.child), body(lc.parent),
                              lc.parent_origin, W, labels, True, contact))
    for ke in ext.knife_edges:
        if body(ke.link) == GROUND:
            raise AbsoluteModelError(f"<knife_edge name={excerpt(ke.name)}>: link {excerpt(ke.link)} is the ground (root link)")
        W = np.concatenate([np.asarray(ke.axis), np.zeros(3)])[:, None]
        W, labels = _planar_restrict(ke.name, W, planar)
        pairs.append(PairSpec(ke.name, "knife_edge", "knife_edge", GROUND, ke.link, ke.link, Pose(xyz=ke.point), W,
                              labels, False))
    for dc in ext.driving_constraints:
        j = by_name[dc.joint]
        if j.type not in ("revolute", "continuous", "prismatic"):
            raise AbsoluteModelError(
                f"<driving_constraint name={excerpt(dc.name)}>: joint {excerpt(dc.joint)} of type {j.type} has not exactly one "
                "coordinate")
        W = allowed_twists(j.type, np.asarray(j.axis))
        W, labels = _planar_restrict(dc.name, W, planar)
        if W.shape[1] == 0:
            raise AbsoluteModelError(f"<driving_constraint name={excerpt(dc.name)}>: the driven motion is out of the plane")
        pairs.append(PairSpec(dc.name, "driving_constraint", "driving", body(j.parent), body(j.child), body(j.child),
                              Pose(), W, labels, True))
    bodies = tuple(link for link in ext.links if body(link) != GROUND)
    model = AbsoluteModel(ext.robot_name, text, root_link, bodies, tuple(pairs), planar, ext, joints,
                          _inertial_elements(root))
    if planar:
        check_moves_in_plane(model)
    return model


_PLANE_TOL = 1e-6  # |cos| of a frame's z axis to world z, and of a motion to the plane, within this of 1 (resp. 0)


def _world(v: np.ndarray) -> str:
    return "(" + ", ".join(f"{x:.3g}" for x in np.where(np.abs(v) < 1e-12, 0.0, v)) + ")"


def check_moves_in_plane(model: AbsoluteModel) -> None:
    """Refuse, in planar mode, a model that does not move in the world xy-plane (one-line AbsoluteModelError).

    Planar mode (Wojtyra & Frączek 2013, Sect. 4.1, eq. (32)) keeps per body the in-plane coordinates (x, y, φ) of
    the world xy-plane and per pair the in-plane wrenches (Fx, Fy, Mz) of its pair frame. Both are right only if
    (i) every pair frame keeps its z axis along world ±z, so that its in-plane wrenches are the world's, and
    (ii) every joint moves in that plane: a revolute or continuous joint turns about world ±z, a prismatic joint
    slides in the xy-plane, a planar joint's normal is world ±z. A model that moves in another plane (a slider-crank
    drawn in x-z) or in space would otherwise get rows of the wrong plane and a meaningless rank and redundancy.
    Checked at the neutral configuration: rotations about world z keep (i) and (ii), so a model that passes moves
    in the plane at every configuration. Floating joints carry no rows and are not checked.
    """
    poses = neutral_poses(model)
    hint = "the model is not planar: it does not move in the world xy-plane (analyse it in spatial mode)"
    for joint in model.tree_joints:
        R = poses[joint.child][0]
        axis = R @ np.asarray(joint.axis)
        if joint.type in ("revolute", "continuous", "planar") and abs(abs(axis[2]) - 1.0) > _PLANE_TOL:
            what = "turns about" if joint.type != "planar" else "has its normal along"
            raise AbsoluteModelError(f"planar: joint {excerpt(joint.name)} {what} world {_world(axis)}, not +-z: {hint}")
        if joint.type == "prismatic" and abs(axis[2]) > _PLANE_TOL:
            raise AbsoluteModelError(f"planar: joint {excerpt(joint.name)} slides along world {_world(axis)}, out of "
                                     f"the xy-plane: {hint}")
    for pair in model.pairs:
        R, _ = pair_frame(pair, poses)
        if abs(abs(R[2, 2]) - 1.0) > _PLANE_TOL:
            raise AbsoluteModelError(f"planar: pair {excerpt(pair.name)}: its frame's z axis is world {_world(R[:, 2])}, "
                                     f"not +-z: {hint}")


# ------------------------------------------------------------------------------------------------------- kinematics
def _q_or_neutral(model: AbsoluteModel, q) -> np.ndarray:
    if q is None:
        return pin.neutral(model.pin_model)
    q = np.asarray(q, dtype=float).reshape(-1)
    if q.shape[0] != model.pin_model.nq or not np.all(np.isfinite(q)):
        raise AbsoluteModelError(f"q: expected {model.pin_model.nq} finite numbers, got {q.shape[0]}")
    return q


def neutral_poses(model: AbsoluteModel) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """World pose (R, o) of every link frame at the neutral configuration [m]; ground included.

    Every tree joint's motion is the identity at neutral (revolute and prismatic at 0, continuous at angle 0,
    planar and floating at the identity), so a link's pose is its joint origins composed from the root; no
    Pinocchio model is needed. Tested against Pinocchio's forward kinematics at ``pin.neutral``.
    """
    out_of: dict[str, list[TreeJoint]] = defaultdict(list)
    for joint in model.tree_joints:
        out_of[joint.parent].append(joint)
    poses = {model.root_link: (np.eye(3), np.zeros(3))}
    stack = [model.root_link]
    while stack:
        link = stack.pop()
        R, o = poses[link]
        for joint in out_of[link]:
            poses[joint.child] = (R @ joint.origin.rotation(), o + R @ np.asarray(joint.origin.xyz, dtype=float))
            stack.append(joint.child)
    out = {GROUND: (np.eye(3), np.zeros(3))}
    for link in model.bodies:
        out[link] = poses[link]
    return out


def body_poses(model: AbsoluteModel, q=None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """World pose (R, o) of every link frame at ``q`` (Pinocchio forward kinematics) [m]; ground included.

    ``q=None`` is the neutral configuration (:func:`neutral_poses`, without building the Pinocchio model).
    """
    if q is None:
        return neutral_poses(model)
    q = _q_or_neutral(model, q)
    pm = model.pin_model
    # Forward kinematics with Pinocchio's joint models, composed here: pin.Data of a model with N joints costs
    # O(N^3) memory (about 15 GB at 600 joints), so large models must not allocate one.
    joints, parents, placements, frames = pm.joints, pm.parents, pm.jointPlacements, pm.frames
    oMi = [pin.SE3.Identity()] * pm.njoints
    for i in range(1, pm.njoints):
        jm = joints[i]
        jd = jm.createData()
        jm.calc(jd, q)
        oMi[i] = oMi[parents[i]] * placements[i] * jd.M
    poses = {GROUND: (np.eye(3), np.zeros(3))}
    for link in model.bodies + (model.root_link,):
        frame = frames[model.frame_ids[link]]
        M = oMi[frame.parentJoint] * frame.placement
        poses[GROUND if link == model.root_link else link] = (np.array(M.rotation), np.array(M.translation))
    return poses


def pair_frame(pair: PairSpec, poses) -> tuple[np.ndarray, np.ndarray]:
    R, o = poses[pair.frame_link]
    return R @ pair.frame_offset.rotation(), o + R @ np.asarray(pair.frame_offset.xyz)


def pair_point(pair: PairSpec, poses) -> tuple[np.ndarray, np.ndarray]:
    """Axes (the pair frame's) and the point [m, world] at which a pair's rows and reactions are evaluated."""
    R, p = pair_frame(pair, poses)
    if pair.contact_offset is not None:
        Rc, oc = poses[pair.child]
        p = oc + Rc @ np.asarray(pair.contact_offset.xyz)
    return R, p


def constraint_matrix(model: AbsoluteModel, q=None, poses=None) -> AbsoluteConstraintMatrix:
    """Assemble C(q) (Wojtyra & Frączek 2013, eq. (5)) in absolute coordinates; see the module docstring.

    ``poses``: the bodies' world poses (R, o) (:func:`body_poses`), for a state known by its poses rather than by
    ``q`` (which is then only recorded)."""
    if poses is None:
        q = None if q is None else _q_or_neutral(model, q)
        poses = body_poses(model, q)
    k = model.coordinates_per_body
    col = {b: i * k for i, b in enumerate(model.bodies)}
    blocks, pairs, free = [], [], []
    row = 0
    for pair in model.pairs:
        W = pair.wrench_basis
        if W.shape[1] == 0:
            free.append(pair.name)
            continue
        R, p = pair_point(pair, poses)
        Ww = np.vstack([R @ W[:3], R @ W[3:]])  # world axes
        block = np.zeros((W.shape[1], model.n_coordinates))
        for link, sign in ((pair.child, 1.0), (pair.parent, -1.0)):
            if link == GROUND:
                continue
            _, o = poses[link]
            J = np.eye(6)
            J[:3, 3:] = -_skew(p - o)  # twist at p from [v_o; ω]
            rows = sign * (Ww.T @ J)
            if model.planar:
                rows = rows[:, [0, 1, 5]]
            block[:, col[link]: col[link] + k] += rows
        blocks.append(block)
        pairs.append(PairRows(pair.name, pair.kind, pair.type, pair.parent, pair.child,
                              tuple(range(row, row + W.shape[1])), pair.labels, W, pair.holonomic))
        row += W.shape[1]
    C = np.vstack(blocks) if blocks else np.zeros((0, model.n_coordinates))
    names = ("vx", "vy", "wz") if model.planar else ("vx", "vy", "vz", "wx", "wy", "wz")
    coords = tuple(f"{b}.{c}" for b in model.bodies for c in names)
    return AbsoluteConstraintMatrix(C, model.bodies, coords, tuple(pairs), tuple(free), model.planar, q,
                                    float(np.max(np.abs(closure_residuals(model, q, poses)), initial=0.0)))


def closure_residuals(model: AbsoluteModel, q=None, poses=None) -> np.ndarray:
    """Assembly errors of the loop closures at ``q``: W^T [Δp; log(ΔR)] per closure [m, rad] (pair frame).

    ``q=None``: the neutral configuration; ``poses``: :func:`body_poses` at ``q``, when the caller has them.
    """
    if poses is None:
        poses = body_poses(model, q)
    out = []
    for pair, lc in zip([p for p in model.pairs if p.kind == "loop_closure"], model.extension.loop_closures):
        Ra, pa = pair_frame(pair, poses)
        Rb0, ob = poses[pair.child]
        Rb = Rb0 @ lc.child_origin.rotation()
        pb = ob + Rb0 @ np.asarray(lc.child_origin.xyz)
        W = _twist_complement(lc.type, tuple(float(x) for x in lc.axis))
        err = np.concatenate([Ra.T @ (pb - pa), pin.log3(Ra.T @ Rb)])
        out.append(W.T @ err)
    return np.concatenate(out) if out else np.zeros(0)


def loops_closed(model: AbsoluteModel, q=None, tol: float = 1e-12) -> bool:
    """Whether every loop closure is assembled at ``q`` (``None``: neutral) to ``tol`` [m, rad], as
    :func:`assemble_loops` decides before its first step."""
    r = closure_residuals(model, q)
    return bool(r.size == 0 or np.max(np.abs(r)) < tol)


def assemble_loops(model: AbsoluteModel, q=None, tol: float = 1e-12, max_iter: int = 50) -> np.ndarray:
    """Close the loops by Gauss-Newton on :func:`closure_residuals` (minimum-norm steps, driven joints held).

    Returns the assembled configuration; raises :class:`AbsoluteModelError` if the loops cannot be closed.
    """
    q = _q_or_neutral(model, q).copy()
    pm = model.pin_model
    driven_v: list[int] = []
    for d in model.extension.driving_constraints:
        jid = pm.getJointId(d.joint)
        if jid < pm.njoints:
            driven_v.extend(range(pm.joints[jid].idx_v, pm.joints[jid].idx_v + pm.joints[jid].nv))
    r = closure_residuals(model, q)
    h = 1e-7
    for _ in range(max_iter):
        if r.size == 0 or np.max(np.abs(r)) < tol:
            return q
        J = np.zeros((r.size, pm.nv))
        for i in range(pm.nv):
            if i in driven_v:
                continue
            dv = np.zeros(pm.nv)
            dv[i] = h
            J[:, i] = (closure_residuals(model, pin.integrate(pm, q, dv))
                       - closure_residuals(model, pin.integrate(pm, q, -dv))) / (2 * h)
        step = np.linalg.lstsq(J, -r, rcond=1e-10)[0]
        q = pin.integrate(pm, q, step)
        r = closure_residuals(model, q)
    if np.max(np.abs(r)) < 1e3 * tol:
        return q
    raise AbsoluteModelError(f"loop closures cannot be assembled: residual {np.max(np.abs(r)):.3g} after {max_iter} "
                             "Newton steps")


def body_twists(model: AbsoluteModel, q, v) -> np.ndarray:
    """Absolute velocity coordinates ν (module docstring) from Pinocchio joint velocities ``v`` [m/s, rad/s]."""
    q = _q_or_neutral(model, q)
    v = np.asarray(v, dtype=float).reshape(-1)
    pm = model.pin_model
    if v.shape[0] != pm.nv or not np.all(np.isfinite(v)):
        raise AbsoluteModelError(f"v: expected {pm.nv} finite numbers, got {v.shape[0]}")
    data = pm.createData()
    pin.forwardKinematics(pm, data, q, v)
    pin.updateFramePlacements(pm, data)
    out = []
    for link in model.bodies:
        tw = pin.getFrameVelocity(pm, data, model.frame_ids[link], pin.LOCAL_WORLD_ALIGNED)
        t = np.concatenate([tw.linear, tw.angular])
        out.append(t[[0, 1, 5]] if model.planar else t)
    return np.concatenate(out) if out else np.zeros(0)


def absolute_dynamics(model: AbsoluteModel, q, nu: np.ndarray, gravity=(0.0, 0.0, -9.81)):
    """Mass matrix M, and right-hand side F − h of the Newton-Euler equations in absolute coordinates.

    Per body, about its frame origin o (world axes), with c = R c_local: M_i = [[m I, −m[c]×], [m[c]×, I_o]],
    h_i = [m ω×(ω×c); ω×(I_o ω)], F_i = [m g; c × m g] (Wojtyra & Frączek 2013, eq. (10), with the body-fixed
    reference point not at the centre of mass). Planar mode keeps the (vx, vy, wz) rows and columns.
    Units: kg, kg m, kg m²; N, N m. Returns (M, F − h).
    """
    poses = body_poses(model, q)
    g = np.asarray(gravity, dtype=float)
    k = model.coordinates_per_body
    n = model.n_coordinates
    M = np.zeros((n, n))
    rhs = np.zeros(n)
    sel = [0, 1, 5] if model.planar else list(range(6))
    for i, link in enumerate(model.bodies):
        R, _ = poses[link]
        inert = model.inertias[link]
        m = inert.mass
        c = R @ np.asarray(inert.com)
        Io = R @ np.asarray(inert.inertia) @ R.T + m * (c @ c * np.eye(3) - np.outer(c, c))
        Mi = np.block([[m * np.eye(3), -m * _skew(c)], [m * _skew(c), Io]])
        t = np.zeros(6)
        t[sel] = nu[i * k: (i + 1) * k]
        w = t[3:]
        h = np.concatenate([m * np.cross(w, np.cross(w, c)), np.cross(w, Io @ w)])
        F = np.concatenate([m * g, np.cross(c, m * g)])
        M[i * k: (i + 1) * k, i * k: (i + 1) * k] = Mi[np.ix_(sel, sel)]
        rhs[i * k: (i + 1) * k] = (F - h)[sel]
    return M, rhs

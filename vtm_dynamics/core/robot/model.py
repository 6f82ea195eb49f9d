"""Robot model: the unconstrained multibody system of Müller 2026, Sec. 3.1, built by Pinocchio from a URDF.

The unconstrained equations of motion are M(q) q'' + C(q, q') q' + P(q) = u (Müller 2026, eq. (3) without the
constraint term). This module gives M (composite rigid body algorithm), the bias h(q, v) = C v + P (Pinocchio's
nonlinear effects), the gravity torques P(q), frame kinematics and the joint-name <-> coordinate index maps.

Coordinates follow Pinocchio: ``q`` has ``nq`` entries and ``v`` has ``nv`` entries; they differ when the model has
joints whose configuration is not a vector space (a URDF ``continuous`` joint is stored as (cos, sin), nq=2, nv=1).
URDF ``fixed`` joints are merged into their parent body and own no coordinate.

Units: SI throughout (m, rad, kg, s, N, N m). Spatial velocities are (linear, angular) 6-vectors.

A ``RobotModel`` owns one Pinocchio ``Data`` workspace: it is not thread-safe; use one instance per thread
(``copy()`` gives an independent one).
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.package_data import example_robot_data_share
from vtm_dynamics.core.robot.urdf_extension import (
    DEFAULT_MAX_DOF,
    DEFAULT_MAX_LINKS,
    DEFAULT_MAX_URDF_BYTES,
    DEFAULT_MAX_XML_DEPTH,
    WORLD_LINK,
    URDFExtension,
    URDFExtensionError,
    extension_from_root,
    parse_urdf_xml,
    read_urdf_file,
)
from vtm_dynamics.core.validation import finite_vector
from vtm_dynamics.core.excerpt import first_line

REFERENCE_FRAMES = {
    "local": pin.ReferenceFrame.LOCAL,
    "world": pin.ReferenceFrame.WORLD,
    "local_world_aligned": pin.ReferenceFrame.LOCAL_WORLD_ALIGNED,
}


class ModelError(ValueError):
    """A robot model cannot be built or queried as asked (unreadable URDF, unknown joint or frame, bad shape)."""


@dataclass(frozen=True)
class JointCoordinates:
    """Where one movable joint lives in q and v.

    ``idx_q:idx_q+nq`` is its configuration slice, ``idx_v:idx_v+nv`` its velocity slice; ``kind`` is Pinocchio's
    joint model name (e.g. ``JointModelRZ``, ``JointModelRUBZ`` for a continuous joint).
    """

    name: str
    joint_id: int
    idx_q: int
    nq: int
    idx_v: int
    nv: int
    kind: str

    @property
    def prismatic(self) -> bool:
        """A translational 1-DOF joint (coordinates in m, efforts in N): Pinocchio's JointModelPX/PY/PZ and
        JointModelPrismaticUnaligned; every other 1-DOF joint of a URDF turns (rad, N m)."""
        return self.kind in ("JointModelPX", "JointModelPY", "JointModelPZ") or self.kind.startswith(
            "JointModelPrismatic")

    @property
    def units(self) -> tuple[str, str, str]:
        """SI units of its (position, velocity, effort): ("m", "m/s", "N") for a prismatic joint, else
        ("rad", "rad/s", "N m")."""
        return ("m", "m/s", "N") if self.prismatic else ("rad", "rad/s", "N m")

    @property
    def q_slice(self) -> slice:
        return slice(self.idx_q, self.idx_q + self.nq)

    @property
    def v_slice(self) -> slice:
        return slice(self.idx_v, self.idx_v + self.nv)


def example_robot_urdf(relative_path: str) -> str:
    """Absolute path of a URDF shipped by the ``example-robot-data`` wheel, e.g. ``ur_description/urdf/ur5_robot.urdf``.

    The wheel (version 6) ships the robot descriptions but no Python loader; this finds its data directory.
    """
    share = example_robot_data_share()
    if share is None:
        raise ModelError("example-robot-data is not installed")
    root = os.path.join(share, "example-robot-data", "robots")
    path = os.path.join(root, relative_path)
    if not os.path.isfile(path):
        raise ModelError(f"example robot URDF not found: {relative_path}")
    return path


def _vector(x: object, n: int, field: str) -> np.ndarray:
    return finite_vector(x, n, field, ModelError)


class RobotModel:
    """Unconstrained robot dynamics from a URDF (Müller 2026, eq. (3) with J = 0), via Pinocchio.

    Build with :meth:`from_urdf`. Public attributes (read-only by convention): ``model`` (pinocchio.Model),
    ``data`` (pinocchio.Data workspace), ``extension`` (parsed vtm_dynamics URDF extension), ``urdf_text`` and
    ``urdf_root`` (its ``<robot>`` element as :meth:`from_urdf` parsed it, or None: read it, never change it).
    """

    __slots__ = ("model", "data", "extension", "urdf_text", "urdf_root", "_joints", "_by_name", "_joint_names")

    def __init__(self, model: pin.Model, extension: URDFExtension | None = None, urdf_text: str = "",
                 urdf_root: ET.Element | None = None) -> None:
        self.model = model
        self.data = model.createData()
        self.extension = extension
        self.urdf_text = urdf_text
        self.urdf_root = urdf_root
        joints = []
        for jid in range(1, model.njoints):
            jm = model.joints[jid]
            if jm.nv == 0:
                continue
            joints.append(
                JointCoordinates(
                    name=model.names[jid], joint_id=jid, idx_q=jm.idx_q, nq=jm.nq, idx_v=jm.idx_v, nv=jm.nv,
                    kind=jm.shortname(),
                )
            )
        joints.sort(key=lambda j: j.idx_v)
        self._joints = tuple(joints)
        self._by_name = {j.name: j for j in joints}
        self._joint_names = tuple(j.name for j in joints)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_urdf(
        cls, urdf: str, gravity: Sequence[float] | None = None, *, max_bytes: int = DEFAULT_MAX_URDF_BYTES,
        max_depth: int = DEFAULT_MAX_XML_DEPTH, max_links: int = DEFAULT_MAX_LINKS, max_dof: int = DEFAULT_MAX_DOF,
    ) -> "RobotModel":
        """Build from URDF XML **text** (never a path: use :meth:`from_urdf_file` for files); ``gravity``
        [m/s^2] defaults to (0, 0, -9.81).

        The text is checked by ``urdf_extension.parse_urdf_xml`` (size ``max_bytes`` [bytes], nesting
        ``max_depth``, ``max_links`` links/joints, ``max_dof`` joint degrees of freedom, no DTD) before Pinocchio
        sees it (Pinocchio's workspace grows like nv^3). Raises ``ModelError`` (one
        line, quoting none of the input) when the text is not URDF XML, exceeds a limit, Pinocchio rejects the
        tree, or the vtm_dynamics extension elements are inconsistent.
        """
        try:
            root = parse_urdf_xml(urdf, max_bytes=max_bytes, max_depth=max_depth, max_links=max_links,
                                  max_dof=max_dof)
            extension = extension_from_root(root)
        except URDFExtensionError as err:
            message = str(err)
            raise ModelError(message if message.startswith("urdf: ") else f"urdf: {message}") from None
        try:
            model = pin.buildModelFromXML(urdf)
        except Exception as err:  # Pinocchio raises plain RuntimeError/ValueError with multi-line text
            first = first_line(err)
            raise ModelError(f"urdf: Pinocchio could not build the model: {first[:160]}") from None
        if model.nv == 0:
            raise ModelError("urdf: the model has no movable joint")
        if gravity is not None:
            model.gravity.linear = _vector(gravity, 3, "gravity")
        return cls(model, extension, urdf, root)

    @classmethod
    def from_urdf_file(cls, path: str, gravity: Sequence[float] | None = None, **limits: int) -> "RobotModel":
        """Build from a URDF file (trusted callers: command lines, parameters, tests); ``limits`` as in
        :meth:`from_urdf`, which checks the file's text once."""
        try:
            text = read_urdf_file(path, limits.get("max_bytes", DEFAULT_MAX_URDF_BYTES))
        except URDFExtensionError as err:
            raise ModelError(str(err)) from None
        return cls.from_urdf(text, gravity, **limits)

    def copy(self) -> "RobotModel":
        """An independent instance (own Model and Data), e.g. for another thread."""
        return RobotModel(self.model.copy(), self.extension, self.urdf_text, self.urdf_root)

    def with_gravity(self, gravity: Sequence[float]) -> "RobotModel":
        """A copy whose gravity vector is ``gravity`` [m/s^2]."""
        other = self.copy()
        other.model.gravity.linear = _vector(gravity, 3, "gravity")
        return other

    # ------------------------------------------------------------------ sizes and index maps
    @property
    def name(self) -> str:
        return self.model.name

    @property
    def nq(self) -> int:
        return int(self.model.nq)

    @property
    def nv(self) -> int:
        return int(self.model.nv)

    @property
    def gravity(self) -> np.ndarray:
        """Gravity vector [m/s^2] in the world frame."""
        return np.array(self.model.gravity.linear)

    @property
    def joints(self) -> tuple[JointCoordinates, ...]:
        """Movable joints in velocity order."""
        return self._joints

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Names of the movable joints in velocity order (fixed joints excluded)."""
        return self._joint_names

    def joint(self, name: str) -> JointCoordinates:
        """Index record of the movable joint ``name``."""
        try:
            return self._by_name[name]
        except (KeyError, TypeError):
            raise ModelError(f"joint: {name!r} is not a movable joint of {self.name!r}") from None

    def q_slice(self, name: str) -> slice:
        return self.joint(name).q_slice

    def v_slice(self, name: str) -> slice:
        return self.joint(name).v_slice

    def v_indices(self, names: Sequence[str]) -> np.ndarray:
        """Velocity indices (int array) of the given joints, concatenated in the given order."""
        if isinstance(names, str):
            names = [names]
        idx: list[int] = []
        for n in names:
            s = self.v_slice(n)
            idx.extend(range(s.start, s.stop))
        return np.array(idx, dtype=int)

    def check_q(self, q: object, field: str = "q") -> np.ndarray:
        return _vector(q, self.nq, field)

    def check_v(self, v: object, field: str = "v") -> np.ndarray:
        return _vector(v, self.nv, field)

    # ------------------------------------------------------------------ configuration space
    def neutral(self) -> np.ndarray:
        """Neutral configuration (zero angles; (1, 0) for continuous joints)."""
        return np.array(pin.neutral(self.model))

    def integrate(self, q: object, v: object, dt: float = 1.0) -> np.ndarray:
        """q (+) v dt on the configuration manifold (pinocchio.integrate) [rad, m]."""
        return np.array(pin.integrate(self.model, self.check_q(q), self.check_v(v) * float(dt)))

    def difference(self, q0: object, q1: object) -> np.ndarray:
        """Tangent vector d (size nv) with q0 (+) d = q1."""
        return np.array(pin.difference(self.model, self.check_q(q0, "q0"), self.check_q(q1, "q1")))

    def joint_positions(self, q: object) -> np.ndarray:
        """One position per velocity coordinate (size nv) of configuration ``q``: the coordinate itself for
        revolute [rad] and prismatic [m] joints, the angle atan2(sin, cos) in (-pi, pi] [rad] for a continuous
        joint (stored as (cos, sin)), nan for joints with several degrees of freedom (planar, floating). The inverse
        of :meth:`configuration_from_angles` up to whole turns of continuous joints."""
        qa = self.check_q(q)
        out = np.full(self.nv, np.nan)
        for j in self._joints:
            if j.nq == j.nv:
                out[j.v_slice] = qa[j.q_slice]
            elif j.nv == 1 and j.nq == 2:
                out[j.idx_v] = np.arctan2(qa[j.idx_q + 1], qa[j.idx_q])
        return out

    def configuration_from_angles(self, angles: object) -> np.ndarray:
        """Configuration q from one coordinate per velocity (angle [rad] or displacement [m]) = neutral (+) angles."""
        return self.integrate(self.neutral(), _vector(angles, self.nv, "angles"))

    def random_configuration(self, rng: np.random.Generator, spread: float = np.pi) -> np.ndarray:
        """neutral (+) uniform(-spread, spread)^nv; finite even for unbounded joints."""
        return self.configuration_from_angles(rng.uniform(-spread, spread, self.nv))

    # ------------------------------------------------------------------ dynamics (Müller 2026, eq. (3))
    def mass_matrix(self, q: object) -> np.ndarray:
        """Generalized mass matrix M(q) [kg, kg m, kg m^2], full symmetric (CRBA)."""
        M = pin.crba(self.model, self.data, self.check_q(q))
        M = np.array(M)
        return np.triu(M) + np.triu(M, 1).T

    def bias_forces(self, q: object, v: object) -> np.ndarray:
        """h(q, v) = C(q, v) v + P(q) [N m, N] (Pinocchio nonLinearEffects)."""
        return np.array(pin.nonLinearEffects(self.model, self.data, self.check_q(q), self.check_v(v)))

    def gravity_torques(self, q: object) -> np.ndarray:
        """Potential (gravity) forces P(q) [N m, N]."""
        return np.array(pin.computeGeneralizedGravity(self.model, self.data, self.check_q(q)))

    def forward_dynamics(self, q: object, v: object, tau: object | None = None) -> np.ndarray:
        """Unconstrained acceleration a = M^-1 (tau - h) [rad/s^2] (ABA)."""
        t = np.zeros(self.nv) if tau is None else self.check_v(tau, "tau")
        return np.array(pin.aba(self.model, self.data, self.check_q(q), self.check_v(v), t))

    def inverse_dynamics(self, q: object, v: object, a: object) -> np.ndarray:
        """tau = M a + h [N m] (RNEA)."""
        return np.array(pin.rnea(self.model, self.data, self.check_q(q), self.check_v(v), self.check_v(a, "a")))

    def kinetic_energy(self, q: object, v: object) -> float:
        """T = 1/2 v^T M v [J]."""
        return float(pin.computeKineticEnergy(self.model, self.data, self.check_q(q), self.check_v(v)))

    def potential_energy(self, q: object) -> float:
        """Gravitational potential energy [J] (zero at the world origin height)."""
        return float(pin.computePotentialEnergy(self.model, self.data, self.check_q(q)))

    # ------------------------------------------------------------------ frames
    def frame_id(self, name: str) -> int:
        """Pinocchio frame index of a link/joint/frame name; ``world`` means the universe frame."""
        if name == WORLD_LINK and not self.model.existFrame(WORLD_LINK):
            return 0
        if not isinstance(name, str) or not self.model.existFrame(name):
            raise ModelError(f"frame: {name!r} does not exist in {self.name!r}")
        return int(self.model.getFrameId(name))

    def _reference(self, reference: str) -> pin.ReferenceFrame:
        try:
            return REFERENCE_FRAMES[reference]
        except KeyError:
            raise ModelError(f"reference: must be one of {', '.join(REFERENCE_FRAMES)}, got {reference!r}") from None

    def frame_placement(self, q: object, frame: str | int) -> pin.SE3:
        """World placement oMf of a frame (rotation, translation [m])."""
        fid = frame if isinstance(frame, int) else self.frame_id(frame)
        pin.forwardKinematics(self.model, self.data, self.check_q(q))
        return pin.SE3(pin.updateFramePlacement(self.model, self.data, fid))

    def frame_velocity(self, q: object, v: object, frame: str | int, reference: str = "local_world_aligned") -> np.ndarray:
        """Spatial velocity (linear [m/s], angular [rad/s]) of a frame, expressed in ``reference``."""
        fid = frame if isinstance(frame, int) else self.frame_id(frame)
        pin.forwardKinematics(self.model, self.data, self.check_q(q), self.check_v(v))
        return np.array(pin.getFrameVelocity(self.model, self.data, fid, self._reference(reference)).vector)

    def frame_jacobian(self, q: object, frame: str | int, reference: str = "local_world_aligned") -> np.ndarray:
        """6 x nv frame Jacobian (linear rows first) expressed in ``reference``."""
        fid = frame if isinstance(frame, int) else self.frame_id(frame)
        return np.array(pin.computeFrameJacobian(self.model, self.data, self.check_q(q), fid, self._reference(reference)))

    def frame_acceleration(
        self, q: object, v: object, a: object, frame: str | int, reference: str = "local_world_aligned",
        classical: bool = False,
    ) -> np.ndarray:
        """Spatial (or, with ``classical``, classical: d/dt of the point velocity) acceleration of a frame.

        With a = 0 this is the drift J'(q, v) v of the frame Jacobian in the same reference (spatial sense).
        """
        fid = frame if isinstance(frame, int) else self.frame_id(frame)
        pin.forwardKinematics(self.model, self.data, self.check_q(q), self.check_v(v), self.check_v(a, "a"))
        ref = self._reference(reference)
        if classical:
            return np.array(pin.getFrameClassicalAcceleration(self.model, self.data, fid, ref).vector)
        return np.array(pin.getFrameAcceleration(self.model, self.data, fid, ref).vector)

    def __repr__(self) -> str:
        return f"RobotModel({self.name!r}, nq={self.nq}, nv={self.nv}, joints={list(self.joint_names)})"

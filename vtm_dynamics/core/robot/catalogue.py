"""The robots the suite ships, in one place: the facts every tool, fit and node reads about a robot it knows by name.

Per robot (:class:`CatalogueRobot`): where its URDF comes from, its joints (velocity order) and tool frame, the
frame a payload is attached to and the maker's rated payload, the maker's maximum joint speeds, the file of its
default brakes (``config/``), the states the tools start from by name, and the category-0 stopping figures the
maker publishes with the test motion the suite states for them.

The robots:

* ``ur5``, ``ur3``: Universal Robots UR5 and UR3 (CB3), URDFs of the ``example-robot-data`` wheel. Rated payloads
  5 kg and 3 kg, a point mass at ``tool0`` (CB3 user manuals). Maximum joint speeds: the manuals' joint speed
  limits, UR5 180 deg/s on every joint, UR3 180 deg/s on base, shoulder and elbow and 360 deg/s on the wrists
  (where the URDF's velocity limit is lower, e.g. the UR3's base and shoulder 2.16 rad/s, the tools cap the speed
  at the URDF's, because a prediction refuses states beyond the model's limits). Published figures: CB3 user
  manual, Appendix A (stop category 0, 100 % extension, 100 % speed, maximum payload); their test motion (arm
  stretched horizontally, q = 0 of these URDFs; extension folded with the elbow) and the brake terms the default
  brakes assume (reflected rotor inertias, wrist brake torque) are stated assumptions, docs/estop.md.
* ``planar_3r``: the planar 3R pendulum of Müller 2026, Sec. 6 (``urdf/planar_3r.urdf``); no payload, no maker.

Nothing here computes: the core's fit tools (:mod:`vtm_dynamics.core.estop.category0_fit`), the command lines and
the nodes turn these facts into models, brakes and parameters. Units: rad, rad/s, s, kg.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from vtm_dynamics.core.package_data import package_data_file

EXAMPLE_ROBOT_DATA = "example-robot-data"  # the wheel's robot descriptions
PACKAGE_URDF = "vtm_dynamics"  # the package's own urdf/ directory


class CatalogueError(ValueError):
    """A catalogue robot whose files are missing from this installation (one line naming the file)."""


@dataclass(frozen=True)
class UrdfSource:
    """Where a robot's URDF is: ``package`` (:data:`EXAMPLE_ROBOT_DATA` or :data:`PACKAGE_URDF`) and the ``path``
    inside it."""

    package: str
    path: str

    def resolve(self) -> str:
        """The absolute path of the URDF file (:class:`~vtm_dynamics.core.robot.model.ModelError` if missing)."""
        from vtm_dynamics.core.robot.model import ModelError, example_robot_urdf  # Pinocchio: only when loading

        if self.package == EXAMPLE_ROBOT_DATA:
            return example_robot_urdf(self.path)
        found = package_data_file("urdf", self.path)
        if found is None:
            raise ModelError(f"robot: URDF urdf/{self.path} not found in this installation")
        return found


@dataclass(frozen=True)
class NamedState:
    """A state the tools start from by name: joint positions ``q`` [rad] and velocities ``v`` [rad/s], velocity
    order (one angle per joint)."""

    name: str
    q: tuple[float, ...]
    v: tuple[float, ...]


@dataclass(frozen=True)
class PublishedStop:
    """A published category-0 stopping figure: ``joint`` stops within ``angle`` [rad] and ``time`` [s]."""

    joint: str
    angle: float
    time: float


@dataclass(frozen=True)
class StoppingTests:
    """The stopping-data test of ISO 10218-1 as the suite states it for a robot: the tested ``joints`` (greatest
    displacement), the joint that folds each one's extension (``fold_joints``) and the 100 % extension pose
    ``base_pose`` [rad]."""

    joints: tuple[str, ...]
    fold_joints: tuple[str, ...]
    base_pose: tuple[float, ...]


@dataclass(frozen=True)
class BrakeAssumptions:
    """What the default brakes assume beyond the published figures: the reflected rotor inertias ``armature``
    [kg m^2] per joint and the sliding torque ``wrist_sliding`` [N m] of the joints without figures."""

    armature: tuple[float, ...]
    wrist_sliding: float


@dataclass(frozen=True)
class SimulatedMotion:
    """The motion ``robot_sim`` drives when it differs from the one in ``config/estop_predict.yaml``: ``home``,
    ``amplitude``, ``phase`` [rad] (one value: the same for every joint)."""

    home: tuple[float, ...]
    amplitude: tuple[float, ...]
    phase: tuple[float, ...]


@dataclass(frozen=True)
class CatalogueRobot:
    """One robot the suite ships (module docstring). ``payload_frame`` None: the robot carries no payload;
    ``rated_payload`` [kg] and ``max_speeds`` [rad/s, one per joint] None: no maker rates them."""

    name: str
    urdf: UrdfSource
    joint_names: tuple[str, ...]
    tcp_frame: str
    payload_frame: str | None
    rated_payload: float | None
    max_speeds: tuple[float, ...] | None
    brakes: str
    states: tuple[NamedState, ...]
    stopping_tests: StoppingTests | None = None
    published_stops: tuple[PublishedStop, ...] = ()
    brake_assumptions: BrakeAssumptions | None = None
    simulated_motion: SimulatedMotion | None = None

    def payload_frame_or(self, tcp_frame: str) -> str:
        """Where a payload is attached: this robot's payload frame (its flange), else ``tcp_frame``. One rule for
        every tool, so a payload is never hung on the frame a distance happens to be measured at."""
        return self.payload_frame or tcp_frame

    def urdf_path(self) -> str:
        """The absolute path of the URDF file."""
        return self.urdf.resolve()

    def brakes_path(self) -> str:
        """The absolute path of the default brake YAML (:class:`CatalogueError` if this installation lacks it)."""
        found = package_data_file("config", self.brakes)
        if found is None:
            raise CatalogueError(f"brakes: no default brakes for {self.name} in this installation "
                                 f"(config/{self.brakes})")
        return found

    @property
    def state_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.states)

    def state(self, name: str) -> NamedState | None:
        """The named state ``name``, or None."""
        return next((s for s in self.states if s.name == name), None)

    def max_speed(self, joint: str) -> float:
        """The maker's maximum speed [rad/s] of ``joint`` (KeyError for another joint; nan when not rated)."""
        k = self.joint_names.index(joint)
        return self.max_speeds[k] if self.max_speeds is not None else math.nan


_DEG = math.pi / 180
_UR_JOINTS = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
              "wrist_3_joint")
_UR_TESTS = StoppingTests(joints=_UR_JOINTS[:3], fold_joints=("elbow_joint",) * 3, base_pose=(0.0,) * 6)


def _stretched(joint: int, speed: float) -> NamedState:
    """The arm stretched (q = 0), joint ``joint`` alone at ``speed`` [rad/s]: a UR's stated test motion."""
    return NamedState(f"stretched_j{joint}", (0.0,) * 6, tuple(speed if k == joint else 0.0 for k in range(6)))


UR5 = CatalogueRobot(
    name="ur5", urdf=UrdfSource(EXAMPLE_ROBOT_DATA, "ur_description/urdf/ur5_robot.urdf"), joint_names=_UR_JOINTS,
    tcp_frame="tool0", payload_frame="tool0", rated_payload=5.0, max_speeds=(180 * _DEG,) * 6,
    brakes="ur5_brakes.yaml",
    states=(NamedState("demo", (0.3, -1.2, 1.5, -0.8, 0.5, 0.2), (2.0, -2.5, 2.8, 1.5, -2.0, 3.0)),
            _stretched(0, math.pi), _stretched(1, math.pi), _stretched(2, math.pi)),
    stopping_tests=_UR_TESTS,
    published_stops=(PublishedStop("shoulder_pan_joint", 0.31, 0.244),
                     PublishedStop("shoulder_lift_joint", 0.70, 0.530),
                     PublishedStop("elbow_joint", 0.22, 0.164)),
    brake_assumptions=BrakeAssumptions(armature=(2.0, 2.0, 0.5, 0.15, 0.15, 0.15), wrist_sliding=28.0),
)
# UR3 named states: the stated test motions of its default brakes' fit, the joint at min(pi, URDF limit) rad/s (the
# URDF limits base and shoulder to 2.16 rad/s) in the direction gravity pulls it, arm stretched
UR3 = CatalogueRobot(
    name="ur3", urdf=UrdfSource(EXAMPLE_ROBOT_DATA, "ur_description/urdf/ur3_robot.urdf"), joint_names=_UR_JOINTS,
    tcp_frame="tool0", payload_frame="tool0", rated_payload=3.0, max_speeds=(180 * _DEG,) * 3 + (360 * _DEG,) * 3,
    brakes="ur3_brakes.yaml",
    states=(NamedState("demo", (0.3, -1.2, 1.5, -0.8, 0.5, 0.2), (1.5, -1.8, 2.0, 1.5, -2.0, 3.0)),
            _stretched(0, 2.16), _stretched(1, 2.16), _stretched(2, math.pi)),
    stopping_tests=_UR_TESTS,
    published_stops=(PublishedStop("shoulder_pan_joint", 0.18, 0.159),
                     PublishedStop("shoulder_lift_joint", 0.20, 0.154),
                     PublishedStop("elbow_joint", 0.15, 0.092)),
    brake_assumptions=BrakeAssumptions(armature=(0.5, 0.5, 0.15, 0.05, 0.05, 0.05), wrist_sliding=12.0),
)
PLANAR_3R = CatalogueRobot(
    name="planar_3r", urdf=UrdfSource(PACKAGE_URDF, "planar_3r.urdf"), joint_names=("joint1", "joint2", "joint3"),
    tcp_frame="link3", payload_frame=None, rated_payload=None, max_speeds=None, brakes="planar_3r_brakes.yaml",
    states=(NamedState("demo", (math.pi / 6,) * 3, (1.0, -0.5, 0.8)),
            NamedState("rest", (math.pi / 6,) * 3, (0.0, 0.0, 0.0))),
    simulated_motion=SimulatedMotion(home=(0.0,), amplitude=(0.6,), phase=(0.0,)),
)

ROBOTS: Mapping[str, CatalogueRobot] = MappingProxyType({r.name: r for r in (UR5, UR3, PLANAR_3R)})
ROBOT_NAMES: tuple[str, ...] = tuple(ROBOTS)
DEFAULT_ROBOT = UR5.name  # the robot the command lines work on when none is named

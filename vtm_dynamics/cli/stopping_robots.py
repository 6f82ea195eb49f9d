"""The robots the stopping-data tools know by name, with their STATED ASSUMPTIONS, and loading a robot for them.

Maximum joint speeds (100 % speed) are not in the published stopping data; we ASSUME the manufacturer's joint speed
limits: UR5 (CB3 manual): base, shoulder, elbow 180 deg/s, wrists 180 deg/s; UR3 (CB3 manual): base, shoulder,
elbow 180 deg/s, wrists 360 deg/s. Where the URDF's velocity limit is lower (example-robot-data: UR5 3.15 rad/s,
UR3 base and shoulder 2.16 rad/s), the URDF limit applies (the prediction refuses states beyond the model's limits). Maximum payloads: UR5 5 kg, UR3 3 kg
(same manuals), a point mass at ``tool0``. The 100 % extension pose is the arm stretched horizontally (q = 0 of the
example-robot-data URDFs); extension is folded with the elbow.
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass

from typing import TYPE_CHECKING

from vtm_dynamics.cli.arguments import robot_name
from vtm_dynamics.cli.predict import ROBOTS, _data_path, _urdf_path

if TYPE_CHECKING:  # the core is imported when a robot is loaded, not when a tool builds its parser
    from vtm_dynamics.core.robot.model import RobotModel


@dataclass(frozen=True)
class StoppingRobot:
    """A named robot: URDF source, default brake file name, TCP and payload frame, tested joints with their fold
    joints and maximum speeds [rad/s], every joint's maximum speed [rad/s], maximum payload [kg], 100 % pose."""

    urdf: str
    brakes: str
    tcp_frame: str
    joints: tuple[str, ...]
    fold_joints: tuple[str, ...]
    max_speeds: tuple[float, ...]
    all_max_speeds: tuple[float, ...]
    max_payload: float
    base_pose: tuple[float, ...]


_UR_JOINTS = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint")
_DEG = math.pi / 180
STOPPING_ROBOTS = {
    "ur5": StoppingRobot(ROBOTS["ur5"][0], "ur5_brakes.yaml", "tool0", _UR_JOINTS, ("elbow_joint",) * 3,
                         (180 * _DEG,) * 3, (180 * _DEG,) * 6, 5.0, (0.0,) * 6),
    "ur3": StoppingRobot("example:ur_description/urdf/ur3_robot.urdf", "ur3_brakes.yaml", "tool0", _UR_JOINTS,
                         ("elbow_joint",) * 3, (180 * _DEG,) * 3, (180 * _DEG,) * 3 + (360 * _DEG,) * 3, 3.0,
                         (0.0,) * 6),
}


@dataclass(frozen=True)
class LoadedRobot:
    """``name``, the URDF ``text`` and its ``robot`` (no payload), the brake configuration ``brake_config`` read
    from ``brake_source``, and the named defaults (None for a robot given by URDF)."""

    name: str
    text: str
    robot: RobotModel
    brake_config: dict
    brake_source: str
    defaults: StoppingRobot | None


def load_robot(name: str | None, urdf: str | None = None, brakes: str | None = None) -> LoadedRobot:
    """A robot by name (``ur5``, ``ur3``) or by URDF file + brake YAML; one-line ``StopInputError`` otherwise."""
    from vtm_dynamics.core.estop import StopInputError
    from vtm_dynamics.core.estop.brakes import load_brake_yaml
    from vtm_dynamics.core.robot.model import RobotModel
    from vtm_dynamics.core.robot.urdf_extension import read_urdf_file

    defaults = None
    if urdf is None:
        defaults = STOPPING_ROBOTS.get(name or "")
        if defaults is None:
            raise StopInputError(f"robot: unknown robot {name!r} (known: {', '.join(STOPPING_ROBOTS)}; or --urdf "
                                 "FILE --brakes FILE)")
        urdf = _urdf_path(defaults.urdf)
        if brakes is None:
            brakes = _data_path("config", defaults.brakes)
            if not os.path.isfile(brakes):
                raise StopInputError(f"brakes: no default brakes for {name} in this installation "
                                     f"(config/{defaults.brakes}); give --brakes FILE")
    elif brakes is None:
        raise StopInputError("brakes: --brakes FILE is required with --urdf")
    text = read_urdf_file(urdf)
    robot = RobotModel.from_urdf(text)
    config = load_brake_yaml(brakes)
    return LoadedRobot(name or robot.name, text, robot, config, brakes, defaults)


def add_robot_arguments(ap: argparse.ArgumentParser, tcp_help: str) -> None:
    """The robot options the stopping tools share: a name, or a URDF file with its brake YAML and TCP frame."""
    ap.add_argument("robot", nargs="?", default="ur5", type=robot_name(STOPPING_ROBOTS),
                    help=f"{' | '.join(STOPPING_ROBOTS)}, any case (ignored with --urdf)")
    ap.add_argument("--urdf", help="URDF file of another robot (needs --brakes and --tcp-frame)")
    ap.add_argument("--brakes", help="brake YAML (default: the robot's config/<robot>_brakes.yaml)")
    ap.add_argument("--tcp-frame", help=tcp_help)

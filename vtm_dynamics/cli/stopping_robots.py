"""The robots the stopping-data tools know by name, and loading a robot for them.

The named robots are those of the catalogue with a stated stopping test (:mod:`vtm_dynamics.core.robot.catalogue`:
tested joints, fold joints, 100 % extension pose, the maker's maximum speeds and rated payload, all stated
assumptions there); any other robot is given by its URDF file, brake YAML and TCP frame.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from typing import TYPE_CHECKING

from vtm_dynamics.cli.arguments import robot_name
from vtm_dynamics.core.robot.catalogue import DEFAULT_ROBOT, ROBOTS, CatalogueError, CatalogueRobot

if TYPE_CHECKING:  # the core is imported when a robot is loaded, not when a tool builds its parser
    from vtm_dynamics.core.robot.model import RobotModel

STOPPING_ROBOTS = tuple(name for name, robot in ROBOTS.items() if robot.stopping_tests is not None)


@dataclass(frozen=True)
class LoadedRobot:
    """``name``, the URDF ``text`` and its ``robot`` (no payload), the brake configuration ``brake_config`` read
    from ``brake_source``, and the catalogue entry ``defaults`` (None for a robot given by URDF)."""

    name: str
    text: str
    robot: RobotModel
    brake_config: dict
    brake_source: str
    defaults: CatalogueRobot | None


def load_robot(name: str | None, urdf: str | None = None, brakes: str | None = None) -> LoadedRobot:
    """A robot by name (one of :data:`STOPPING_ROBOTS`) or by URDF file + brake YAML; one-line
    ``StopInputError`` otherwise."""
    from vtm_dynamics.core.estop import StopInputError
    from vtm_dynamics.core.estop.brakes import load_brake_yaml
    from vtm_dynamics.core.robot.model import RobotModel
    from vtm_dynamics.core.robot.urdf_extension import read_urdf_file

    defaults = None
    if urdf is None:
        defaults = ROBOTS.get(name or "") if name in STOPPING_ROBOTS else None
        if defaults is None:
            raise StopInputError(f"robot: unknown robot {name!r} (known: {', '.join(STOPPING_ROBOTS)}; or --urdf "
                                 "FILE --brakes FILE)")
        urdf = defaults.urdf_path()
        if brakes is None:
            try:
                brakes = defaults.brakes_path()
            except CatalogueError as err:
                raise StopInputError(f"{err}; give --brakes FILE") from None
    elif brakes is None:
        raise StopInputError("brakes: --brakes FILE is required with --urdf")
    text = read_urdf_file(urdf)
    robot = RobotModel.from_urdf(text)
    config = load_brake_yaml(brakes)
    return LoadedRobot(name or robot.name, text, robot, config, brakes, defaults)


def add_robot_arguments(ap: argparse.ArgumentParser, tcp_help: str) -> None:
    """The robot options the stopping tools share: a name, or a URDF file with its brake YAML and TCP frame."""
    ap.add_argument("robot", nargs="?", default=DEFAULT_ROBOT, type=robot_name(STOPPING_ROBOTS),
                    help=f"{' | '.join(STOPPING_ROBOTS)}, any case (ignored with --urdf)")
    ap.add_argument("--urdf", help="URDF file of another robot (needs --brakes and --tcp-frame)")
    ap.add_argument("--brakes", help="brake YAML (default: the robot's config/<robot>_brakes.yaml)")
    ap.add_argument("--tcp-frame", help=tcp_help)

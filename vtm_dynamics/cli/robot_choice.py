"""The robot a command line works on: a robot of the catalogue by name, or a URDF file with its brake file.

Shared by ``vtm-predict`` and ``vtm-calibrate``: the model (bare and with a payload at its payload frame), the
default brake file and the default TCP frame of a named robot, all read from
:mod:`vtm_dynamics.core.robot.catalogue`. A URDF path here is a trusted path typed on the command line. Errors are
one-line :class:`~vtm_dynamics.core.estop.StopInputError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vtm_dynamics.core.estop import StopInputError
from vtm_dynamics.core.estop.defaults import PAYLOAD
from vtm_dynamics.core.robot.catalogue import ROBOT_NAMES, ROBOTS, CatalogueError, CatalogueRobot

if TYPE_CHECKING:  # Pinocchio is imported when a robot is loaded, not when a tool builds its parser
    from vtm_dynamics.core.robot.model import RobotModel

ROBOT_HELP = " | ".join(ROBOT_NAMES)


def named_robot(robot_name: str | None, urdf: str | None = None) -> CatalogueRobot | None:
    """The catalogue robot ``robot_name`` (None if it is none and a URDF file is given); StopInputError when
    neither names a robot."""
    robot = ROBOTS.get(robot_name or "")
    if urdf is None and robot is None:
        raise StopInputError(f"robot: must be one of {', '.join(ROBOT_NAMES)} or --urdf PATH, got {robot_name!r}")
    return robot


def load_robot(robot_name: str | None, urdf: str | None = None, payload: float = PAYLOAD,
               tcp_frame: str | None = None, payload_frame: str | None = None,
               ) -> tuple[RobotModel, RobotModel, str | None]:
    """(bare robot, robot with ``payload`` [kg] at its payload frame, payload frame) from a robot name of the
    catalogue or a URDF file. The payload frame: ``payload_frame`` if given, else the catalogue's, else
    ``tcp_frame``."""
    from vtm_dynamics.core.estop.payload import with_payload
    from vtm_dynamics.core.robot.model import RobotModel

    spec = named_robot(robot_name, urdf)
    bare = RobotModel.from_urdf_file(urdf if urdf is not None else spec.urdf_path())
    if payload_frame is not None and not bare.model.existFrame(payload_frame):
        raise StopInputError(f"payload_frame: the model has no frame {payload_frame[:80]!r}")
    payload_frame = payload_frame or (spec.payload_frame_or(tcp_frame) if spec else tcp_frame)
    robot = bare
    if payload:
        if payload_frame is None:
            raise StopInputError("payload: needs --tcp-frame to know where to attach it")
        robot = with_payload(bare, payload, payload_frame)
    return bare, robot, payload_frame


def default_brakes_path(robot_name: str | None, urdf: str | None = None) -> str:
    """The shipped brake YAML of a named robot; with a URDF file the user must name one."""
    spec = ROBOTS.get(robot_name or "")
    if spec is None:
        raise StopInputError("brakes: --brakes YAML is required with --urdf")
    try:
        return spec.brakes_path()
    except CatalogueError as err:
        raise StopInputError(str(err)) from None


def default_tcp_frame(robot_name: str | None, tcp_frame: str | None = None) -> str | None:
    """``tcp_frame`` if given, else the TCP frame of a named robot, else None."""
    spec = ROBOTS.get(robot_name or "")
    return tcp_frame or (spec.tcp_frame if spec is not None else None)

"""Where a node's robot model comes from: a robot of the catalogue by name, a URDF path, or URDF text.

Robot names: those of :mod:`vtm_dynamics.core.robot.catalogue` (``ur5`` and ``ur3`` from the ``example-robot-data``
wheel, ``planar_3r`` in the package's ``urdf/`` directory). The URDF text is also what the nodes publish on / read
from ``robot_description``. No physics here: models are built by ``vtm_dynamics.core.robot.model``.
"""

from __future__ import annotations

import os

from vtm_dynamics.core.robot.catalogue import ROBOT_NAMES, ROBOTS
from vtm_dynamics.core.robot.model import ModelError, RobotModel
from vtm_dynamics.core.robot.urdf_extension import (
    DEFAULT_MAX_DOF,
    DEFAULT_MAX_LINKS,
    DEFAULT_MAX_URDF_BYTES,
    DEFAULT_MAX_XML_DEPTH,
    URDFExtensionError,
    parse_urdf_xml,
    read_urdf_file,
)

__all__ = ["ROBOT_NAMES", "SIM_OVERRIDES", "default_tcp_frame", "load_urdf_text", "model_from_urdf_text",
           "robot_urdf_path", "root_frame", "urdf_root_link"]

# robot_sim parameters that differ per robot from the UR5 defaults of config/estop_predict.yaml
SIM_OVERRIDES = {
    robot.name: {"motion_home": list(robot.simulated_motion.home),
                 "motion_amplitude": list(robot.simulated_motion.amplitude),
                 "motion_phase": list(robot.simulated_motion.phase), "tcp_frame": robot.tcp_frame}
    for robot in ROBOTS.values() if robot.simulated_motion is not None
}


def robot_urdf_path(robot: str) -> str:
    """URDF file of a named robot (one of ``ROBOT_NAMES``)."""
    spec = ROBOTS.get(robot)
    if spec is None:
        raise ModelError(f"robot: unknown robot {robot!r} (known: {', '.join(ROBOT_NAMES)})")
    return spec.urdf_path()


def load_urdf_text(robot: str = "", urdf_path: str = "") -> str:
    """URDF XML text from ``urdf_path`` if given, else from the named ``robot``; '' when neither is set."""
    path = os.path.expanduser(urdf_path) if urdf_path else (robot_urdf_path(robot) if robot else "")
    if not path:
        return ""
    try:  # bounded: a regular file of at most the text cap (a FIFO or /dev/zero here hung or exhausted the node)
        return read_urdf_file(path)
    except URDFExtensionError as err:
        raise ModelError("urdf_path: " + str(err).removeprefix("urdf: ")) from None


def model_from_urdf_text(text: str, *, max_bytes: int = DEFAULT_MAX_URDF_BYTES,
                         max_depth: int = DEFAULT_MAX_XML_DEPTH, max_links: int = DEFAULT_MAX_LINKS,
                         max_dof: int = DEFAULT_MAX_DOF) -> RobotModel:
    """Robot model from URDF XML text, e.g. ``robot_description`` (raises ``ModelError`` with one line on bad text).

    The text is data, never a path; its size [bytes], nesting depth, link/joint count and degrees of freedom are
    capped before any expensive parse (``core.urdf_extension.parse_urdf_xml``). Errors name ``robot_description``.
    """
    try:
        return RobotModel.from_urdf(text, max_bytes=max_bytes, max_depth=max_depth, max_links=max_links,
                                    max_dof=max_dof)
    except ModelError as err:
        message = str(err)
        raise ModelError("robot_description: " + message.removeprefix("urdf: ")) from None


def default_tcp_frame(robot: RobotModel, robot_name: str = "") -> str:
    """The frame whose stopping distance is reported when none is configured: a known robot's tool frame, else
    ``tool0`` if it exists, else the last frame of the model."""
    known = [ROBOTS[n].tcp_frame if n in ROBOTS else "" for n in (robot_name, robot.name)]
    for name in (*known, "tool0"):
        if name and robot.model.existFrame(name):
            return name
    return robot.model.frames[len(robot.model.frames) - 1].name


def urdf_root_link(text: str) -> str:
    """Name of the root link of URDF text (the link that is no joint's child), parsed with the core's limits."""
    try:
        root = parse_urdf_xml(text)
    except URDFExtensionError as err:
        raise ModelError(str(err)) from None
    links = [link.get("name") for link in root.findall("link")]
    children = {child.get("link") for child in root.findall("joint/child")}
    roots = [name for name in links if name not in children]
    if len(roots) != 1:
        raise ModelError(f"urdf: expected one root link, found {len(roots)}")
    return roots[0]


def root_frame(robot: RobotModel) -> str:
    """Name of the URDF root link (the fixed frame of markers and TCP positions)."""
    for f in robot.model.frames:
        if f.parentJoint == 0 and f.name != "universe" and str(f.type).endswith("BODY"):
            return f.name
    return "world"

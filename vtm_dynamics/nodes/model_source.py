"""Where a node's robot model comes from: a robot name the project ships, a URDF path, or URDF text.

Robot names: ``ur5`` and ``ur3`` (Universal Robots UR5 and UR3 from the ``example-robot-data`` wheel) and ``planar_3r`` (the planar
3R pendulum of Müller 2026, Sec. 6, in the package's ``urdf/`` directory). The URDF text is also what the nodes
publish on / read from ``robot_description``. No physics here: models are built by ``vtm_dynamics.core.robot.model``.
"""

from __future__ import annotations

import os
import sys

from vtm_dynamics.core.robot.model import ModelError, RobotModel, example_robot_urdf
from vtm_dynamics.core.robot.urdf_extension import (
    DEFAULT_MAX_DOF,
    DEFAULT_MAX_LINKS,
    DEFAULT_MAX_URDF_BYTES,
    DEFAULT_MAX_XML_DEPTH,
    URDFExtensionError,
    parse_urdf_xml,
)

ROBOT_NAMES = ("ur5", "ur3", "planar_3r")
_EXAMPLE_ROBOT_URDFS = {"ur5": "ur_description/urdf/ur5_robot.urdf", "ur3": "ur_description/urdf/ur3_robot.urdf"}
_PACKAGE_URDFS = {"planar_3r": "planar_3r.urdf"}
DEFAULT_TCP_FRAMES = {"ur5": "tool0", "ur3": "tool0", "planar_3r": "link3"}
# robot_sim parameters that differ per robot from the UR5 defaults of config/estop_predict.yaml
SIM_OVERRIDES = {
    "planar_3r": {"motion_home": [0.0], "motion_amplitude": [0.6], "motion_phase": [0.0], "tcp_frame": "link3"},
}


def package_share_dir(subdir: str) -> str:
    """``<package>/<subdir>`` of a source checkout, else ``<prefix>/share/vtm_dynamics/<subdir>`` (installed)."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    candidates = [os.path.join(here, subdir), os.path.join(sys.prefix, "share", "vtm_dynamics", subdir)]
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            candidates.append(os.path.join(prefix, "share", "vtm_dynamics", subdir))
    for c in candidates:
        if os.path.isdir(c):
            return c
    raise ModelError(f"package data directory {subdir!r} not found (looked in {candidates[0]} and the install share)")


def robot_urdf_path(robot: str) -> str:
    """URDF file of a named robot (one of ``ROBOT_NAMES``)."""
    if robot in _EXAMPLE_ROBOT_URDFS:
        return example_robot_urdf(_EXAMPLE_ROBOT_URDFS[robot])
    if robot in _PACKAGE_URDFS:
        path = os.path.join(package_share_dir("urdf"), _PACKAGE_URDFS[robot])
        if os.path.isfile(path):
            return path
        raise ModelError(f"robot: URDF of {robot!r} not found at {path}")
    raise ModelError(f"robot: unknown robot {robot!r} (known: {', '.join(ROBOT_NAMES)})")


def load_urdf_text(robot: str = "", urdf_path: str = "") -> str:
    """URDF XML text from ``urdf_path`` if given, else from the named ``robot``; '' when neither is set."""
    path = os.path.expanduser(urdf_path) if urdf_path else (robot_urdf_path(robot) if robot else "")
    if not path:
        return ""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as err:
        raise ModelError(f"urdf_path: cannot read {path}: {err.strerror}") from None


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
    for name in (DEFAULT_TCP_FRAMES.get(robot_name, ""), DEFAULT_TCP_FRAMES.get(robot.name, ""), "tool0"):
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

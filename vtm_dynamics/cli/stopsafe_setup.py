"""What ``vtm-check-trajectory`` and ``vtm-safety-distance`` share: the robot (a known name or a URDF with its
brakes, collision meshes and fixed joints), the stop cases (categories x the envelope), a progress bar and the
estimated cost stated before long runs.

Known robots come from the robot catalogue (URDF, brake file, TCP frame, payload frame, rated payload); the
envelope's payload range defaults to 0 .. the rated payload. Meshes are found only in the package directories
given (``--package-dir``; the example robots' own directory for known robots). Units: SI.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vtm_dynamics.cli.arguments import add_torque_limits_option
from vtm_dynamics.cli.robot_choice import default_brakes_path
from vtm_dynamics.core.estop import CategoryOne, StopInputError
from vtm_dynamics.core.estop.inputs import torque_limits_from_text, torque_limits_text
from vtm_dynamics.core.estop.defaults import (
    CATEGORY1_DECELERATION, ENVELOPE_DELAY_FACTOR, ENVELOPE_TORQUE_FACTOR,
)
from vtm_dynamics.core.robot.catalogue import EXAMPLE_ROBOT_DATA, ROBOT_NAMES, ROBOTS
from vtm_dynamics.core.robot.urdf_extension import read_urdf_file

if TYPE_CHECKING:  # Pinocchio, coal and the engine are imported when a robot is loaded, not for --help
    from vtm_dynamics.core.estop.brakes import BrakeSet
    from vtm_dynamics.core.robot.model import RobotModel
    from vtm_dynamics.core.stopsafe.robot_geometry import RobotGeometry
    from vtm_dynamics.core.stopsafe.stop_cases import StopSetup

MAX_PACKAGE_DIRS = 16


@dataclass
class LoadedSetup:
    """``name``, kinematic ``robot`` (fixed joints removed), its collision ``geometry``, ``brakes``, the stop
    ``setup`` (cases), the ``tcp_frame`` and where each input came from (``sources``)."""

    name: str
    robot: RobotModel
    geometry: RobotGeometry
    brakes: BrakeSet
    setup: StopSetup
    tcp_frame: str | None
    sources: dict


def add_robot_arguments(ap: argparse.ArgumentParser) -> None:
    """--robot / --urdf / --brakes / --package-dir / --tcp-frame / --fixed-joint and the stop cases."""
    g = ap.add_argument_group("robot")
    g.add_argument("--robot", default="ur5", help=f"a known robot: {', '.join(ROBOT_NAMES)} ")
    g.add_argument("--urdf", help="URDF file of another robot (needs --brakes and --package-dir for meshes)")
    g.add_argument("--brakes", help="brake YAML (default: the known robot's)")
    g.add_argument("--package-dir", action="append", default=[], metavar="DIR",
                   help="directory that holds the URDF's mesh packages (repeatable)")
    g.add_argument("--tcp-frame", help="frame whose stopping distance is reported (default: the robot's tool frame)")
    g.add_argument("--payload-frame", help="frame carrying the envelope's payload (default: the known robot's "
                   "payload frame, tool0 for the URs, as in vtm-predict; with --urdf: the TCP frame)")
    g.add_argument("--fixed-joint", action="append", default=[], metavar="NAME=VALUE",
                   help="lock a joint at a value [rad or m] (e.g. gripper fingers), repeatable")
    g.add_argument("--shapes", choices=("convex", "mesh"), default="convex",
                   help="distance shapes: convex hulls of the meshes (default, conservative) or the meshes")
    c = ap.add_argument_group("stop cases")
    c.add_argument("--category", choices=("0", "1", "both"), default="0", help="IEC 60204-1 stop category")
    c.add_argument("--decel", type=float, default=CATEGORY1_DECELERATION,
                   help=f"category-1 ramp deceleration [rad/s^2] (default {CATEGORY1_DECELERATION:g})")
    add_torque_limits_option(c)
    c.add_argument("--torque-factor", type=float, nargs=2, default=ENVELOPE_TORQUE_FACTOR, metavar=("MIN", "MAX"),
                   help="envelope: brake torque factors (default %(default)s)")
    c.add_argument("--delay-factor", type=float, nargs=2, default=ENVELOPE_DELAY_FACTOR, metavar=("MIN", "MAX"),
                   help="envelope: engage delay factors (default %(default)s)")
    c.add_argument("--payload", type=float, nargs=2, default=None, metavar=("MIN", "MAX"),
                   help="envelope: payload range [kg] (default 0 .. the known robot's rated payload)")
    c.add_argument("--nominal", action="store_true", help="nominal brakes only (no envelope)")


def _fixed(items: list[str]) -> dict[str, float]:
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        try:
            out[name] = float(value)
        except ValueError:
            raise StopInputError(f"fixed-joint: expected NAME=VALUE, got {item[:60]!r}") from None
        if not math.isfinite(out[name]):
            raise StopInputError(f"fixed-joint.{name[:40]}: not a finite value")
    return out


def load_setup(args: argparse.Namespace) -> LoadedSetup:
    """The robot, its geometry, brakes and stop cases from the parsed arguments (one-line errors)."""
    from vtm_dynamics.core.estop.brakes import brakes_from_config, load_brake_yaml
    from vtm_dynamics.core.estop.envelope import EnvelopeSpec
    from vtm_dynamics.core.stopsafe.robot_geometry import build_robot_geometry, example_robot_package_dir
    from vtm_dynamics.core.stopsafe.stop_cases import StopSetup

    if len(args.package_dir) > MAX_PACKAGE_DIRS:
        raise StopInputError(f"package-dir: at most {MAX_PACKAGE_DIRS} directories")
    spec = None if args.urdf else ROBOTS.get(args.robot)
    if args.urdf is None and spec is None:
        raise StopInputError(f"robot: must be one of {', '.join(ROBOT_NAMES)} or --urdf FILE, got {args.robot!r}")
    urdf_path = args.urdf or spec.urdf_path()
    dirs = list(args.package_dir) or ([example_robot_package_dir()] if spec and spec.urdf.package == EXAMPLE_ROBOT_DATA
                                      else [os.path.dirname(os.path.abspath(urdf_path))])
    for d in dirs:
        if not os.path.isdir(d):
            raise StopInputError(f"package-dir: not a directory: {os.path.basename(d)[:80]}")
    text = read_urdf_file(urdf_path)
    robot, geometry = build_robot_geometry(text, dirs, shapes=args.shapes, fixed_joints=_fixed(args.fixed_joint))
    if args.brakes is None and spec is None:
        raise StopInputError("brakes: --brakes FILE is required with --urdf")
    brake_file = args.brakes or default_brakes_path(args.robot, None)
    brakes = brakes_from_config(robot, load_brake_yaml(brake_file))
    tcp = args.tcp_frame or (spec.tcp_frame if spec else None)
    if tcp is not None:
        robot.frame_id(tcp)
    payload_frame = args.payload_frame or (spec.payload_frame if spec else None) or tcp
    rated = (spec.rated_payload or 0.0) if spec else 0.0
    payload = tuple(args.payload) if args.payload is not None else (0.0, rated)
    envelope = None if args.nominal else EnvelopeSpec(
        torque_factor=tuple(args.torque_factor), delay_factor=tuple(args.delay_factor), payload=payload,
        payload_frame=payload_frame)
    categories = (0, 1) if args.category == "both" else (int(args.category),)
    limits = torque_limits_from_text(args.torque_limits)
    setup = StopSetup(robot, brakes, envelope, categories, CategoryOne(deceleration=args.decel, torque_limits=limits),
                      payload_frame=payload_frame)
    sources = {
        "urdf": os.path.basename(urdf_path), "brakes": os.path.basename(brake_file),
        "envelope": "nominal brakes only" if envelope is None else
        f"torque x{args.torque_factor[0]:g}..{args.torque_factor[1]:g}, delay x{args.delay_factor[0]:g}.."
        f"{args.delay_factor[1]:g}, payload {payload[0]:g}..{payload[1]:g} kg"
        + (f" at {payload_frame}" if payload[1] > 0 else ""),
        "category1": None if 1 not in categories else
        f"ramp {args.decel:g} rad/s^2 (assumed, --decel), drive torque limits {torque_limits_text(limits)}",
    }
    return LoadedSetup(args.robot if spec else robot.name, robot, geometry, brakes, setup, tcp, sources)


class ProgressBar:
    """A one-line text bar on stderr (``\\r`` updates, at most ten a second)."""

    def __init__(self, what: str, quiet: bool = False, width: int = 30) -> None:
        self.what, self.quiet, self.width = what, quiet, width
        self._last = 0.0

    def __call__(self, done: int, total: int) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        frac = done / total if total else 1.0
        bar = "#" * int(round(frac * self.width))
        sys.stderr.write(f"\r{self.what} [{bar:<{self.width}}] {done}/{total}")
        sys.stderr.flush()

    def close(self) -> None:
        if not self.quiet:
            sys.stderr.write("\n")
            sys.stderr.flush()


def fmt_seconds(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"

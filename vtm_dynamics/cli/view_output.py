"""``--view FILE.html`` and ``--serve`` of the command-line tools: their results as a 3-D view (``views``).

``--view`` writes one self-contained HTML file (opens offline; send it to a colleague); ``--serve`` shows the same
page on http://127.0.0.1:PORT/ until Ctrl-C (loopback only). Mesh files are read only from trusted roots
(``views/robot_geometry``): installed packages, ``--mesh-dir`` (and ``--package-dir``) directories and the
directory of a URDF file named on the command line.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

if TYPE_CHECKING:  # the views and Pinocchio are imported when a view is written, not when a parser is built
    from vtm_dynamics.core.robot.model import RobotModel
    from vtm_dynamics.views.robot_geometry import RobotGeometry
    from vtm_dynamics.views.scene import Scene


def add_view_arguments(ap: argparse.ArgumentParser, what: str) -> None:
    """The view options every tool shares; ``what`` names what the view shows (for the help text)."""
    group = ap.add_argument_group("3-D view")
    group.add_argument("--view", metavar="HTML", help=f"write {what} as a 3-D view: one self-contained HTML file "
                       "that opens offline in a browser (loads nothing from the network)")
    group.add_argument("--serve", action="store_true", help="show the 3-D view in a browser: serve it on "
                       "http://127.0.0.1:PORT/ (loopback only) until Ctrl-C")
    group.add_argument("--port", type=port_number, default=0,
                       help="--serve: the port on 127.0.0.1 (default: a free one)")
    group.add_argument("--mesh-dir", action="append", default=[], metavar="DIR",
                       help="a directory holding the packages that package:// mesh names refer to (repeatable; "
                       "example-robot-data and AMENT_PREFIX_PATH are searched too)")


def port_number(text: str) -> int:
    """A TCP port 0..65535 (0: a free one), for argparse."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port 0..65535, got {text!r}")
    return port


def wants_view(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "view", None) or getattr(args, "serve", False))


def geometry(model, urdf_text: str, args: argparse.Namespace, urdf_path: str | None = None,
             root=None) -> RobotGeometry:
    """The robot's drawable geometry with the mesh roots the command line allows (``root``: the URDF's parsed
    ``<robot>`` element when the caller holds it)."""
    from vtm_dynamics.views.mesh_files import default_package_roots
    from vtm_dynamics.views.robot_geometry import robot_geometry

    given = list(getattr(args, "mesh_dir", None) or []) + list(getattr(args, "package_dir", None) or [])
    # none given: the default roots, which the geometry looks up only when a mesh names a package
    roots = [os.path.abspath(d) for d in given] + default_package_roots() if given else None
    return robot_geometry(model, urdf_text, urdf_dir=os.path.dirname(os.path.abspath(urdf_path)) if urdf_path
                          else None, package_roots=roots, root=root)


def check_view_target(args: argparse.Namespace) -> None:
    """Refuse a ``--view`` file that cannot be written before the work that fills it (one line, OSError)."""
    path = getattr(args, "view", None)
    if not path:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or os.path.isdir(path) or not os.access(folder, os.W_OK):
        why = "is a directory" if os.path.isdir(path) else ("No such directory" if not os.path.isdir(folder)
                                                             else "Permission denied")
        raise OSError(f"view: cannot write {os.path.basename(path)!r}: {why}")


def emit(scene: Scene, args: argparse.Namespace, say: Callable[[str], None] = print,
         serve: bool = True) -> bytes:
    """Write ``--view`` and (with ``serve``) serve ``--serve``; returns the page when ``--serve`` asks for it (else
    b""). Notes on what could not be drawn go to stderr."""
    from vtm_dynamics.views.web_page import page_parts, write_parts

    for note in scene.notes:
        sys.stderr.write(f"view: note: {note}\n")
    parts = page_parts(scene)
    if args.view:
        write_parts(parts, args.view)
        say(f"wrote {args.view} (3-D view, {sum(map(len, parts)) / 1e6:.1f} MB, opens offline)")
    if not args.serve:
        return b""
    page = b"".join(parts)
    if serve:
        from vtm_dynamics.views.serve import serve_until_interrupted

        serve_until_interrupted(page, args.port, say)
    return page


def show_stop(args: argparse.Namespace, robot: RobotModel, prediction, envelope=None, urdf_path: str | None = None,
              reference=None, say: Callable[[str], None] = print, serve: bool = True) -> bytes:
    """The view of one predicted stop (``vtm-predict``, ``vtm-estop-demo``)."""
    from vtm_dynamics.views.stop_view import stop_scene

    shown = geometry(robot.model, robot.urdf_text, args, urdf_path, root=robot.urdf_root)
    scene = stop_scene(robot, prediction, geometry=shown, envelope=envelope, reference=reference)
    return emit(scene, args, say, serve)


def show_map(args: argparse.Namespace, loaded, spec, read, say: Callable[[str], None] = print,
             count: int = 3) -> bytes:
    """The view of a stopping map (``vtm-stopping-map``): its worst ``count`` states replayed. ``read``: the map's
    rows a block at a time (:data:`vtm_dynamics.views.map_sample.Reader`); the map is never held whole."""
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.views.map_sample import sample_map
    from vtm_dynamics.views.map_view import map_scene, replay_worst

    sample = sample_map(read, count)
    worst = replay_worst(loaded.robot, brakes_from_config(loaded.robot, loaded.brake_config), spec, sample)
    scene = map_scene(loaded.robot, sample, cell_box=spec.cell_box, worst=worst,
                      geometry=geometry(loaded.robot.model, loaded.text, args, getattr(args, "urdf", None)))
    return emit(scene, args, say)


def show_solvability(args: argparse.Namespace, urdf_text: str, report, planar: bool, max_bodies: int,
                     say: Callable[[str], None] = print) -> bytes:
    """The view of a solvability report (``vtm-solvability``) at the configuration it was made at."""
    import pinocchio as pin

    from vtm_dynamics.core.reactions.model_limits import load_for_analysis
    from vtm_dynamics.core.reactions.pair_frames import pair_placements
    from vtm_dynamics.views.solvability_view import solvability_scene

    model = load_for_analysis(urdf_text, planar, max_bodies)
    q = np.asarray(report.q, dtype=float) if report.q is not None else pin.neutral(model.pin_model)
    scene = solvability_scene(model.pin_model, geometry(model.pin_model, urdf_text, args, args.model), q, report,
                              pair_placements(model, q, report))
    return emit(scene, args, say)


def show_check(args: argparse.Namespace, loaded, trajectory, scene, result, scaling=None,
               say: Callable[[str], None] = print, serve: bool = True) -> bytes:
    """The view of a stop-safe trajectory check (``vtm-check-trajectory``): ``loaded`` its robot set-up, the
    checked ``trajectory``, the obstacle ``scene``, the check's ``result`` and the speed-scaling search's
    ``scaling`` (None when ``--scale`` was not asked)."""
    from vtm_dynamics.core.stopsafe.viewer_data import worst_stop_paths
    from vtm_dynamics.views.clearance_view import trajectory_check_scene

    paths = worst_stop_paths(loaded.geometry, result.worst, loaded.tcp_frame) if result.worst is not None else None
    view = trajectory_check_scene(loaded.robot, trajectory, scene, result, paths, tcp_frame=loaded.tcp_frame,
                                  geometry=geometry(loaded.robot.model, loaded.robot.urdf_text, args,
                                                    getattr(args, "urdf", None)), scaling=scaling)
    return emit(view, args, say, serve)


def reference_motion(plant) -> tuple[str, Sequence[float], np.ndarray] | None:
    """A reference plant's recorded motion (``robot_sim``'s fixed-step simulation) for :func:`show_stop`."""
    record = getattr(plant, "record", None)
    if record is None or not len(record.t):
        return None
    return "reference simulation (robot_sim, fixed step)", np.asarray(record.t), np.asarray(record.q)

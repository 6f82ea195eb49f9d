"""Building blocks of a stop-safe motion view: a robot moving along a planned trajectory through a scene of boxes,
cylinders and spheres, its TCP path, the closest approach between robot and scene highlighted as a segment with
its distance, and the worst predicted stop from some instant of the motion with its path and rest pose.

The stop-safe trajectory check itself (which instants to stop from, distances by coal) is not part of this
module: it takes the check's results as plain values (:class:`ClosestApproach`, a core ``StopPrediction``) so the
check can hand them over when it exists. Units: m, s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from vtm_dynamics.core.estop.results import StopPrediction
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.views import palette
from vtm_dynamics.views.robot_geometry import RobotGeometry, frame_positions, geometry_scale, link_poses, robot_geometry
from vtm_dynamics.views.scene import (
    MAX_FRAMES,
    Box,
    Cylinder,
    Label,
    LegendEntry,
    Polyline,
    RobotLayer,
    Scene,
    Sphere,
    TimelineEvent,
    check_scene,
    clip_text,
)
from vtm_dynamics.views.stop_view import thinned


@dataclass(frozen=True)
class ClosestApproach:
    """The smallest distance [m] between robot and scene: at ``time`` [s] of the motion, between ``robot_point``
    (on ``robot_part``) and ``scene_point`` (on ``scene_part``), world coordinates [m]."""

    time: float
    distance: float
    robot_point: tuple[float, float, float]
    scene_point: tuple[float, float, float]
    robot_part: str = ""
    scene_part: str = ""


def clearance_scene(robot: RobotModel, times: np.ndarray, configurations: np.ndarray,
                    obstacles: Sequence[Box | Cylinder | Sphere], *, closest: ClosestApproach | None = None,
                    stop: tuple[float, StopPrediction] | None = None, tcp_frame: str | None = None,
                    geometry: RobotGeometry | None = None, title: str | None = None,
                    max_frames: int = MAX_FRAMES) -> Scene:
    """The scene of a motion through ``obstacles`` (module docstring). ``stop``: (the instant [s] of the motion
    the stop starts from, its prediction): its TCP path and rest pose are drawn, and the instant is marked."""
    geometry = geometry if geometry is not None else robot_geometry(robot.model, robot.urdf_text)
    t = np.asarray(times, dtype=float)
    qs = np.asarray(configurations, dtype=float)
    marks = [m for m in ((closest.time,) if closest else ()) + ((stop[0],) if stop else ())]
    keep = thinned(t, marks, max_frames, values=qs)
    poses = link_poses(robot.model, geometry, qs[keep])
    scale = geometry_scale(poses)
    layers = [RobotLayer("robot", "planned motion", palette.ROBOT, 1.0, t[keep], poses)]
    legend = [LegendEntry(palette.ROBOT, "robot along the planned motion", ("robot",))]
    shapes = list(obstacles)
    lines, labels, events = [], [], []
    if obstacles:
        legend.append(LegendEntry(palette.OBSTACLE, "scene", tuple(o.name for o in obstacles)))
    if tcp_frame:
        lines.append(Polyline("tcp_path", f"path of {tcp_frame}", frame_positions(robot.model, tcp_frame, qs[keep]),
                              palette.TCP_PATH, 2.5, t[keep], True))
        legend.append(LegendEntry(palette.TCP_PATH, f"path of {tcp_frame}", ("tcp_path",)))
    info = [f"{robot.name}: planned motion of {t[-1] - t[0]:.3f} s through {len(obstacles)} obstacles"]
    if closest is not None:
        a, b = np.asarray(closest.robot_point, dtype=float), np.asarray(closest.scene_point, dtype=float)
        lines.append(Polyline("closest", "closest approach", np.array([a, b]), palette.CLOSEST, 5.0))
        shapes += [Sphere("closest_robot", 0.012 * scale, tuple(a), palette.CLOSEST, on_top=True),
                   Sphere("closest_scene", 0.012 * scale, tuple(b), palette.CLOSEST, on_top=True)]
        text = f"closest {1e3 * closest.distance:.1f} mm at t = {closest.time:.3f} s"
        parts = " - ".join(x for x in (closest.robot_part, closest.scene_part) if x)
        labels.append(Label(text, tuple(0.5 * (a + b)), palette.CLOSEST))
        legend.append(LegendEntry(palette.CLOSEST, "closest approach", ("closest", "closest_robot", "closest_scene")))
        info.append(text + (f" ({parts})" if parts else ""))
        events.append(TimelineEvent(closest.time, "closest", clip_text(text)))
        layers.append(RobotLayer("closest_pose", "pose at the closest approach", palette.CLOSEST,
                                 palette.GHOST_OPACITY, np.zeros(1),
                                 link_poses(robot.model, geometry, qs[int(np.argmin(np.abs(t - closest.time)))][None])))
    if stop is not None:
        instant, p = stop
        layers.append(RobotLayer("stop_rest", "rest pose of the worst stop", palette.REST, palette.GHOST_OPACITY,
                                 np.zeros(1), link_poses(robot.model, geometry, p.q_final[None, :])))
        legend.append(LegendEntry(palette.REST, f"worst stop from t = {instant:.3f} s: rest pose and path",
                                  ("stop_rest", "stop_path")))
        if p.tcp_positions is not None:
            lines.append(Polyline("stop_path", "worst stopping path", np.asarray(p.tcp_positions), palette.REST, 3.0))
        info.append(f"worst stop from t = {instant:.3f} s: "
                    + (f"{p.stop_time:.3f} s, TCP {p.tcp_straight_distance:.3f} m" if p.stopped else "NOT STOPPED"))
        events.append(TimelineEvent(instant, "engage", clip_text(f"worst stop starts at t = {instant:.3f} s")))
    return check_scene(Scene(
        title=clip_text(title or f"{robot.name}: planned motion and scene"), geometry=geometry, robots=tuple(layers),
        shapes=tuple(shapes), lines=tuple(lines), labels=tuple(labels), events=tuple(sorted(events, key=lambda e: e.time)),
        info=tuple(clip_text(x) for x in info), legend=tuple(legend), duration=float(t[-1]), notes=geometry.notes))

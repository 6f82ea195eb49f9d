"""The view of a stop-safe trajectory check: the robot moving along the planned trajectory through the scene, the
worst predicted stop replayed from the instant it starts, its rest pose, the closest approach between robot and
scene, and every checked E-stop instant on the timeline, safe or not.

What is drawn comes from the check (``core/stopsafe``; Müller 2026, Sec. 1: every stop along the motion must end
clear, the stops themselves by eqs. (3) and (22) through ``core/estop``): the worst stop is the prediction of the
closest case of the sample with the smallest certified clearance (``TrajectoryCheck.worst``), its paths are
:func:`vtm_dynamics.core.stopsafe.viewer_data.worst_stop_paths`, the closest points and their distance are the
sweep's, and the timeline's colours are the samples' verdicts. Nothing here computes a distance: the view only
places the robot's visual geometry by forward kinematics of the planned and the predicted configurations. The
planned motion is the trajectory as the check interpolated it (``PlannedTrajectory.evaluate``). Units: m, s, rad.
"""

from __future__ import annotations

import math
import numpy as np

from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.stopsafe.results import SampleResult, SpeedScaling, TrajectoryCheck
from vtm_dynamics.core.stopsafe.scene import Obstacle
from vtm_dynamics.core.stopsafe.scene import Scene as CheckScene
from vtm_dynamics.core.stopsafe.trajectory import PlannedTrajectory, model_order
from vtm_dynamics.views import palette
from vtm_dynamics.views.robot_geometry import RobotGeometry, frame_positions, geometry_scale, geometry_of, link_poses
from vtm_dynamics.views.scene import (
    MAX_FRAMES,
    MAX_MESH_TRIANGLES,
    MAX_SPANS,
    Box,
    Cylinder,
    Label,
    LegendEntry,
    Mesh,
    Polyline,
    RobotLayer,
    Scene,
    Sphere,
    TimelineEvent,
    TimelineSpan,
    check_scene,
    clip_text,
)
from vtm_dynamics.views.stop_view import merged_events, thinned

PLAN_FRAMES = 2000  # planned-motion frames evaluated (the trajectory's points and the checked instants added)
MAX_OBSTACLE_LABELS = 30  # obstacles named beside them; a busier scene names only the closest one
FLOOR_THICKNESS = 0.01  # [m] the slab drawn under the floor height
STOP_OPACITY = 1.0  # the stopping robot: opaque; the planned motion stays in front where the two coincide (page.js)


def _pose(position, rotation) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = rotation
    T[:3, 3] = position
    return T


def obstacle_shape(ob: Obstacle, name: str, color=palette.OBSTACLE, opacity: float = 0.85):
    """The view shape of one obstacle of the check's scene (same kind, dimensions and pose)."""
    T = _pose(ob.position, ob.rotation)
    if ob.kind == "box":
        return Box(name, tuple(float(d) for d in ob.dimensions), T, color, opacity)
    if ob.kind == "sphere":
        return Sphere(name, float(ob.dimensions[0]), tuple(float(x) for x in ob.position), color, opacity)
    if ob.kind in ("cylinder", "cone"):  # SolidPrimitive order: height, radius; a cone's tip at +z
        height, radius = (float(d) for d in ob.dimensions)
        return Cylinder(name, radius, height, T, color, opacity, top_radius=0.0 if ob.kind == "cone" else None)
    return Mesh(name, np.asarray(ob.vertices, dtype=float), np.asarray(ob.triangles), T, color, opacity)


def _bounding_box(ob: Obstacle, name: str, color) -> Box:
    """A mesh drawn as its bounding box in its own frame (when the page's triangle budget is spent)."""
    lo, hi = ob.vertices.min(axis=0), ob.vertices.max(axis=0)
    T = _pose(ob.position + ob.rotation @ (0.5 * (lo + hi)), ob.rotation)
    return Box(name, tuple(float(x) for x in np.maximum(hi - lo, 1e-4)), T, color, 0.3, wire=True)


def scene_shapes(scene: CheckScene, extent: np.ndarray) -> tuple[list, list[Label], list[str], list[str]]:
    """(shapes, labels, shape names, notes) of the check's obstacles and floor. ``extent`` (2 x 3) [m]: what else
    is drawn (the robot's motion), so the floor slab covers it and the obstacles."""
    shapes, labels, names, notes = [], [], [], []
    triangles = 0
    label_all = len(scene.obstacles) <= MAX_OBSTACLE_LABELS
    for k, ob in enumerate(scene.obstacles):
        name = f"obstacle_{k}"
        if ob.kind == "mesh" and triangles + len(ob.triangles) > MAX_MESH_TRIANGLES:
            shapes.append(_bounding_box(ob, name, palette.OBSTACLE))
            notes.append(f"obstacle {ob.name}: {len(ob.triangles)} triangles over the page's budget of "
                         f"{MAX_MESH_TRIANGLES}; drawn as its bounding box")
        else:
            triangles += len(ob.triangles) if ob.kind == "mesh" else 0
            shapes.append(obstacle_shape(ob, name))
        names.append(name)
        if label_all:
            labels.append(Label(clip_text(ob.name), tuple(float(x) for x in ob.position), palette.OBSTACLE_TEXT,
                                name))
    if scene.floor_height is not None:
        pts = [extent] + [np.array([ob.position]) for ob in scene.obstacles]
        allp = np.concatenate(pts)
        lo, hi = allp.min(axis=0)[:2] - 0.2, allp.max(axis=0)[:2] + 0.2
        center = np.array([*(0.5 * (lo + hi)), scene.floor_height - 0.5 * FLOOR_THICKNESS])
        shapes.append(Box("floor", (float(hi[0] - lo[0]), float(hi[1] - lo[1]), FLOOR_THICKNESS),
                          _pose(center, np.eye(3)), palette.FLOOR, 0.45))
        names.append("floor")
    return shapes, labels, names, notes


def planned_frames(robot: RobotModel, trajectory: PlannedTrajectory, result: TrajectoryCheck,
                   count: int = PLAN_FRAMES) -> tuple[np.ndarray, np.ndarray]:
    """(times [s], configurations in model order) of the planned motion: evenly spaced instants, the trajectory's
    points and the checked E-stop instants."""
    order = model_order(robot, trajectory)
    t = np.unique(np.concatenate([np.linspace(trajectory.start, trajectory.end, max(int(count), 2)),
                                  trajectory.time_from_start, result.times]))
    return t, order.columns(trajectory.evaluate(t, 0))


def _mm(x: float) -> str:
    return f"{1e3 * x:.1f} mm" if math.isfinite(x) else "none"


def _excess(s: SampleResult, result: TrajectoryCheck) -> float:
    """How far [m] the sample's certified clearances exceed their margins (negative: short of them)."""
    return min(s.certified_clearance - result.margin, s.certified_self_clearance - result.self_margin)


def _worst_text(s: SampleResult, result: TrajectoryCheck) -> str:
    if s.certified_clearance - result.margin <= s.certified_self_clearance - result.self_margin:
        return f"{_mm(s.certified_clearance)} ({s.pair[0]} - {s.pair[1]})"
    return f"{_mm(s.certified_self_clearance)} ({s.self_pair[0]} - {s.self_pair[1]}, own parts)"


def sample_spans(result: TrajectoryCheck, start: float, end: float) -> list[TimelineSpan]:
    """The checked E-stop instants on the timeline: each stands for the instants nearer to it than to its
    neighbours (as its certified clearance does); runs of safe and of unsafe instants become one span each,
    with the smallest certified clearance of the run in its tooltip. A check that stopped at its first unsafe
    instants (``complete`` False) vouches for no stretch: only its unsafe runs are drawn."""
    samples = result.samples
    if not samples:
        return []
    t = result.times
    edges = np.concatenate([[start], 0.5 * (t[1:] + t[:-1]), [end]])
    runs: list[list[int]] = []
    for k, s in enumerate(samples):
        if runs and samples[runs[-1][-1]].safe == s.safe:
            runs[-1].append(k)
        else:
            runs.append([k])
    if len(runs) > MAX_SPANS or not result.complete:  # keep the unsafe runs; the grey track shows behind them
        runs = [r for r in runs if not samples[r[0]].safe][:MAX_SPANS]
    spans = []
    for run in runs:
        s0 = samples[run[0]]
        worst = min((samples[k] for k in run), key=lambda s: _excess(s, result))
        n = len(run)
        what = "safe" if s0.safe else "UNSAFE"
        text = (f"t = {t[run[0]]:.3f} .. {t[run[-1]]:.3f} s: {n} E-stop instant{'s' if n != 1 else ''} {what}; "
                f"smallest certified clearance {_worst_text(worst, result)}")
        if not s0.safe:
            text += f"; {worst.reason}"
        spans.append(TimelineSpan(float(edges[run[0]]), float(edges[run[-1] + 1]),
                                  palette.SAFE if s0.safe else palette.UNSAFE, clip_text(text)))
    return spans


def trajectory_check_scene(robot: RobotModel, trajectory: PlannedTrajectory, scene: CheckScene,
                           result: TrajectoryCheck, worst_paths: dict | None, *, geometry: RobotGeometry | None = None,
                           tcp_frame: str | None = None, title: str | None = None, scaling: SpeedScaling | None = None,
                           max_frames: int = MAX_FRAMES) -> Scene:
    """The view of ``result``, the check of ``trajectory`` against ``scene`` (module docstring). ``worst_paths``:
    ``worst_stop_paths`` of ``result.worst`` (None when there is no worst stop); ``robot`` is the kinematic model
    the check used, ``geometry`` its visual geometry (default: the URDF's visuals); ``scaling`` the speed-scaling
    search's result when one ran (stated in the info)."""
    geometry = geometry if geometry is not None else geometry_of(robot)
    t_plan, q_plan = planned_frames(robot, trajectory, result)
    keep = thinned(t_plan, list(result.times), max_frames)
    t_plan, q_plan = t_plan[keep], q_plan[keep]
    plan_poses = link_poses(robot.model, geometry, q_plan)
    scale = geometry_scale(plan_poses)
    layers = [RobotLayer("robot", "planned motion", palette.ROBOT, 1.0, t_plan, plan_poses)]
    legend = [LegendEntry(palette.ROBOT, "robot along the planned trajectory", ("robot", "plan_tcp"))]
    lines, shapes, labels, events, notes = [], [], [], [], list(geometry.notes)
    if tcp_frame:
        lines.append(Polyline("plan_tcp", f"path of {tcp_frame}", frame_positions(robot.model, tcp_frame, q_plan),
                              palette.TCP_PATH, 2.5, t_plan, True))
        legend[0] = LegendEntry(palette.ROBOT, f"robot along the planned trajectory; orange: path of {tcp_frame}",
                                ("robot", "plan_tcp"))
    end = float(t_plan[-1])
    worst = result.worst
    info = [f"{robot.name}: stop-safe check of a {trajectory.duration:.3f} s trajectory, {len(result.samples)} "
            f"E-stop instants x {len(result.cases)} case{'s' if len(result.cases) != 1 else ''}, margin "
            f"{_mm(result.margin)}" + (f", own parts {_mm(result.self_margin)}" if result.self_margin else "")]
    if result.safe:
        info.append("SAFE: every predicted stop ends clear")
    elif result.first_unsafe is not None:
        info.append(f"UNSAFE from t = {result.first_unsafe.time:.3f} s: {result.first_unsafe.reason}")
        events.append(TimelineEvent(result.first_unsafe.time, "unsafe",
                                    clip_text(f"first unsafe E-stop instant t = {result.first_unsafe.time:.3f} s: "
                                              f"{result.first_unsafe.reason}")))
    else:
        info.append("UNSAFE")
    if not result.complete:
        info.append("the check stopped at its first unsafe instants: not every instant was checked")
    if scaling is not None:
        passes = scaling.recheck is not None and scaling.recheck.safe
        info.append(f"largest safe speed scaling: {scaling.scaling:.3f} (re-check at it "
                    f"{'passes' if passes else 'FAILS'}); the view shows the trajectory as planned")
    if worst is not None and worst_paths is not None:
        end = max(end, _add_worst_stop(robot, geometry, result, worst_paths, layers, lines, shapes, labels, legend,
                                       events, info, notes, scale, max_frames))
    # the camera frames the robot's motion and the stop (a large cell around it is there when zoomed out)
    drawn = np.concatenate([plan_poses[..., :3].reshape(-1, 3)] + [np.asarray(ln.points) for ln in lines]
                           + [np.asarray(layer.poses)[..., :3].reshape(-1, 3) for layer in layers[1:]])
    obstacles, names_labels, names, more_notes = scene_shapes(scene, np.array([drawn.min(axis=0),
                                                                                drawn.max(axis=0)]))
    notes += more_notes
    if names:
        legend.append(LegendEntry(palette.OBSTACLE, "scene" + (" and floor" if scene.floor_height is not None
                                                                else ""), tuple(names)))
    legend += [LegendEntry(palette.SAFE, "timeline: E-stop instants whose stops all end clear"),
               LegendEntry(palette.UNSAFE, "timeline: E-stop instants with a stop that does not")]
    spans = sample_spans(result, float(trajectory.start), float(trajectory.end))
    return check_scene(Scene(
        title=clip_text(title or f"{robot.name}: stop-safe trajectory check - "
                        f"{'SAFE' if result.safe else 'UNSAFE'}"),
        geometry=geometry, robots=tuple(layers), shapes=tuple(obstacles + shapes), lines=tuple(lines),
        labels=tuple(names_labels + labels), events=tuple(sorted(events, key=lambda e: e.time)), spans=tuple(spans),
        info=tuple(clip_text(x) for x in info), legend=tuple(legend), duration=end, notes=tuple(notes),
        focus=_focus(drawn, scene)))


def _focus(drawn: np.ndarray, scene: CheckScene, reach: float = 0.3) -> np.ndarray:
    """What the camera starts framed on: the robot's motion and the stop, and the obstacles as far as they lie
    within ``reach`` [m] of them (a wall or floor of a whole cell is seen by zooming out)."""
    lo, hi = drawn.min(axis=0) - reach, drawn.max(axis=0) + reach
    near = [np.clip(ob.position, lo, hi) for ob in scene.obstacles]
    return _thin_points(np.concatenate([drawn] + ([np.array(near)] if near else [])))


def _thin_points(points: np.ndarray, count: int = 2000) -> np.ndarray:
    """At most ``count`` of ``points`` (evenly by index, the extremes of each axis kept)."""
    if len(points) <= count:
        return points
    extremes = np.concatenate([np.argmin(points, axis=0), np.argmax(points, axis=0)])
    return points[np.union1d(np.linspace(0, len(points) - 1, count - 6).astype(int), extremes)]


def _add_worst_stop(robot, geometry, result: TrajectoryCheck, paths: dict, layers: list, lines: list, shapes: list,
                    labels: list, legend: list, events: list, info: list, notes: list, scale: float,
                    max_frames: int) -> float:
    """The worst stop's layers, paths, closest approach, events and info; returns the instant [s] it ends."""
    worst = result.worst
    s = worst.sample
    p = worst.predictions[worst.case]
    t0 = float(s.time)
    t = t0 + np.asarray(p.t, dtype=float)
    q = np.asarray(p.q, dtype=float)
    closest_at = t0 + float(worst.stop_instant) if math.isfinite(worst.stop_instant) else None
    if closest_at is not None and worst.q_at is not None:  # the closest configuration is a frame of the replay
        k = int(np.searchsorted(t, closest_at))
        t, q = np.insert(t, k, closest_at), np.insert(q, k, worst.q_at, axis=0)
    stop_events = merged_events(p)
    keep = thinned(t, [t0 + e[0] for e in stop_events] + ([closest_at] if closest_at is not None else []),
                   max_frames, values=q)
    if len(keep) < len(t):
        notes.append(f"the worst stop is drawn with {len(keep)} of its {len(t)} samples (max_frames)")
    poses = link_poses(robot.model, geometry, q[keep])
    case = result.cases[worst.case] if worst.case < len(result.cases) else f"case {worst.case}"
    layers += [RobotLayer("estop", "pose at the worst E-stop instant", palette.START, palette.GHOST_OPACITY,
                          t[:1], poses[:1]),
               RobotLayer("stop", "worst stop", palette.WORST, STOP_OPACITY, t[keep], poses, appears=True),
               RobotLayer("stop_rest", "rest pose of the worst stop", palette.REST, palette.GHOST_OPACITY,
                          t[-1:], link_poses(robot.model, geometry, np.asarray(p.q_final)[None, :]))]
    legend += [LegendEntry(palette.START, f"pose at the worst E-stop instant, t = {t0:.3f} s", ("estop",)),
               LegendEntry(palette.WORST, f"worst stop ({case}); purple line: its TCP path", ("stop", "stop_tcp")),
               LegendEntry(palette.REST, "rest pose of the worst stop", ("stop_rest",))]
    cases = paths.get("cases", [])
    others = []
    for entry in cases:
        if "tcp_path" not in entry:
            continue
        pts = np.asarray(entry["tcp_path"], dtype=float)
        if entry["case"] == worst.case:
            lines.append(Polyline("stop_tcp", "TCP path of the worst stop", pts, palette.WORST, 3.5))
        elif len(others) < 8:
            others.append(f"other_tcp_{entry['case']}")
            lines.append(Polyline(others[-1], f"TCP path of {result.cases[entry['case']]}", pts, palette.OTHER_CASE,
                                  1.5))
    if others:
        legend.append(LegendEntry(palette.OTHER_CASE, f"TCP paths of the other cases from t = {t0:.3f} s",
                                  tuple(others)))
    events.append(TimelineEvent(t0, "estop", clip_text(f"worst E-stop instant t = {t0:.3f} s ({case})")))
    for time, kind, joints in stop_events:
        if time > 0:
            events.append(TimelineEvent(t0 + time, kind, clip_text(f"{t0 + time:.3f} s worst stop: {kind} "
                                                                   f"{', '.join(joints[:3])}")))
    stop_time = float(p.stop_time) if p.stopped else float(p.t[-1])
    info.append(f"worst stop: E-stop at t = {t0:.3f} s ({case}): "
                + (f"at rest after {stop_time:.3f} s" if p.stopped else f"NOT STOPPED within {stop_time:.3f} s")
                + (f", TCP {s.tcp_distance:.3f} m" if math.isfinite(s.tcp_distance) else ""))
    points = np.asarray(paths["closest_points"], dtype=float)
    if closest_at is not None and points.shape == (2, 3) and np.all(np.isfinite(points)):
        own = worst.kind == "self"
        distance = s.self_clearance if own else s.clearance
        certified = s.certified_self_clearance if own else s.certified_clearance
        pair = f"{worst.pair[0]} - {worst.pair[1]}" + (" (own parts)" if own else "")
        text = f"{pair}: {_mm(distance)}"
        lines.append(Polyline("closest", "closest approach", points, palette.CLOSEST, 5.0))
        r = 0.012 * scale
        shapes += [Sphere("closest_robot", r, tuple(points[0]), palette.CLOSEST, on_top=True),
                   Sphere("closest_scene", r, tuple(points[1]), palette.CLOSEST, on_top=True)]
        labels.append(Label(clip_text(text), tuple(0.5 * (points[0] + points[1])), palette.CLOSEST, "closest"))
        toggles = ["closest", "closest_robot", "closest_scene"]
        if paths.get("witness_path"):
            witness = np.asarray(paths["witness_path"], dtype=float)
            wt = t0 + np.asarray(p.t, dtype=float)
            wk = thinned(wt, [], max_frames, values=witness)
            lines.append(Polyline("witness", f"path of the closest point of {worst.pair[0]}", witness[wk],
                                  palette.CLOSEST, 2.0, wt[wk], True))
            toggles.append("witness")
        legend.append(LegendEntry(palette.CLOSEST, f"closest approach ({pair}) and the path of its point on the "
                                  "robot" if "witness" in toggles else f"closest approach ({pair})", tuple(toggles)))
        info.append(f"closest: {text} at t = {closest_at:.3f} s, {1e3 * worst.stop_instant:.0f} ms into the stop; "
                    f"certified {_mm(certified)}")
        events.append(TimelineEvent(closest_at, "closest", clip_text(f"closest approach at t = {closest_at:.3f} s: "
                                                                     f"{text}")))
    return float(t[-1])


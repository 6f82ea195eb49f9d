"""The view of one predicted emergency stop: the robot moving along the predicted motion at true time, ghosts of
the pose at the E-stop and at rest, the TCP path with the events on it and on the timeline, the envelope's
worst-case rest pose beside the nominal one, and (optionally) a reference simulation of the same stop.

The motion is the prediction's own time series (Müller 2026, eq. (3) between events, eq. (22) at abrupt locks;
``core/estop``): its samples are drawn as they are (no re-simulation), thinned evenly to ``max_frames`` with every
event instant kept. A prediction that is not the robot's stop (``StopPrediction.valid`` false: not at rest within
the horizon, or past a joint limit) says so in the page's title, its text panel and the name of the last pose's
ghost. Units: s, m, rad.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.estop.envelope import StopEnvelope
from vtm_dynamics.core.estop.results import StopPrediction
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.views import palette
from vtm_dynamics.views.robot_geometry import RobotGeometry, frame_positions, geometry_scale, geometry_of, link_poses
from vtm_dynamics.views.scene import (
    MAX_FRAMES,
    JointTrack,
    LegendEntry,
    Polyline,
    RobotLayer,
    Scene,
    Sphere,
    TimelineEvent,
    check_scene,
    clip_text,
)


def thinned(times: np.ndarray, keep: Sequence[float], max_frames: int,
            values: np.ndarray | None = None) -> np.ndarray:
    """Indices of at most ``max_frames`` samples of ``times``: first and last kept, and the first sample at or
    after each instant of ``keep`` (the events) while the budget allows. The rest of the budget goes, one sample
    at a time, to the sample that the kept ones miss most when interpolated linearly (``values``: one row per
    sample, e.g. configurations), so that a replay stays close to the series where the motion bends, whatever the
    spacing of the samples (the engine's steps are adaptive); without ``values``, evenly by index."""
    n = len(times)
    if n <= max_frames:
        return np.arange(n)
    must = {0, n - 1} | {int(min(np.searchsorted(times, t), n - 1)) for t in keep}
    must = set(sorted(must)[: max(2, max_frames // 2)])
    if values is None:
        even = np.linspace(0, n - 1, max(max_frames - len(must), 2)).round().astype(int)
        return np.array(sorted(must | set(even.tolist())))[:max_frames]
    t = np.asarray(times, dtype=float)
    y = np.asarray(values, dtype=float).reshape(n, -1)
    kept = sorted(must)
    while len(kept) < max_frames:
        k = np.array(kept)
        miss = np.max(np.abs(np.column_stack([np.interp(t, t[k], y[k, j]) for j in range(y.shape[1])]) - y),
                      axis=1)
        worst = int(np.argmax(miss))
        if miss[worst] == 0.0:
            break
        kept = sorted(kept + [worst])
    return np.array(kept)


def merged_events(prediction: StopPrediction) -> list[tuple[float, str, list[str]]]:
    """(time [s], kind, joints) with simultaneous events of one kind (all brakes engaging) on one line."""
    out: list[tuple[float, str, list[str]]] = []
    for e in prediction.events:
        if out and out[-1][1] == e.kind and abs(out[-1][0] - e.time) < 1e-9:
            out[-1][2].extend(e.joints)
        else:
            out.append((float(e.time), e.kind, list(e.joints)))
    return out


def _joints_text(joints: list[str], total: int) -> str:
    if len(joints) == total and total > 2:
        return f"all {total} joints"
    return ", ".join(joints) if len(joints) <= 3 else f"{', '.join(joints[:3])} and {len(joints) - 3} more"


def rest_label(prediction: StopPrediction) -> str:
    """The name of the ghost at the prediction's last pose: the rest pose only of a stop that is :attr:`valid`
    (``StopPrediction.valid``); otherwise the pose at the horizon or a rest pose past a joint limit, so named."""
    if not prediction.stopped:
        return "pose at the horizon, NOT at rest"
    if prediction.limit_crossings:
        return "predicted rest pose, NOT VALID: past a joint limit"
    return "predicted rest pose"


def stop_scene(robot: RobotModel, prediction: StopPrediction, *, geometry: RobotGeometry | None = None,
               envelope: StopEnvelope | None = None, reference: tuple[str, np.ndarray, np.ndarray] | None = None,
               title: str | None = None, max_frames: int = MAX_FRAMES) -> Scene:
    """The scene of ``prediction`` (module docstring). ``envelope``: adds its worst-distance rest pose;
    ``reference``: (label, times [s], configurations) of another motion of the same stop, drawn beside it
    (e.g. the reference plant of ``vtm-estop-demo``). ``geometry`` defaults to the model's URDF visuals."""
    p = prediction
    geometry = geometry if geometry is not None else geometry_of(robot)
    events = merged_events(p)
    t = np.asarray(p.t, dtype=float)
    keep = thinned(t, [e[0] for e in events], max_frames, values=p.q)
    worst = envelope.worst_distance if envelope is not None else None
    q0 = robot.check_q(p.q[0])
    q_worst = pin.integrate(robot.model, q0, robot.check_v(worst.stopping_angles)) if worst is not None else None
    # one forward-kinematics pass for every pose drawn: the motion, the rest pose and the envelope's worst
    data = robot.model.createData()  # one workspace for all of them
    drawn = link_poses(robot.model, geometry, np.vstack([p.q[keep], p.q_final[None, :]]
                                                        + ([q_worst[None, :]] if q_worst is not None else [])), data)
    poses, rest_poses, worst_poses = drawn[:len(keep)], drawn[len(keep):len(keep) + 1], drawn[len(keep) + 1:]
    rest = rest_label(p)
    layers = [RobotLayer("robot", "predicted stop", palette.ROBOT, 1.0, t[keep], poses),
              RobotLayer("start", "pose at the E-stop", palette.START, palette.GHOST_OPACITY, t[:1], poses[:1]),
              RobotLayer("rest", rest, palette.REST, palette.GHOST_OPACITY, t[-1:], rest_poses)]
    legend = [LegendEntry(palette.ROBOT, "robot along the predicted stop", ("robot", "tcp_path")),
              LegendEntry(palette.START, "pose at the E-stop", ("start",)),
              LegendEntry(palette.REST, rest, ("rest",))]
    scale = geometry_scale(poses)
    shapes, lines = [], []
    info = [f"{robot.name}: predicted emergency stop, category {p.category}"
            + (f" (power off at {p.power_off_time:.3f} s)" if p.category == 1 else "")]
    info.append(f"stop time {p.stop_time:.4f} s (all joints held)" if p.stopped else
                p.not_stopped_text().replace("not stopped", "NOT STOPPED", 1))
    if p.limit_crossings:  # no end stops in the model: the motion past the limit is not one the robot can make
        info.append("NOT VALID: past a joint limit (an end stop, not the brake, would end this motion: outside "
                    "what the prediction models)")
        info += [f"  {c}" for c in p.limit_crossings]
    if p.tcp_frame and p.tcp_positions is not None:
        tcp = np.asarray(p.tcp_positions, dtype=float)
        info.append(f"TCP {p.tcp_frame}: straight {p.tcp_straight_distance:.4f} m, path {p.tcp_path_length:.4f} m")
        lines.append(Polyline("tcp_path", f"path of {p.tcp_frame}", tcp[keep], palette.TCP_PATH, 3.0, t[keep], True))
        when = [e[0] for e in events]
        at = np.column_stack([np.interp(when, t, tcp[:, i]) for i in range(3)]).tolist()  # the TCP at each event
        for k, (_, kind, _) in enumerate(events):
            shapes.append(Sphere(f"event_{k}", 0.01 * scale, tuple(at[k]), palette.event_color(kind), on_top=True))
        legend.append(LegendEntry(palette.TCP_PATH, f"path of {p.tcp_frame}; dots: events",
                                  ("tcp_path",) + tuple(f"event_{k}" for k in range(len(events)))))
    info.append(f"energy: brakes {p.brake_energy:.2f} J, impulsive locks {p.impulse_energy:.2f} J")
    if envelope is not None:
        layers.append(RobotLayer("worst", "worst-case rest pose", palette.WORST, palette.GHOST_OPACITY, t[-1:],
                                 worst_poses))
        legend.append(LegendEntry(palette.WORST, "envelope: worst-case rest pose", ("worst", "worst_tcp")))
        measure = (f"TCP {worst.tcp_straight_distance:.4f} m" if envelope.tcp_frame
                   else f"largest angle {worst.max_stopping_angle:.4f} rad")
        info.append(f"envelope over {len(envelope.cases)} cases: worst {measure}, stop {worst.stop_time:.4f} s "
                    f"(torque x{worst.torque_factor:.3g}, delay x{worst.delay_factor:.3g}, payload "
                    f"{worst.payload:.3g} kg); worst time {envelope.worst_time.stop_time:.4f} s")
        if not envelope.valid:
            info.append(f"envelope NOT VALID: {envelope.invalid_text()}")
        if p.tcp_frame:
            at = frame_positions(robot.model, p.tcp_frame, q_worst[None, :], data)[0]
            shapes.append(Sphere("worst_tcp", 0.015 * scale, tuple(float(x) for x in at), palette.WORST, on_top=True))
    if reference is not None:
        label, rt, rq = reference
        rt, rq = np.asarray(rt, dtype=float), np.asarray(rq, dtype=float)
        rk = thinned(rt, [], max_frames, values=rq)
        layers.append(RobotLayer("reference", clip_text(label), palette.SIMULATED, 0.45, rt[rk],
                                 link_poses(robot.model, geometry, rq[rk], data)))
        legend.append(LegendEntry(palette.SIMULATED, clip_text(label), ("reference",)))
    n = robot.nv
    timeline = [TimelineEvent(time, kind, clip_text(f"{time:.4f} s {kind}: {_joints_text(j, n)}"))
                for time, kind, j in events]
    angles = np.array([pin.difference(robot.model, q0, q) for q in np.asarray(p.q, dtype=float)[keep]])
    joints = JointTrack("robot", tuple(robot.joint_names), angles, np.asarray(p.v)[keep],
                        np.asarray(p.locked, dtype=bool)[keep])
    notes = list(geometry.notes)
    if len(keep) < len(t):
        notes.append(f"the motion is drawn with {len(keep)} of its {len(t)} samples (max_frames)")
    duration = max(float(t[-1]), float(rt[-1]) if reference is not None else 0.0)
    return check_scene(Scene(
        title=clip_text(" — ".join(x for x in (title or f"{robot.name}: predicted stop", p.invalid_label()) if x)),
        geometry=geometry, robots=tuple(layers),
        shapes=tuple(shapes), lines=tuple(lines), events=tuple(timeline), joints=joints,
        info=tuple(clip_text(x) for x in info), legend=tuple(legend), duration=duration, notes=tuple(notes)))

"""The view of a workspace stopping map: where the sampled states put the TCP, coloured by their stopping distance,
the cell box they were sampled in, and the worst states replayed as predicted stops.

The map's rows are ``core/stopping/workspace_map`` results (one :func:`core.estop.predict_stop` per state, Müller
2026, eq. (3) with brakes); a row carries every input that produced it, so :func:`replay_row` predicts the same
stop again (same configuration, velocity, payload, brake-torque and delay factors, category) to show its motion.
The scene is drawn from a :class:`~vtm_dynamics.views.map_sample.MapSample` (the drawn rows, the worst rows and the
info panel, gathered from the map a block at a time), never from the whole map. Units: m, s.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from vtm_dynamics.core.estop import predict_stop
from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.estop.payload import with_payload
from vtm_dynamics.core.estop.results import StopPrediction
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.stopping.workspace_map import MapSpec
from vtm_dynamics.views import palette
from vtm_dynamics.views.map_sample import MapSample, worst_order
from vtm_dynamics.views.robot_geometry import RobotGeometry, geometry_of
from vtm_dynamics.views.scene import Box, Label, LegendEntry, PointCloud, Polyline, Scene, check_scene, clip_text
from vtm_dynamics.views.stop_view import stop_scene

# the worst states' labels and paths: #1 is drawn as the animated stop (its path in palette.TCP_PATH), the others
# in colours that neither the TCP path nor the cloud's red end uses
WORST_COLORS = (palette.TCP_PATH, (0.55, 0.15, 0.75), (0.0, 0.55, 0.55), (0.45, 0.30, 0.10))


def row_state(columns: dict[str, np.ndarray], robot: RobotModel, row: int) -> tuple[np.ndarray, np.ndarray]:
    """(q, v) of map row ``row`` [rad, rad/s] from its ``q_<joint>`` / ``v_<joint>`` columns."""
    q = np.array([columns[f"q_{n}"][row] for n in robot.joint_names], dtype=float)
    v = np.array([columns[f"v_{n}"][row] for n in robot.joint_names], dtype=float)
    return q, v


def replay_row(robot: RobotModel, brakes: BrakeSet, spec: MapSpec, columns: dict[str, np.ndarray],
               row: int) -> StopPrediction:
    """The stop of map row ``row`` predicted again from the inputs the row records (module docstring)."""
    q, v = row_state(columns, robot, row)
    mass = float(columns["payload_kg"][row])
    model = robot if mass == 0 else with_payload(robot, mass, spec.payload_frame)
    c1 = spec.category_one() if spec.category == 1 else None
    scaled = brakes.scaled(torque_factor=float(columns["torque_factor"][row]),
                           delay_factor=float(columns["delay_factor"][row]))
    return predict_stop(model, scaled, q, v, category=spec.category, category_one=c1, tcp_frame=spec.tcp_frame)


def worst_rows(columns: dict[str, np.ndarray], count: int = 3) -> list[int]:
    """Rows of the largest TCP stopping distances, largest first (:func:`~.map_sample.worst_order`: rows that did
    not stop within the horizon or went past a joint limit first, rows without a finite distance last)."""
    known = None if "stopped" not in columns else \
        np.asarray(columns["stopped"], dtype=bool) & np.asarray(columns.get("within_limits", True), dtype=bool)
    keys = worst_order(columns["tcp_straight_distance_m"], known)
    return [int(k) for k in np.argsort(keys, kind="stable")[:count]]


def replay_worst(robot: RobotModel, brakes: BrakeSet, spec: MapSpec, sample: MapSample) -> list[StopPrediction]:
    """The stops of the sample's worst rows predicted again (:func:`replay_row`), worst first."""
    return [replay_row(robot, brakes, spec, sample.worst, k) for k in range(len(sample.worst_rows))]


def map_scene(robot: RobotModel, sample: MapSample, *, cell_box=None, worst: Sequence[StopPrediction] = (),
              geometry: RobotGeometry | None = None, title: str | None = None) -> Scene:
    """The scene of a map from its :class:`~vtm_dynamics.views.map_sample.MapSample` (module docstring).
    ``worst``: the replayed predictions of the sample's worst rows (:func:`replay_worst`), worst first; the first
    is animated with its ghosts and events, every one gets its TCP path and a label."""
    geometry = geometry if geometry is not None else geometry_of(robot)
    n, top, d, ok = sample.count, sample.top, sample.distance, np.asarray(sample.stopped, dtype=bool)
    colors = palette.ramp(np.where(np.isfinite(d[ok]), d[ok], 0.0) / (top if top > 0 else 1.0))
    base = stop_scene(robot, worst[0], geometry=geometry) if worst else Scene(title="", geometry=geometry)
    span = float(np.max(np.ptp(sample.start, axis=0))) if len(sample.start) else 1.0
    size = max(0.005, 0.018 * span)
    clouds = [PointCloud("states", "TCP at the E-stop", sample.start[ok], colors, size=size)]
    shapes = list(base.shapes)
    legend = list(base.legend) + [LegendEntry(palette.ramp([1.0])[0], f"TCP at the E-stop of {n} states: colour = "
                                              f"stopping distance, blue 0 m .. red {top:.3f} m", ("states",))]
    past = np.asarray(sample.past_limit, dtype=bool) if len(sample.past_limit) == len(ok) else np.zeros_like(ok)
    late = ~ok & ~past
    if late.any():  # a state not at rest has no stopping distance to colour it by
        clouds.append(PointCloud("not_stopped", "TCP at the E-stop, not stopped within the horizon",
                                 sample.start[late], np.tile(palette.NOT_STOPPED, (int(np.sum(late)), 1)),
                                 size=1.6 * size))
        legend.append(LegendEntry(palette.NOT_STOPPED, "TCP at the E-stop of states that did not stop within the "
                                  "horizon (stopping distance not known)", ("not_stopped",)))
    if past.any():  # nor has one whose stop goes past a joint limit: the model has no end stops
        clouds.append(PointCloud("past_limit", "TCP at the E-stop, stop past a joint limit", sample.start[past],
                                 np.tile(palette.PAST_LIMIT, (int(np.sum(past)), 1)), size=1.6 * size))
        legend.append(LegendEntry(palette.PAST_LIMIT, "TCP at the E-stop of states whose stop goes past a joint "
                                  "limit (no end stops in the model: not a stop, stopping distance not known)",
                                  ("past_limit",)))
    if cell_box is not None:
        lo, hi = (np.asarray(c, dtype=float) for c in cell_box)
        pose = np.eye(4)
        pose[:3, 3] = 0.5 * (lo + hi)
        shapes.append(Box("cell_box", tuple(float(x) for x in hi - lo), pose, palette.CELL_BOX, 0.12, wire=True))
        legend.append(LegendEntry(palette.CELL_BOX, "cell box the TCP was sampled in", ("cell_box",)))
    lines = list(base.lines)
    labels = []
    for k, p in enumerate(worst):
        color = WORST_COLORS[k % len(WORST_COLORS)]
        state = int(sample.worst["state"][k])
        if k > 0 and p.tcp_positions is not None:
            lines.append(Polyline(f"worst_{k}", f"state {state}", np.asarray(p.tcp_positions), color, 2.5))
            legend.append(LegendEntry(color, f"TCP path of state {state} (#{k + 1})", (f"worst_{k}",)))
        if p.tcp_positions is not None:
            distance = float(sample.worst["tcp_straight_distance_m"][k])
            text = ("not stopped" if not bool(sample.worst["stopped"][k]) else "past a joint limit"
                    if not bool(sample.worst["within_limits"][k]) else f"{distance:.3f} m")
            labels.append(Label(f"#{k + 1}: {text}", tuple(float(x) for x in p.tcp_positions[-1]), color))
    s = list(sample.info)
    if worst:
        s.append(f"animated: state {int(sample.worst['state'][0])} (#1), replayed from its inputs")
    return check_scene(dataclasses.replace(
        base, title=clip_text(title or f"{robot.name}: stopping map, {n} states"), shapes=tuple(shapes),
        lines=tuple(lines), clouds=tuple(clouds), labels=tuple(labels), legend=tuple(legend),
        info=tuple(clip_text(x) for x in s + list(base.info[1:]))))

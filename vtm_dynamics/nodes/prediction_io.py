"""Between the ROS messages of an E-stop and ``vtm_dynamics.core.estop``: brakes in, prediction messages out.

* brake configuration: a YAML file (``vtm_dynamics.core.estop.brakes`` format), YAML text (PredictStop service) or the
  per-joint overrides carried by a ``vtm_msgs/BrakeEvent`` (NaN / empty arrays keep the configured value);
* out: ``vtm_msgs/StopPrediction`` (with its ``trajectory_msgs/JointTrajectory`` and ``TopologyEvent`` list),
  ``vtm_msgs/JointReactions`` at rest and the RViz ``MarkerArray``.

No physics here: every number comes from the core result or from the core model's kinematics/energies.
Units: s, rad, rad/s, N m, N, J, m.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Mapping, Sequence

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, Wrench
from visualization_msgs.msg import MarkerArray
from vtm_msgs.msg import BrakeEvent, JointReactions, StopPrediction, TopologyEvent

from vtm_dynamics.core import estop
from vtm_dynamics.core.estop.brakes import BrakeConfigError, BrakeSet, JointBrake, brakes_from_config
from vtm_dynamics.core.excerpt import clip, excerpt
from vtm_dynamics.core.limited_yaml import DEFAULT_MAX_YAML_BYTES, DEFAULT_MAX_YAML_DEPTH, load_yaml_text
from vtm_dynamics.core.estop.wrenches import rest_geometry
from vtm_dynamics.core.estop.series import position_series
from vtm_dynamics.core.reactions.held_uniqueness import held_joint_uniqueness
from vtm_dynamics.core.robot.catalogue import ROBOTS, CatalogueError
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.nodes.conversions import (
    JointStateSnapshot,
    configuration_from_positions,
    joint_trajectory_message,
    positions_from_configuration,
    seconds_to_duration,
    seconds_to_stamp,
    stamp_to_seconds,
)
from vtm_dynamics.nodes.bounded_worker import one_line
from vtm_dynamics.nodes.markers import MarkerScales, stop_markers
from vtm_dynamics.nodes.model_source import root_frame

EVENT_KINDS = {
    "engage": TopologyEvent.BRAKE_ENGAGE,
    "stick": TopologyEvent.STICK,
    "slip": TopologyEvent.SLIP,
    "release": TopologyEvent.SLIP,  # a held joint whose needed torque exceeded its capacity starts to slide
    "lock": TopologyEvent.LOCK,
    "unlock": TopologyEvent.UNLOCK,
}
OVERRIDE_FIELDS = {  # BrakeEvent array -> JointBrake field (joint-side values)
    "engage_delay": "engage_delay",
    "sliding_torque": "sliding_torque",
    "viscous_coefficient": "viscous",
    "holding_torque": "holding_torque",
}
OVERRIDE_FIELD_OF = {target: field for field, target in OVERRIDE_FIELDS.items()}
# Bounds of BrakeEvent overrides (docs/input_limits.md). Holding brakes engage within 10-200 ms: 1 s is far
# beyond any real brake and keeps a prediction's simulated time bounded (a 1e6 s delay kept the node busy ~10 s).
# The largest industrial arms need a few 1e4 N m at the base joint (1 t payload at 3 m reach): 1e5 N m (or N)
# bounds any brake torque, 1e5 N m s/rad any viscous coefficient. Relative to a configured brake an override may
# scale a torque by at most 10 (a worn or hot brake differs by tens of percent; 10x is a wrong unit or a typo).
MAX_OVERRIDE_DELAY = 1.0
MAX_OVERRIDE_TORQUE = 1e5
MAX_OVERRIDE_VISCOUS = 1e5
MAX_OVERRIDE_TORQUE_FACTOR = 10.0
MAX_OVERRIDE_JOINTS = 256


# ---------------------------------------------------------------------------------------------- brakes
def default_brake_config_path(robot_name: str) -> str:
    """The default brake file of a robot of the catalogue, or '' for any other name or when this installation
    lacks it. The name may come from a robot_description message: it selects a catalogue entry, never a path."""
    robot = ROBOTS.get(robot_name)
    try:
        return robot.brakes_path() if robot is not None else ""
    except CatalogueError:
        return ""


def load_brakes(robot: RobotModel, path: str, robot_name: str = "") -> BrakeSet:
    """Brakes of ``robot`` from ``path``, else from the package's default for ``robot_name`` / the model name."""
    if not path:
        path = default_brake_config_path(robot_name) or default_brake_config_path(robot.name)
    if not path:
        raise BrakeConfigError(f"brake_config: no brake configuration for robot {robot.name!r}; set brake_config")
    return brakes_from_config(robot, os.path.expanduser(path))


def brakes_from_yaml_text(robot: RobotModel, text: str, *, max_bytes: int = DEFAULT_MAX_YAML_BYTES,
                          max_depth: int = DEFAULT_MAX_YAML_DEPTH) -> BrakeSet:
    """Brakes from YAML text (the PredictStop service's ``brake_config_yaml``), parsed within limits.

    ``max_bytes`` (default 64 KiB) is checked before parsing, nesting ``max_depth`` (default 20) and the node
    count while parsing; aliases are refused. Every failure is a one-line ``BrakeConfigError`` starting with
    ``brake_config_yaml:`` (never RecursionError or MemoryError).
    """
    data = load_yaml_text(text, "brake_config_yaml", BrakeConfigError, max_bytes=max_bytes, max_depth=max_depth)
    if not isinstance(data, Mapping):
        raise BrakeConfigError("brake_config_yaml: expected a mapping with a top-level 'brakes' key")
    try:
        return brakes_from_config(robot, data)
    except BrakeConfigError as err:
        raise BrakeConfigError(f"brake_config_yaml: {err}") from None


def brake_overrides(msg: BrakeEvent, known: Sequence[str], *, max_delay: float = MAX_OVERRIDE_DELAY,
                    max_torque: float = MAX_OVERRIDE_TORQUE, max_viscous: float = MAX_OVERRIDE_VISCOUS,
                    max_joints: int = MAX_OVERRIDE_JOINTS,
                    bound_names: Mapping[str, str] | None = None) -> dict[str, dict[str, float]]:
    """{joint: {JointBrake field: joint-side value}} from a BrakeEvent's per-joint arrays (joints in ``known``).

    Arrays are empty (no override) or as long as ``joint_names``; NaN entries keep the configured value; other
    values must be finite, >= 0 and within the absolute bounds: ``engage_delay`` <= ``max_delay`` [s],
    ``sliding_torque`` / ``holding_torque`` <= ``max_torque`` [N m or N], ``viscous_coefficient`` <=
    ``max_viscous`` [N m s/rad or N s/m]. ``joint_names``: at most ``max_joints``, unique. Errors are one-line
    ValueErrors naming the field and the joint, e.g. ``engage_delay[elbow_joint]: ...``. The bounds relative to
    the configured brake are checked by :func:`apply_overrides`. ``bound_names`` maps a field
    (``engage_delay``, ...) to the name of the setting its bound comes from, quoted in the error.
    """
    names = list(msg.joint_names)
    if len(names) > max_joints:
        raise ValueError(f"joint_names: {len(names)} names (max_joints {max_joints})")
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"joint_names: duplicate name {excerpt(name)}")
        seen.add(name)
    known_set = set(known)
    limits = {"engage_delay": max_delay, "sliding_torque": max_torque, "holding_torque": max_torque,
              "viscous": max_viscous}
    out: dict[str, dict[str, float]] = {}
    for field, target in OVERRIDE_FIELDS.items():
        values = list(getattr(msg, field))
        if not values:
            continue
        if len(values) != len(names):
            raise ValueError(f"{field}: {len(values)} values for {len(names)} joint_names (must be 0 or equal)")
        for name, x in zip(names, values):
            x = float(x)
            if math.isnan(x) or name not in known_set:
                continue
            if not math.isfinite(x) or x < 0:
                raise ValueError(f"{field}[{clip(name)}]: must be >= 0 and finite, got {x}")
            if x > limits[target]:
                source = f" ({bound_names[target]})" if bound_names and target in bound_names else ""
                raise ValueError(f"{field}[{clip(name)}]: {x:g} exceeds the bound {limits[target]:g}{source}")
            out.setdefault(name, {})[target] = x
    return out


def engage_inputs(msg: BrakeEvent, known: Sequence[str], *, max_delay: float, now: float, receipt_instant: float,
                  future_tolerance: float) -> tuple[float, bool, dict[str, dict[str, float]], str]:
    """What a BrakeEvent ENGAGE triggers with: (instant [s], whether it is the event's stamp, the brake overrides
    of the joints in ``known``, a problem). The instant is the stamp, or ``receipt_instant`` for an unstamped event.
    A problem (overrides out of bounds, a stamp more than ``future_tolerance`` [s] ahead of ``now``) does not drop
    the trigger: its prediction is refused naming it."""
    overrides: dict[str, dict[str, float]] = {}
    problem = ""
    try:
        overrides = brake_overrides(msg, known, max_delay=max_delay, bound_names={"engage_delay": "max_engage_delay"})
    except ValueError as err:
        problem = f"brake_events: {one_line(str(err))}"
    instant = stamp_to_seconds(msg.header.stamp)
    stamped = instant > 0
    if not stamped:
        instant = receipt_instant
    if stamped and instant - now > future_tolerance and not problem:
        problem = (f"brake_events: header.stamp: {instant - now:.3f} s in the future (future_stamp_tolerance "
                   f"{future_tolerance:g} s)")
    return instant, stamped, overrides, problem


def apply_overrides(robot: RobotModel, brakes: BrakeSet, overrides: Mapping[str, Mapping[str, float]], *,
                    max_torque_factor: float = MAX_OVERRIDE_TORQUE_FACTOR) -> BrakeSet:
    """A BrakeSet with the per-joint overrides applied (a joint without a configured brake gets one).

    A torque or viscous override of a joint whose configured value is positive may be at most
    ``max_torque_factor`` times that value (the absolute bounds of :func:`brake_overrides` hold as well). One-line
    ValueError naming the BrakeEvent field and the joint otherwise.
    """
    by_joint = {b.joint: b for b in brakes.brakes}
    for joint, fields in overrides.items():
        base = by_joint.get(joint, JointBrake(joint=joint))
        for target, value in fields.items():
            configured = float(getattr(base, target))
            if target != "engage_delay" and configured > 0 and value > max_torque_factor * configured:
                raise ValueError(f"{OVERRIDE_FIELD_OF[target]}[{clip(joint)}]: {value:g} exceeds "
                                 f"{max_torque_factor:g} x the configured {configured:g}")
        by_joint[joint] = dataclasses.replace(base, **fields)
    return BrakeSet.from_brakes(robot, list(by_joint.values()), brakes.source)


# ---------------------------------------------------------------------------------------------- the call
def snapshot(robot: RobotModel, stamp: float, positions: np.ndarray, v: np.ndarray) -> JointStateSnapshot:
    return JointStateSnapshot(stamp=stamp, positions=np.asarray(positions, dtype=float),
                              q=configuration_from_positions(robot, positions), v=np.asarray(v, dtype=float),
                              estimated_velocity=())


# ---------------------------------------------------------------------------------------------- results
def stop_time(result: estop.StopPrediction) -> float:
    return float(result.stop_time) if result.stopped else float(result.t[-1])


def rest_positions(robot: RobotModel, result: estop.StopPrediction) -> np.ndarray:
    return positions_from_configuration(robot, result.q_final)


def root_frame_of(robot: RobotModel) -> str:
    return root_frame(robot)


def _point(p: Sequence[float]) -> Point:
    return Point(x=float(p[0]), y=float(p[1]), z=float(p[2]))


def _strictly_increasing(t: np.ndarray) -> np.ndarray:
    """Indices keeping the LAST sample of each run of equal times (events are sampled before and after)."""
    if len(t) == 0:
        return np.zeros(0, dtype=int)
    keep = np.append(np.diff(t) > 0, True)
    return np.flatnonzero(keep)


def topology_events(robot: RobotModel, result: estop.StopPrediction) -> list[TopologyEvent]:
    out = []
    names = list(robot.joint_names)
    for ev in result.events:
        kind = EVENT_KINDS.get(ev.kind)
        if kind is None:
            continue
        m = TopologyEvent()
        m.time_from_start = seconds_to_duration(ev.time)
        m.kind = kind
        m.joint_names = list(ev.joints)
        m.velocity_joint_names = names
        m.velocity_before = [float(x) for x in ev.v_minus]
        m.velocity_after = [float(x) for x in ev.v_plus]
        if ev.kind == "lock":
            imp = dict(zip(ev.impulse_joints, np.asarray(ev.impulses, dtype=float)))
            m.impulses = [float(imp.get(j, 0.0)) for j in ev.joints]
        m.kinetic_energy_loss = float(ev.energy_loss)
        out.append(m)
    if result.stopped:
        m = TopologyEvent()
        m.time_from_start = seconds_to_duration(result.stop_time)
        m.kind = TopologyEvent.STOP
        m.joint_names = names
        m.velocity_joint_names = names
        zeros = [0.0] * robot.nv
        m.velocity_before = zeros
        m.velocity_after = zeros
        out.append(m)
    return out


def stop_prediction_message(robot: RobotModel, result: estop.StopPrediction, stamp: Time, frame_id: str,
                            scenario_id: str, category: int, max_points: int = 200) -> StopPrediction:
    """The ``vtm_msgs/StopPrediction`` of a core prediction (``success`` false if the robot did not come to rest
    within the horizon; the fields then describe the state at the horizon). A category-1 stop carries its power-off
    time [s], the energy its drives took out [J] and the deceleration [rad/s^2] and torque limits [N m] its ramp
    assumed (the core's ``RampRecord``)."""
    msg = StopPrediction()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.model_name = robot.name
    msg.scenario_id = scenario_id
    msg.stop_category = int(category)
    names = list(robot.joint_names)
    keep = _strictly_increasing(result.t)
    # one position per joint, a continuous joint's angle continuous along the stop (per-sample atan2 jumped by
    # 2 pi where a wrist turned through +-pi)
    positions = position_series(robot, result.q[keep])
    msg.trajectory = joint_trajectory_message(names, result.t[keep], positions, result.v[keep], stamp=stamp,
                                              frame_id=frame_id, max_points=max_points)
    msg.events = topology_events(robot, result)
    msg.stop_time = seconds_to_duration(stop_time(result))
    msg.joint_names = names
    msg.stopping_angles = [float(x) for x in result.stopping_angles]
    msg.joint_stop_times = [float(x) for x in result.joint_stop_times]
    msg.holding_torques = [float(x) for x in result.holding_torques]
    msg.tcp_frame = result.tcp_frame or ""
    if result.tcp_positions is not None and len(result.tcp_positions):
        msg.tcp_start = _point(result.tcp_positions[0])
        msg.tcp_rest = _point(result.tcp_positions[-1])
    msg.tcp_path_length = float(result.tcp_path_length)
    msg.tcp_straight_distance = float(result.tcp_straight_distance)
    msg.initial_kinetic_energy = float(result.initial_kinetic_energy)
    msg.energy_dissipated_by_brakes = float(result.brake_energy)
    msg.energy_dissipated_by_impulses = float(result.impulse_energy)
    msg.potential_energy_change = float(result.potential_energy_change)
    msg.power_off_time = float(result.power_off_time)
    if result.ramp is not None:  # category 1; category 0 keeps 0 J and empty arrays (the message's defaults)
        msg.energy_dissipated_by_drives = float(result.ramp.drive_energy)
        msg.ramp_deceleration_limits = [float(x) for x in result.ramp.deceleration]
        limits = result.ramp.torque_limits
        msg.ramp_torque_limits = [float(x) for x in limits] if limits is not None else [0.0] * robot.nv
    msg.success = bool(result.stopped) and not result.limit_crossings
    msg.message = (f"not at rest within the horizon ({result.t[-1]:.3f} s)" if not result.stopped else
                   result.limit_text() if result.limit_crossings else "ok")
    return msg


def mark_provenance(msg: StopPrediction, *, model_name: str, model_hash: str, start_stamp: Time | float | None,
                    start_age: float, velocities_estimated: bool, revision: int, final: bool) -> StopPrediction:
    """Fill what a prediction was made from: the model (name, hash of its URDF text), the start state's stamp
    (a Time, or [s]; None: no state) and age [s] relative to the trigger instant, whether velocities were
    estimated, and the revision of the stop and whether it is final. Returns ``msg``."""
    msg.model_name = model_name
    msg.model_hash = model_hash
    if isinstance(start_stamp, Time):
        msg.start_state_stamp = start_stamp
    elif start_stamp is not None and math.isfinite(start_stamp) and start_stamp > 0:
        msg.start_state_stamp = seconds_to_stamp(start_stamp)
    msg.start_state_age = float(start_age)
    msg.velocities_estimated = bool(velocities_estimated)
    msg.revision = max(0, min(int(revision), 2**32 - 1))
    msg.final = bool(final)
    return msg


def joint_reactions_message(robot: RobotModel, result: estop.StopPrediction, stamp: Time) -> JointReactions:
    """Reaction wrenches at rest (Pinocchio joint forces, joint frame, child side) and holding torques."""
    msg = JointReactions()
    msg.header.stamp = stamp
    names = [robot.model.names[i] for i in range(1, robot.model.njoints)]
    msg.joint_names = names
    for w in result.rest_wrenches:
        wr = Wrench()
        wr.force.x, wr.force.y, wr.force.z = (float(x) for x in w[:3])
        wr.torque.x, wr.torque.y, wr.torque.z = (float(x) for x in w[3:])
        msg.wrenches.append(wr)
    hold = []
    for n in names:
        j = robot.joint(n)
        hold.append(float(result.holding_torques[j.idx_v]) if j.nv == 1 else float("nan"))
    msg.holding_torques = hold
    unique, method = held_reaction_verdicts(robot, result.q_final, names)
    msg.uniquely_determined = unique
    msg.method = method
    return msg


def held_reaction_verdicts(robot: RobotModel, q_final: Any, names: Sequence[str]) -> tuple[list[bool], str]:
    """Per joint: is the reaction at rest unique, and the ``method`` text of the message.

    Kinematic trees: all unique, ``"rnea"``. Models with loop closures or knife edges: the wrenches above come from
    the RNEA of the tree (the loop closures carry no load in it), so the method says so, and uniqueness comes from
    the core's analysis of the mechanism held by its brakes (``core.reactions.held_uniqueness``). If that analysis
    cannot run (e.g. too many bodies), no reaction is claimed unique.
    """
    ext = robot.extension
    if ext is None or (not ext.loop_closures and not ext.knife_edges):
        return [True] * len(names), "rnea"
    method = "rnea of the tree; loop closures not included"
    try:
        verdict = held_joint_uniqueness(robot.urdf_text, np.asarray(q_final, dtype=float))
    except ValueError:
        verdict = {}
    if not verdict:
        return [False] * len(names), method + "; uniqueness not analysed"
    return [bool(verdict.get(n, False)) for n in names], method


def stop_markers_message(robot: RobotModel, result: estop.StopPrediction, stamp: Time, frame_id: str,
                         scales: MarkerScales = MarkerScales()) -> MarkerArray:
    """Markers of the prediction: TCP path, rest pose (joint origins), reaction forces and holding torques at rest
    (the rest geometry computed by the core, :func:`vtm_dynamics.core.estop.wrenches.rest_geometry`); the summary
    text of a prediction that is not the robot's stop starts with its NOT VALID mark, in red."""
    rest = rest_geometry(robot, result)
    tcp = result.tcp_positions if result.tcp_positions is not None else np.zeros((0, 3))
    head = f"stop {stop_time(result):.3f} s" if result.stopped else f"NOT at rest after {stop_time(result):.3f} s"
    summary = f"{head}, {result.tcp_frame} path {result.tcp_path_length:.3f} m" if result.tcp_frame else head
    mark = result.invalid_label()  # a stop past a joint limit or cut off by the horizon is not the robot's stop
    return stop_markers(frame_id, stamp, tcp, rest.origins, rest.axes, rest.forces,
                        np.nan_to_num(rest.holding_torques), f"{mark}\n{summary}" if mark else summary, scales,
                        alert=bool(mark))

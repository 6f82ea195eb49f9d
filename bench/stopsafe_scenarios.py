"""Robots, cells and planned trajectories shared by the stop-safe tests and bench/bench_stopsafe.py.

UR5: example-robot-data URDF, the calibrated brakes of config/ur5_brakes.yaml. Panda: example-robot-data URDF with
the gripper fingers fixed at 0.02 m and ASSUMED brakes (no published figures: sliding 0.6 x and holding 0.8 x the
URDF effort limit, 10 ms engage delay, as bench_estop.py assumes). The cells put a table in front of the robot, a
wall behind it and the floor under its base. Trajectories are rest-to-rest joint motions with cosine speed
profiles (positions and velocities at the points: cubic interpolation). Units: SI.
"""

from __future__ import annotations

import math
import os

import numpy as np

from vtm_dynamics.core.estop import StopSettings
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.estop.envelope import EnvelopeSpec
from vtm_dynamics.core.robot.model import example_robot_urdf
from vtm_dynamics.core.robot.urdf_extension import read_urdf_file
from vtm_dynamics.core.stopsafe.robot_geometry import build_robot_geometry, example_robot_package_dir
from vtm_dynamics.core.stopsafe.scene import scene_from_mapping
from vtm_dynamics.core.stopsafe.stop_cases import StopSetup
from vtm_dynamics.core.stopsafe.trajectory import planned_trajectory

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UR5_URDF = "ur_description/urdf/ur5_robot.urdf"
PANDA_URDF = "panda_description/urdf/panda.urdf"
PANDA_FINGERS = {"panda_finger_joint1": 0.02, "panda_finger_joint2": 0.02}
# link pairs of the UR5 that its own design keeps within ~1.5 cm of each other in every configuration (the hulls of
# the links on either side of one short link); a stop cannot change that, and a margin on them would flag every stop
UR5_ALLOWED_SELF_PAIRS = [["base_link", "upper_arm_link"], ["wrist_1_link", "wrist_3_link"],
                          ["forearm_link", "wrist_2_link"]]


def ur5(envelope: bool = False, categories: tuple[int, ...] = (0,), step: float | None = None):
    """(robot, geometry, setup) of the UR5 with its calibrated brakes; ``envelope``: the 9-case envelope
    (torque x0.9..1.1, delay x1..1.5, payload 0..5 kg at tool0); ``step`` [s] the engine's largest step (None:
    its default)."""
    text = read_urdf_file(example_robot_urdf(UR5_URDF))
    robot, geometry = build_robot_geometry(text, [example_robot_package_dir()])
    brakes = brakes_from_config(robot, os.path.join(REPO, "config", "ur5_brakes.yaml"))
    env = EnvelopeSpec(payload=(0.0, 5.0), payload_frame="tool0") if envelope else None
    settings = StopSettings() if step is None else StopSettings(step=step)
    return robot, geometry, StopSetup(robot, brakes, env, categories, payload_frame="tool0", settings=settings)


def panda_brake_config(robot) -> dict:
    """ASSUMED Panda brakes (module docstring) as a brake configuration."""
    eff = robot.model.effortLimit
    return {"brakes": {"defaults": {"engage_delay": 0.01}, "joints": {
        n: {"sliding_torque": 0.6 * float(eff[i]), "holding_torque": 0.8 * float(eff[i])}
        for i, n in enumerate(robot.joint_names)}}}


def panda(envelope: bool = False, categories: tuple[int, ...] = (0,)):
    """(robot, geometry, setup) of the Panda (fingers fixed) with the assumed brakes."""
    text = read_urdf_file(example_robot_urdf(PANDA_URDF))
    robot, geometry = build_robot_geometry(text, [example_robot_package_dir()], fixed_joints=PANDA_FINGERS)
    brakes = brakes_from_config(robot, panda_brake_config(robot))
    env = EnvelopeSpec(payload=(0.0, 3.0), payload_frame="panda_link8") if envelope else None
    return robot, geometry, StopSetup(robot, brakes, env, categories, payload_frame="panda_link8")


TABLE_TOP = {"ur5": 0.22, "panda": 0.35}  # [m] a few centimetres under the tool in the home poses


def cell(robot_name: str, table_top: float | None = None, floor: float = -0.05, tilt: float = 0.12,
         self_collision: bool = True) -> dict:
    """A table in front (its top tilted by ``tilt`` rad about y, so that the clearance changes along a turn of
    the base), a wall behind, the floor below (the scene file's mapping)."""
    allowed = UR5_ALLOWED_SELF_PAIRS if robot_name == "ur5" else []
    top = TABLE_TOP[robot_name] if table_top is None else table_top
    quat = [0.0, math.sin(0.5 * tilt), 0.0, math.cos(0.5 * tilt)]
    return {"scene": {
        "floor": {"height": floor}, "self_collision": self_collision, "allowed_self_pairs": allowed,
        "obstacles": [
            {"name": "table", "primitive": {"type": "box", "dimensions": [0.5, 0.9, 0.04]},
             "pose": {"position": [0.6, 0.0, top - 0.02], "orientation": quat}},
            {"name": "wall", "primitive": {"type": 1, "dimensions": [0.04, 2.0, 1.6]},
             "pose": {"position": [-0.55, 0.0, 0.8], "orientation": [0, 0, 0, 1]}},
        ]}}


def scene(robot_name: str, **kw):
    return scene_from_mapping(cell(robot_name, **kw))


def rest_to_rest(names, waypoints, durations):
    """A trajectory through ``waypoints`` (each held at rest), every move a cosine speed profile of its duration,
    sampled at 4 points per move (positions and velocities)."""
    t, P, V = [0.0], [np.asarray(waypoints[0], dtype=float)], [np.zeros(len(names))]
    for a, b, d in zip(waypoints[:-1], waypoints[1:], durations):
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        for x in (0.25, 0.5, 0.75, 1.0):
            s = 0.5 - 0.5 * math.cos(math.pi * x)
            ds = 0.5 * math.pi * math.sin(math.pi * x) / d
            t.append(t[-1] + 0.25 * d)
            P.append(a + s * (b - a))
            V.append(ds * (b - a))
    return planned_trajectory(list(names), t, P, V)


UR5_HOME = [0.0, -1.3, 1.7, -1.97, -1.57, 0.0]


def ur5_pan(duration: float = 1.0, sweep: float = 1.6):
    """The UR5 arm over the table, base turning by ``sweep`` rad."""
    a = list(UR5_HOME)
    b = list(UR5_HOME)
    a[0], b[0] = -0.5 * sweep, 0.5 * sweep
    names = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
             "wrist_3_joint"]
    return rest_to_rest(names, [a, b], [duration])


def ur5_down(duration: float = 0.5):
    """The UR5 forearm driven down towards the table (shoulder and elbow), rest to rest."""
    a = [0.0, -1.45, 1.35, -1.5, -1.57, 0.0]
    b = [0.0, -1.1, 1.75, -1.5, -1.57, 0.0]
    names = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
             "wrist_3_joint"]
    return rest_to_rest(names, [a, b], [duration])


def ur5_tour(seconds: float = 10.0):
    """A 10 s UR5 motion through five poses above the table (the bench's trajectory)."""
    poses = [UR5_HOME, [0.6, -1.1, 1.5, -1.9, -1.57, 0.3], [0.2, -1.5, 1.9, -1.9, -1.2, 0.0],
             [-0.6, -1.2, 1.6, -2.0, -1.57, -0.4], [-0.2, -1.4, 1.8, -1.9, -1.9, 0.2], UR5_HOME]
    names = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
             "wrist_3_joint"]
    return rest_to_rest(names, poses, [seconds / (len(poses) - 1)] * (len(poses) - 1))


PANDA_HOME = [0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8]


def panda_pan(duration: float = 1.0, sweep: float = 1.4):
    a = list(PANDA_HOME)
    b = list(PANDA_HOME)
    a[0], b[0] = -0.5 * sweep, 0.5 * sweep
    return rest_to_rest([f"panda_joint{k}" for k in range(1, 8)], [a, b], [duration])


def table_only(top: float):
    """Only a table under the UR5's tool (its top at ``top`` [m]), no floor, no self-collision."""
    return scene_from_mapping({"scene": {"self_collision": False, "obstacles": [
        {"name": "table", "primitive": {"type": "box", "dimensions": [0.5, 0.9, 0.04]},
         "pose": {"position": [0.65, 0.0, top - 0.02]}}]}})

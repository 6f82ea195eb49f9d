"""Shared inputs of the view tests: one UR5 prediction with its envelope (module-scoped in each test module)."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def ur5_stop():
    """(robot, prediction, envelope) of the UR5 demo stop with a 2-case random envelope (13 cases in all)."""
    from vtm_dynamics.cli.predict import run_prediction

    summary, robot, _ = run_prediction("ur5", envelope=2)
    return robot, summary.prediction, summary.envelope


@functools.lru_cache(maxsize=1)
def ur5_geometry():
    from vtm_dynamics.views.robot_geometry import robot_geometry

    robot = ur5_stop()[0]
    return robot_geometry(robot.model, robot.urdf_text)


# a small cell for the trajectory-check views: the UR5 drives its wrist down towards a table (some stops come too
# close, others end clear), with one obstacle of every other kind and the floor (a scene file's mapping)
CHECK_CELL = {"scene": {"self_collision": False, "floor": {"height": -0.1}, "obstacles": [
    {"name": "table", "primitive": {"type": 1, "dimensions": [0.5, 0.9, 0.04]},
     "pose": {"position": [0.65, 0.0, 0.035]}},
    {"name": "pillar", "primitive": {"type": "cylinder", "dimensions": [0.8, 0.05]},
     "pose": {"position": [0.1, -0.6, 0.35], "orientation": [0.0, 0.0, 0.3826834, 0.9238795]}},
    {"name": "cone", "primitive": {"type": "cone", "dimensions": [0.2, 0.06]},
     "pose": {"position": [0.7, 0.35, 0.155]}},
    {"name": "ball", "primitive": {"type": "sphere", "dimensions": [0.06]}, "pose": {"position": [0.3, 0.6, 0.01]}},
    {"name": "jig", "mesh": {"vertices": [[0, 0, 0], [0.1, 0, 0], [0, 0.1, 0], [0, 0, 0.1]],
                             "triangles": [[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]]},
     "pose": {"position": [0.5, -0.4, 0.055]}},
]}}
CHECK_RATE = 20.0  # [Hz] E-stop instants (fixed: few stops, cheap)


@functools.lru_cache(maxsize=1)
def ur5_check():
    """(robot, trajectory, scene, result, worst-stop paths) of the check of a 0.5 s UR5 motion in
    :data:`CHECK_CELL` with the nominal brakes at :data:`CHECK_RATE`, through the core API (as
    ``vtm-check-trajectory --nominal --rate 20`` runs it)."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                    "bench"))
    import stopsafe_scenarios as S

    from vtm_dynamics.core.stopsafe.check import CheckSettings, TrajectoryChecker
    from vtm_dynamics.core.stopsafe.sampling import SamplingSpec
    from vtm_dynamics.core.stopsafe.scene import scene_from_mapping
    from vtm_dynamics.core.stopsafe.viewer_data import worst_stop_paths

    robot, geometry, setup = S.ur5()
    trajectory = S.ur5_down(0.5)
    scene = scene_from_mapping(CHECK_CELL)
    checker = TrajectoryChecker(setup, geometry, scene, CheckSettings(sampling=SamplingSpec(rate=CHECK_RATE)), "tool0")
    result = checker.check(trajectory)
    return robot, trajectory, scene, result, worst_stop_paths(geometry, result.worst, "tool0")

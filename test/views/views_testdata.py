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

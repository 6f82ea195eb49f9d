"""Known-truth recordings for the recorded-stop tests: UR5 stops of the independent fixed-step plant with brakes
that differ from the prior of the fit (test/recordings/data/ur5_prior_brakes.yaml), seen through the default measurement model of
``vtm_dynamics.recordings.simulated`` (500 Hz, +-0.2 ms timestamp jitter, 19-bit encoder, 1e-4 rad noise)."""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from vtm_dynamics.core.estop.brakes import BrakeSet, brakes_from_config
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf
from vtm_dynamics.recordings.simulated import StopStart, simulate_stops

from test.core.core_testdata import UR5

PLANT_DT = 2e-5  # [s] the plant's step: its O(dt) error stays well below the encoder noise
MAIN = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint")  # the joints with published figures


def ur5() -> RobotModel:
    return RobotModel.from_urdf_file(example_robot_urdf(UR5))


PRIOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "ur5_prior_brakes.yaml")


def prior_brakes(robot: RobotModel) -> BrakeSet:
    return brakes_from_config(robot, PRIOR)


def true_brakes(robot: RobotModel) -> BrakeSet:
    """The truth: 20 % more sliding torque, different viscous terms, 12 ms delays, holding 1.5 x sliding."""
    prior = prior_brakes(robot)
    return BrakeSet.from_brakes(robot, [dataclasses.replace(
        b, sliding_torque=1.2 * b.sliding_torque, holding_torque=1.8 * b.sliding_torque,
        viscous=0.8 * b.viscous + 1.0, engage_delay=0.012) for b in prior.brakes])


def starts(n: int, seed: int = 1) -> list[StopStart]:
    """Stops from poses around the demo pose, every joint moving at 0.4-2 rad/s in either direction."""
    rng = np.random.default_rng(seed)
    home = np.array([0.3, -1.2, 1.5, -0.8, 0.5, 0.2])
    return [StopStart(home + rng.uniform(-0.3, 0.3, 6), rng.choice([-1, 1], 6) * rng.uniform(0.4, 2.0, 6))
            for _ in range(n)]


def samples(n: int, seed: int = 1) -> dict:
    robot = ur5()
    return simulate_stops(robot, true_brakes(robot), starts(n, seed), seed=seed + 1, plant_dt=PLANT_DT)


def check_main_terms_and_delays(robot: RobotModel, ident, truth: BrakeSet, fields=("sliding_torque", "viscous"),
                                rel: float = 0.05, delay_tol: float = 1e-3) -> None:
    """The issue's known-truth bar: ``fields`` of the MAIN joints identified within ``rel`` of ``truth``, and
    every joint's engage delay within ``delay_tol`` [s]."""
    import pytest

    true = {b.joint: b for b in truth.brakes}
    est = {(e.joint, e.field): e for e in ident.estimates}
    for joint in MAIN:
        for field in fields:
            e = est[(joint, field)]
            assert e.identifiable, (joint, field, e.reason)
            assert e.value == pytest.approx(getattr(true[joint], field), rel=rel), (joint, field, e.value)
    for joint in robot.joint_names:
        e = est[(joint, "engage_delay")]
        assert e.identifiable and abs(e.value - true[joint].engage_delay) < delay_tol, joint


def check_reported_values_within_sigma(ident, truth: BrakeSet, k: float = 3.0) -> None:
    """Every value reported as identified lies within ``k`` of its own 1-sigma of the truth."""
    true = {b.joint: b for b in truth.brakes}
    for e in ident.estimates:
        if e.identifiable:
            error = e.value - getattr(true[e.joint], e.field)
            assert abs(error) <= k * e.sigma, (e.joint, e.field, e.value, e.sigma, error / e.sigma)


def check_held_out_stops(robot: RobotModel, ident, held, rel: float = 0.05) -> None:
    """The fitted brakes predict each held-out stop's largest joint angle, stop time and TCP distance within ``rel``."""
    import pytest

    from vtm_dynamics.core.estop.identification import compare_stops

    for c in compare_stops(robot, BrakeSet.from_brakes(robot, list(ident.brakes)), held, "tool0"):
        i = int(np.argmax(np.abs(c.recorded_angles)))
        assert c.predicted_angles[i] == pytest.approx(c.recorded_angles[i], rel=rel), c.label
        assert c.predicted_time == pytest.approx(c.recorded_time, rel=rel), c.label
        assert c.predicted_tcp == pytest.approx(c.recorded_tcp, rel=rel), c.label

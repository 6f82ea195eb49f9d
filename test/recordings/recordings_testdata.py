"""Known-truth recordings for the recorded-stop tests.

``REALISTIC``: the validation set ``tuning_a`` (``vtm_dynamics.recordings.validation_sets``: per-joint delays of
13-24 ms, viscous terms on J0-J2, capacities 1.15-1.3 x sliding that decide slips in about half of the stops,
5 kg at tool0, a driver-like sensor), its first twelve stops (ten to fit, two held out), simulated by the
independent fixed-step plant at 2e-5 s (the validation script uses 5e-6 s, whose own error is four times smaller:
the tests here check values within 5 %, delays within 1 ms and intervals within 4 sigma, which the 2e-5 s plant's
bias of up to 3.6 sigma on the best-determined torques leaves room for; the coverage of the intervals is measured
in bench/validate_calibration.py). Fits start from the shipped prior without the extended terms.

``samples``/``true_brakes``: the older, simpler stops (equal 12 ms delays, no payload, a prior close to the
truth) that the bag tests use as plain recordings and the Stribeck test builds its truth on."""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from vtm_dynamics.core.estop.brakes import BrakeSet, brakes_from_config
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf
from vtm_dynamics.core.estop.identification import identify_brakes
from vtm_dynamics.recordings.simulated import PlantStop, StopStart, plant_stops, simulate_stops
from vtm_dynamics.recordings.validation_sets import TUNING_A

from test.core.core_testdata import UR5

PLANT_DT = 2e-5  # [s] the plant's step: its O(dt) error stays well below the encoder noise
MAIN = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint")  # the joints with published figures


def ur5() -> RobotModel:
    return RobotModel.from_urdf_file(example_robot_urdf(UR5))


PRIOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "ur5_prior_brakes.yaml")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED_PRIOR = os.path.join(REPO, "config", "ur5_brakes_coulomb_viscous.yaml")
REALISTIC = dataclasses.replace(TUNING_A, held=2)
REALISTIC_PLANT_DT = 2e-5  # [s]


def realistic_plant(robot: RobotModel) -> list[PlantStop]:
    return plant_stops(robot, REALISTIC.truth(robot), REALISTIC.starts(robot), plant_dt=REALISTIC_PLANT_DT)


def fit_realistic(robot: RobotModel, stops, **options):
    """The identification of ``stops`` from the shipped prior without the extended terms, as a user runs it."""
    prior = brakes_from_config(robot, SHIPPED_PRIOR)
    return identify_brakes(robot, prior.brakes, stops, tcp_frame="tool0", **options)


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


def check_held_out_stops(robot: RobotModel, ident, held, rel: float = 0.05, sample: float = 0.002) -> None:
    """The fitted brakes predict each held-out stop's largest joint angle, stop time and TCP distance within ``rel``
    (the stop time within ``rel`` or one ``sample`` period [s], whichever is larger: a recording times a stop of
    30-50 ms no better than its sample period)."""
    import pytest

    from vtm_dynamics.core.estop.identification import compare_stops

    for c in compare_stops(robot, BrakeSet.from_brakes(robot, list(ident.brakes)), held, "tool0"):
        i = int(np.argmax(np.abs(c.recorded_angles)))
        assert c.predicted_angles[i] == pytest.approx(c.recorded_angles[i], rel=rel), c.label
        assert c.predicted_time == pytest.approx(c.recorded_time, rel=rel, abs=sample), c.label
        assert c.predicted_tcp == pytest.approx(c.recorded_tcp, rel=rel), c.label

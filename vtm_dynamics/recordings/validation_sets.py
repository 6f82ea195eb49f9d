"""Validation sets with known truth for the brake identification: UR5 category-0 stops of the independent
fixed-step plant (:mod:`vtm_dynamics.core.estop.braked_plant`), seen through a measurement model like a real
driver's (:mod:`.simulated`).

They are made not to share the identification's assumptions: every joint engages after its own delay, spread
over 10-30 ms (the prior says 10 ms for all); the three large joints have a viscous term; the holding capacities
are 1.15-1.3 x the sliding torque, so that a joint at rest must hold the reactions of the joints still braking and
slips in a good fraction of the stops (the prior says 1.5 x); a 5 kg payload sits at ``tool0``; every joint
moves at 0.3-3.1 rad/s in either direction when the trigger fires; the samples come at 500 Hz with timestamp
jitter, encoder quantisation and noise, and a few lost messages. A fit starts from the shipped prior
(``config/ur5_brakes_coulomb_viscous.yaml``) or perturbed values, never from the truth.

Five sets (``tuning_a``, ``tuning_b``, ``held_out``, ``fresh``, ``untouched``) are the ones the identification was
developed and tested on (``held_out``, ``fresh`` and ``untouched`` were each held out until they showed defects,
which were then addressed); ``sealed`` was never used to tune anything and is reported separately
(``bench/validate_calibration.py``).

Units: s, rad, rad/s, N m, N m s/rad, kg.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from vtm_dynamics.core.estop.brakes import BrakeSet, JointBrake
from vtm_dynamics.core.estop.payload import with_payload
from vtm_dynamics.core.robot.catalogue import UR5
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.recordings.simulated import Sensor, StopStart

# a driver like a real one: 500 Hz, each sample taken up to 0.25 ms from its stamp, a 19-bit joint encoder with
# 1e-4 rad noise, velocities with 3e-3 rad/s noise, 0.3 % of the messages lost
DRIVER = Sensor(rate=500.0, jitter=2.5e-4, quantum=2.0 * math.pi / 2**19, noise=1e-4, velocity_noise=3e-3,
                drop_rate=0.003)


@dataclass(frozen=True)
class ValidationSet:
    """One set: per joint (UR5 order) ``delays`` [s], ``sliding`` [N m], ``viscous`` [N m s/rad] and ``holding``
    (x sliding); ``payload`` [kg] at ``tool0``; the stops' start poses ``home`` +- ``spread`` [rad] with every
    joint at ``speeds`` [rad/s] in either direction, drawn with ``seed``; ``stops`` to fit and ``held`` more kept
    out of the fit; the sensor, and whether the set is ``held_out`` (never used to tune the identification)."""

    name: str
    delays: tuple[float, ...]
    sliding: tuple[float, ...]
    viscous: tuple[float, ...]
    holding: tuple[float, ...]
    home: tuple[float, ...]
    seed: int
    payload: float = 5.0
    spread: float = 0.4
    speeds: tuple[float, float] = (0.3, 3.1)
    stops: int = 10
    held: int = 4
    sensor: Sensor = field(default=DRIVER)
    held_out: bool = False

    def robot(self) -> RobotModel:
        """The UR5 of the robot catalogue with this set's payload at its payload frame (``tool0``)."""
        return with_payload(RobotModel.from_urdf_file(UR5.urdf_path()), self.payload, UR5.payload_frame)

    def truth(self, robot: RobotModel) -> BrakeSet:
        return BrakeSet.from_brakes(robot, [
            JointBrake(name, engage_delay=d, sliding_torque=s, viscous=c, holding_torque=h * s)
            for name, d, s, c, h in zip(robot.joint_names, self.delays, self.sliding, self.viscous, self.holding)])

    def starts(self, robot: RobotModel, count: int | None = None) -> list[StopStart]:
        """The first ``count`` (default all: ``stops + held``) trigger states, within the model's limits."""
        rng = np.random.default_rng(self.seed)
        limit = np.asarray(robot.model.velocityLimit, float)
        out = []
        for _ in range(self.stops + self.held if count is None else count):
            q0 = np.asarray(self.home) + rng.uniform(-self.spread, self.spread, len(self.home))
            v0 = rng.choice([-1.0, 1.0], len(self.home)) * rng.uniform(*self.speeds, len(self.home))
            out.append(StopStart(q0, np.clip(v0, -limit, limit)))
        return out


# The scenario: delays 13-24 ms, viscous on J0-J2, capacities 1.15-1.3 x sliding (the elbow's decides
# whether it slips in about half of the stops), 5 kg at tool0.
TUNING_A = ValidationSet(
    "tuning_a", delays=(0.013, 0.021, 0.017, 0.024, 0.015, 0.019), sliding=(62.0, 135.0, 58.0, 24.0, 21.0, 19.0),
    viscous=(45.0, 18.0, 9.0, 0.0, 0.0, 0.0), holding=(1.2, 1.15, 1.15, 1.3, 1.2, 1.25),
    home=(0.0, -0.2, 0.2, -1.2, -1.5, 0.0), seed=5)
TUNING_B = ValidationSet(
    "tuning_b", delays=(0.028, 0.011, 0.022, 0.016, 0.030, 0.013), sliding=(48.0, 122.0, 50.0, 26.0, 23.0, 18.0),
    viscous=(60.0, 25.0, 14.0, 0.0, 0.0, 0.0), holding=(1.3, 1.15, 1.15, 1.15, 1.25, 1.2),
    home=(0.5, -0.3, 0.3, -1.0, 0.8, 0.3), seed=17)
# Held out until it showed a defect of the capacity intervals (a hold read as a tiny slip that absorbed the trigger
# state's error), which was then fixed: since then it counts as a tuning set.
HELD_OUT = ValidationSet(
    "held_out", delays=(0.017, 0.026, 0.012, 0.021, 0.019, 0.027), sliding=(70.0, 145.0, 62.0, 30.0, 25.0, 22.0),
    viscous=(35.0, 12.0, 6.0, 0.0, 0.0, 0.0), holding=(1.25, 1.15, 1.2, 1.15, 1.3, 1.2),
    home=(-0.3, -0.1, 0.4, -1.5, -1.2, 0.5), seed=29)
# Run once untouched; it showed two defects (capacities read in joint order stood in for each other; starts that
# all fell into one basin far from the data passed as converged), which were then addressed: a tuning set since.
FRESH = ValidationSet(
    "fresh", delays=(0.022, 0.014, 0.028, 0.011, 0.024, 0.016), sliding=(57.0, 128.0, 66.0, 27.0, 24.0, 20.0),
    viscous=(52.0, 20.0, 11.0, 0.0, 0.0, 0.0), holding=(1.2, 1.25, 1.15, 1.2, 1.15, 1.3),
    home=(0.2, -0.4, 0.6, -1.3, 1.0, -0.4), seed=41)
# Run once untouched; its intervals covered the truth too rarely (a misfit in one stop made the errors of the
# others' values non-white), which the jackknife over stops then addressed: a tuning set since.
UNTOUCHED = ValidationSet(
    "untouched", delays=(0.019, 0.024, 0.015, 0.028, 0.012, 0.021), sliding=(66.0, 140.0, 55.0, 25.0, 26.0, 21.0),
    viscous=(40.0, 15.0, 8.0, 0.0, 0.0, 0.0), holding=(1.15, 1.2, 1.25, 1.2, 1.3, 1.15),
    home=(-0.2, -0.3, 0.5, -1.1, -0.8, 0.2), seed=53)
# Never used to tune anything: run once, for the report.
SEALED = ValidationSet(
    "sealed", delays=(0.025, 0.017, 0.012, 0.023, 0.029, 0.014), sliding=(60.0, 132.0, 61.0, 28.0, 22.0, 24.0),
    viscous=(45.0, 18.0, 9.0, 0.0, 0.0, 0.0), holding=(1.3, 1.2, 1.2, 1.25, 1.15, 1.2),
    home=(0.1, -0.5, 0.7, -1.2, 0.6, -0.3), seed=67, held_out=True)
SETS = {s.name: s for s in (TUNING_A, TUNING_B, HELD_OUT, FRESH, UNTOUCHED, SEALED)}

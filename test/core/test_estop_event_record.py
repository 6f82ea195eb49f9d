"""The E-stop event record says which joint did what: a joint that sticks and another that is released at the same
instant are two events (stick, release), not one 'stick' naming both."""

from __future__ import annotations

import numpy as np
import pytest

from vtm_dynamics.core import estop
from vtm_dynamics.core.brakes import BrakeSet, JointBrake
from vtm_dynamics.core.model import RobotModel, example_robot_urdf
from vtm_dynamics.core.payload import with_payload

SLIDING = [163.73, 158.65, 65.06, 24.11, 24.11, 24.11]  # [N m]
Q0 = np.array([1.5, -1.9, 2.0, -0.5, 0.4, 1.0])  # [rad]
V0 = np.pi * np.array([0.3, 0.8, -0.6, -0.5, 0.5, -0.3])  # [rad/s]


@pytest.fixture(scope="module")
def prediction() -> estop.StopPrediction:
    robot = with_payload(RobotModel.from_urdf(example_robot_urdf("ur_description/urdf/ur5_robot.urdf")), 5.0, "tool0")
    brakes = BrakeSet.from_brakes(robot, [JointBrake(n, engage_delay=0.02, sliding_torque=s, holding_torque=1.2 * s)
                                          for n, s in zip(robot.joint_names, SLIDING)])
    return estop.predict_stop(robot, brakes, Q0, V0, tcp_frame="tool0")


def _held_after(prediction: estop.StopPrediction, event: estop.StopEvent) -> np.ndarray:
    """Active set right after ``event`` (events appear twice in the series: the later sample is after it)."""
    after = int(np.flatnonzero(np.abs(prediction.t - event.time) <= 1e-12)[-1])
    return prediction.locked[after]


def test_simultaneous_stick_and_release_are_recorded_as_two_events(prediction):
    at = [e for e in prediction.events if abs(e.time - 0.04611) < 5e-5]
    assert sorted((e.kind, e.joints) for e in at) == [("release", ("elbow_joint",)), ("stick", ("wrist_1_joint",))]


def test_every_event_names_only_joints_that_did_what_its_kind_says(prediction):
    names = prediction.joint_names
    checked = 0
    for e in prediction.events:
        held = _held_after(prediction, e)
        for joint in e.joints:
            i = names.index(joint)
            if e.kind == "stick":
                assert held[i], f"{e.time:.5f} s: {joint} listed as stick but not held after the event"
                checked += 1
            elif e.kind == "release":
                assert not held[i], f"{e.time:.5f} s: {joint} listed as release but still held"
                checked += 1
    assert checked >= 7

"""What an E-stop prediction reports: the event record says which joint did what (a joint that sticks and another
that is released at the same instant are two events, stick and release, not one 'stick' naming both), and the TCP
path length is the length of the travelled path, not of chords between output samples."""

from __future__ import annotations

import numpy as np
import pytest

from vtm_dynamics.core import estop
from vtm_dynamics.core.estop.brakes import BrakeSet, JointBrake
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf
from vtm_dynamics.core.estop.payload import with_payload

SLIDING = [163.73, 158.65, 65.06, 24.11, 24.11, 24.11]  # [N m]
Q0 = np.array([1.5, -1.9, 2.0, -0.5, 0.4, 1.0])  # [rad]
V0 = np.pi * np.array([0.3, 0.8, -0.6, -0.5, 0.5, -0.3])  # [rad/s]


@pytest.fixture(scope="module")
def prediction() -> estop.StopPrediction:
    robot = with_payload(RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf")), 5.0, "tool0")
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


def _reference_path_length(robot: RobotModel, prediction: estop.StopPrediction, per_interval: int = 400) -> float:
    """TCP path length on a fine resampling of the trajectory (cubic Hermite in q, v between samples)."""
    import pinocchio as pin

    frame = robot.model.getFrameId("tool0")
    _, q, _ = estop.dense_series(prediction, per_interval)
    points = []
    for qq in q:
        pin.forwardKinematics(robot.model, robot.data, qq)
        points.append(pin.updateFramePlacement(robot.model, robot.data, frame).translation.copy())
    return float(np.sum(np.linalg.norm(np.diff(np.array(points), axis=0), axis=1)))


def test_tcp_path_length_is_the_length_of_the_travelled_path_not_of_chords_between_samples():
    robot = with_payload(RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf")), 5.0, "tool0")
    brakes = BrakeSet.from_brakes(robot, [JointBrake(n, engage_delay=0.02, sliding_torque=s, holding_torque=1.2 * s)
                                          for n, s in zip(robot.joint_names, SLIDING)])
    rng = np.random.default_rng(1)
    for _ in range(4):
        q, v = rng.uniform(-2.0, 2.0, 6), rng.uniform(-2.0, 2.0, 6)
        p = estop.predict_stop(robot, brakes, q, v, tcp_frame="tool0")
        reference = _reference_path_length(robot, p)
        assert abs(p.tcp_path_length - reference) <= 1e-4 * reference, (p.tcp_path_length, reference)
        assert p.tcp_path_length >= p.tcp_straight_distance


def test_energy_fields_balance_the_brake_work_and_jump_losses(prediction):
    # stopped, category 0: kinetic energy at the E-stop plus the potential energy released equals what the brakes
    # and the jumps dissipated (the series integrate the brake work independently of these end-point energies)
    assert prediction.stopped
    released = prediction.initial_kinetic_energy - prediction.potential_energy_change
    assert released == pytest.approx(prediction.brake_energy + prediction.impulse_energy, rel=1e-6)
    assert prediction.initial_kinetic_energy > 0


def test_rest_geometry_holds_the_whole_arm_at_the_base_joint(prediction):
    from vtm_dynamics.core.estop.wrenches import rest_geometry

    robot = with_payload(RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf")), 5.0,
                         "tool0")
    rest = rest_geometry(robot, prediction)
    assert rest.names == robot.joint_names
    np.testing.assert_allclose(np.linalg.norm(rest.axes, axis=1), 1.0, atol=1e-12)
    total_mass = sum(inertia.mass for inertia in robot.model.inertias[1:])
    # at rest the first joint carries the weight of everything after it: a vertical force of m g in world axes
    np.testing.assert_allclose(rest.forces[0], [0.0, 0.0, total_mass * 9.81], rtol=1e-9, atol=1e-9)
    for name, origin in zip(rest.names, rest.origins):
        np.testing.assert_allclose(origin, robot.frame_placement(prediction.q_final, name).translation, atol=1e-12)

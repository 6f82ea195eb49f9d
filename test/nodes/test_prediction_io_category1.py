"""A category-1 stop published by the E-stop predictor says what it was (``prediction_io.stop_prediction_message``
and ``vtm_msgs/StopPrediction``): when the power was cut, how much energy the drives took out during the ramp, and
the deceleration and torque limits the ramp assumed; a category-0 stop carries the documented defaults (power cut
at 0 s, 0 J by the drives, empty limit arrays).

Before, none of this was in the message: a subscriber of a category-1 stop that ended at standstill read
``energy_dissipated_by_brakes`` 0 J and no word of where the arm's 26.5 J of kinetic energy went.

The predictions are the node's (its parameters, ``stop_worker.predict_with_brakes``) with the shipped UR5 brakes,
whose rotor inertias (armature) count in the energies; no ROS graph."""

import os
from types import SimpleNamespace

import numpy as np
import pinocchio as pin
import pytest
import yaml
from builtin_interfaces.msg import Time
from rclpy.serialization import deserialize_message, serialize_message
from vtm_msgs.msg import StopPrediction

from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf
from vtm_dynamics.nodes import prediction_io as io
from vtm_dynamics.nodes.estop_parameters import PARAMETERS, prediction_settings
from vtm_dynamics.nodes.stop_worker import predict_with_brakes
from vtm_dynamics.core.estop.brakes import brakes_from_config

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BRAKES = os.path.join(REPO, "config", "ur5_brakes.yaml")
Q = np.array([0.3, -1.2, 1.5, -0.8, 0.5, 0.2])
V = np.array([2.0, -2.5, 2.8, 1.5, -2.0, 3.0])  # the fastest joint: 3 rad/s


@pytest.fixture(scope="module")
def ur5():
    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    return robot, brakes_from_config(robot, BRAKES)


def armature_from_the_brake_file(robot):
    with open(BRAKES, encoding="utf-8") as fh:
        joints = yaml.safe_load(fh)["brakes"]["joints"]
    return np.array([float(joints[name]["armature"]) for name in robot.joint_names])


def published(ur5, **parameters):
    """The node's prediction from (Q, V) with ``parameters`` and its StopPrediction, sent through CDR and back
    (what a subscriber receives)."""
    robot, brakes = ur5
    p = {s.name: s.value_of(s.declared_default()) for s in PARAMETERS}
    p.update(robot="ur5", **parameters)
    settings = prediction_settings(p)
    out = predict_with_brakes(robot, brakes, SimpleNamespace(q=Q, v=V), settings)
    assert out.result is not None, out.reason
    msg = io.stop_prediction_message(robot, out.result, Time(), "base_link", "estop-1", settings.category,
                                     max_points=100000)
    return out.result, deserialize_message(serialize_message(msg), StopPrediction)


def energy(robot, armature, q, v):
    """Kinetic energy of the arm (1/2 v^T M v) and of its rotors plus potential energy [J], Pinocchio."""
    return (float(pin.computeKineticEnergy(robot.model, robot.data, q, v)) + 0.5 * float(armature @ (v * v))
            + float(pin.computePotentialEnergy(robot.model, robot.data, q)))


def point_at(msg, t):
    """The trajectory point of ``msg`` at ``t`` [s] from the E-stop (to the nanosecond of a Duration)."""
    times = np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in msg.trajectory.points])
    k = int(np.argmin(np.abs(times - t)))
    assert abs(times[k] - t) < 1e-9
    return msg.trajectory.points[k]


@pytest.mark.parametrize("limits, expected", [("", [0.0] * 6), ("urdf", [150.0, 150.0, 150.0, 28.0, 28.0, 28.0]),
                                              ("150 150 150 28 28 0", [150.0, 150.0, 150.0, 28.0, 28.0, 0.0])])
def test_a_category_1_stop_says_when_the_power_was_cut_and_what_the_ramp_assumed(ur5, limits, expected):
    """3 rad/s^2 from 3 rad/s: the ramp to standstill lasts 1 s (these limits do not lengthen it)."""
    result, msg = published(ur5, stop_category=1, category1_deceleration=3.0, category1_torque_limits=limits)
    assert msg.stop_category == StopPrediction.CATEGORY_1 and msg.success
    assert msg.power_off_time == result.power_off_time == pytest.approx(1.0, abs=1e-12)
    assert list(msg.ramp_deceleration_limits) == [3.0] * 6
    assert list(msg.ramp_torque_limits) == expected


def test_a_category_1_stop_says_how_much_energy_the_drives_took_out(ur5):
    """The drives' energy is the arm's and rotors' kinetic plus the potential energy at the first point of the
    published trajectory minus at the point of the power cut, computed here (41.5 J: the 26.5 J of motion and 15.0 J
    of potential energy the arm loses on the way down). The ramp ends at standstill, so the brakes take out
    nothing and the energies of the message balance: kinetic energy at the E-stop = drives + brakes + impulses +
    potential energy gained."""
    robot, _ = ur5
    armature = armature_from_the_brake_file(robot)
    result, msg = published(ur5, stop_category=1, category1_deceleration=3.0)
    start, cut = msg.trajectory.points[0], point_at(msg, msg.power_off_time)
    assert start.time_from_start.sec == start.time_from_start.nanosec == 0
    expected = (energy(robot, armature, np.array(start.positions), np.array(start.velocities))
                - energy(robot, armature, np.array(cut.positions), np.array(cut.velocities)))
    assert msg.energy_dissipated_by_drives == pytest.approx(expected, rel=1e-9)
    assert msg.energy_dissipated_by_drives > 40.0 and abs(msg.energy_dissipated_by_brakes) < 1e-9
    assert msg.initial_kinetic_energy == pytest.approx(
        msg.energy_dissipated_by_drives + msg.energy_dissipated_by_brakes + msg.energy_dissipated_by_impulses
        + msg.potential_energy_change, rel=1e-9)


def test_a_category_0_stop_carries_the_documented_defaults(ur5):
    """Power is cut at the E-stop, the drives take nothing out, no ramp limits."""
    _, msg = published(ur5, stop_category=0)
    assert msg.stop_category == StopPrediction.CATEGORY_0 and msg.success
    assert msg.power_off_time == 0.0 and msg.energy_dissipated_by_drives == 0.0
    assert list(msg.ramp_deceleration_limits) == [] and list(msg.ramp_torque_limits) == []
    assert msg.energy_dissipated_by_brakes > 20.0

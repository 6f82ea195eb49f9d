"""The stop prediction on robots whose joints are not all revolute: a joint declared continuous (Pinocchio stores
its angle as (cos, sin), so the Python engine runs) predicts the stop of the same joint declared revolute, also
when it turns further than pi; the UR5 on a braked linear track (a prismatic joint) against an independent SciPy
integration of Pinocchio's M and h with its own event handling (test/core/ivp_stop.py)."""

import os

import numpy as np
import pytest

from core_testdata import REPO
from ivp_stop import reference_stop
from joint_type_models import TRACK_BRAKE, on_track, ur5_text, with_continuous
from vtm_dynamics.core.estop import StopSettings, predict_stop
from vtm_dynamics.core.estop.brakes import brakes_from_config, load_brake_yaml
from vtm_dynamics.core.estop.prediction import compiled_engine_applies
from vtm_dynamics.core.estop.series import position_series
from vtm_dynamics.core.robot.model import RobotModel

UR5_BRAKES = os.path.join(REPO, "config", "ur5_brakes.yaml")
ANGLES = np.array([0.3, -1.2, 1.4, -0.8, 1.1, 3.1])  # wrist_3 near +pi: its rest angle lies past it
V0 = np.array([1.0, -1.5, 2.0, 2.5, -2.0, 3.0])
PYTHON = StopSettings(engine="python")


@pytest.fixture(scope="module")
def revolute():
    return RobotModel.from_urdf(ur5_text())


@pytest.fixture(scope="module")
def continuous():
    return RobotModel.from_urdf(with_continuous(ur5_text(), "wrist_3_joint", "shoulder_pan_joint"))


def _stop(robot, config, settings=PYTHON):
    brakes = brakes_from_config(robot, config)
    return predict_stop(robot, brakes, robot.configuration_from_angles(ANGLES), V0, tcp_frame="tool0",
                        settings=settings)


@pytest.mark.parametrize("settings", [PYTHON, StopSettings()], ids=["python", "compiled"])
def test_a_continuous_joint_stops_like_the_same_joint_declared_revolute(revolute, continuous, settings):
    config = load_brake_yaml(UR5_BRAKES)
    assert not compiled_engine_applies(continuous, StopSettings())  # the Python engine takes over
    ref, con = _stop(revolute, config, settings), _stop(continuous, config)
    assert ref.stopped and con.stopped
    # same engine: to rounding; compiled vs Python engine: within the integration tolerance (2e-8 s measured)
    tol = 1e-9 if settings.engine == "python" else 1e-6
    assert con.stop_time == pytest.approx(ref.stop_time, abs=tol)
    np.testing.assert_allclose(con.joint_stop_times, ref.joint_stop_times, atol=tol)
    np.testing.assert_allclose(con.stopping_angles, ref.stopping_angles, atol=tol)
    np.testing.assert_allclose(con.holding_torques, ref.holding_torques, atol=1e-6)
    assert con.tcp_straight_distance == pytest.approx(ref.tcp_straight_distance, abs=tol)
    assert [(e.kind, e.joints) for e in con.events] == [(e.kind, e.joints) for e in ref.events]
    np.testing.assert_allclose([e.time for e in con.events], [e.time for e in ref.events], atol=tol)
    # one angle per joint, continuous with the start: wrist_3 rests past +pi (3.1 + 0.064 rad), not near -3.1
    rest = position_series(continuous, con.q)[-1]
    np.testing.assert_allclose(rest, ANGLES + ref.stopping_angles, atol=tol)
    assert rest[5] > np.pi


def test_a_continuous_joint_turning_further_than_pi_reports_its_whole_travel(revolute, continuous):
    # a weak wrist-3 brake: v0 = 3 rad/s against 0.17 N m on 0.15 kg m^2 of rotor turns the wrist about 5 rad;
    # its end points alone give that only modulo 2 pi (it was reported as -1.29 rad)
    config = load_brake_yaml(UR5_BRAKES)
    config["brakes"]["joints"]["wrist_3_joint"].update(sliding_torque=0.17, breakaway_torque=0.2,
                                                      holding_torque=0.25)
    ref, con = _stop(revolute, config), _stop(continuous, config)
    assert ref.stopped and ref.stopping_angles[5] > 2 * np.pi - 1.5  # the check needs a travel past pi
    assert con.stop_time == pytest.approx(ref.stop_time, abs=1e-9)
    np.testing.assert_allclose(con.stopping_angles, ref.stopping_angles, atol=1e-8)
    np.testing.assert_allclose(position_series(continuous, con.q)[-1], ANGLES + ref.stopping_angles, atol=1e-8)


ARM = {"shoulder_pan_joint": (53.0, 80.0, 20.0, 2.0), "shoulder_lift_joint": (115.0, 170.0, 20.0, 2.0),
       "elbow_joint": (53.0, 80.0, 10.0, 0.5), "wrist_1_joint": (28.0, 42.0, 0.0, 0.0),
       "wrist_2_joint": (28.0, 42.0, 0.0, 0.0), "wrist_3_joint": (28.0, 42.0, 0.0, 0.0)}


@pytest.mark.parametrize("axis", ["1 0 0", "0 0 1"], ids=["horizontal", "vertical"])
def test_the_ur5_on_a_braked_linear_track_matches_an_independent_integration(axis):
    robot = RobotModel.from_urdf(on_track(ur5_text(), axis=axis))
    assert robot.joints[0].name == "track_joint" and robot.joints[0].prismatic
    brakes = {n: {"engage_delay": 0.01, "rise_time": 0.005, "sliding_torque": s, "holding_torque": h,
                  "viscous": c, "armature": a} for n, (s, h, c, a) in ARM.items()}
    brakes["track_joint"] = dict(TRACK_BRAKE)
    q0 = np.concatenate([[0.2], ANGLES])
    v0 = np.concatenate([[1.5], V0])  # carriage at 1.5 m/s
    ref = reference_stop(robot.model, brakes, q0, v0)
    assert ref.max_hold_ratio < 1.0 and np.all(np.isfinite(ref.joint_stop_times))  # the reference applies
    for settings in (StopSettings(), PYTHON):
        p = predict_stop(robot, brakes_from_config(robot, {"brakes": {"joints": brakes}}), q0, v0,
                         tcp_frame="tool0", settings=settings)
        assert p.stopped
        np.testing.assert_allclose(p.joint_stop_times, ref.joint_stop_times, atol=1e-6)
        np.testing.assert_allclose(p.q_final, ref.q_final, atol=1e-6)  # the track's travel [m] and the arm [rad]
        assert p.stopping_angles[0] > 0.05  # the carriage travels (about 0.1 m)
    # the TCP distance includes the carriage's travel: the arm's own TCP motion (UR5 without the track) plus it
    arm = RobotModel.from_urdf(ur5_text())
    shift = np.array([float(x) for x in axis.split()])
    start = arm.frame_placement(q0[1:], "tool0").translation + q0[0] * shift
    rest = arm.frame_placement(p.q_final[1:], "tool0").translation + p.q_final[0] * shift
    assert p.tcp_straight_distance == pytest.approx(float(np.linalg.norm(rest - start)), abs=1e-9)

"""Category-1 ramp (IEC 60204-1 stop category 1, :mod:`vtm_dynamics.core.estop.ramp`): the time after which power
is cut regardless, ``CategoryOne.max_duration`` [s]."""

import math
import os

import numpy as np
import pytest

from core_testdata import REPO
from vtm_dynamics.core.estop import CategoryOne, StopInputError, predict_stop
from vtm_dynamics.core.estop.brakes import brakes_from_config

Q = np.array([0.3, -1.2, 1.5, -0.8, 0.5, 0.2])
V = np.array([2.0, -2.5, 2.8, 1.5, -2.0, 3.0])


@pytest.fixture(scope="module")
def ur5_brakes(ur5):
    return brakes_from_config(ur5, os.path.join(REPO, "config", "ur5_brakes.yaml"))


@pytest.mark.parametrize("max_duration", [-0.2, -1e-9, math.nan, math.inf, -math.inf])
def test_a_max_duration_that_is_not_a_finite_time_of_at_least_zero_is_an_input_error(ur5, ur5_brakes, max_duration):
    """A negative time would cut the power before the stop begins (the ramp extrapolated backwards in time);
    NaN and infinity are no times."""
    with pytest.raises(StopInputError, match=r"^category_one\.max_duration: ") as err:
        predict_stop(ur5, ur5_brakes, Q, V, category=1, category_one=CategoryOne(max_duration=max_duration))
    assert "\n" not in str(err.value)


def test_a_max_duration_of_zero_cuts_the_power_at_once(ur5, ur5_brakes):
    """max_duration 0: the stop is the category-0 stop from the initial state."""
    p = predict_stop(ur5, ur5_brakes, Q, V, category=1, category_one=CategoryOne(max_duration=0.0))
    zero = predict_stop(ur5, ur5_brakes, Q, V)
    assert p.power_off_time == 0.0
    assert p.stop_time == pytest.approx(zero.stop_time, abs=1e-9)
    np.testing.assert_allclose(p.q_final, zero.q_final, atol=1e-9)


def test_a_ramp_that_ends_at_standstill_hands_the_arm_to_fully_engaged_brakes(ur5, ur5_brakes):
    """The drives hold the arm until the brakes hold it: with the shipped brakes' 5 ms torque rise the arm must not
    sag after the power cut. The stop is the straight ramp itself: it ends at T = max |v0_i| / decel [s] with every
    joint at q0 + v0 T / 2 (before, the brakes' capacity started from zero at the power cut: every joint slipped,
    the stop ended 2.3 ms after the ramp and the elbow rested 8.9e-6 rad further on)."""
    decel = 3.0
    p = predict_stop(ur5, ur5_brakes, Q, V, category=1, category_one=CategoryOne(deceleration=decel))
    T = float(np.max(np.abs(V))) / decel
    assert p.power_off_time == pytest.approx(T, abs=1e-12)
    assert p.stop_time == pytest.approx(T, abs=1e-12)
    np.testing.assert_allclose(p.q_final, Q + V * T / 2.0, atol=1e-12)
    assert not [e for e in p.events if e.kind in ("slip", "release")]
    assert p.stopped and p.locked[-1].all()


def test_the_drive_torque_of_the_ramp_includes_the_rotor_inertia(ur5, ur5_brakes):
    """The drives decelerate the rotors too: the ramp's drive torque is (M(q) + diag(armature)) a + h(q, v), the
    mass matrix of the braked phase. Only the base joint turns (vertical axis: no gravity or velocity torque on
    it), so its torque is the constant (M_00 + armature_0) v0 / T and the slowest ramp within a limit L lasts
    T = (M_00 + armature_0) v0 / L. Before, the rotor was left out: the ramp lasted 0.246 s instead of 0.446 s."""
    q = np.array([0.4, -1.0, 1.2, -0.5, 0.8, 0.1])
    v0 = 2.0
    limit = 20.0
    v = np.array([v0, 0.0, 0.0, 0.0, 0.0, 0.0])
    others = 1e4  # N m: never reached by the other joints
    c1 = CategoryOne(deceleration=20.0, torque_limits=(limit,) + (others,) * 5)
    p = predict_stop(ur5, ur5_brakes, q, v, category=1, category_one=c1)
    M00 = ur5.mass_matrix(q)[0, 0]
    armature = 2.0  # shoulder_pan_joint in config/ur5_brakes.yaml
    assert p.power_off_time == pytest.approx((M00 + armature) * v0 / limit, rel=1e-6)
    ramp = p.t < p.power_off_time
    np.testing.assert_allclose(p.tau_drive[ramp, 0], -limit, rtol=1e-6)


def test_a_ramp_refused_for_the_motions_own_torques_says_so_and_names_the_joint(planar_3r):
    """Torque limits that hold the arm against gravity but not the Coriolis and centrifugal torques of its motion
    at the trigger: no ramp can fit (a slower ramp only removes the deceleration part), so the prediction is
    refused; the message names the joint and the cause. It used to blame gravity."""
    brakes = brakes_from_config(planar_3r, os.path.join(REPO, "config", "planar_3r_brakes.yaml"))
    q = np.array([0.5, 0.3, -0.2])
    v = np.array([0.0, 0.0, 9.0])
    gravity = np.abs(planar_3r.gravity_torques(q))
    limits = tuple(gravity * 1.1 + 1.0)
    with pytest.raises(StopInputError, match=r"^category_one\.torque_limits: ") as err:
        predict_stop(planar_3r, brakes, q, v, category=1, category_one=CategoryOne(deceleration=4.0, torque_limits=limits))
    text = str(err.value)
    assert "centrifugal" in text and "'joint" in text and "\n" not in text


def test_a_joint_at_rest_at_the_trigger_of_a_ramp_to_standstill_stops_at_0_the_others_at_the_ramps_end(ur5,
                                                                                                        ur5_brakes):
    v = V.copy()
    v[3] = 0.0  # wrist 1 at rest: the drives hold it still through the ramp
    p = predict_stop(ur5, ur5_brakes, Q, v, category=1, category_one=CategoryOne(deceleration=5.0))
    T = float(np.max(np.abs(v)) / 5.0)  # the straight-line ramp's length without torque limits
    assert p.stopped and p.stop_time == pytest.approx(T, abs=1e-12)
    assert p.joint_stop_times[3] == 0.0  # was T: reported as coming to rest at the power cut
    np.testing.assert_allclose(np.delete(p.joint_stop_times, 3), T, atol=1e-12)


def _number_before(text: str, unit_tail: str) -> float:
    """The number in ``text`` just before ``unit_tail`` (e.g. ' N m at joint')."""
    return float(text.split(unit_tail)[0].split()[-1])


def test_a_ramp_that_only_a_longer_than_the_longest_ramp_would_fit_is_refused_naming_joint_torque_and_limit(
        ur5, ur5_brakes):
    """Only the base joint turns (vertical axis: its torque is the constant (M_00 + armature_0) v0 / T), and its
    drive may give 0.01 N m: the ramp would need T = 891 s. The search stops at the longest ramp,
    CATEGORY1_LONGEST_RAMP (10 s), and refuses, naming the joint, the torque that 10 s ramp needs and the limit.
    Before, it searched up to 2^40 times the ramp and predicted an 891 s ramp (178 000 samples; at 0.001 N m an
    8916 s ramp took 2.9 GB)."""
    from vtm_dynamics.core.estop.defaults import CATEGORY1_LONGEST_RAMP

    q = np.array([0.4, -1.0, 1.2, -0.5, 0.8, 0.1])
    v0, limit = 2.0, 0.01
    v = np.array([v0, 0.0, 0.0, 0.0, 0.0, 0.0])
    c1 = CategoryOne(deceleration=20.0, torque_limits=(limit,) + (1e4,) * 5)
    with pytest.raises(StopInputError, match=r"^category_one\.torque_limits: ") as err:
        predict_stop(ur5, ur5_brakes, q, v, category=1, category_one=c1)
    text = str(err.value)
    armature = 2.0  # shoulder_pan_joint in config/ur5_brakes.yaml
    needed = (ur5.mass_matrix(q)[0, 0] + armature) * v0 / CATEGORY1_LONGEST_RAMP
    assert "'shoulder_pan_joint'" in text and f"{CATEGORY1_LONGEST_RAMP:g} s" in text and "\n" not in text
    assert _number_before(text, " N m at joint") == pytest.approx(needed, rel=1e-5)
    assert "(limit 0.01 N m)" in text


def test_a_ramp_refused_for_the_poses_it_passes_through_names_the_joint_and_its_torque(ur5, ur5_brakes):
    """The shoulder starts nearly upright (gravity 4.4 N m there, within its 30 N m) and turns at 1 rad/s: a slow
    ramp carries the arm through the horizontal, where gravity alone needs about 59 N m. Nothing fits; the message
    names the shoulder, a torque over its limit and the limit (before: 'not even a ramp 2^40 times as long as the
    deceleration limits allow', no joint)."""
    q = np.array([0.0, -1.5, 0.0, 0.0, 0.0, 0.0])
    v = np.array([0.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    assert abs(ur5.gravity_torques(q)[1]) < 30.0  # not refused for the start pose
    c1 = CategoryOne(deceleration=20.0, torque_limits=(1e4, 30.0, 1e4, 1e4, 1e4, 1e4))
    with pytest.raises(StopInputError, match=r"^category_one\.torque_limits: ") as err:
        predict_stop(ur5, ur5_brakes, q, v, category=1, category_one=c1)
    text = str(err.value)
    assert "'shoulder_lift_joint'" in text and "(limit 30 N m)" in text
    assert _number_before(text, " N m at joint") > 30.0


@pytest.mark.parametrize("longest", [0.0, -1.0, math.nan, math.inf])
def test_a_longest_ramp_that_is_not_a_positive_finite_time_is_an_input_error(ur5, ur5_brakes, longest):
    c1 = CategoryOne(deceleration=20.0, torque_limits=(1.0,) + (1e4,) * 5, longest_ramp=longest)
    with pytest.raises(StopInputError, match=r"^category_one\.longest_ramp: "):
        predict_stop(ur5, ur5_brakes, Q, np.array([2.0, 0, 0, 0, 0, 0]), category=1, category_one=c1)


def _dense_drive_torques(robot, q0, v0, T, armature, n=20001):
    """|drive torque| [N m] along the ramp of length T at n instants, computed here from the ramp's definition
    (v = v0 (1 - t/T), a = -v0/T) with Pinocchio's RNEA and the rotor inertias read from the brake file."""
    import pinocchio as pin

    out = []
    for t in np.linspace(0.0, T, n):
        q = q0 + v0 * (t - t * t / (2.0 * T))
        out.append(np.array(pin.rnea(robot.model, robot.data, q, v0 * (1.0 - t / T), -v0 / T)) - armature * v0 / T)
    return np.abs(np.array(out))


def _yaml_armature(robot):
    import yaml

    with open(os.path.join(REPO, "config", "ur5_brakes.yaml"), encoding="utf-8") as fh:
        joints = yaml.safe_load(fh)["brakes"]["joints"]
    return np.array([joints[name]["armature"] for name in robot.joint_names])


def test_a_lengthened_ramp_keeps_the_drive_torque_within_its_limit_between_the_points_it_was_checked_at(
        ur5, ur5_brakes):
    """The shoulder passes through horizontal during the ramp; its gravity torque peaks there. The ramp was
    checked at 21 instants only: the ramp found for a 65 N m limit needed 65.003 N m between two of them."""
    q0 = np.array([0.0, -0.6, 0.0, 0.0, 0.0, 0.0])
    v0 = np.array([0.0, 1.5, 0.0, 0.0, 0.0, 0.0])
    limit = 65.0
    c1 = CategoryOne(deceleration=2.0, torque_limits=(1e4, limit, 1e4, 1e4, 1e4, 1e4))
    p = predict_stop(ur5, ur5_brakes, q0, v0, category=1, category_one=c1)
    T = p.power_off_time
    assert T > 1.5 / 2.0  # the limit did lengthen the ramp
    torque = _dense_drive_torques(ur5, q0, v0, T, _yaml_armature(ur5))[:, 1]
    assert torque.max() <= limit * (1.0 + 1e-9)
    assert torque.max() >= limit * (1.0 - 1e-6)  # and it is the shortest ramp that fits


def test_a_ramp_that_fits_at_the_checked_points_but_not_between_them_is_not_taken_as_fitting(ur5, ur5_brakes):
    """An 8 s ramp turning the shoulder through horizontal twice needs 60.66 N m; at 21 instants it showed 58.4 N m
    at most, so it was predicted within a 60.3 N m limit. No ramp up to the longest one fits: refused."""
    q0 = np.array([0.0, -2.5, 0.0, 0.0, 0.0, 0.0])
    v0 = np.array([0.0, 2.0, 0.0, 0.0, 0.0, 0.0])
    armature = _yaml_armature(ur5)
    assert _dense_drive_torques(ur5, q0, v0, 8.0, armature)[:, 1].max() > 60.3 + 0.3
    c1 = CategoryOne(deceleration=0.25, torque_limits=(1e4, 60.3, 1e4, 1e4, 1e4, 1e4))
    with pytest.raises(StopInputError, match=r"shoulder_lift_joint") as err:
        predict_stop(ur5, ur5_brakes, q0, v0, category=1, category_one=c1)
    named = float(str(err.value).split(" needs ")[1].split(" N m")[0])
    assert named > 60.3


def test_urdf_torque_limits_on_a_urdf_that_gives_no_joint_an_effort_limit_are_refused(ur5_brakes):
    """``torque_limits="urdf"`` asks for the URDF's effort limits; effort 0 means no limit on that joint. A URDF whose
    every joint says 0 gives the drives no limit at all: the ramp is then the unlimited one (0.125 s for this
    state), which the reports described as kept within the URDF's effort limits. Refused, naming the field."""
    import re

    from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf

    with open(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"), encoding="utf-8") as fh:
        text = re.sub(r'effort="[^"]*"', 'effort="0"', fh.read())
    robot = RobotModel.from_urdf(text)
    v = np.array([0.0, 2.5, 2.5, 0.0, 0.0, 0.0])
    with pytest.raises(StopInputError, match=r"^category_one\.torque_limits: ") as err:
        predict_stop(robot, ur5_brakes, Q, v, category=1, category_one=CategoryOne(deceleration=20.0,
                                                                                    torque_limits="urdf"))
    assert "effort" in str(err.value) and "\n" not in str(err.value)


def test_urdf_torque_limits_with_effort_0_on_some_joints_limit_only_the_others(ur5, ur5_brakes):
    """Effort 0 on the wrists only: they are not limited, the shoulder and elbow keep their 150 N m. The ramp is
    the one whose largest shoulder or elbow torque reaches 150 N m (checked densely here along the ramp, from
    its definition), not the refusal of a URDF with no limit at all."""
    import re

    from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf

    with open(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"), encoding="utf-8") as fh:
        text = re.sub(r'effort="28(\.0)?"', 'effort="0"', fh.read())
    robot = RobotModel.from_urdf(text)
    assert list(robot.model.effortLimit) == [150.0, 150.0, 150.0, 0.0, 0.0, 0.0]
    v = np.array([0.0, 2.5, 2.5, 0.0, 0.0, 0.0])
    p = predict_stop(robot, ur5_brakes, Q, v, category=1, category_one=CategoryOne(deceleration=20.0,
                                                                                 torque_limits="urdf"))
    peak = _dense_drive_torques(robot, Q, v, p.power_off_time, _yaml_armature(robot))[:, :3].max()
    assert p.power_off_time > 2.5 / 20.0
    assert 150.0 * (1.0 - 1e-6) <= peak <= 150.0 * (1.0 + 1e-9)


def test_a_ramp_cut_short_by_max_duration_is_the_ramp_to_standstill_its_torques_after_the_cut_count(ur5, ur5_brakes):
    """The drives follow the ramp they can complete to standstill; the time limit cuts the power on the way
    (IEC 61800-5-2 SS1-t: the timer does not shorten the drives' ramp). So the torques the rest of that ramp would
    need lengthen it even though power is cut before them, which is the conservative reading: a slower ramp leaves
    the arm faster and further along at the cut. The shoulder starts at -1 rad at 1.5 rad/s; its ramp at 1 rad/s^2
    would pass through the horizontal, where gravity needs more than the 62 N m limit; the first 0.3 s of that
    1.5 s ramp need at most 55.1 N m. The cut state must be that of the ramp whose peak is the limit (3.16 s),
    not that of the 1.5 s ramp (with the shipped brakes the shoulder then turns 0.522 rad, not 0.481 rad)."""
    q0 = np.array([0.0, -1.0, 0.0, 0.0, 0.0, 0.0])
    v0 = np.array([0.0, 1.5, 0.0, 0.0, 0.0, 0.0])
    armature = _yaml_armature(ur5)
    limit, cut = 62.0, 0.3
    unlimited = _dense_drive_torques(ur5, q0, v0, 1.5, armature)[:, 1]  # 20001 instants of the 1.5 s ramp
    assert unlimited[:4001].max() < 56.0 < limit < unlimited.max()  # its first 0.3 s fit, its later part does not
    c1 = CategoryOne(deceleration=1.0, torque_limits=(1e4, limit, 1e4, 1e4, 1e4, 1e4), max_duration=cut)
    p = predict_stop(ur5, ur5_brakes, q0, v0, category=1, category_one=c1)
    assert p.power_off_time == pytest.approx(cut, abs=1e-12)
    at_cut = np.flatnonzero(p.t == cut)[0]
    T = cut / (1.0 - p.v[at_cut, 1] / v0[1])  # the ramp's length from the velocity at the cut, v = v0 (1 - t/T)
    torque = _dense_drive_torques(ur5, q0, v0, T, armature)[:, 1]
    assert torque.max() <= limit * (1.0 + 1e-9) and torque.max() >= limit * (1.0 - 1e-6)
    assert T > 3.0


def test_a_ramp_longer_than_the_longest_ramp_already_at_its_deceleration_limit_is_refused_for_its_own_torques(
        ur5, ur5_brakes):
    """At 0.04 rad/s^2 from 0.5 rad/s the ramp lasts 12.5 s, longer than the 10 s a ramp may be stretched to, and
    its shoulder (from -1 rad to 2.125 rad, within its limits) needs more than 59 N m where it passes the
    horizontal: refused. The message gives that 12.5 s ramp's torque (checked densely here from the ramp's
    definition); it described a 10 s ramp, one the drives are never asked to follow."""
    q0 = np.array([0.0, -1.0, 0.0, 0.0, 0.0, 0.0])
    v0 = np.array([0.0, 0.5, 0.0, 0.0, 0.0, 0.0])
    c1 = CategoryOne(deceleration=0.04, torque_limits=(1e4, 59.0, 1e4, 1e4, 1e4, 1e4))
    with pytest.raises(StopInputError, match=r"^category_one\.torque_limits: ") as err:
        predict_stop(ur5, ur5_brakes, q0, v0, category=1, category_one=c1)
    text = str(err.value)
    peak = _dense_drive_torques(ur5, q0, v0, 12.5, _yaml_armature(ur5))[:, 1].max()
    assert peak > 59.0
    assert "'shoulder_lift_joint'" in text and " 12.5 s," in text
    assert _number_before(text, " N m at joint") == pytest.approx(peak, rel=1e-5)


def _energy(robot, armature, q, v):
    """Kinetic energy of the arm and its rotors plus potential energy [J], from Pinocchio directly."""
    import pinocchio as pin

    return (float(pin.computeKineticEnergy(robot.model, robot.data, q, v)) + 0.5 * float(armature @ (v * v))
            + float(pin.computePotentialEnergy(robot.model, robot.data, q)))


def test_the_drives_of_a_ramp_about_a_vertical_axis_take_out_all_its_kinetic_energy(ur5, ur5_brakes):
    """Only the base joint turns (vertical axis: no potential energy changes), so the drives remove the kinetic
    energy of the arm and the base rotor, 1/2 (M_00 + armature_0) v0^2 (8.92 J here), and the brakes nothing
    (the ramp ends at standstill). The record holds the assumed limits as given."""
    q = np.array([0.4, -1.0, 1.2, -0.5, 0.8, 0.1])
    v0 = 2.0
    limits = (20.0, 1e4, 1e4, 1e4, 1e4, 1e4)
    p = predict_stop(ur5, ur5_brakes, q, np.array([v0, 0, 0, 0, 0, 0]), category=1,
                     category_one=CategoryOne(deceleration=20.0, torque_limits=limits))
    expected = 0.5 * (ur5.mass_matrix(q)[0, 0] + 2.0) * v0 * v0  # armature 2.0: shoulder_pan_joint in the YAML
    assert p.ramp.drive_energy == pytest.approx(expected, rel=1e-9)
    assert p.brake_energy == pytest.approx(0.0, abs=1e-9)
    np.testing.assert_array_equal(p.ramp.deceleration, np.full(6, 20.0))
    np.testing.assert_array_equal(p.ramp.torque_limits, limits)


def test_the_drives_energy_is_the_change_of_kinetic_and_potential_energy_up_to_the_power_cut(ur5, ur5_brakes):
    """Every joint moving, shoulder and elbow through gravity: the drives' energy is (T + T_rotors + V) at the
    E-stop minus at the power cut, here computed from the predicted trajectory's sample at the cut. The ramp to
    standstill (3 rad/s^2) ends at rest; cut at 0.4 s the arm still moves and the brakes take the rest: in both the
    energy at the E-stop is the drives' + the brakes' + the potential energy gained."""
    armature = _yaml_armature(ur5)
    for c1 in (CategoryOne(deceleration=3.0), CategoryOne(deceleration=3.0, max_duration=0.4)):
        p = predict_stop(ur5, ur5_brakes, Q, V, category=1, category_one=c1)
        k = np.flatnonzero(p.t == p.power_off_time)[0]
        expected = _energy(ur5, armature, Q, V) - _energy(ur5, armature, p.q[k], p.v[k])
        assert p.ramp.drive_energy == pytest.approx(expected, rel=1e-9)
        assert p.stopped and p.impulse_energy == 0.0
        assert p.initial_kinetic_energy == pytest.approx(
            p.ramp.drive_energy + p.brake_energy + p.potential_energy_change, rel=1e-4)
    assert p.power_off_time == 0.4 and p.brake_energy > 10.0  # the cut one: the brakes did take energy out


def test_urdf_torque_limits_are_recorded_as_the_models_effort_limits(ur5, ur5_brakes):
    p = predict_stop(ur5, ur5_brakes, Q, V / 4.0, category=1,
                     category_one=CategoryOne(deceleration=1.0, torque_limits="urdf"))
    np.testing.assert_array_equal(p.ramp.torque_limits, [150.0, 150.0, 150.0, 28.0, 28.0, 28.0])
    assert CategoryOne().torque_limits is None
    assert predict_stop(ur5, ur5_brakes, Q, V, category=1).ramp.torque_limits is None


def test_a_category_0_stop_has_no_ramp_and_cuts_the_power_at_the_e_stop(ur5, ur5_brakes):
    p = predict_stop(ur5, ur5_brakes, Q, V)
    assert p.ramp is None and p.power_off_time == 0.0

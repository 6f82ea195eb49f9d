"""ISO 10218-1 test matrix: the published UR5 figures at 100/100/100, category-1 points against the closed form
of the ramp, extension poses against plain forward kinematics, the band around the nominal value."""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest

from vtm_dynamics.core.estop import LockEvent, StopInputError
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.robot.catalogue import ROBOTS
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.stopping import iso10218 as iso


def load(name: str):
    """The catalogue robot ``name`` (no payload) and its default brakes."""
    robot = RobotModel.from_urdf_file(ROBOTS[name].urdf_path())
    return robot, brakes_from_config(robot, ROBOTS[name].brakes_path())


@pytest.fixture(scope="module")
def ur5():
    return load("ur5")


def ur5_spec(**kw) -> iso.StoppingTestSpec:
    d = ROBOTS["ur5"]
    t = d.stopping_tests
    fields = dict(joints=t.joints, fold_joints=t.fold_joints, max_speeds=tuple(map(d.max_speed, t.joints)),
                  max_payload=d.rated_payload, payload_frame="tool0", base_pose=t.base_pose)
    return iso.StoppingTestSpec(**{**fields, **kw})


def test_the_three_joints_of_greatest_displacement_of_the_ur5_are_base_shoulder_elbow(ur5):
    assert iso.greatest_displacement_joints(ur5[0], [0.0] * 6, "tool0") == d_joints()


def d_joints():
    return ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint")


@pytest.mark.parametrize("fraction", [0.33, 0.66])
def test_extension_pose_puts_the_tool_at_the_fraction_of_its_horizontal_reach(ur5, fraction):
    robot = ur5[0]
    q, reach = iso.extension_pose(robot, [0.0] * 6, "shoulder_pan_joint", "elbow_joint", "tool0", fraction)

    def horizontal(qq):  # the base axis is the world z axis through the origin
        data = robot.model.createData()
        pin.framesForwardKinematics(robot.model, data, np.asarray(qq))
        return float(np.hypot(*data.oMf[robot.model.getFrameId("tool0")].translation[:2]))

    assert horizontal(q) == pytest.approx(fraction * horizontal(np.zeros(6)), abs=1e-9)
    assert reach == pytest.approx(horizontal(q), abs=1e-9)
    assert np.count_nonzero(q) == 1 and q[2] != 0  # only the elbow folded


@pytest.mark.parametrize("name", ["ur5", "ur3"])
def test_the_100_percent_category0_points_reproduce_the_published_figures(name):
    """CB3 manual, Appendix A (category 0, 100 % speed / extension / payload) within the 10 % the default brakes
    were fitted to, in the true category-0 test (every joint braked); the envelope's weaker or later brakes stop
    later, stronger ones earlier."""
    robot, brakes = load(name)
    d = ROBOTS[name]
    t = d.stopping_tests
    limit = robot.model.velocityLimit
    speeds = tuple(min(d.max_speed(j), float(limit[robot.joint(j).idx_v])) for j in t.joints)
    spec = iso.StoppingTestSpec(joints=t.joints, fold_joints=t.fold_joints, max_speeds=speeds,
                                max_payload=d.rated_payload, payload_frame="tool0", base_pose=t.base_pose,
                                categories=(0,), speed_levels=(1.0,), extension_levels=(1.0,), payload_levels=(1.0,),
                                hold_others=False)
    points = {p.joint: p for p in iso.stopping_points(robot, brakes, spec)}
    for fig in d.published_stops:
        p = points[fig.joint]
        assert p.payload == d.rated_payload and p.stopped
        assert p.angle == pytest.approx(fig.angle, rel=0.10) and p.time == pytest.approx(fig.time, rel=0.10)
        assert p.angle_min < p.angle < p.angle_max and p.time_min < p.time < p.time_max


@pytest.mark.parametrize("hold_others", [True, False], ids=["others_held", "others_braked"])
def test_category1_points_follow_the_ramp_closed_form_and_grow_with_speed(ur5, hold_others):
    """The drives ramp the tested joint down (time v0/a, angle v0^2/(2a)) and hold the others at rest, so whether
    the others would be held rigid or braked hardly matters. The base axis is vertical: with the others held
    nothing moves it after power-off and its point is the closed form. A shoulder or elbow may sag under gravity
    while its brake engages after power-off (and, braked, the sagging others jolt the base a little): never less
    than the ramp, and only a little more."""
    spec = ur5_spec(categories=(0, 1), extension_levels=(1.0,), payload_levels=(1.0,), category1_deceleration=4.0,
                    hold_others=hold_others)
    points = iso.stopping_points(*ur5, spec)
    assert len(points) == 2 * 3 * 3
    for p in points:
        if p.category != 1:
            continue
        ramp_time, ramp_angle = p.speed / 4.0, p.speed ** 2 / 8.0
        if p.joint == "shoulder_pan_joint" and hold_others:
            assert p.time == pytest.approx(ramp_time, abs=1e-6) and p.angle == pytest.approx(ramp_angle, abs=1e-6)
        else:
            assert ramp_time - 1e-9 <= p.time <= ramp_time + 0.05
            assert ramp_angle - 1e-5 <= p.angle <= ramp_angle + 2e-3
    for joint in d_joints():
        cat0 = sorted((p for p in points if p.category == 0 and p.joint == joint), key=lambda p: p.speed)
        assert [p.angle for p in cat0] == sorted(p.angle for p in cat0)  # faster -> longer stopping distance


def test_a_speed_above_the_model_limit_is_one_line_naming_the_joint(ur5):
    spec = ur5_spec(max_speeds=(math.pi, 9.0, math.pi))
    with pytest.raises(StopInputError, match=r"^max_speeds.shoulder_lift_joint: 9 rad/s is above"):
        iso.stopping_points(*ur5, spec)


def test_an_unreachable_extension_folds_to_the_least_extension_and_says_so():
    """On the UR3 the lateral offsets keep tool0 more than 33 % of its reach from the base axis whatever the elbow
    does: strict refuses in one line, otherwise the pose of least extension is used and its reach returned."""
    from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf

    ur3 = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur3_robot.urdf"))
    with pytest.raises(StopInputError, match="^extension: turning elbow_joint within its limits cannot bring"):
        iso.extension_pose(ur3, [0.0] * 6, "shoulder_pan_joint", "elbow_joint", "tool0", 0.33)
    q, reach = iso.extension_pose(ur3, [0.0] * 6, "shoulder_pan_joint", "elbow_joint", "tool0", 0.33, strict=False)
    data = ur3.model.createData()

    def horizontal(elbow):
        qq = np.zeros(6)
        qq[2] = elbow
        pin.framesForwardKinematics(ur3.model, data, qq)
        return float(np.hypot(*data.oMf[ur3.model.getFrameId("tool0")].translation[:2]))

    scan = min(horizontal(t) for t in np.linspace(-np.pi, np.pi, 20001))
    assert reach == pytest.approx(horizontal(q[2]), abs=1e-9)
    assert reach == pytest.approx(scan, abs=1e-6) and reach > 0.33 * horizontal(0.0)


def test_tcp_stopping_distance_of_the_base_test_is_the_chord_of_its_circle(ur5):
    """Base joint alone, the others held: the payload frame turns on a circle of radius reach about the vertical
    base axis, so its straight stopping distance is the chord 2 r sin(angle / 2) (nominal and at the band's
    largest angle)."""
    robot, brakes = ur5
    spec = ur5_spec(joints=("shoulder_pan_joint",), fold_joints=("elbow_joint",), max_speeds=(math.pi,),
                    categories=(0,), speed_levels=(1.0,), extension_levels=(0.66,), payload_levels=(1.0,),
                    hold_others=True)
    (p,) = iso.stopping_points(robot, brakes, spec)
    assert p.tcp_distance == pytest.approx(2 * p.reach * math.sin(p.angle / 2), rel=1e-9)
    assert p.tcp_distance_max == pytest.approx(2 * p.reach * math.sin(p.angle_max / 2), rel=1e-9)


def weak_shoulder_brakes(robot: RobotModel):
    """The UR5 default brakes with the shoulder brake below its gravity load in the stretched pose (sliding 40 N m
    against about 99 N m): the shoulder falls, swings past the bottom and rests on the way back."""
    import yaml

    with open(ROBOTS["ur5"].brakes_path(), encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    config["brakes"]["joints"]["shoulder_lift_joint"].update(
        sliding_torque=40.0, viscous=2.0, breakaway_torque=48.0, holding_torque=60.0)
    return brakes_from_config(robot, config)


def test_the_stopping_angle_and_tcp_distance_are_the_farthest_reached_not_the_net_displacement(ur5):
    """A joint that swings past and comes back before it rests travelled its farthest excursion: the angle, its band
    and the TCP distance are the largest |q_i(t) - q_i(0)| and |p(t) - p(0)| over the single-stop time series
    (nominal and every corner of the band), not the start-to-rest difference."""
    from vtm_dynamics.core.estop import predict_stop
    from vtm_dynamics.core.estop.payload import with_payload

    robot = ur5[0]
    brakes = weak_shoulder_brakes(robot)
    spec = ur5_spec(joints=("shoulder_lift_joint",), fold_joints=("elbow_joint",), max_speeds=(math.pi,),
                    categories=(0,), speed_levels=(1.0,), extension_levels=(1.0,), payload_levels=(1.0,),
                    hold_others=False)
    (p,) = iso.stopping_points(robot, brakes, spec)
    i = robot.joint("shoulder_lift_joint").idx_v
    loaded = with_payload(robot, p.payload, "tool0")
    q0 = np.array(p.q_test)
    v0 = np.zeros(robot.nv)
    v0[i] = p.direction * p.speed
    angles, tcps = [], []
    for tf, df in [(1.0, 1.0), (0.9, 1.0), (0.9, 1.5), (1.1, 1.0), (1.1, 1.5)]:
        stop = predict_stop(loaded, brakes.scaled(tf, df), q0, v0, tcp_frame="tool0")
        angles.append(float(np.max(np.abs(stop.q[:, i] - q0[i]))))
        tcps.append(float(np.max(np.linalg.norm(stop.tcp_positions - stop.tcp_positions[0], axis=1))))
        if (tf, df) == (1.0, 1.0):
            net_angle, net_tcp = abs(float(stop.stopping_angles[i])), float(stop.tcp_straight_distance)
    assert angles[0] > net_angle + 0.1 and tcps[0] > net_tcp  # the case swings back: the two measures differ
    assert p.angle == pytest.approx(angles[0], rel=1e-9)
    assert p.angle_min == pytest.approx(min(angles), rel=1e-9) and p.angle_max == pytest.approx(max(angles), rel=1e-9)
    assert p.tcp_distance == pytest.approx(tcps[0], rel=1e-9)
    assert p.tcp_distance_max == pytest.approx(max(tcps), rel=1e-9)


def test_a_point_whose_stop_goes_past_a_joint_limit_says_so_and_is_not_valid(ur5):
    """The elbow test started 10 mrad inside the elbow's lower limit, moving the way gravity pulls (towards it) at
    pi rad/s: the model has no end stop, so its predicted stop runs past the limit and is not the robot's."""
    from vtm_dynamics.core.estop import predict_stop
    from vtm_dynamics.core.estop.payload import with_payload

    robot, brakes = ur5
    elbow = robot.joint("elbow_joint")
    low = float(robot.model.lowerPositionLimit[elbow.idx_q])
    spec = ur5_spec(joints=("elbow_joint",), fold_joints=("elbow_joint",), max_speeds=(math.pi,), categories=(0,),
                    speed_levels=(1.0,), extension_levels=(1.0,), payload_levels=(1.0,), hold_others=True,
                    base_pose=(0.0, -1.5, low + 0.01, -1.0, 0.5, 0.0))
    (p,) = iso.stopping_points(robot, brakes, spec)
    # independent: the nominal stop of the same test, its lowest elbow position against the URDF limit
    v = np.zeros(robot.nv)
    v[elbow.idx_v] = p.direction * math.pi
    others = [n for n in robot.joint_names if n != "elbow_joint"]
    alone = predict_stop(with_payload(robot, p.payload, "tool0"), brakes, np.array(p.q_test), v,
                         lock_events=[LockEvent(0.0, others)])
    assert float(np.min(alone.q[:, elbow.idx_q])) < low - 0.05
    assert p.stopped and not p.valid
    assert p.limit_crossings and p.limit_crossings[0].startswith("elbow_joint reaches")


def test_points_within_the_limits_are_valid(ur5):
    spec = ur5_spec(joints=("shoulder_pan_joint",), fold_joints=("elbow_joint",), max_speeds=(math.pi,),
                    categories=(0,), speed_levels=(1.0,), extension_levels=(0.66,), payload_levels=(1.0,))
    (p,) = iso.stopping_points(*ur5, spec)
    assert p.valid and p.limit_crossings == ()

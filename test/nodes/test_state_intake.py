"""The predictor's joint-state intake without ROS (nodes/state_intake.py): the receipt clock, the checks on receipt,
unstamped states stamped at their receipt instant, and complete states kept for the start-state choice. The clocks
are plain numbers the test sets."""

import math

import pytest
from sensor_msgs.msg import JointState

from vtm_dynamics.nodes.model_source import load_urdf_text, model_from_urdf_text
from vtm_dynamics.nodes.state_intake import StateIntake, instant_of_receipt, publisher_of, receipt_time
from vtm_dynamics.nodes.stop_session import StartLimits

JOINTS = ["joint1", "joint2", "joint3"]


class Clocks:
    def __init__(self) -> None:
        self.node, self.wall, self.monotonic = 1000.0, 5000.0, 10.0


@pytest.fixture
def intake():
    clocks = Clocks()
    got = StateIntake(8, lambda: clocks.node, future_tolerance=0.05, wall=lambda: clocks.wall,
                      monotonic=lambda: clocks.monotonic)
    got.clocks = clocks
    got.reset(model_from_urdf_text(load_urdf_text("planar_3r")))
    return got


def _state(names=JOINTS, q=(0.1, 0.2, 0.3), v=(0.0, 0.0, 0.0), stamp=1000.0) -> JointState:
    msg = JointState(name=list(names), position=list(q), velocity=list(v))
    msg.header.stamp.sec, msg.header.stamp.nanosec = int(stamp), int(round((stamp % 1) * 1e9))
    return msg


def test_the_receipt_clock_is_the_dds_reception_stamp_else_the_wall_clock():
    assert receipt_time({"received_timestamp": 2_500_000_000}) == 2.5
    assert receipt_time({"received_timestamp": 0}, wall=lambda: 7.0) == 7.0
    assert receipt_time(None, wall=lambda: 7.0) == 7.0 and receipt_time({"received_timestamp": "x"}, lambda: 7.0) == 7.0
    assert instant_of_receipt(received=9.9, now=100.0, wall=10.0) == pytest.approx(99.9)  # it waited 0.1 s
    assert instant_of_receipt(received=10.5, now=100.0, wall=10.0) == 100.0  # never after now
    assert publisher_of({"publisher_gid": {"data": [1, 2]}}) == b"\x01\x02" and publisher_of(None) == "unknown"


def test_nothing_is_taken_before_a_model_is_known():
    got = StateIntake(8, lambda: 0.0, 0.05)
    assert got.receive(_state(), 0.0).no_model


def test_a_state_from_the_future_is_rejected_on_receipt_with_its_lead(intake):
    got = intake.receive(_state(stamp=1000.2), 5000.0)
    assert got.rejected == "header.stamp: 0.200 s in the future (future_stamp_tolerance 0.05 s)"
    assert intake.newest() is None


def test_a_malformed_state_is_rejected_and_nothing_of_it_is_merged(intake):
    got = intake.receive(_state(q=(0.1, math.nan, 0.3)), 5000.0)
    assert "position" in got.rejected and "joint2" in got.rejected
    assert intake.newest() is None


def test_a_complete_state_is_kept_with_its_stamp_and_receipt_and_subsets_merge_by_name(intake):
    assert intake.receive(_state(names=JOINTS[:2], q=(0.1, 0.2), v=(0.0, 0.0)), 4999.0).sample is None
    assert math.isinf(intake.age())
    got = intake.receive(_state(names=["joint3", "gripper"], q=(0.3, 1.0), v=(0.0, 0.0), stamp=999.99), 4999.5)
    assert got.unknown_names == ("gripper",) and not got.velocities_missing
    sample = got.sample
    assert sample.stamp == pytest.approx(999.99) and sample.received == 4999.5 and not sample.unstamped
    assert intake.received_by(4999.6) is sample and intake.received_by(4999.4) is None
    assert intake.stamped_by(1000.0) is sample and intake.newest() is sample
    intake.clocks.monotonic += 0.25
    assert intake.age() == pytest.approx(0.25)


def test_an_unstamped_state_is_stamped_at_its_receipt_instant_and_says_so(intake):
    got = intake.receive(_state(stamp=0.0), received=4999.9)  # it waited 0.1 s for its callback
    assert got.sample.unstamped and got.sample.stamp == pytest.approx(999.9)
    assert got.sample.header_stamp.sec == 999


def test_velocities_missing_are_estimated_from_stamped_positions_and_declared(intake):
    intake.receive(_state(v=(), stamp=999.9), 4999.9)
    got = intake.receive(_state(q=(0.2, 0.2, 0.3), v=(), stamp=1000.0), 5000.0)
    assert got.velocities_missing and set(got.sample.estimated) == set(JOINTS)
    assert got.sample.state.v[0] == pytest.approx(1.0)  # 0.1 rad in 0.1 s
    choice = intake.choose(StartLimits(0.05, 0.05, 0.05), instant=1000.0, stamped=True, received=5000.0,
                           now=1000.0, waited=0.0)
    assert choice.ok and choice.sample is got.sample


def test_a_new_model_empties_the_history(intake):
    intake.receive(_state(), 5000.0)
    intake.reset(model_from_urdf_text(load_urdf_text("planar_3r")))
    assert intake.newest() is None


def test_a_state_with_a_silent_publishers_joints_is_as_old_as_their_last_message(intake):
    """The wrist publisher fell silent 5 s ago; fresh arm messages must not make its joints look fresh."""
    intake.receive(_state(q=(0.1, 0.2, 0.3), v=(0.0, 0.0, 1.0), stamp=995.0), 4995.0)
    got = intake.receive(_state(names=JOINTS[:2], q=(0.4, 0.5), v=(0.0, 0.0), stamp=1000.0), 5000.0)
    assert got.sample.stamp == pytest.approx(995.0) and got.sample.header_stamp.sec == 995
    choice = intake.choose(StartLimits(0.05, 0.05, 0.05), instant=1000.0, stamped=False, received=5000.0,
                           now=1000.0, waited=0.0)
    assert not choice.ok and choice.age == pytest.approx(5.0)
    assert "start state is 5.000 s older than the trigger instant (max_start_state_age 0.05 s)" == choice.reason


def test_velocities_are_not_estimated_over_a_gap_longer_than_max_velocity_gap():
    clocks = Clocks()
    intake = StateIntake(8, lambda: clocks.node, 0.05, wall=lambda: clocks.wall, monotonic=lambda: clocks.monotonic,
                         max_velocity_gap=0.05)
    intake.reset(model_from_urdf_text(load_urdf_text("planar_3r")))
    intake.receive(_state(v=(), stamp=997.0), 4997.0)
    got = intake.receive(_state(v=(), stamp=1000.0), 5000.0)  # 3 s later: a 3-s average is not the velocity now
    assert set(got.sample.unavailable) == set(JOINTS)
    choice = intake.choose(StartLimits(0.05, 0.05, 0.05), instant=1000.0, stamped=False, received=5000.0,
                           now=1000.0, waited=0.0)
    assert not choice.ok and "more than max_start_state_age apart" in choice.reason


def test_a_message_that_changes_no_joint_adds_no_state(intake):
    """A gripper driver's message (only joints the model lacks) and a republication with older stamps: neither is
    a new state of the arm, so neither enters the history as one."""
    arm = intake.receive(_state(stamp=999.99), 4999.99).sample
    gripper = intake.receive(_state(names=["finger"], q=(0.4,), v=(), stamp=1000.0), 5000.0)
    assert gripper.sample is None and not gripper.rejected and gripper.unknown_names == ("finger",)
    assert not gripper.velocities_missing  # the finger's missing velocity is not the arm's
    older = intake.receive(_state(q=(0.5, 0.5, 0.5), v=(), stamp=999.9), 5000.0)
    assert older.sample is None and older.superseded == tuple(JOINTS) and not older.velocities_missing
    assert "ignoring values older than those held for" in older.warnings[0]
    assert intake.received_by(5000.0) is arm and intake.newest() is arm


def test_a_node_clock_gone_back_behind_the_states_held_starts_afresh(intake):
    """A simulation restarted: /clock from 0 again, the driver's stamps too. The states held are of another time;
    without starting afresh every new state would be older than them and skipped."""
    intake.receive(_state(stamp=1000.0), 5000.0)
    intake.clocks.node = 3.0
    got = intake.receive(_state(q=(0.3, 0.2, 0.1), stamp=2.99), 5001.0)
    assert got.restarted and "node clock went back" in got.warnings[0]
    assert got.sample is not None and got.sample.stamp == pytest.approx(2.99)
    assert intake.newest() is got.sample and len(intake.history) == 1


def test_a_joint_merged_from_two_publishers_makes_the_states_unusable_until_one_has_it_alone_a_window(intake):
    from vtm_dynamics.nodes.state_intake import SHARED_WINDOW

    assert not intake.receive(_state(stamp=999.90), 4999.90, publisher=b"driver").sample.shared
    got = intake.receive(_state(q=(0.0, 0.2, 0.3), stamp=999.95), 4999.95, publisher=b"republisher")
    assert "joint 'joint1' is published by two publishers" in got.sample.shared
    choice = intake.choose(StartLimits(max_age=1.0, future_tolerance=0.05, wait_timeout=0.0), instant=1000.0,
                           stamped=False, received=4999.96, now=1000.0, waited=0.0)
    assert choice.reason == got.sample.shared  # no prediction from it: a refusal that says why
    # the driver alone: usable again once the republisher has been silent for the window
    assert intake.receive(_state(stamp=999.96), 4999.96, publisher=b"driver").sample.shared
    intake.clocks.node += SHARED_WINDOW
    assert intake.receive(_state(stamp=999.95 + SHARED_WINDOW), 4999.95 + SHARED_WINDOW,
                          publisher=b"driver").sample.shared  # the switch back at 4999.96 was a second source too
    assert not intake.receive(_state(stamp=999.97 + SHARED_WINDOW), 4999.97 + SHARED_WINDOW,
                              publisher=b"driver").sample.shared
    # a publisher of other joints only (a gripper's) and an unknown publisher are not a second source
    got = intake.receive(_state(names=["finger"], q=(0.4,), v=(0.0,), stamp=1000.0 + SHARED_WINDOW),
                         4999.98 + SHARED_WINDOW, publisher=b"gripper")
    assert got.unknown_names == ("finger",) and got.sample is None
    assert not intake.receive(_state(stamp=999.99 + SHARED_WINDOW), 4999.99 + SHARED_WINDOW,
                              publisher=b"driver").sample.shared
    assert not intake.receive(_state(stamp=1000.01 + SHARED_WINDOW), 5000.0 + SHARED_WINDOW).sample.shared


# ------------------------------------------------------------------ a model that includes the gripper
FINGER = '''<joint name="finger_joint" type="prismatic"><parent link="link3"/><child link="finger"/>
  <origin xyz="0 0 -1" rpy="0 0 0"/><axis xyz="1 0 0"/><limit lower="0" upper="0.04" effort="100" velocity="0.1"/>
  </joint><link name="finger"><inertial><mass value="0.2"/><inertia ixx="1e-4" ixy="0" ixz="0" iyy="1e-4" iyz="0"
  izz="1e-4"/></inertial></link></robot>'''
ARM_PERIOD, ARM_V = 0.002, (1.0, -0.5, 0.25)  # the arm driver: 500 Hz, joints moving [rad/s]


def _gripper_intake(rest_hold: float = 0.05) -> StateIntake:
    """An arm with a gripper finger in its model; the node's setting: rest_hold = max_start_state_age = 0.05 s."""
    clocks = Clocks()
    intake = StateIntake(64, lambda: clocks.node, 0.05, wall=lambda: clocks.wall, max_velocity_gap=0.05,
                         rest_hold=rest_hold)
    intake.clocks = clocks
    intake.reset(model_from_urdf_text(load_urdf_text("planar_3r").replace("</robot>", FINGER)))
    return intake


def _arm(intake: StateIntake, t: float):
    q = tuple(0.1 + v * (t - 999.0) for v in ARM_V)
    return intake.receive(_state(q=q, v=ARM_V, stamp=t), 4000.0 + t)


def _finger(intake: StateIntake, t: float, position: float, velocity: float):
    return intake.receive(_state(names=["finger_joint"], q=(position,), v=(velocity,), stamp=t), 4000.0 + t)


def test_a_gripper_held_still_and_reported_less_often_does_not_make_the_arm_state_older():
    """Arm at 500 Hz, gripper (in the model) at 50 Hz, held open: the moving arm joints decide the state's age.
    Before, every state between two gripper messages carried the gripper's stamp: up to 18 ms too old."""
    intake = _gripper_intake()
    _finger(intake, 1000.0, 0.03, 0.0)
    for k in range(10):
        sample = _arm(intake, 1000.0 + k * ARM_PERIOD).sample
        assert sample.stamp == pytest.approx(1000.0 + k * ARM_PERIOD, abs=1e-9)
    assert sample.header_stamp.nanosec == pytest.approx(18_000_000, abs=1000)  # the arm message's own stamp


def test_a_stamped_trigger_starts_from_the_arm_state_of_its_instant_not_a_later_one_under_the_gripper_stamp():
    """E-stop stamped 1000.005 s: the start state is the arm's state of 1000.004 s. Before, all ten arm states
    carried the gripper's stamp 1000.000 and the newest of them was taken: arm positions of 1000.018 s, 13 ms after
    the E-stop (a braking arm's, in a real stop), passed off as 5 ms before it."""
    intake = _gripper_intake()
    _finger(intake, 1000.0, 0.03, 0.0)
    for k in range(10):
        _arm(intake, 1000.0 + k * ARM_PERIOD)
    _finger(intake, 1000.02, 0.03, 0.0)
    intake.clocks.node = 1000.03
    choice = intake.choose(StartLimits(0.05, 0.05, 0.05), instant=1000.005, stamped=True, received=5000.005,
                           now=1000.03, waited=0.025)
    assert choice.ok and choice.sample.stamp == pytest.approx(1000.004, abs=1e-9)
    assert choice.age == pytest.approx(0.001, abs=1e-9)
    assert choice.sample.state.positions[0] == pytest.approx(0.1 + ARM_V[0] * 1.004, abs=1e-12)


def test_a_moving_gripper_reported_less_often_still_ages_the_state():
    """The gripper closing at 0.05 m/s: its value 18 ms old is 0.9 mm off now; the state is as old as it."""
    intake = _gripper_intake()
    _finger(intake, 1000.0, 0.03, -0.05)
    sample = _arm(intake, 1000.018).sample
    assert sample.stamp == pytest.approx(1000.0, abs=1e-9)


def test_a_silent_gripper_at_rest_ages_the_state_once_older_than_the_rest_hold():
    """Its publisher silent for 0.1 s (more than rest_hold 0.05 s): the gripper may have started to move since, so
    the state is that old and a prediction from it is refused."""
    intake = _gripper_intake()
    _finger(intake, 999.9, 0.03, 0.0)
    sample = _arm(intake, 1000.0).sample
    assert sample.stamp == pytest.approx(999.9, abs=1e-9)
    choice = intake.choose(StartLimits(0.05, 0.05, 0.05), instant=1000.0, stamped=False, received=5000.0,
                           now=1000.0, waited=0.0)
    assert not choice.ok and choice.reason.startswith("start state is 0.100 s older than the trigger instant")


def test_without_a_rest_hold_every_state_is_as_old_as_its_oldest_joint():
    intake = _gripper_intake(rest_hold=0.0)
    _finger(intake, 1000.0, 0.03, 0.0)
    assert _arm(intake, 1000.018).sample.stamp == pytest.approx(1000.0, abs=1e-9)


def test_a_robot_entirely_at_rest_is_as_new_as_its_newest_joint_value():
    intake = _gripper_intake()
    _finger(intake, 1000.0, 0.03, 0.0)
    got = intake.receive(_state(q=(0.1, 0.2, 0.3), v=(0.0, 0.0, 0.0), stamp=1000.018), 5000.018)
    assert got.sample.stamp == pytest.approx(1000.018, abs=1e-9)


# ------------------------------------------------------------------ a moving gripper reported less often
GRIPPER_V = -0.05  # [m/s] the finger closing


def _arm_at(t: float) -> tuple[float, ...]:
    """The arm's positions [rad] at ``t`` [s]: what its driver writes into the message stamped ``t``."""
    return tuple(0.1 + v * (t - 999.0) for v in ARM_V)


def _moving_gripper_history(arm_stamps, finger_stamps=(1000.0, 1000.02)) -> StateIntake:
    """The arm at 500 Hz, the finger (moving) at 50 Hz, messages received in stamp order."""
    intake = _gripper_intake()
    intake.clocks.node = 1000.07  # every message received by then, none ahead of the node clock
    messages = sorted([(t, "arm") for t in arm_stamps] + [(t, "finger") for t in finger_stamps])
    for t, who in messages:
        if who == "arm":
            _arm(intake, t)
        else:
            _finger(intake, t, 0.03 + GRIPPER_V * (t - 1000.0), GRIPPER_V)
    return intake


def _stamped_choice(intake: StateIntake, instant: float, waited: float = 0.025):
    return intake.choose(StartLimits(0.05, 0.05, 0.05), instant=instant, stamped=True, received=4000.0 + instant,
                         now=1000.03, waited=waited)


def test_a_stamped_trigger_with_a_moving_gripper_takes_no_arm_value_from_after_its_instant():
    """Arm at 500 Hz (1000.000 .. 1000.018 s), gripper closing at 0.05 m/s reported at 50 Hz (1000.000, 1000.020 s),
    E-stop stamped 1000.005 s. Every arm state between the gripper messages is stamped with the gripper's 1000.000 s
    (the moving gripper ages it). The start state must hold the arm's values of 1000.004 s, the last ones at or
    before the instant. Before, the newest state stamped 1000.000 s was taken: arm values of 1000.018 s, 13 ms
    after the E-stop (the arm already braking), reported as 5 ms before it."""
    intake = _moving_gripper_history([1000.0 + k * ARM_PERIOD for k in range(10)])
    choice = _stamped_choice(intake, 1000.005)
    assert choice.ok
    arm_now = choice.sample.state.positions[:3]
    assert arm_now == pytest.approx(_arm_at(1000.004), abs=1e-12)
    assert choice.sample.state.positions[3] == pytest.approx(0.03, abs=1e-12)  # the gripper's 1000.000 s value
    # the reported stamp and age are those of the oldest moving value used: the gripper's
    assert choice.sample.stamp == pytest.approx(1000.0, abs=1e-9)
    assert choice.age == pytest.approx(0.005, abs=1e-9)


def test_a_stamped_trigger_does_not_wait_once_an_arm_value_after_its_instant_has_arrived():
    """The arm's 1000.006 s message is in: no state holding only values at or before 1000.005 s can come any more
    (each joint's value only gets newer), so the choice is made now. Before, the state stamped with the gripper's
    1000.000 s looked older than the instant and the worker waited out state_wait_timeout, then took the arm's
    1000.006 s values."""
    intake = _moving_gripper_history([1000.0, 1000.002, 1000.004, 1000.006], finger_stamps=(1000.0,))
    choice = _stamped_choice(intake, 1000.005, waited=0.001)
    assert not choice.wait and choice.ok
    assert choice.sample.state.positions[:3] == pytest.approx(_arm_at(1000.004), abs=1e-12)
    waiting = _moving_gripper_history([1000.0, 1000.002, 1000.004], finger_stamps=(1000.0,))
    assert _stamped_choice(waiting, 1000.005, waited=0.001).wait  # the arm has not reached the instant yet


def test_with_no_state_before_the_instant_the_age_says_how_far_after_it_the_newest_value_lies():
    """The first complete state holds the gripper's 1000.000 s value and the arm's 1000.006 s: nothing at or before
    the E-stop (1000.005 s) is held, so the earliest state after it is taken, with age 1000.005 - 1000.006 = -1 ms
    (negative: values from after the instant). Before, its age was +5 ms (the gripper's stamp): arm values from
    after the E-stop reported as older than it."""
    intake = _moving_gripper_history([1000.006], finger_stamps=(1000.0,))
    choice = _stamped_choice(intake, 1000.005)
    assert choice.ok and choice.age == pytest.approx(-0.001, abs=1e-9)
    late = _moving_gripper_history([1000.06], finger_stamps=(1000.04,))
    refused = _stamped_choice(late, 1000.005)
    assert not refused.ok and refused.reason.startswith("start state holds values stamped 0.055 s after the trigger")

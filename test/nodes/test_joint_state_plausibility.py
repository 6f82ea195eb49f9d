"""A joint state with absurd positions (1e300 rad, or a full joint range beyond the limits) is rejected naming the
field and joint, so it never feeds a later velocity estimate: before, one such state made the next state's
estimated velocity about -1e299 rad/s, and a genuine E-stop failed with "exceeds the velocity limit"."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sensor_msgs.msg import JointState

from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.nodes.conversions import JointStateError, JointStateTracker, seconds_to_stamp
from vtm_dynamics.nodes.model_source import load_urdf_text, model_from_urdf_text

UR5 = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint", "wrist_3_joint")
Q0 = [0.1, -1.2, 1.4, -1.6, -1.5, 0.3]

WHEEL = """<robot name="wheel">
  <link name="base"/>
  <joint name="wheel" type="continuous"><parent link="base"/><child link="w"/><axis xyz="0 0 1"/></joint>
  <link name="w"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/>
  </inertial></link>
</robot>"""


@pytest.fixture(scope="module")
def ur5() -> RobotModel:
    return model_from_urdf_text(load_urdf_text("ur5"))


def _js(names, pos, vel=(), stamp=0.0) -> JointState:
    m = JointState(name=list(names), position=[float(x) for x in pos], velocity=[float(x) for x in vel])
    m.header.stamp = seconds_to_stamp(stamp)
    return m


@pytest.mark.parametrize("value", [1e300, -1e300, 6.3 + 4 * math.pi + 0.01, 1e9])
def test_a_position_far_outside_the_joint_range_is_rejected_naming_the_joint(ur5, value):
    tracker = JointStateTracker(ur5)
    with pytest.raises(JointStateError) as err:
        tracker.update(_js(UR5, Q0[:5] + [value], [0.0] * 6, stamp=10.0))
    assert str(err.value).startswith("position:") and "wrist_3_joint" in str(err.value), str(err.value)
    assert tracker.missing == UR5  # nothing merged


def test_an_absurd_state_does_not_poison_the_next_velocity_estimate(ur5):
    tracker = JointStateTracker(ur5)
    tracker.update(_js(UR5, Q0, stamp=10.0))
    with pytest.raises(JointStateError):
        tracker.update(_js(UR5, Q0[:5] + [1e300], [0.0] * 6, stamp=10.5))
    tracker.update(_js(UR5, Q0, stamp=11.0))  # no velocities: estimated from the last accepted positions
    s = tracker.snapshot()
    assert s.velocity_source == "estimated"
    assert np.allclose(s.v, 0.0), s.v


def test_positions_somewhat_beyond_the_limits_are_still_accepted(ur5):
    """A driver's overshoot is kept (the prediction then says why it cannot start there): only absurd values go."""
    tracker = JointStateTracker(ur5)
    tracker.update(_js(UR5, Q0[:5] + [6.4], [0.0] * 6, stamp=10.0))
    assert tracker.snapshot().positions[5] == 6.4


def test_continuous_joints_may_count_many_turns_but_not_1e300_radians():
    robot = RobotModel.from_urdf(WHEEL)
    tracker = JointStateTracker(robot)
    tracker.update(_js(["wheel"], [1e6], [1.0], stamp=1.0))  # ~160,000 turns of a wheel: plausible
    with pytest.raises(JointStateError, match=r"position: .*'wheel'"):
        tracker.update(_js(["wheel"], [1e300], [1.0], stamp=2.0))

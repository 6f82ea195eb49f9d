"""projection_controller over real DDS with a passive joint that cannot be controlled: bounded efforts within the
limits, and /diagnostics says which passive demand was not met.

The planar 3R arm (urdf/planar_3r.urdf, 108 kg bars of 1 m, 1000 N m effort limits) with joint3 declared passive and
no constraint: joint3 can move alone, so condition (64) fails everywhere (margin 0). Held at q = (0.1, -0.2, 0.3)
the law needs joint3's gravity torque m g (0.5 m) sin(q1 + q2 + q3) = 105.2 N m there, which no active joint can
give: the node publishes bounded efforts for joint1 and joint2 only, reports ERROR, and names the unmet 105.2 N m.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from test.nodes.controller_harness import (  # noqa: F401 - ros is a fixture
    PLANAR_3R,
    ControllerProcess,
    FixedRobot,
    Outputs,
    latest_diag,
    ros,
    trajectory_message,
    wait_for_subscribers,
)
from test.ros_helpers import spin_until
from trajectory_msgs.msg import JointTrajectory

NAMES = ["joint1", "joint2", "joint3"]
POSE = np.array([0.1, -0.2, 0.3])
UNMET = 108.0 * 9.81 * 0.5 * math.sin(POSE.sum())  # [N m] gravity torque of bar 3 about joint3


def test_uncontrollable_passive_joint_gets_bounded_efforts_and_the_unmet_demand_is_reported(ros, tmp_path):
    node, executor = ros
    name, controller = "pc_passive", "passive_effort"
    proc = ControllerProcess(tmp_path, name, f"urdf_path:={PLANAR_3R}", f"controller_name:={controller}",
                             "joints:=[joint1, joint2]", "passive_joints:=[joint3]", "diagnostic_period:=0.05",
                             "rate_hz:=100.0", "state_timeout:=2.0", "effort_limit_overrides:=[joint1=400.0]")
    out = Outputs(node, name, controller)
    robot = FixedRobot(node, NAMES, POSE)
    pub_traj = node.create_publisher(JointTrajectory, f"/{name}/trajectory", 10)
    try:
        wait_for_subscribers(executor, pub_traj, robot.pub)
        latest_diag(executor, out, lambda d: "trajectory" in d["_message"], 20.0)
        pub_traj.publish(trajectory_message(NAMES, [0.0], [POSE], [[0.0] * 3], [[0.0] * 3], 0.0))
        last = latest_diag(executor, out, lambda d: d["trajectories"] == "1" and "passive_unmet" in d)
        n = len(out.commands)
        assert spin_until(executor, lambda: len(out.commands) >= n + 30, 10.0), "the command stream stopped"
        efforts = np.array([c for _, c in out.commands[n:]])
        assert proc.alive(), proc.output()
        assert efforts.shape[1] == 2 and np.all(np.isfinite(efforts))
        assert np.all(np.abs(efforts) <= np.array([400.0, 1000.0]))
        last = latest_diag(executor, out, lambda d: d["trajectories"] == "1" and "passive_unmet" in d)
        assert last["_level"] == 2 and "unmet passive demand" in last["_message"], last["_message"]
        assert last["controllable"] == "false"
        joint, value = last["passive_unmet"].split("=")
        assert joint == "joint3" and abs(float(value)) == pytest.approx(UNMET, rel=1e-6)
        assert float(last["passive_residual"]) == pytest.approx(UNMET, rel=1e-6)
        assert float(last["controllability_tolerance"]) == 0.01
    finally:
        node.destroy_publisher(pub_traj)
        robot.close()
        out.close()
        proc.stop()

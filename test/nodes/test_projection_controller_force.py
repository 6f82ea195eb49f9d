"""projection_controller closes the constraint force loop of Aghili eqs. (51)-(52) over real DDS.

The slider-crank with all three joints actuated (urdf/slider_crank.urdf: crank, rod, and the massless slider block
closed to the world by the prismatic pair ``slider_guide``) holds the pose q1 = 0.6 rad on its branch. The test
process is the plant (lockstep, 4 ms steps of simulated time): it publishes its joint states and the wrench its
slider guide actually carries (geometry_msgs/WrenchStamped on ``constraint_wrench``, frame_id ``slider_guide``),
and it is pushed down at the slider pin by 5 N that the controller's model does not contain. The set point asks
the guide for 20 N upward on the slider. With G_F = 0.25 and G_I = 6.25 1/s the designed force error dynamics
(1 + G_F) e' + G_I e = 0 decays at 5 1/s; the measured error must follow that rate (within 5 %: sampled at 4 ms
with the measurement one step old, the loop's dominant root is exp(-5.05 1/s * 4 ms)) down to 1e-3 of its start,
while the crank stays at its pose. (With the measurement one sample old the proportional gain must stay below 1:
at G_F = 1 the sampled loop oscillates at the Nyquist frequency - documented in docs/projection.md.)
"""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import WrenchStamped
from trajectory_msgs.msg import JointTrajectory

from test.nodes.controller_harness import (  # noqa: F401 - ros is a fixture
    SLIDER_CRANK,
    T0,
    ControllerProcess,
    Outputs,
    Plant,
    ros,
    trajectory_message,
    wait_for_subscribers,
)
from test.ros_helpers import spin_until
from vtm_dynamics.core.projection.constraint_wrench import closure_wrench
from vtm_dynamics.core.projection.simulation import ConstraintSet, constrained_dynamics
from vtm_dynamics.core.robot.constraints import constraints_from_extension
from vtm_dynamics.core.robot.model import RobotModel

BRANCH = np.array([1.0, -2.0, 1.0])
G_F, G_I = 0.25, 6.25
RATE = G_I / (1.0 + G_F)  # [1/s] designed decay of the force error
SETPOINT = 20.0  # [N] upward force of the guide on the slider (world z)
PUSH = 5.0  # [N] unmodelled downward push on the slider pin


def wrench_message(name: str, w) -> WrenchStamped:
    msg = WrenchStamped()
    msg.header.frame_id = name
    msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z = (float(x) for x in w[:3])
    msg.wrench.torque.x, msg.wrench.torque.y, msg.wrench.torque.z = (float(x) for x in w[3:])
    return msg


def test_constraint_force_converges_to_its_set_point_with_the_designed_pi_dynamics(ros, tmp_path):
    node, executor = ros
    name, controller = "pc_force", "force_effort"
    robot = RobotModel.from_urdf_file(SLIDER_CRANK)
    guide = constraints_from_extension(robot)[0]
    cs = ConstraintSet((guide,))
    proc = ControllerProcess(tmp_path, name, f"urdf_path:={SLIDER_CRANK}", f"controller_name:={controller}",
                             "use_sim_time:=true", "diagnostic_period:=0.1", "force_control:=true",
                             "force_measurement:=topic", f"force_gain:={G_F}", f"force_integral_gain:={G_I}")
    out = Outputs(node, name, controller)
    q0 = BRANCH * 0.6
    plant = Plant(node, robot, cs, q0, robot.joint_names, out)
    slider = robot.frame_id("slider")

    def push(q):  # generalized force of -PUSH along world z at the slider pin
        return robot.frame_jacobian(q, slider, "local_world_aligned")[2] * -PUSH

    plant.disturbance = push
    pub_traj = node.create_publisher(JointTrajectory, f"/{name}/trajectory", 10)
    pub_set = node.create_publisher(WrenchStamped, f"/{name}/constraint_wrench_setpoint", 10)
    pub_meas = node.create_publisher(WrenchStamped, "constraint_wrench", 20)
    errors = []

    def measure(p):
        F = constrained_dynamics(robot, cs, p.q, p.v, p.tau()).constraint_force
        w = closure_wrench(robot, guide, p.q, F)
        pub_meas.publish(wrench_message("slider_guide", w))
        errors.append((p.t, SETPOINT - w[2]))

    try:
        wait_for_subscribers(executor, pub_traj, pub_set, pub_meas, plant.pub_state, plant.pub_clock)
        hold = trajectory_message(robot.joint_names, [0.0], [q0], [np.zeros(3)], [np.zeros(3)], stamp=0.0)
        pub_traj.publish(hold)
        pub_set.publish(wrench_message("slider_guide", [0.0, 0.0, SETPOINT, 0.0, 0.0, 0.0]))
        spin_until(executor, lambda: False, 0.3)
        plant.run(executor, T0 + 2.0, on_step=measure)
        assert proc.alive(), proc.output()

        t = np.array([e[0] for e in errors])
        e = np.array([e[1] for e in errors])
        active = np.flatnonzero(np.abs(e) > 1e-9)
        assert active.size, "the force loop never saw an error"
        t_on = t[active[0]]
        e0 = e[active[0]]
        assert abs(e0) > 0.5 * PUSH  # the unmodelled push shows up as a force error
        window = (t > t_on + 0.1) & (t < t_on + 1.2)
        rate = -np.polyfit(t[window], np.log(np.abs(e[window])), 1)[0]
        assert abs(rate - RATE) < 0.05 * RATE, rate
        assert abs(e[-1]) < 1e-3 * abs(e0)
        crank = np.array([h[1][0] for h in plant.history])
        assert np.max(np.abs(crank - 0.6)) < 1e-3  # the force loop does not disturb the motion
    finally:
        for pub in (pub_traj, pub_set, pub_meas):
            node.destroy_publisher(pub)
        plant.close()
        out.close()
        proc.stop()

"""projection_controller follows a trajectory of task coordinates over real DDS (Aghili eqs. (40)-(46)).

Model: the planar 3R arm (urdf/planar_3r.urdf) with its tip held on the horizontal plane z = -1.5 m by one
point_on_plane loop closure (written into a temporary URDF here), so two degrees of freedom remain. The node runs
with task_frame = tip and task_components = [x, angle_y]; the test process is the plant (lockstep, 4 ms). The
arm starts at rest 0.05 m and -0.04 rad off a moving reference theta_d(t) sent on ~/task_trajectory. With
kp = 25, kd = 10 the designed error is e(t) = (e0 + (e0' + 5 e0) t) exp(-5 t) per component; the sampled loop
must stay within 5 % of the initial error of it and settle below 2 % within 2 s. (What remains is sampling: a
zero-order hold of 4 ms and the lockstep's timing leave a tracking lag of about one step times the reference speed,
0.1 m/s here, and a 4 ms delay in a loop with kd = 10 1/s shifts the transient by about kd dt = 4 %; the exact
agreement of the continuous law is shown in test/core/projection/test_task_coordinates.py.)
"""

from __future__ import annotations

import numpy as np
from trajectory_msgs.msg import JointTrajectory

from test.nodes.controller_harness import (  # noqa: F401 - ros is a fixture
    PLANAR_3R,
    T0,
    ControllerProcess,
    Outputs,
    Plant,
    ros,
    trajectory_message,
    wait_for_subscribers,
)
from test.ros_helpers import spin_until
from vtm_dynamics.core.projection.projector import correct_positions
from vtm_dynamics.core.projection.simulation import ConstraintSet
from vtm_dynamics.core.projection.task_coordinates import FramePoint
from vtm_dynamics.core.robot.constraints import constraints_from_extension
from vtm_dynamics.core.robot.model import RobotModel

TIP_ON_PLANE = """
  <loop_closure name="tip_on_plane" type="point_on_plane">
    <parent link="world"/>
    <child link="tip"/>
    <origin xyz="0 0 -1.5" rpy="0 0 0"/>
    <child_origin xyz="0 0 0" rpy="0 0 0"/>
    <axis xyz="0 0 1"/>
  </loop_closure>
</robot>"""
W = 5.0  # [1/s] designed closed-loop pole (double): kp = W^2, kd = 2 W


def reference(t):
    t = np.asarray(t, dtype=float)[:, None]
    pos = np.hstack([0.6 + 0.1 * np.sin(t), 0.3 + 0.15 * np.sin(0.8 * t)])
    vel = np.hstack([0.1 * np.cos(t), 0.12 * np.cos(0.8 * t)])
    acc = np.hstack([-0.1 * np.sin(t), -0.096 * np.sin(0.8 * t)])
    return pos, vel, acc


def test_task_coordinate_trajectory_gives_the_designed_error_dynamics(ros, tmp_path):
    node, executor = ros
    urdf = tmp_path / "planar_3r_tip_on_plane.urdf"
    with open(PLANAR_3R) as fh:
        urdf.write_text(fh.read().replace("</robot>", TIP_ON_PLANE))
    robot = RobotModel.from_urdf_file(str(urdf))
    cs = ConstraintSet(constraints_from_extension(robot))
    task = FramePoint(robot, "tip", ("x", "angle_y"))
    # start on the plane, near the reference's start, at rest
    start = correct_positions(np.array([1.3, -0.9, 0.7]), lambda q: cs.residual(robot, q),
                              lambda q: cs.jacobian(robot, q), tol=1e-13, max_iterations=50)
    assert start.converged
    q0 = start.q
    name, controller = "pc_task", "task_effort"
    proc = ControllerProcess(tmp_path, name, f"urdf_path:={urdf}", f"controller_name:={controller}",
                             "use_sim_time:=true", "diagnostic_period:=0.1", "task_frame:=tip",
                             "task_components:=[x, angle_y]", f"kp:={W * W}", f"kd:={2 * W}")
    out = Outputs(node, name, controller)
    plant = Plant(node, robot, cs, q0, robot.joint_names, out)
    pub = node.create_publisher(JointTrajectory, f"/{name}/task_trajectory", 10)
    try:
        wait_for_subscribers(executor, pub, plant.pub_state, plant.pub_clock)
        # the reference starts 0.05 m and -0.04 rad away from where the arm stands
        shift = task.value(robot, q0) - reference([0.0])[0][0] + np.array([-0.05, 0.04])
        ts = np.arange(0.0, 2.5 + 1e-9, 0.02)
        pos, vel, acc = reference(ts)
        msg = trajectory_message(task.names, ts, pos + shift, vel, acc, stamp=T0)
        for _ in range(3):
            pub.publish(msg)
            spin_until(executor, lambda: False, 0.1)
        plant.run(executor, T0 + 2.0)
        assert proc.alive(), proc.output()

        t = np.array([h[0] for h in plant.history]) - T0
        theta = np.array([task.value(robot, h[1]) for h in plant.history])
        ref = reference(t)[0] + shift
        e = ref - theta
        # the plant's brakes hold it until the first command: the loop closes at the last step still at q0
        start = int(np.flatnonzero(np.any(np.array([h[1] for h in plant.history]) != q0, axis=1))[0]) - 1
        assert start >= 0
        t, e = t[start:] - t[start], e[start:]
        e0 = e[0]
        ed0 = reference([t[0] + plant.history[start][0] - T0])[1][0]  # at rest: e' = theta_d'
        designed = (e0 + (ed0 + W * e0) * t[:, None]) * np.exp(-W * t[:, None])
        print(f"deviation {np.max(np.abs(e - designed)) / np.max(np.abs(e0)):.3%}, "
              f"final {np.max(np.abs(e[t > t[-1] - 0.1])) / np.max(np.abs(e0)):.3%}")
        scale = np.max(np.abs(e0))
        assert np.max(np.abs(e - designed)) < 0.05 * scale, np.max(np.abs(e - designed)) / scale
        assert np.max(np.abs(e[t > t[-1] - 0.1])) < 0.02 * scale
        assert np.max(np.abs(np.array([cs.residual(robot, h[1]) for h in plant.history]))) < 1e-9
        last = out.diagnostics[-1]
        assert float(last["task_conditioning"]) > 0.1 and last["_level"] == 0, last
    finally:
        node.destroy_publisher(pub)
        plant.close()
        out.close()
        proc.stop()

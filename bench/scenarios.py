"""The paper's two joint-locking scenarios, shared by the core tests, benchmarks and the peer comparison.

Müller 2026, Sec. 6 (Example 1): planar 3R pendulum released from rest at q = (pi/6, pi/6, pi/6) with q1 measured
from the horizontal, joint 2 locked at 0.8 s, joint 3 at 1.3 s, RK4 with 1e-4 s.

Which reading of "from the horizontal": the paper's Fig. 1 is not in the text we have, so we take the standard
planar convention (x horizontal, y up, angles counterclockwise, q1 of the first bar from the +x axis, q2 and q3
relative to the previous bar): the bars start 30, 60 and 90 degrees above the horizontal, the third one pointing
straight up. ``urdf/planar_3r.urdf`` hangs straight down at q = 0 and turns about +y in the x-z plane, so the same
pose seen from the other side of that plane (a mirror image, which gravity does not distinguish) is
q_urdf = (pi/2 + pi/6, pi/6, pi/6): only q1 is offset, the relative angles keep value and sign. Sec. 7: a 6-DOF arm moving at t = 0, joints 1, 2, 3 locked at 0.05, 0.10,
0.15 s (here a UR5 from example-robot-data; the paper's Stäubli RX130L model is not public).
"""

import numpy as np

from vtm_dynamics.core.robot.constraints import JointLock
from vtm_dynamics.core.switching.integrator import TimeEvent, simulate

Q0_3R_PAPER = np.full(3, np.pi / 6)  # [rad] as the paper states it, q1 from the horizontal
Q0_3R = Q0_3R_PAPER + np.array([np.pi / 2, 0.0, 0.0])  # [rad] the same pose in urdf/planar_3r.urdf coordinates
LOCKS_3R = ((0.8, "joint2"), (1.3, "joint3"))
HORIZON_3R = 2.0

Q0_ARM = np.array([0.0, -1.2, 1.5, -0.5, 1.2, 0.0])
V0_ARM = np.array([1.0, -0.8, 1.2, 0.5, -0.5, 0.8])
LOCK_TIMES_ARM = (0.05, 0.10, 0.15)
HORIZON_ARM = 0.5


def run_3r(robot, transition="kkt", integrator="rk4", dt=1e-4, record_every=1, t_end=HORIZON_3R, **kw):
    events = [TimeEvent(t, JointLock(j)) for t, j in LOCKS_3R]
    return simulate(robot, Q0_3R, np.zeros(3), t_end, events, integrator=integrator, dt=dt, transition=transition,
                    record_every=record_every, **kw)


def run_arm(robot, transition="kkt", integrator="rk4", dt=1e-4, record_every=10, t_end=HORIZON_ARM, **kw):
    events = [TimeEvent(t, JointLock(robot.joint_names[i])) for i, t in enumerate(LOCK_TIMES_ARM)]
    return simulate(robot, Q0_ARM, V0_ARM, t_end, events, integrator=integrator, dt=dt, transition=transition,
                    record_every=record_every, **kw)

"""The slider-crank over 10 s at the default settings of ``constrained_step`` (dt = 2 ms): 18 passages through
the singular configurations q1 = +-pi/2, against an independent reference - the one-coordinate Lagrangian of the
branch q2 = -2 q1 integrated by scipy's DOP853 at tight tolerances.

Reference model (from the URDF's point masses m = 1 kg at the crank tip B and rod tip C, l = 0.5 m, gravity
along the paper's y): with theta = q1 on the branch, B = l (cos, sin), C = (2 l cos, 0), so
T = m l^2 theta'^2 (1 + 4 sin^2 theta) / 2 and V = m g l sin theta, giving
(1 + 4 sin^2) theta'' + 4 sin cos theta'^2 + (g / l) cos = 0.
"""

import os

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from vtm_dynamics.core.projection.simulation import ConstraintSet, constrained_step
from vtm_dynamics.core.robot.constraints import constraints_from_extension
from vtm_dynamics.core.robot.model import RobotModel

from core_testdata import REPO

# the slider as a massless body closed by a 5-row prismatic pair, and the paper's two-coordinate model with one
# point_on_plane row: the same mechanism, so both must follow the same reference
MODELS = {"prismatic_slider": ("slider_crank.urdf", np.array([1.0, -2.0, 1.0])),
          "point_on_plane": ("slider_crank_point_on_plane.urdf", np.array([1.0, -2.0]))}
M, L, G = 1.0, 0.5, 9.81
DT, STEPS = 2e-3, 5000  # 10 s


def reference(theta0, rate0, times):
    def rhs(t, y):
        s, c = np.sin(y[0]), np.cos(y[0])
        return [y[1], -(4 * s * c * y[1] ** 2 + G / L * c) / (1 + 4 * s * s)]

    sol = solve_ivp(rhs, (times[0], times[-1]), [theta0, rate0], method="DOP853", t_eval=times, rtol=1e-13,
                    atol=1e-13)
    return sol.y[0]


def energy(theta, rate):
    s = np.sin(theta)
    return 0.5 * M * L**2 * rate**2 * (1 + 4 * s * s) + M * G * L * s


@pytest.mark.parametrize("model", sorted(MODELS))
def test_ten_seconds_through_eighteen_passages_at_default_settings(model):
    urdf, branch = MODELS[model]
    robot = RobotModel.from_urdf_file(os.path.join(REPO, "urdf", urdf))
    cs = ConstraintSet(constraints_from_extension(robot))
    q, v = np.zeros(robot.nq), branch * 10.0
    E0 = energy(0.0, 10.0)
    times = DT * np.arange(STEPS + 1)
    ref = reference(0.0, 10.0, times)
    angle_err = energy_err = 0.0
    passages = 0
    for k in range(1, STEPS + 1):
        c_before = np.cos(q[0])
        step = constrained_step(robot, cs, q, v, None, DT)  # default settings
        q, v = step.q, step.v
        passages += int(np.cos(q[0]) * c_before < 0)
        angle_err = max(angle_err, abs(q[0] - ref[k]))
        energy_err = max(energy_err, abs(robot.kinetic_energy(q, v) + robot.potential_energy(q) - E0))
    print(f"passages {passages}, angle drift {angle_err:.2e} rad, energy drift {energy_err:.2e} J")
    assert passages == 18
    assert angle_err <= 1e-6
    assert energy_err <= 1e-6

"""The warm-up loads every compiled kernel and leaves nothing behind: the predictions after it are those of a
process that never warmed up (same numbers)."""

import os

import numpy as np

from core_testdata import REPO
from vtm_dynamics.core.estop import predict_stop
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.estop.warm_up import compile_kernels, warm_up


def test_warm_up_runs_every_kernel_and_changes_no_prediction(ur5):
    brakes = brakes_from_config(ur5, os.path.join(REPO, "config", "ur5_brakes.yaml"))
    q, v = np.array([0.3, -1.2, 1.5, -0.8, 0.5, 0.2]), np.array([2.0, -2.5, 2.8, 1.5, -2.0, 3.0])
    before = predict_stop(ur5, brakes, q, v)
    assert compile_kernels() >= 0.0
    assert warm_up(ur5, brakes) >= 0.0
    after = predict_stop(ur5, brakes, q, v)
    assert np.array_equal(before.q_final, after.q_final) and before.stop_time == after.stop_time
    assert [e.time for e in before.events] == [e.time for e in after.events]


def test_after_compile_kernels_a_prediction_needs_no_other_compiled_variant():
    """A kernel called with another layout or type than the warm-up used gets another compiled variant when a
    prediction first meets it: that compile (or cache load) would fall in the first E-stop. In a fresh process:
    every kernel's variants after ``compile_kernels`` are all that a UR5 stop with the shipped brakes uses."""
    import subprocess
    import sys

    code = """
import numpy as np
from numba.core.registry import CPUDispatcher
from vtm_dynamics.core.estop import compiled_checks, compiled_decision, compiled_dynamics, compiled_events, compiled_steps
from vtm_dynamics.core.estop import predict_stop
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.estop.warm_up import compile_kernels
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf

def variants():
    out = {}
    for mod in (compiled_checks, compiled_decision, compiled_dynamics, compiled_events, compiled_steps):
        for name, f in vars(mod).items():
            if isinstance(f, CPUDispatcher):
                out[mod.__name__ + "." + name] = len(f.signatures)
    return out

compile_kernels()
before = variants()
ur5 = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
brakes = brakes_from_config(ur5, "config/ur5_brakes.yaml")
predict_stop(ur5, brakes, np.array([0.3, -1.2, 1.5, -0.8, 0.5, 0.2]), np.array([2.0, -2.5, 2.8, 1.5, -2.0, 3.0]))
after = variants()
print({k: (before.get(k, 0), n) for k, n in after.items() if n != before.get(k, 0)})
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": REPO})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "{}", out.stdout

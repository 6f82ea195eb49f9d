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

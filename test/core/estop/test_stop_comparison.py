"""Predictions are timed by the rule their recorded stop was timed with (module stop_comparison)."""

import os

import numpy as np
import pytest

from core_testdata import REPO
from vtm_dynamics.core.estop import predict_stop
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.estop.inputs import StopSettings
from vtm_dynamics.core.estop.output_error import interp_hermite
from vtm_dynamics.core.estop.recorded import RecordedStop, settle_time
from vtm_dynamics.core.estop.stop_comparison import predicted_stop_time

UR5_BRAKES = os.path.join(REPO, "test", "core", "estop", "data", "ur5_coulomb_viscous_brakes.yaml")
Q_MOVING = np.array([0.3, -1.2, 1.5, -0.8, 0.5, 0.2])
V_MOVING = np.array([2.0, -2.5, 2.8, 1.5, -2.0, 3.0])
STEP = 0.002  # [s] 500 Hz
THRESHOLD = 0.05  # [rad/s]


@pytest.fixture(scope="module")
def prediction(ur5):
    return predict_stop(ur5, brakes_from_config(ur5, UR5_BRAKES), Q_MOVING, V_MOVING)


def positions_only(prediction, until: float) -> RecordedStop:
    """The prediction's own angles sampled at 500 Hz from 1 ms after the trigger to ``until`` [s], without
    velocities."""
    t = np.arange(0.001, until, STEP)
    q = interp_hermite(prediction.t, prediction.q, prediction.v, t)
    return RecordedStop("positions", Q_MOVING, V_MOVING, t, q, rest_speed=THRESHOLD, timed_by_positions=True)


def test_a_stop_timed_by_positions_times_its_prediction_near_where_the_predicted_speed_falls_below_the_threshold(
        prediction):
    # independent: the engine's own velocities; the derived speed averages over +-4 ms, so within a few samples
    assert prediction.stopped
    expected = settle_time(prediction.t, prediction.v, THRESHOLD)
    stop = positions_only(prediction, prediction.stop_time + 0.3)
    assert predicted_stop_time(prediction, stop) == pytest.approx(expected, abs=2 * STEP)


def test_a_prediction_that_goes_on_after_the_recording_ends_is_timed_at_its_own_rest_not_at_the_last_sample(
        prediction):
    full = positions_only(prediction, prediction.stop_time + 0.3)
    cut = positions_only(prediction, 0.5 * prediction.stop_time)
    assert predicted_stop_time(prediction, cut) == pytest.approx(predicted_stop_time(prediction, full), abs=STEP)
    assert predicted_stop_time(prediction, cut) > cut.t[-1] + 5 * STEP


def test_a_prediction_is_timed_on_the_recordings_own_instants_so_its_coarse_samples_do_not_make_it_early(ur5):
    # the "recording": the same stop integrated with steps of 20 us and sampled at 500 Hz by linear interpolation of
    # those dense samples (no Hermite, no coarse grid); the prediction under test has samples up to 20 ms apart,
    # whose linearly interpolated speed put its stop time up to 3.2 % early here
    brakes = brakes_from_config(ur5, UR5_BRAKES)
    rng = np.random.default_rng(99)
    lo = np.maximum(ur5.model.lowerPositionLimit, -np.pi)
    hi = np.minimum(ur5.model.upperPositionLimit, np.pi)
    worst = 0.0
    for _ in range(6):
        q = 0.5 * (lo + hi) + rng.uniform(-0.4, 0.4, ur5.nv) * (hi - lo)
        v = rng.uniform(-0.7, 0.7, ur5.nv) * ur5.model.velocityLimit
        prediction = predict_stop(ur5, brakes, q, v)
        dense = predict_stop(ur5, brakes, q, v, settings=StopSettings(step=2e-5))
        t = np.arange(0.001, dense.t[-1] + 0.05, STEP)
        recorded_v = np.stack([np.interp(t, dense.t, dense.v[:, j]) for j in range(ur5.nv)], axis=1)
        recorded_q = np.stack([np.interp(t, dense.t, dense.q[:, j]) for j in range(ur5.nv)], axis=1)
        stop = RecordedStop("dense", q, v, t, recorded_q, rest_speed=0.02)
        recorded = settle_time(t, recorded_v, 0.02)
        worst = max(worst, abs(predicted_stop_time(prediction, stop) - recorded) / recorded)
    assert worst < 1e-3


def test_a_stop_the_engine_cannot_predict_keeps_the_engines_reason_in_its_comparison_and_shortfall(ur5):
    # the elbow recorded 0.5 rad beyond its +pi limit: the engine refuses the start state. The comparison used to
    # say only that the prediction was missing (reported as "not at rest"), without why.
    from vtm_dynamics.core.estop.stop_comparison import compare_stops, shortfalls

    q0 = Q_MOVING.copy()
    q0[2] = np.pi + 0.5
    t = np.arange(0.001, 0.5, STEP)
    stop = RecordedStop("beyond", q0, V_MOVING, t, np.tile(q0, (t.size, 1)), stop_time=0.3)
    (c,) = compare_stops(ur5, brakes_from_config(ur5, UR5_BRAKES), [stop])
    assert np.isnan(c.predicted_time)
    assert "elbow_joint" in c.failure
    (short,) = shortfalls([c], 0.05)
    assert short.failure == c.failure


def test_the_joint_that_moved_most_is_chosen_per_unit_never_comparing_metres_with_radians():
    from vtm_dynamics.core.estop.stop_comparison import StopComparison

    nan = np.full(3, np.nan)
    # a track (m) travelling 0.05 m, an arm joint 0.2 rad, another 0.1 rad
    c = StopComparison("s", np.array([0.05, -0.2, 0.1]), nan, 0.3, 0.3, 0.1, 0.1, 0.0, np.zeros(0),
                       np.zeros((0, 3)))
    assert c.main_joints(["m", "rad", "rad"]) == [0, 1]
    assert c.main_joints(["rad", "rad", "rad"]) == [1]

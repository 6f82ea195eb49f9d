"""The largest safe speed scaling, by bisection on the prediction: a motion whose stops come too close at full
speed gets a scaling below 1; the trials are monotone (safe below it, unsafe above), and the trajectory re-timed at
it - written out and read back - passes the check when run again."""

import numpy as np
import pytest

import stopsafe_scenarios as S
from vtm_dynamics.core.stopsafe.check import CheckSettings, TrajectoryChecker
from vtm_dynamics.core.stopsafe.sampling import SamplingSpec
from vtm_dynamics.core.stopsafe.speed_scaling import largest_speed_scaling, per_segment_scalings
from vtm_dynamics.core.stopsafe.trajectory import TrajectoryError
from vtm_dynamics.core.stopsafe.trajectory_files import trajectory_from_mapping


@pytest.fixture(scope="module")
def scaled():
    robot, geometry, setup = S.ur5(step=0.01)
    traj = S.ur5_down(0.22)
    far = TrajectoryChecker(setup, geometry, S.table_only(-0.5), CheckSettings(sampling=SamplingSpec(rate=100.0)))
    lowest = -0.5 + min(s.clearance for s in far.check(traj).samples)
    # instants refined to a bound of 3 cm: about as many at every scaling (the bound scales with the speed)
    settings = CheckSettings(margin=0.01, sampling=SamplingSpec(tolerance=0.03))
    checker = TrajectoryChecker(setup, geometry, S.table_only(lowest - 0.005), settings)
    return checker, traj, largest_speed_scaling(checker, traj, tolerance=0.05)


def test_scaling_is_below_one_for_a_motion_whose_stops_come_too_close(scaled):
    checker, traj, result = scaled
    assert not result.trials[0].safe and result.trials[0].scaling == pytest.approx(1.0)
    assert 0.05 < result.scaling < 1.0
    unsafe_above = min(t.scaling for t in result.trials if not t.safe)
    assert unsafe_above - result.scaling <= 0.05 * unsafe_above + 1e-12  # bisected to the tolerance


def test_the_trials_are_monotone_and_the_result_passes_when_checked_again(scaled):
    checker, traj, result = scaled
    assert result.monotone
    safe = sorted(t.scaling for t in result.trials if t.safe)
    assert len(safe) >= 3 and safe[0] <= 0.25 * result.scaling + 1e-12  # the probes below the result
    assert result.recheck is not None and result.recheck.safe and result.recheck.complete
    text_round_trip = trajectory_from_mapping(traj.retimed(result.scaling).as_message_dict())
    again = checker.check(text_round_trip)
    assert again.safe
    np.testing.assert_allclose(again.column("clearance"), result.recheck.column("clearance"), atol=1e-9)


def test_scaling_arguments_are_checked(scaled):
    checker, traj, _ = scaled
    with pytest.raises(TrajectoryError, match="max_scaling"):
        largest_speed_scaling(checker, traj, max_scaling=50.0)
    with pytest.raises(TrajectoryError, match="scaling.tolerance"):
        largest_speed_scaling(checker, traj, tolerance=0.9)


def test_per_segment_scalings_are_at_least_the_uniform_one_and_pass_together(scaled):
    checker, traj, uniform = scaled
    scales, recheck = per_segment_scalings(checker, traj, uniform.scaling, 1.0, tolerance=0.2)
    assert len(scales) == traj.n_points - 1 and np.all(scales >= uniform.scaling - 1e-12)
    assert recheck.safe and recheck.complete
    # the segments the motion starts and ends with are slow anyway: they may run faster than the uniform scaling
    assert scales.max() > uniform.scaling

"""Trajectory sampling reproduces the polynomials it is built from, holds the ends and rejects malformed input."""

import numpy as np
import pytest

from vtm_dynamics.core.projection.desired_trajectory import (
    PiecewiseTrajectory, TrajectoryError, TrajectoryLimits, check_start_segment,
)


def poly(coeffs, t, d=0):
    return np.polynomial.polynomial.polyval(t, np.polynomial.polynomial.polyder(coeffs, d) if d else coeffs)


@pytest.mark.parametrize("degree, given", [(5, "pva"), (3, "pv"), (1, "p")])
def test_a_polynomial_of_the_segment_order_is_reproduced_exactly_between_waypoints(degree, given):
    rng = np.random.default_rng(degree)
    coeffs = rng.normal(size=(degree + 1, 2))  # two joints
    knots = np.array([0.0, 0.3, 0.45, 1.2])
    P = np.stack([poly(coeffs[:, j], knots) for j in range(2)], axis=1)
    V = np.stack([poly(coeffs[:, j], knots, 1) for j in range(2)], axis=1) if "v" in given else None
    A = np.stack([poly(coeffs[:, j], knots, 2) for j in range(2)], axis=1) if "a" in given else None
    traj = PiecewiseTrajectory(knots, P, V, A)
    for t in np.linspace(0.0, 1.2, 37)[:-1]:
        s = traj.sample(t)
        for j in range(2):
            assert s.positions[j] == pytest.approx(poly(coeffs[:, j], t), abs=1e-10)
            if degree > 1:
                assert s.velocities[j] == pytest.approx(poly(coeffs[:, j], t, 1), abs=1e-9)
                assert s.accelerations[j] == pytest.approx(poly(coeffs[:, j], t, 2), abs=1e-8)
            else:
                assert s.velocities[j] == pytest.approx(coeffs[1, j], abs=1e-10)
                assert s.accelerations[j] == 0.0
        assert not s.finished


def test_the_last_point_is_held_with_zero_velocity_and_the_first_before_the_start():
    traj = PiecewiseTrajectory([0.5, 1.0], [[0.0, 1.0], [2.0, 3.0]], [[1.0, 1.0], [4.0, 4.0]])
    end = traj.sample(7.0)
    assert end.finished and list(end.positions) == [2.0, 3.0] and not end.velocities.any()
    assert not end.accelerations.any()
    before = traj.sample(0.1)
    assert list(before.positions) == [0.0, 1.0] and not before.velocities.any() and not before.finished
    started = traj.with_start([5.0, 5.0], [0.0, 0.0])
    assert list(started.times) == [0.0, 0.5, 1.0] and list(started.sample(0.0).positions) == [5.0, 5.0]


def test_malformed_trajectories_are_rejected_naming_the_field():
    with pytest.raises(TrajectoryError, match="^time_from_start:"):
        PiecewiseTrajectory([0.0, 0.0], [[0.0], [1.0]])
    with pytest.raises(TrajectoryError, match="^positions:"):
        PiecewiseTrajectory([0.0, 1.0], [[0.0], [np.nan]])
    # JointTrajectory messages (by joint name, field by field): test/nodes/test_projection_controller_io.py


def test_a_first_point_already_due_is_refused_for_every_limited_joint_that_would_jump_to_it():
    """A joint without a velocity limit may jump to a first point that is already due; every other joint that would
    jump is refused. Only the first joint that moved used to be looked at: a small move of an unlimited wrist let an
    elbow jump 2 rad at once."""
    limits = TrajectoryLimits(("wrist", "elbow"), ("rad", "rad"), np.array([-np.inf, -3.0]), np.array([np.inf, 3.0]),
                              np.array([np.inf, 1.0]))  # the wrist has no velocity limit
    start = np.zeros(2)
    check_start_segment(start, np.array([0.1, 0.0]), 0.0, limits)  # the unlimited wrist alone: accepted
    for first in (np.array([0.0, 2.0]), np.array([0.1, 2.0])):
        with pytest.raises(TrajectoryError, match=r"points\[0\]\.positions\[elbow\]: due at once"):
            check_start_segment(start, first, 0.0, limits)

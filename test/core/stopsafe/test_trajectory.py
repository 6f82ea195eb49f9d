"""A planned trajectory interpolates like the joint trajectory controller, re-times without changing its path, maps
joints by name and refuses motions outside the model's limits with one line."""

import numpy as np
import pytest
from scipy.interpolate import BPoly

from vtm_dynamics.core.stopsafe.trajectory import (
    TrajectoryError, check_limits, extremes, model_order, planned_trajectory, velocity_headroom,
)

T = [0.0, 0.4, 1.0, 1.3]
P = [[0.0, 1.0], [0.3, 0.8], [0.1, 1.2], [0.5, 1.0]]
V = [[0.0, 0.0], [0.5, -0.2], [-0.3, 0.4], [0.0, 0.0]]
A = [[0.0, 0.0], [1.0, 2.0], [-2.0, 0.5], [0.0, 0.0]]


@pytest.mark.parametrize("with_a", [False, True])
def test_cubic_and_quintic_segments_match_scipy_hermite_polynomials(with_a):
    traj = planned_trajectory(["a", "b"], T, P, V, A if with_a else None)
    t = np.linspace(0.0, 1.3, 211)
    for j in range(2):
        derivs = [[P[k][j], V[k][j]] + ([A[k][j]] if with_a else []) for k in range(len(T))]
        ref = BPoly.from_derivatives(T, derivs)
        for d in range(3):
            np.testing.assert_allclose(traj.evaluate(t, d)[:, j], ref.derivative(d)(t) if d else ref(t), atol=1e-9)


def test_positions_only_interpolate_linearly_with_one_sided_velocities_at_points():
    traj = planned_trajectory(["a", "b"], T, P)
    assert traj.interpolation == "linear"
    np.testing.assert_allclose(traj.evaluate([0.2], 0)[0], [0.15, 0.9])
    np.testing.assert_allclose(traj.evaluate([0.4], 1)[0], (np.array(P[2]) - P[1]) / 0.6)  # the segment after
    np.testing.assert_allclose(traj.evaluate([0.4], 1, side="left")[0], (np.array(P[1]) - P[0]) / 0.4)


def test_retiming_keeps_the_path_and_scales_velocities_and_accelerations():
    traj = planned_trajectory(["a", "b"], T, P, V, A)
    slow = traj.retimed(0.5)
    t = np.linspace(0.0, 1.3, 53)
    ts = t / 0.5
    np.testing.assert_allclose(slow.evaluate(ts, 0), traj.evaluate(t, 0), atol=1e-12)
    np.testing.assert_allclose(slow.evaluate(ts, 1), 0.5 * traj.evaluate(t, 1), atol=1e-12)
    np.testing.assert_allclose(slow.evaluate(ts, 2), 0.25 * traj.evaluate(t, 2), atol=1e-12)
    again = planned_trajectory(["a", "b"], slow.time_from_start, slow.positions, slow.velocities, slow.accelerations)
    np.testing.assert_allclose(again.evaluate(ts, 0), slow.evaluate(ts, 0), atol=1e-12)


def test_extremes_are_found_between_points():
    # a cubic segment that overshoots both ends: the extreme lies inside it, not at a point
    traj = planned_trajectory(["a"], [0.0, 1.0], [[0.0], [0.0]], [[2.0], [2.0]])
    ext = extremes(traj, 0)
    dense = traj.evaluate(np.linspace(0, 1, 20001), 0)[:, 0]
    # p(t) = 2t - 6t^2 + 4t^3 peaks at t = (3 - sqrt 3)/6 with 2 sqrt(3) / 18 = 0.19245...
    assert ext.high[0] == pytest.approx(2 * np.sqrt(3) / 18, abs=1e-12) and ext.high[0] >= dense.max()
    assert ext.low[0] == pytest.approx(-2 * np.sqrt(3) / 18, abs=1e-12) and ext.low[0] <= dense.min()


def test_model_order_is_by_name_and_names_every_joint(ur5):
    names = list(ur5.joint_names)[::-1]
    traj = planned_trajectory(names, [0.0, 1.0], [np.arange(6) * 0.1, np.arange(6) * 0.1], None)
    order = model_order(ur5, traj)
    np.testing.assert_allclose(order.columns(traj.evaluate([0.5]))[0], (np.arange(6) * 0.1)[::-1])
    with pytest.raises(TrajectoryError, match="'elbow_joint' of 'ur5' is missing"):
        model_order(ur5, planned_trajectory(names[:3] + names[4:], [0, 1], [[0] * 5, [0] * 5]))
    with pytest.raises(TrajectoryError, match="'gripper' is not a movable joint"):
        model_order(ur5, planned_trajectory(names + ["gripper"], [0, 1], [[0] * 7, [0] * 7]))


def test_limits_are_checked_on_the_interpolated_motion(ur5):
    names = list(ur5.joint_names)
    q = [0.0, -1.0, 3.0, 0.0, 0.0, 0.0]
    traj = planned_trajectory(names, [0.0, 1.0], [q, q], [[0, 0, 1.2, 0, 0, 0], [0, 0, 0.0, 0, 0, 0]])
    with pytest.raises(TrajectoryError) as err:  # the elbow (limit pi) overshoots between the two points
        check_limits(ur5, traj)
    assert "elbow_joint reaches" in str(err.value) and "above its upper limit 3.14159" in str(err.value)
    fast = planned_trajectory(names, [0.0, 0.5], [[0.0] * 6, [0, 0, 0, 0, 0, 2.0]], None)
    with pytest.raises(TrajectoryError, match="wrist_3_joint moves at 4 /s .* above its velocity limit 3.2"):
        check_limits(ur5, fast)
    assert velocity_headroom(ur5, fast) == pytest.approx(3.2 / 4.0)


@pytest.mark.parametrize("args, words", [
    ((["a", "a"], [0, 1], [[0, 0], [0, 0]]), "'a' appears twice"),
    ((["a"], [0, 0], [[0], [1]]), "time_from_start[1]: 0 s is not after"),
    ((["a"], [0, 1], [[0], [float("nan")]]), "positions[1, 0]: not a finite number"),
    ((["a"], [0], [[0]]), "expected 2..100000 points"),
    ((["a"], [0, 1], [[0], [1]], None, [[0], [0]]), "accelerations: given without velocities"),
])
def test_bad_trajectories_are_one_line(args, words):
    with pytest.raises(TrajectoryError) as err:
        planned_trajectory(*args)
    assert words in str(err.value) and "\n" not in str(err.value)

"""Speeds derived from recorded positions, the stop-time rule of a recording without velocities."""

import numpy as np
import pytest

from vtm_dynamics.core.estop.recorded import position_velocities

STEP = 0.002  # [s] 500 Hz


def test_derived_speed_of_a_parabola_is_its_derivative_wherever_the_window_is_complete():
    t = np.arange(50) * STEP
    q = np.column_stack([3.0 * t * t - 2.0 * t, -0.5 * t * t + 1.0])
    v = position_velocities(t, q, half_width=0.004)
    exact = np.column_stack([6.0 * t - 2.0, -1.0 * t])  # a difference quotient centred on t is exact for a parabola
    assert np.allclose(v[2:-2], exact[2:-2], rtol=0, atol=1e-9)
    assert np.allclose(v[:2], exact[2], rtol=0, atol=1e-9) and np.allclose(v[-2:], exact[-3], rtol=0, atol=1e-9)


def test_without_a_complete_window_the_derived_speed_is_the_mean_velocity():
    t = np.array([0.0, 0.001, 0.002])
    q = np.array([[0.0], [0.5e-3], [2e-3]])
    assert np.allclose(position_velocities(t, q, half_width=0.004), 1.0)
    assert np.array_equal(position_velocities(t[:1], q[:1]), np.zeros((1, 1)))


def test_samples_sharing_a_stamp_are_averaged_and_share_a_derived_speed():
    t = np.array([0.0, 0.002, 0.002, 0.004, 0.006])
    q = np.array([[0.0], [1e-3], [3e-3], [4e-3], [6e-3]])
    v = position_velocities(t, q, half_width=0.001)
    assert v[1, 0] == v[2, 0] == pytest.approx((4e-3 - 0.0) / 0.004)
    assert v[3, 0] == pytest.approx((6e-3 - 2e-3) / 0.004)
    assert np.all(np.isfinite(v))

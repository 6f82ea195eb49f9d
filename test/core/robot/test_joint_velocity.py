"""A joint's velocity at a new sample: the measured one when reported, the backward difference of the positions
over their stamps otherwise, and "unavailable" (never a stale number passed off as an estimate) when the stamps
cannot give one."""

from __future__ import annotations

import math

import pytest

from vtm_dynamics.core.robot.joint_velocity import VELOCITY_SOURCES, joint_velocity


def test_a_measured_velocity_is_taken_as_it_is_even_with_a_previous_sample():
    v = joint_velocity(1.0, 2.0, measured=-0.25, previous=(0.0, 1.0))
    assert (v.value, v.source) == (-0.25, "measured")


def test_without_a_measurement_the_backward_difference_is_exact_for_constant_speed():
    speed, t0, dt = 1.7, 100.0, 0.002
    v = joint_velocity(0.3 + speed * (t0 + dt), t0 + dt, previous=(0.3 + speed * t0, t0))
    assert v.source == "estimated" and v.value == pytest.approx(speed, rel=1e-9)


@pytest.mark.parametrize("stamp,previous", [(0.0, (0.0, -1.0)), (5.0, (1.0, 5.0)), (5.0, (1.0, 6.0)), (5.0, None)])
def test_an_unstamped_repeated_older_or_first_sample_gives_no_velocity(stamp, previous):
    v = joint_velocity(2.0, stamp, previous=previous)
    assert (v.value, v.source) == (0.0, "unavailable")
    assert v.source in VELOCITY_SOURCES


def test_a_difference_over_a_gap_longer_than_the_bound_is_no_velocity():
    """A position-only stream that paused for 3 s: the difference would be a 3-s average, not the velocity now."""
    v = joint_velocity(1.0, 103.0, previous=(1.0, 100.0), max_gap=0.05)
    assert (v.value, v.source) == (0.0, "unavailable")
    within = joint_velocity(1.0 + 0.02 * 1.5, 100.02, previous=(1.0, 100.0), max_gap=0.05)
    assert within.source == "estimated" and within.value == pytest.approx(1.5, rel=1e-9)


@pytest.mark.parametrize("speed", [2.0, -2.0])
def test_a_continuous_joint_turning_through_pi_gets_the_difference_on_the_circle(speed):
    """Reported wrapped to (-pi, pi]: from just below +pi to just above -pi (or back) is a small step, not 2 pi."""
    dt = 0.1
    a0 = math.pi - 0.001 if speed > 0 else -math.pi + 0.001
    a1 = math.atan2(math.sin(a0 + speed * dt), math.cos(a0 + speed * dt))
    assert abs(a1 - a0) > math.pi  # the reported angles did jump
    v = joint_velocity(a1, 10.0 + dt, previous=(a0, 10.0), continuous=True)
    assert v.source == "estimated" and v.value == pytest.approx(speed, rel=1e-9)


def test_a_joint_with_limits_keeps_the_plain_difference_even_beyond_pi():
    """A revolute joint may legally move from -3 rad to +3 rad; that is a 6 rad step, not a wrap."""
    v = joint_velocity(3.0, 2.0, previous=(-3.0, 1.0))
    assert v.value == pytest.approx(6.0)

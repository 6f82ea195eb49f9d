"""A joint's velocity at a new sample: the measured one when reported, the backward difference of the positions
over their stamps otherwise, and "unavailable" (never a stale number passed off as an estimate) when the stamps
cannot give one."""

from __future__ import annotations

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

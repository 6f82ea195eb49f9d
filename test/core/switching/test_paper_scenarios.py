"""The paper's Example 1 (Müller 2026, Sec. 6) starts where the paper says: q = (pi/6, pi/6, pi/6) with q1 measured
from the horizontal, i.e. the three bars 30, 60 and 90 degrees above the horizontal (bench/scenarios.py)."""

from __future__ import annotations

import numpy as np
from scenarios import Q0_3R, Q0_3R_PAPER


def test_example_1_pose_puts_the_bars_30_60_90_degrees_above_the_horizontal(planar_3r):
    joints = [planar_3r.frame_placement(Q0_3R, name).translation for name in ("link1", "link2", "link3", "tip")]
    elevations = []
    for a, b in zip(joints[:-1], joints[1:]):
        d = b - a
        assert abs(d[1]) < 1e-12  # the pendulum moves in the vertical x-z plane
        elevations.append(np.degrees(np.arctan2(d[2], abs(d[0]))))
    np.testing.assert_allclose(elevations, [30.0, 60.0, 90.0], atol=1e-9)


def test_example_1_relative_angles_are_the_papers(planar_3r):
    np.testing.assert_allclose(Q0_3R[1:], Q0_3R_PAPER[1:], atol=0)
    np.testing.assert_allclose(Q0_3R_PAPER, np.full(3, np.pi / 6))

"""Müller 2026, Sec. 7 on a UR5 seen from the motors (bench/sec7_motor_side.py, the figure of docs/estop.md): the
invariants the figure shows, at a coarser step than the figure's."""

from __future__ import annotations

import numpy as np
import pytest
from sec7_motor_side import GEAR_RATIO, LOCK_TIMES, arm_with_rotors, figure, lock_jumps, run


@pytest.fixture(scope="module")
def runs():
    robot = arm_with_rotors()
    return robot, run(robot, "kkt", dt=1e-3, record_every=1), run(robot, "naive", dt=1e-3, record_every=1)


def test_motor_side_is_the_joint_side_through_the_gear_with_the_same_power(runs):
    _, consistent, _ = runs
    np.testing.assert_array_equal(consistent.q_motor, GEAR_RATIO * consistent.q)
    np.testing.assert_array_equal(consistent.v_motor, GEAR_RATIO * consistent.v)
    np.testing.assert_allclose(consistent.p_motor * consistent.v_motor, consistent.p * consistent.v, rtol=1e-14,
                               atol=1e-14)


def test_the_free_motors_momenta_are_continuous_only_with_the_consistent_update(runs):
    _, consistent, naive = runs
    jc, jn = lock_jumps(consistent), lock_jumps(naive)
    assert [round(t, 6) for t, _ in jc] == list(LOCK_TIMES)
    scale = np.abs(consistent.p_motor[:, :3]).max()
    for (_, jump_c), (_, jump_n) in zip(jc[:2], jn[:2]):
        assert np.abs(jump_c).max() < 1e-12 * scale  # eq. (22): F^T M v is kept
        assert np.abs(jump_n).max() > 1e-3 * scale  # setting the rate to zero changes the others' momenta


def test_the_consistent_locks_dissipate_exactly_the_jump_energy_the_naive_ones_can_create_energy(runs):
    robot, consistent, naive = runs
    for ev in consistent.trajectory.events[1:]:
        dv = ev.transition.v_plus - ev.v_minus
        M = robot.mass_matrix(ev.q)
        assert ev.transition.energy_loss == pytest.approx(0.5 * dv @ M @ dv, rel=1e-9, abs=1e-12)
        assert ev.transition.energy_loss > 0
    assert min(ev.transition.energy_loss for ev in naive.trajectory.events[1:]) < 0


def test_the_arm_comes_to_rest_in_a_different_pose(runs):
    _, consistent, naive = runs
    assert np.abs(consistent.v[-1]).max() == 0 and np.abs(naive.v[-1]).max() == 0
    dq = consistent.q[-1] - naive.q[-1]
    assert dq[0] == 0  # joint 1 locks before the first difference
    assert np.abs(dq[1:3]).min() > 1e-3  # joints 2 and 3: mrad on the joint side, tenths of a rad at the motor
    np.testing.assert_array_equal(dq[3:], 0.0)  # the wrist is held


def test_the_figure_is_drawn(runs, tmp_path):
    from test.cli.test_plots import layout_problems

    _, consistent, naive = runs
    shown = []
    import vtm_dynamics.cli.plots as plots

    original = plots.save_figure_at

    def keep(plt, fig, path, source=None, notes=(), dpi=110):
        shown.append(fig)
        return original(plt, fig, path, source, notes, dpi)

    mp = pytest.MonkeyPatch()
    mp.setattr(plots, "save_figure_at", keep)
    try:
        figure(consistent, naive, str(tmp_path / "sec7.png"))
    finally:
        mp.undo()
    assert layout_problems(shown[0]) == []

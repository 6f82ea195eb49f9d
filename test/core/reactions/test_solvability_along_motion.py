"""Solvability along a motion (Wojtyra & Frączek 2013, Sect. 4.3-4.4): the paper's mobile robot driven by d(t)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from vtm_dynamics.core.reactions.absolute_coordinates import body_twists, constraint_matrix, load_absolute_model
from vtm_dynamics.core.reactions.solvability import SolvabilityError, unique_reactions
from vtm_dynamics.core.reactions.solvability_along_motion import (
    analyze_along,
    drive_kinematically,
    paper_steering_drive,
)
from vtm_dynamics.core.robot.urdf_extension import read_urdf_file

URDF = Path(__file__).resolve().parents[3] / "urdf"


@pytest.fixture(scope="module")
def robot():
    return load_absolute_model(read_urdf_file(str(URDF / "mobile_robot_knife_edges.urdf")), planar=True)


@pytest.fixture(scope="module")
def motion(robot):
    v0 = np.zeros(robot.pin_model.nv)
    v0[0] = 0.1  # the paper's eq. (39): every body moves at 0.1 m/s along x0
    drive = paper_steering_drive(0.01, 20.0)
    times, qs, vs = drive_kinematically(robot, pin.neutral(robot.pin_model), v0, {"H": drive}, 20.0, 0.5)
    return times, qs, vs, analyze_along(robot, times, qs, vs, drives={"H": drive})


def test_the_motion_satisfies_every_constraint_and_follows_the_drive(robot, motion):
    times, qs, vs, _ = motion
    drive = paper_steering_drive(0.01, 20.0)
    iq = robot.pin_model.joints[robot.pin_model.getJointId("H")].idx_q
    for t, q, v in zip(times, qs, vs):
        C = constraint_matrix(robot, q)
        nu = body_twists(robot, q, v)
        drive_row = next(pr.rows[0] for pr in C.pairs if pr.kind == "driving_constraint")
        others = np.delete(C.matrix @ nu, drive_row)
        assert np.max(np.abs(others)) < 1e-9  # knife edges and loops hold along the whole motion
        assert q[iq] == pytest.approx(drive(t), abs=1e-12)
        assert C.closure_residual < 1e-10


def test_the_robot_turns_right_then_left_and_ends_parallel_to_x(motion):
    # Sect. 4.1: "firstly turns right, then travels forward, and finally turns left and starts to move along a line
    # parallel to x0"; Fig. 3: about 2 m travelled along x at 0.1 m/s in the paper's run
    _, qs, _, _ = motion
    yaw = np.arctan2(qs[:, 3], qs[:, 2])
    assert yaw.min() < -0.1 and abs(yaw[-1]) < 0.02
    assert 1.8 < qs[-1, 0] < 2.2


def test_verdicts_along_the_motion_are_the_papers_at_every_sample(motion):
    _, _, _, report = motion
    # Sect. 4.4: B, C, W1-W4 non-unique during the whole simulation; A, D-H, the drive and W5 unique
    assert {s.redundancy for s in report.samples} == {2}
    assert all(set(s.unsolvable) == {"B", "C", "W1", "W2", "W3", "W4"} for s in report.samples)
    assert report.changes == ()


def test_fig4_quantities_unique_ones_are_numbers_the_others_never(motion):
    _, _, _, report = motion
    for pair, label in (("D", "Fx"), ("D", "Fy"), ("W5", "Fy")):
        _, values = report.series(pair, label)
        assert np.all(np.isfinite(values)) and np.max(np.abs(values)) > 1e-4  # unique and nonzero while steering
    for pair, label in (("B", "Fy"), ("W3", "Fy")):
        _, values = report.series(pair, label)
        assert np.all(np.isnan(values))  # Fig. 4 left: depends on how the redundancy is removed


def test_unique_components_do_not_depend_on_which_constraints_a_solver_deletes(robot, motion):
    # The paper's check (Sect. 4.4): delete p = 2 rows (its variants: C.Fy + W4, W1 + W4, W2 + W4), solve the
    # reduced, regular equations of motion, and compare: unique reactions must be the same in every variant.
    from vtm_dynamics.core.reactions.absolute_coordinates import absolute_dynamics

    times, qs, vs, report = motion
    i = 12
    q, v, t = qs[i], vs[i], times[i]
    C = constraint_matrix(robot, q)
    nu = body_twists(robot, q, v)
    h = 1e-6
    Cp = constraint_matrix(robot, pin.integrate(robot.pin_model, q, v * h)).matrix
    Cm = constraint_matrix(robot, pin.integrate(robot.pin_model, q, -v * h)).matrix
    gamma = -((Cp - Cm) / (2 * h)) @ nu
    drive = paper_steering_drive(0.01, 20.0)
    drive_row = next(pr.rows[0] for pr in C.pairs if pr.kind == "driving_constraint")
    gamma[drive_row] += (drive(t + 1e-3) - 2 * drive(t) + drive(t - 1e-3)) / 1e-6
    M, rhs = absolute_dynamics(robot, q, nu)
    rows = {(pr.name, lab): r for pr in C.pairs for r, lab in zip(pr.rows, pr.labels)}
    values = []
    for deleted in ((("C", "Fy"), ("W4", "Fy")), (("W1", "Fy"), ("W4", "Fy")), (("W2", "Fy"), ("W4", "Fy"))):
        keep = [r for r in range(C.matrix.shape[0]) if r not in {rows[d] for d in deleted}]
        A = C.matrix[keep]
        K = np.block([[M, -A.T], [A, np.zeros((len(keep), len(keep)))]])
        sol = np.linalg.solve(K, np.concatenate([rhs, gamma[keep]]))  # regular once the redundancy is gone
        lam = np.zeros(C.matrix.shape[0])
        lam[keep] = sol[M.shape[0]:]
        values.append({k: lam[r] for k, r in rows.items()})
    sample = report.samples[i]
    for pair, label in (("D", "Fx"), ("D", "Fy"), ("W5", "Fy"), ("B", "Fx"), ("A", "Fx")):
        expected = sample.component(pair, label)
        assert all(vals[(pair, label)] == pytest.approx(expected, rel=1e-6, abs=1e-12) for vals in values)
    spread = [vals[("W3", "Fy")] for vals in values]
    assert max(spread) - min(spread) > 1e-4  # W3's lateral force differs between the variants (Fig. 4 left)


def test_a_moving_drive_is_not_a_constraint_violation(robot, motion):
    _, qs, vs, _ = motion
    assert unique_reactions(robot, q=qs[10], v=vs[10]).pair("D").solvable
    bad = vs[10].copy()
    bad[1] += 0.05  # sideways slip of the platform: the knife edges forbid it
    with pytest.raises(SolvabilityError, match="v: the velocities violate the constraints"):
        unique_reactions(robot, q=qs[10], v=bad)


def test_bad_series_are_one_line(robot):
    q = pin.neutral(robot.pin_model)
    with pytest.raises(SolvabilityError, match="times: must be finite and strictly increasing"):
        analyze_along(robot, [0.0, 0.0], [q, q])
    with pytest.raises(SolvabilityError, match="max_samples"):
        analyze_along(robot, np.arange(5.0), [q] * 5, max_samples=4)
    with pytest.raises(SolvabilityError, match="drives: 'A' is not a joint with a driving constraint"):
        drive_kinematically(robot, q, np.zeros(robot.pin_model.nv), {"A": lambda t: 0.0}, 1.0, 0.5)

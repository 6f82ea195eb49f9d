"""The sweep finds the smallest distance along predicted stops within its resolution (against an independent
brute-force reference), and the sampling bound between E-stop instants is computed from the trajectory's exact
extremes and shrinks with the spacing."""

import numpy as np
import pytest

import stopsafe_scenarios as S
from stopsafe_reference import ReferenceSweep
from vtm_dynamics.core.robot.model import example_robot_urdf
from vtm_dynamics.core.robot.urdf_extension import read_urdf_file
from vtm_dynamics.core.stopsafe.broad_phase import scene_bodies
from vtm_dynamics.core.stopsafe.robot_geometry import example_robot_package_dir
from vtm_dynamics.core.stopsafe.sampling import (
    Instants, interval_maxima, refinement, sampling_bounds, states, uniform_instants,
)
from vtm_dynamics.core.stopsafe.stop_cases import predict_stops, stop_times
from vtm_dynamics.core.stopsafe.sweep import Sweeper, SweepSettings
from vtm_dynamics.core.stopsafe.trajectory import model_order


@pytest.fixture(scope="module")
def ur5_cell():
    robot, geometry, setup = S.ur5()
    scene = S.scene("ur5")
    geometry.set_self_pairs(scene.self_collision, scene.allowed_self_pairs)
    reference = ReferenceSweep(read_urdf_file(example_robot_urdf(S.UR5_URDF)), [example_robot_package_dir()], scene)
    return robot, geometry, setup, scene, reference


def test_sweep_clearances_are_within_their_resolution_of_a_dense_reference(ur5_cell):
    robot, geometry, setup, scene, reference = ur5_cell
    sweeper = Sweeper(geometry, scene_bodies(scene), SweepSettings(pose_tolerance=0.002))
    q = np.array([[-0.4, -1.3, 1.7, -1.97, -1.57, 0.0], [0.3, -1.2, 1.6, -1.9, -1.57, 0.3],
                  [0.0, -1.45, 1.35, -1.5, -1.57, 0.0]])
    v = np.array([[1.5, 0.0, 0.0, 0.0, 0.0, 0.0], [-1.0, -0.8, 1.0, 0.5, 0.0, 1.0], [0.0, 1.5, 1.8, 0.0, 0.0, 0.0]])
    preds = predict_stops(setup, q, v)
    swept = sweeper.sweep(preds)
    for c, p in zip(swept, preds):
        scene_ref, self_ref = reference.stop_clearances(p, per_interval=8)
        assert c.scene.value - c.scene.resolution - 1e-9 <= scene_ref <= c.scene.value + c.scene.resolution
        assert c.self.value - c.self.resolution - 1e-9 <= self_ref <= c.self.value + c.self.resolution
        assert c.scene.pair[1] in ("table", "wall", "floor") and c.scene.exact_calls > 0


def test_interval_maxima_are_the_exact_extremes_of_the_polynomials():
    traj = S.ur5_tour(4.0)
    t = np.linspace(traj.start, traj.end, 37)
    lo, hi = t[:-1], t[1:]
    for d in (1, 2):
        got = interval_maxima(traj, d, lo, hi)
        for i in range(len(lo)):
            grid = np.linspace(lo[i], hi[i], 4001)  # both one-sided values where the acceleration jumps
            dense = np.maximum(np.abs(traj.evaluate(grid, d)), np.abs(traj.evaluate(grid, d, "left"))).max(axis=0)
            assert np.all(got[i] >= dense - 1e-12) and np.all(got[i] - dense <= 1e-3 * np.maximum(dense, 1.0))


def test_the_sampling_bound_halves_with_the_spacing_and_refinement_meets_the_tolerance(ur5_cell):
    robot, geometry, setup, scene, _ = ur5_cell
    traj = S.ur5_pan(1.0, 1.0)
    order = model_order(robot, traj)
    sweeper = Sweeper(geometry, scene_bodies(scene))
    coarse = uniform_instants(traj, 10.0, 1000)
    fine = uniform_instants(traj, 20.0, 1000)
    T = np.full((len(fine), robot.nv), 0.1)
    e_coarse = sampling_bounds(traj, order, coarse, T[: len(coarse)], sweeper.weights).max(axis=1)
    e_fine = sampling_bounds(traj, order, fine, T, sweeper.weights).max(axis=1)
    assert e_coarse.max() == pytest.approx(2 * e_fine.max(), rel=0.15)
    new = refinement(coarse, e_coarse, 0.005, np.zeros(len(e_coarse), bool), 10_000)
    assert len(new) == int(np.sum(np.ceil(e_coarse / 0.005) - 1))
    merged = coarse.merged(new)
    e_merged = sampling_bounds(traj, order, merged, np.full((len(merged), robot.nv), 0.1), sweeper.weights)
    assert e_merged.max() <= 0.005 * 1.05  # the extremes move a little inside the shorter intervals


def test_linear_trajectories_are_sampled_on_both_sides_of_every_point(ur5):
    from vtm_dynamics.core.stopsafe.trajectory import planned_trajectory

    names = list(ur5.joint_names)
    traj = planned_trajectory(names, [0.0, 0.5, 1.0], [[0.0] * 6, [0.5] + [0.0] * 5, [0.5, 0.5] + [0.0] * 4])
    inst = uniform_instants(traj, 4.0, 100)
    at_point = inst.t == 0.5
    assert at_point.sum() == 2 and inst.left[at_point].tolist() == [True, False]
    q, v = states(traj, model_order(ur5, traj), inst)
    np.testing.assert_allclose(v[at_point][0, :2], [1.0, 0.0])
    np.testing.assert_allclose(v[at_point][1, :2], [0.0, 1.0])


def test_stop_times_take_the_horizon_for_a_stop_that_did_not_end(ur5_cell):
    robot, _, setup, _, _ = ur5_cell
    preds = predict_stops(setup, np.array([S.UR5_HOME]), np.array([[1.0, 0, 0, 0, 0, 0]]))[0]
    worst, joints = stop_times(preds)
    assert worst == pytest.approx(max(p.stop_time for p in preds)) and joints.shape == (6,)
    assert isinstance(Instants(np.zeros(1), np.zeros(1, bool)), Instants)

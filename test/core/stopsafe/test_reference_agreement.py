"""The check against an independent brute-force reference (bench/stopsafe_reference.py: Pinocchio's own geometry
pipeline, every pair's exact distance at dense poses of the stops, E-stop instants between the check's): on the
UR5 and the Panda in a cell with a table, a wall and a floor, the reference clearance at the check's instants lies
within the check's resolution, and at instants between them never below the certified clearance
(clearance - resolution - sampling bound). The full-size comparison with its table is in bench/bench_stopsafe.py;
this one checks every fourth instant to stay cheap."""

import numpy as np
import pytest

import stopsafe_scenarios as S
from stopsafe_reference import ReferenceSweep
from vtm_dynamics.core.robot.model import example_robot_urdf
from vtm_dynamics.core.robot.urdf_extension import read_urdf_file
from vtm_dynamics.core.stopsafe.check import CheckSettings, TrajectoryChecker
from vtm_dynamics.core.stopsafe.robot_geometry import example_robot_package_dir
from vtm_dynamics.core.stopsafe.sampling import Instants, SamplingSpec, states
from vtm_dynamics.core.stopsafe.stop_cases import predict_stops
from vtm_dynamics.core.stopsafe.trajectory import model_order

CASES = {
    "ur5": (lambda: S.ur5(step=0.01), lambda: S.ur5_pan(0.5, 0.6), S.UR5_URDF, None),
    "panda": (lambda: S.panda(), lambda: S.panda_pan(0.7, 0.7), S.PANDA_URDF, S.PANDA_FINGERS),
}


@pytest.mark.parametrize("name", ["ur5", "panda"])
def test_reference_sweep_agrees_within_the_stated_error(name):
    build, trajectory, urdf, fixed = CASES[name]
    robot, geometry, setup = build()
    scene = S.scene(name)
    traj = trajectory()
    settings = CheckSettings(sampling=SamplingSpec(tolerance=0.01))
    result = TrajectoryChecker(setup, geometry, scene, settings, None).check(traj)
    assert result.max_sampling_bound <= 0.01 + 1e-9 and result.suspect_intervals == 0
    reference = ReferenceSweep(read_urdf_file(example_robot_urdf(urdf)), [example_robot_package_dir()], scene, fixed)
    order = model_order(robot, traj)
    picked = result.samples[::4]
    inst = Instants(np.array([s.time for s in picked]), np.zeros(len(picked), bool))
    for s, preds in zip(picked, predict_stops(setup, *states(traj, order, inst))):
        ref_scene, ref_self = reference.stop_clearances(preds, per_interval=4)
        assert s.clearance - s.resolution - 1e-9 <= ref_scene <= s.clearance + s.resolution
        if np.isfinite(ref_self):
            assert s.self_clearance - s.self_resolution - 1e-9 <= ref_self <= s.self_clearance + s.self_resolution
    between = np.array([0.5 * (a.time + b.time) for a, b in zip(result.samples[:-1:4], result.samples[1::4])])
    inst = Instants(between, np.zeros(len(between), bool))
    times = result.times
    errors = []
    for t, preds in zip(between, predict_stops(setup, *states(traj, order, inst))):
        ref_scene, _ = reference.stop_clearances(preds, per_interval=4)
        i = int(np.searchsorted(times, t)) - 1
        a, b = result.samples[i], result.samples[i + 1]
        certified = min(a.clearance - a.resolution, b.clearance - b.resolution) - max(a.sampling_bound, b.sampling_bound)
        assert ref_scene >= certified - 1e-9
        errors.append(abs(ref_scene - a.clearance) / (a.sampling_bound + a.resolution))
    assert max(errors) <= 1.0  # the stated error covers the reference's difference from the neighbouring instant

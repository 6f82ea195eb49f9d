"""The trajectory check flags a motion whose predicted stop comes within 1 cm of an obstacle and passes one whose
stops stay 5 cm clear (while the planned path alone clears the margin in both); it reads joints by name, refuses
an empty scene, and stops on request or at its deadline. A stop that carries a joint past its position limit (the
model has no end stops) makes its E-stop instant unsafe however clear of the scene it stays."""

import time

import numpy as np
import pytest

import stopsafe_scenarios as S
from test.core.limit_case import elbow_towards_limit, reference_elbow_rest
from vtm_dynamics.core.stopsafe.broad_phase import scene_bodies
from vtm_dynamics.core.stopsafe.check import CheckSettings, TrajectoryChecker
from vtm_dynamics.core.stopsafe.sampling import SamplingSpec
from vtm_dynamics.core.stopsafe.scene import Scene, SceneError
from vtm_dynamics.core.stopsafe.stop_cases import CheckCancelled
from vtm_dynamics.core.stopsafe.sweep import Sweeper
from vtm_dynamics.core.stopsafe.trajectory import model_order, planned_trajectory

FAST = CheckSettings(sampling=SamplingSpec(tolerance=0.02))  # bound 2 cm between E-stop instants: a cheap check


@pytest.fixture(scope="module")
def down():
    """The UR5 forearm driven down towards a table fast; the lowest point its stops reach (a far table)."""
    robot, geometry, setup = S.ur5(step=0.01)
    traj = S.ur5_down(0.22)
    far = TrajectoryChecker(setup, geometry, S.table_only(-0.5), CheckSettings(sampling=SamplingSpec(rate=100.0))).check(traj)
    lowest = -0.5 + min(s.clearance for s in far.samples)
    return robot, geometry, setup, traj, lowest


def path_clearance(geometry, scene, robot, traj) -> float:
    """The planned path's own smallest distance to the scene (no stop), on a fine grid of the trajectory."""
    sweeper = Sweeper(geometry, scene_bodies(scene))
    order = model_order(robot, traj)
    Q = order.columns(traj.evaluate(np.linspace(traj.start, traj.end, 401)))
    Rp, tp = geometry.part_placements(*geometry.joint_poses(Q))
    return min(sweeper.exact(s, Rp[k], tp[k]) for k in range(len(Q)) for s in range(sweeper.n_slots))


def test_a_stop_within_1_cm_is_flagged_one_5_cm_clear_is_not(down):
    robot, geometry, setup, traj, lowest = down
    near, clear = S.table_only(lowest - 0.01), S.table_only(lowest - 0.05)
    # the planned path alone stays clear of the 2 cm margin even with the near table: only the stops come close
    assert path_clearance(geometry, near, robot, traj) > FAST.margin
    flagged = TrajectoryChecker(setup, geometry, near, FAST, "tool0").check(traj)
    assert not flagged.safe and flagged.first_unsafe is not None
    assert flagged.first_unsafe.pair == ("wrist_3_link", "table") and "within" in flagged.first_unsafe.reason
    assert min(s.clearance for s in flagged.samples) <= 0.01 + 1e-9  # (the refined instants may find lower)
    passed = TrajectoryChecker(setup, geometry, clear, FAST, "tool0").check(traj)
    assert passed.safe and passed.first_unsafe is None
    assert 0.045 <= min(s.clearance for s in passed.samples) <= 0.05 + 1e-9
    assert passed.min_certified_clearance >= FAST.margin and passed.max_sampling_bound <= 0.02 + 1e-9
    assert passed.worst is not None and passed.worst.pair[1] == "table"


def test_joints_are_read_by_name_in_any_order(down):
    robot, geometry, setup, traj, lowest = down
    order = np.arange(6)[::-1]
    names = [traj.joint_names[k] for k in order]
    shuffled = planned_trajectory(names, traj.time_from_start, traj.positions[:, order], traj.velocities[:, order])
    scene = S.table_only(lowest - 0.05)
    settings = CheckSettings(sampling=SamplingSpec(rate=40.0))
    a = TrajectoryChecker(setup, geometry, scene, settings).check(traj)
    b = TrajectoryChecker(setup, geometry, scene, settings).check(shuffled)
    np.testing.assert_allclose(a.column("clearance"), b.column("clearance"), rtol=0, atol=1e-12)


def test_an_empty_scene_is_refused(down):
    robot, geometry, setup, traj, _ = down
    with pytest.raises(SceneError, match="scene: empty"):
        TrajectoryChecker(setup, geometry, Scene(self_collision=False))


def test_cancel_and_deadline_stop_the_check_between_batches(down):
    robot, geometry, setup, traj, lowest = down
    checker = TrajectoryChecker(setup, geometry, S.table_only(lowest - 0.05), CheckSettings(batch=4))
    calls = []
    with pytest.raises(CheckCancelled, match="cancelled"):
        checker.check(traj, cancel=lambda: calls.append(1) or len(calls) > 3)
    with pytest.raises(CheckCancelled, match="deadline"):
        checker.check(traj, deadline=time.monotonic() - 1.0)


def test_an_instant_whose_stop_goes_past_a_joint_limit_is_unsafe_and_names_the_joint_and_how_far(down):
    robot, geometry, setup, _, _ = down
    q_end, v, limit = elbow_towards_limit(robot)  # the elbow 10 mrad below its upper limit at 3 rad/s at the end
    q_start = q_end.copy()
    q_start[robot.joint_names.index("elbow_joint")] -= 0.3  # 0.1 s earlier at the same speed (a straight line)
    rest_from_start = reference_elbow_rest(robot, q_start, v)
    rest_from_end = reference_elbow_rest(robot, q_end, v)
    assert rest_from_start < limit - 0.1 and rest_from_end > limit + 0.1  # the independent integration
    traj = planned_trajectory(robot.joint_names, [0.0, 0.1], [q_start, q_end], [v, v])
    scene = S.table_only(-0.5)  # half a metre below the base: every stop stays far clear of it
    result = TrajectoryChecker(setup, geometry, scene, CheckSettings(sampling=SamplingSpec(rate=50.0))).check(traj)
    first, last = result.samples[0], result.samples[-1]
    assert min(s.certified_clearance for s in result.samples) > 0.3  # the scene alone would pass every instant
    assert not result.safe and not last.safe and last.stopped  # at rest, but beyond where the end stop is
    assert first.safe and first.limit_crossings == () and first.reason == ""
    (line,) = last.limit_crossings
    assert line.startswith("elbow_joint reaches ") and line.endswith(f"past its upper limit {limit:.4f} rad")
    reached = float(line.split()[2])
    assert abs(reached - rest_from_end) < 0.005  # how far: the reference's rest angle, within 5 mrad
    assert "past a joint limit: elbow_joint reaches" in last.reason and "cat 0" in last.reason
    assert result.first_unsafe is not None and result.first_unsafe.limit_crossings

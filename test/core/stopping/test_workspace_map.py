"""Map sampling: states depend on (inputs, chunk) only, stay inside the joint limits, the cell box and the speed
limits; the reach check refuses a box nobody can reach; a stop past a joint limit is flagged, not a distance."""

from __future__ import annotations

import os

import numpy as np
import pinocchio as pin
import pytest

from core_testdata import REPO
from vtm_dynamics.core.estop import predict_stop
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.robot.catalogue import UR5
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.estop.generated_dynamics import GeneratedStages
from vtm_dynamics.core.stopping.workspace_map import (
    MapInputError, MapSpec, check_map_spec, chunk_states, evaluate_chunk, summarize,
    dynamics_used, prepared_dynamics,
)


@pytest.fixture(scope="module")
def ur5():
    return RobotModel.from_urdf_file(UR5.urdf_path())


BOX = ((0.2, -0.4, 0.0), (0.6, 0.4, 0.5))


def spec(**kw) -> MapSpec:
    return MapSpec(**{"n_states": 50, "chunk_size": 20, "tcp_frame": "tool0", "payload_frame": "tool0",
                      "max_speeds": (3.0,) * 6, "speed_fraction": (0.2, 0.8), **kw})


def test_a_chunk_is_the_same_whenever_it_is_drawn_and_differs_from_its_neighbours(ur5):
    a, b = chunk_states(ur5, spec(), 1), chunk_states(ur5, spec(), 1)
    chunk_states(ur5, spec(), 0)  # drawing another chunk in between changes nothing
    c = chunk_states(ur5, spec(), 1)
    assert np.array_equal(a.q, b.q) and np.array_equal(a.v, c.v) and np.array_equal(a.payload, c.payload)
    assert not np.array_equal(a.q, chunk_states(ur5, spec(), 0).q)
    assert list(a.index) == list(range(20, 40)) and len(chunk_states(ur5, spec(), 2).index) == 10


def test_states_respect_limits_speed_fraction_and_the_cell_box(ur5):
    batch = chunk_states(ur5, spec(cell_box=BOX), 0)
    lo, hi = ur5.model.lowerPositionLimit, ur5.model.upperPositionLimit
    assert np.all(batch.q >= lo) and np.all(batch.q <= hi)
    ratio = np.max(np.abs(batch.v) / 3.0, axis=1)
    assert np.allclose(ratio, batch.speed_fraction) and np.all((ratio >= 0.2) & (ratio <= 0.8))
    data = ur5.model.createData()
    for q, tcp in zip(batch.q, batch.tcp_start):  # independent forward kinematics
        pin.framesForwardKinematics(ur5.model, data, q)
        p = data.oMf[ur5.model.getFrameId("tool0")].translation
        assert np.allclose(p, tcp) and np.all(p >= BOX[0]) and np.all(p <= BOX[1])


@pytest.mark.parametrize("kw, words", [
    ({"cell_box": ((3.0, 3.0, 3.0), (4.0, 4.0, 4.0))}, "cell_box: outside the reach"),
    ({"cell_box": ((0.5, 0.0, 0.0), (0.4, 1.0, 1.0))}, "cell_box: expected"),
    ({"max_speeds": (3.0, 3.0, 9.0, 3.0, 3.0, 3.0)}, "max_speeds[elbow_joint]: 9 rad/s is above"),
    ({"speed_fraction": (0.5, 1.2)}, "speed_fraction: expected"),
    ({"payloads": (-1.0,)}, "payloads: expected masses 0 .. 10000 kg"),
    # a mistyped mass failed in the workers with "mass matrix not positive definite" (status 1), a factor of 1e6 ran
    ({"payloads": (0.0, 1e30)}, "payloads: expected masses 0 .. 10000 kg"),
    ({"torque_factor": (0.9, 1e6)}, "torque_factor: expected 0.0 <= min <= max <= 100.0"),
    ({"delay_factor": (1.0, 1e6)}, "delay_factor: expected 0.0 <= min <= max <= 100.0"),
    ({"n_states": 0}, "n_states: expected"),
    ({"category1_torque_limits": (150.0,) * 5}, "category1_torque_limits: 5 values for 6 joints"),
    ({"category1_torque_limits": (150.0, -1.0, 150.0, 28.0, 28.0, 28.0)},
     "category1_torque_limits: '-1.0' is not a finite torque >= 0 N m"),
    ({"category1_torque_limits": "lots"}, "category1_torque_limits: 'lots' is neither 'urdf' nor numbers"),
])
def test_bad_maps_are_refused_in_one_line(ur5, kw, words):
    with pytest.raises(MapInputError) as err:
        check_map_spec(ur5, spec(**kw))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_grid_enumerates_every_point_of_the_joint_ranges_once(ur5):
    grid_spec = spec(n_states=12, chunk_size=5, grid=(3, 2, 2, 1, 1, 1), q_low=(-1.0, -2.0, 0.0, -1.0, -1.0, -1.0),
                     q_high=(1.0, -1.0, 2.0, 1.0, 1.0, 1.0))
    q = np.concatenate([chunk_states(ur5, grid_spec, k).q for k in range(grid_spec.n_chunks)])
    expected = [(a, b, c, 0.0, 0.0, 0.0) for a in (-1.0, 0.0, 1.0) for b in (-2.0, -1.0) for c in (0.0, 2.0)]
    assert [tuple(row) for row in q] == expected
    with pytest.raises(MapInputError, match=r"^grid: 3 x 2 x 2 x 1 x 1 x 1 points, but n_states is 10$"):
        check_map_spec(ur5, spec(n_states=10, grid=(3, 2, 2, 1, 1, 1)))


def _rows(times: list[float]) -> dict[str, np.ndarray]:
    t = np.array(times)
    return {"state": np.arange(t.size), "stop_time_s": t, "tcp_straight_distance_m": np.linspace(0.01, 0.1, t.size),
            "stopped": np.isfinite(t), "within_limits": np.ones(t.size, bool)}


@pytest.mark.parametrize("times", [
    [0.1, 0.2, 0.3, 0.4, 0.5, np.inf, np.inf, np.inf, np.inf, np.inf],  # half did not stop: p50 reaches them
    [0.05 * k for k in range(1, 100)] + [np.inf],  # one in a hundred did not stop: p99 and the max reach it
    [0.3, 0.1, 0.2, 0.4],  # every state stopped: numpy's percentiles
])
def test_a_state_that_did_not_stop_counts_as_an_infinite_stop_time_in_the_percentiles(times):
    s = summarize(_rows(times))
    # independent: the not-stopped states as a time larger than any other, numpy's linear percentiles over all rows
    big = 1e300
    ref = np.percentile(np.where(np.isfinite(times), times, big), (50, 90, 99, 100))
    longest = max(t for t in times if np.isfinite(t))
    expected = [np.inf if x > longest else x for x in ref]  # interpolated towards a state that did not stop
    assert s.time_percentiles == pytest.approx(expected, rel=1e-12)
    assert s.worst_time == max(times) and s.stopped == int(np.sum(np.isfinite(times)))



def test_a_state_that_did_not_stop_makes_the_worst_distance_unbounded_not_its_distance_at_the_horizon():
    # state 3 was still moving when the horizon ended, 0.05 m from its start: its stopping distance is not known,
    # only that it exceeds 0.05 m; it may not pass for a shorter stop than state 1's 0.10 m
    rows = {"state": np.arange(5), "tcp_straight_distance_m": np.array([0.02, 0.10, 0.04, 0.05, 0.03]),
            "stop_time_s": np.array([0.1, 0.3, 0.2, np.inf, 0.15]), "stopped": np.array([1, 1, 1, 0, 1], bool),
            "within_limits": np.ones(5, bool)}
    s = summarize(rows)
    assert s.worst_distance == np.inf and s.worst_distance_state == 3
    # numpy's linear percentiles over the five rows with the unknown distance larger than any other
    ranked = np.array([0.02, 0.03, 0.04, 0.10, 1e300])
    expected = [np.inf if x > 0.10 else x for x in np.percentile(ranked, (50, 90, 99, 100))]
    assert s.distance_percentiles == pytest.approx(expected, rel=1e-12)
    assert s.distance_percentiles[0] == pytest.approx(0.04, rel=1e-12)


def test_the_worst_distance_is_the_largest_row_when_every_state_stopped():
    d = np.array([0.02, 0.10, 0.04, 0.05, 0.03])
    s = summarize({"state": np.arange(10, 15), "tcp_straight_distance_m": d, "stop_time_s": np.full(5, 0.2),
                   "stopped": np.ones(5, bool), "within_limits": np.ones(5, bool)})
    assert (s.worst_distance, s.worst_distance_state) == (0.10, 11)
    assert s.distance_percentiles == pytest.approx(np.percentile(d, (50, 90, 99, 100)), rel=1e-12)


def test_a_state_whose_stop_goes_past_a_joint_limit_is_flagged_and_counts_like_one_that_did_not_stop(ur5):
    # state 0: the elbow 10 mrad below its upper limit at 3 rad/s (the dynamics have no end stop, so its predicted
    # stop runs past the limit); state 1: the same speed far from the limit
    brakes = brakes_from_config(ur5, os.path.join(REPO, "config", "ur5_brakes.yaml"))
    elbow = ur5.joint_names.index("elbow_joint")
    limit = float(ur5.model.upperPositionLimit[elbow])
    v = (0.0, 0.0, 3.0, 0.0, 0.0, 0.0)
    states = (((0.0, -1.5, limit - 0.01, -1.0, 0.5, 0.0), v), ((0.0, -1.5, 0.5, -1.0, 0.5, 0.0), v))
    rows = evaluate_chunk(ur5, brakes, spec(n_states=2, chunk_size=2, states=states, payloads=(0.0,),
                                            torque_factor=(1.0, 1.0), delay_factor=(1.0, 1.0)), 0)
    # independent: the elbow's largest position along each state's own prediction against the URDF limit
    reached = [float(np.max(predict_stop(ur5, brakes, q, v).q[:, elbow])) for q, _ in states]
    assert reached[0] > limit > reached[1]
    assert rows["within_limits"].tolist() == [False, True] and rows["stopped"].tolist() == [True, True]
    s = summarize(rows)
    assert (s.count, s.stopped, s.past_limits) == (2, 2, 1)
    assert (s.worst_distance, s.worst_distance_state) == (np.inf, 0)
    assert (s.worst_time, s.worst_time_state) == (np.inf, 0)
    assert s.distance_percentiles[-1] == np.inf
    assert s.distance_percentiles[0] == np.inf  # p50 of two rows interpolates towards the unknown one


def test_the_map_says_which_dynamics_its_stops_use(monkeypatch):
    """Generated M and h where the generator covers the model, else Pinocchio with the reason (for the summary). (The
    run's cache of generated code, conftest: a UR5's first generation and compilation takes about 20 s.)"""
    from joint_type_models import on_track, ur5_text

    monkeypatch.delenv("VTM_GENERATED_DYNAMICS", raising=False)
    spec = MapSpec(n_states=4, chunk_size=4, tcp_frame="tool0", payload_frame="tool0", payloads=(0.0, 5.0))
    ur5 = RobotModel.from_urdf(ur5_text())
    assert dynamics_used(ur5, spec) == "generated"
    track = RobotModel.from_urdf(on_track(ur5_text()))  # a prismatic joint from the world: ADAM's trace fails
    assert dynamics_used(track, spec).startswith("Pinocchio (generation failed")
    monkeypatch.setenv("VTM_GENERATED_DYNAMICS", "off")
    assert dynamics_used(ur5, spec) == "Pinocchio (VTM_GENERATED_DYNAMICS=off)"


def test_the_tool_makes_the_generated_code_and_its_event_loop_before_the_workers_start(monkeypatch):
    from joint_type_models import ur5_text

    monkeypatch.delenv("VTM_GENERATED_DYNAMICS", raising=False)
    prepared = []
    monkeypatch.setattr(GeneratedStages, "prepare_loop", lambda self: prepared.append(self.robot.name))
    spec = MapSpec(n_states=4, chunk_size=4, tcp_frame="tool0", payload_frame="tool0", payloads=(0.0, 5.0))
    assert prepared_dynamics(RobotModel.from_urdf(ur5_text()), spec) == "generated"
    assert prepared == ["ur5"]
    monkeypatch.setenv("VTM_GENERATED_DYNAMICS", "off")
    assert prepared_dynamics(RobotModel.from_urdf(ur5_text()), spec).startswith("Pinocchio")
    assert prepared == ["ur5"]  # nothing to prepare for Pinocchio's M and h

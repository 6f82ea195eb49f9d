"""The other views: a stopping map (its states where the TCP was, coloured by distance, the cell box, the worst
states replayed from their own inputs), a solvability report (pairs marked by verdict) and the building blocks of
a motion through a scene (obstacles, closest approach, a stop from one instant)."""

from __future__ import annotations

import os

import numpy as np
import pinocchio as pin
import pytest

from test.ros_helpers import REPO_ROOT
from test.views.views_testdata import ur5_geometry, ur5_stop
from vtm_dynamics.views import palette
from vtm_dynamics.views.scene import Box, Cylinder, Sphere

BOX = ((0.2, -0.5, 0.0), (0.8, 0.5, 0.6))


@pytest.fixture(scope="module")
def ur5_map():
    from vtm_dynamics.cli.stopping_robots import load_robot
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.stopping.workspace_map import MapSpec, evaluate_chunk

    loaded = load_robot("ur5")
    brakes = brakes_from_config(loaded.robot, loaded.brake_config)
    spec = MapSpec(n_states=8, tcp_frame="tool0", payload_frame="tool0", chunk_size=8, seed=3, cell_box=BOX,
                   payloads=(0.0, 5.0))
    return loaded.robot, brakes, spec, evaluate_chunk(loaded.robot, brakes, spec, 0)


def test_a_worst_map_state_replayed_from_its_inputs_stops_as_the_map_says(ur5_map):
    from vtm_dynamics.views.map_view import replay_row, worst_rows

    robot, brakes, spec, cols = ur5_map
    rows = worst_rows(cols, 3)
    d = cols["tcp_straight_distance_m"]
    assert list(d[rows]) == sorted(d, reverse=True)[:3]
    for row in rows:  # payload, brake factors and category as the row records them: the same stop again
        p = replay_row(robot, brakes, spec, cols, row)
        assert p.tcp_straight_distance == pytest.approx(d[row], rel=1e-9)
        assert p.stop_time == pytest.approx(cols["stop_time_s"][row], rel=1e-9)


def test_the_map_view_shows_every_state_the_cell_box_and_animates_the_worst(ur5_map):
    from vtm_dynamics.views.map_view import map_scene, replay_row, worst_rows

    robot, brakes, spec, cols = ur5_map
    worst = [(r, replay_row(robot, brakes, spec, cols, r)) for r in worst_rows(cols, 2)]
    scene = map_scene(robot, cols, cell_box=BOX, worst=worst, geometry=ur5_geometry())
    cloud = scene.clouds[0]
    start = np.column_stack([cols["tcp_x_m"], cols["tcp_y_m"], cols["tcp_z_m"]])
    np.testing.assert_allclose(cloud.points, start)
    assert np.all(start >= np.array(BOX[0])) and np.all(start <= np.array(BOX[1]))  # sampled in the box
    k = int(np.argmax(cols["tcp_straight_distance_m"]))
    np.testing.assert_allclose(cloud.colors[k], palette.ramp([1.0])[0])  # the farthest is the reddest
    box = next(s for s in scene.shapes if s.name == "cell_box")
    np.testing.assert_allclose(box.size, (0.6, 1.0, 0.6))
    np.testing.assert_allclose(box.pose[:3, 3], (0.5, 0.0, 0.3))
    moving = scene.robots[0]
    np.testing.assert_allclose(moving.times, worst[0][1].t)
    assert [lb.text.split(":")[0] for lb in scene.labels] == ["#1", "#2"]
    thin = map_scene(robot, cols, cell_box=BOX, worst=worst, geometry=ur5_geometry(), max_points=3)
    assert len(thin.clouds[0].points) == 3
    assert any(np.allclose(p, start[worst[1][0]]) for p in thin.clouds[0].points)  # the worst are kept


def test_the_solvability_view_marks_each_pair_by_its_verdict():
    from vtm_dynamics.core.reactions.model_limits import load_for_analysis
    from vtm_dynamics.core.reactions.pair_frames import pair_placements
    from vtm_dynamics.core.reactions.solvability import analyze_solvability
    from vtm_dynamics.core.robot.urdf_extension import read_urdf_file
    from vtm_dynamics.views.robot_geometry import robot_geometry
    from vtm_dynamics.views.solvability_view import solvability_scene

    text = read_urdf_file(os.path.join(REPO_ROOT, "urdf", "parallelogram_4bar.urdf"))
    report = analyze_solvability(text)
    model = load_for_analysis(text, False, 50)
    q = np.asarray(report.q) if report.q is not None else pin.neutral(model.pin_model)
    placements = pair_placements(model, q, report)
    scene = solvability_scene(model.pin_model, robot_geometry(model.pin_model, text), q, report, placements)
    spheres = [s for s in scene.shapes if s.name.startswith("pair_") and s.name.count("_") == 1]
    assert len(spheres) == len(report.pairs) == 5
    for pair, sphere, label in zip(report.pairs, spheres, scene.labels):
        unique_parts = bool(pair.determined_directions)
        expected = palette.SOLVABLE if pair.solvable else (palette.PARTLY_SOLVABLE if unique_parts else
                                                           palette.UNSOLVABLE)
        assert sphere.color == expected and label.text.startswith(pair.name)
        assert ("not unique" in label.text) == (not pair.solvable)
    arrows = [s for s in scene.shapes if "_force_" in s.name or "_moment_" in s.name]
    assert arrows and all(not report.pairs[int(a.name.split("_")[1])].solvable for a in arrows)
    assert "degree of redundancy p = 3" in scene.info[0] and scene.duration == 0


def test_the_clearance_building_blocks_show_the_scene_the_closest_approach_and_a_stop():
    from vtm_dynamics.views.clearance_view import ClosestApproach, clearance_scene

    robot, p, _ = ur5_stop()
    t = np.linspace(0.0, 1.0, 11)
    qs = p.q[0] + np.outer(t, np.full(robot.nv, 0.2))
    table = Box("table", (1.0, 1.0, 0.1), np.eye(4), palette.OBSTACLE)
    pillar = Cylinder("pillar", 0.05, 1.0, np.eye(4), palette.OBSTACLE)
    ball = Sphere("ball", 0.1, (0.5, 0.5, 0.5), palette.OBSTACLE)
    closest = ClosestApproach(0.4, 0.0123, (0.1, 0.2, 0.3), (0.1, 0.2, 0.3123), "wrist_3_link", "ball")
    scene = clearance_scene(robot, t, qs, (table, pillar, ball), closest=closest, stop=(0.4, p), tcp_frame="tool0",
                            geometry=ur5_geometry())
    segment = next(ln for ln in scene.lines if ln.name == "closest")
    np.testing.assert_allclose(segment.points, [closest.robot_point, closest.scene_point])
    assert "12.3 mm at t = 0.400 s" in scene.labels[0].text and scene.events[0].time == 0.4
    assert {"table", "pillar", "ball"} <= {s.name for s in scene.shapes}
    rest = next(layer for layer in scene.robots if layer.name == "stop_rest")
    np.testing.assert_allclose(rest.poses[0], next(r for r in ur5_stop_scene_rest(p)).poses[0], atol=1e-12)
    assert scene.duration == 1.0 and len(scene.robots[0].times) == 11


def ur5_stop_scene_rest(p):
    from vtm_dynamics.views.stop_view import stop_scene

    robot = ur5_stop()[0]
    return [layer for layer in stop_scene(robot, p, geometry=ur5_geometry()).robots if layer.name == "rest"]

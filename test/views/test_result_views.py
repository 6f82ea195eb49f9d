"""The other views: a stopping map (its states where the TCP was, coloured by distance, the cell box, the worst
states replayed from their own inputs), a solvability report (pairs marked by verdict) and a stop-safe trajectory
check (the planned motion through the states the check stopped from, the worst stop, the closest approach, every
instant's verdict on the timeline, the scene as its file says)."""

from __future__ import annotations

import base64
import os
import zlib

import numpy as np
import pinocchio as pin
import pytest

from test.ros_helpers import REPO_ROOT
from test.views.views_testdata import CHECK_CELL, ur5_check, ur5_geometry
from vtm_dynamics.views import palette
from vtm_dynamics.views.baked_meshes import unbaked
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
    from vtm_dynamics.views.map_sample import columns_reader, sample_map
    from vtm_dynamics.views.map_view import map_scene, replay_worst

    robot, brakes, spec, cols = ur5_map
    sample = sample_map(columns_reader(cols), 2)
    worst = replay_worst(robot, brakes, spec, sample)
    scene = map_scene(robot, sample, cell_box=BOX, worst=worst, geometry=ur5_geometry())
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
    np.testing.assert_allclose(moving.times, worst[0].t)
    assert [lb.text.split(":")[0] for lb in scene.labels] == ["#1", "#2"]
    second = sample.worst_rows[1]
    assert worst[1].tcp_straight_distance == pytest.approx(cols["tcp_straight_distance_m"][second], rel=1e-9)
    thin = sample_map(columns_reader(cols), 2, max_points=3)
    assert len(thin.start) == 3
    assert any(np.allclose(p, start[second]) for p in thin.start)  # the worst are kept


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


@pytest.fixture(scope="module")
def check_view():
    from vtm_dynamics.views.clearance_view import trajectory_check_scene
    from vtm_dynamics.views.robot_geometry import robot_geometry

    robot, trajectory, cell, result, paths = ur5_check()
    geometry = robot_geometry(robot.model, robot.urdf_text)
    return robot, geometry, result, trajectory_check_scene(robot, trajectory, cell, result, paths, geometry=geometry,
                                                           tcp_frame="tool0")


def _link_positions(robot, geometry, q) -> np.ndarray:
    """World positions [m] of the drawn links at ``q``, by Pinocchio's forward kinematics."""
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, np.asarray(q, dtype=float))
    return np.array([data.oMf[link.frame_id].translation for link in geometry.links])


def test_the_check_view_replays_the_checked_states_and_the_worst_stop(check_view):
    robot, geometry, result, scene = check_view
    layers = {layer.name: layer for layer in scene.robots}
    assert list(layers) == ["robot", "estop", "stop", "stop_rest"]
    plan = layers["robot"]
    for s in result.samples:  # the planned motion passes through every state the check stopped from
        k = int(np.flatnonzero(plan.times == s.time)[0])
        np.testing.assert_allclose(plan.poses[k, :, :3], _link_positions(robot, geometry, s.q), atol=1e-9)
    worst = result.worst
    p = worst.predictions[worst.case]
    stop = layers["stop"]
    assert stop.appears and not plan.appears  # not there before the E-stop fires
    assert stop.times[0] == worst.sample.time and stop.times[-1] == pytest.approx(worst.sample.time + p.t[-1])
    np.testing.assert_allclose(stop.poses[0, :, :3], _link_positions(robot, geometry, worst.sample.q), atol=1e-9)
    np.testing.assert_allclose(layers["estop"].poses[0], stop.poses[0])
    np.testing.assert_allclose(layers["stop_rest"].poses[0, :, :3], _link_positions(robot, geometry, p.q_final),
                               atol=1e-9)
    at = int(np.flatnonzero(stop.times == worst.sample.time + worst.stop_instant)[0])  # the closest instant
    np.testing.assert_allclose(stop.poses[at, :, :3], _link_positions(robot, geometry, worst.q_at), atol=1e-9)


def test_the_check_view_marks_the_closest_approach_and_every_instants_verdict(check_view):
    robot, geometry, result, scene = check_view
    worst = result.worst
    segment = next(ln for ln in scene.lines if ln.name == "closest")
    np.testing.assert_allclose(segment.points, worst.points)
    label = next(lb for lb in scene.labels if lb.color == palette.CLOSEST)
    assert label.text == f"{worst.pair[0]} - {worst.pair[1]}: {1e3 * worst.sample.clearance:.1f} mm"
    kinds = {e.kind: e.time for e in scene.events if e.kind in ("estop", "closest", "unsafe")}
    assert kinds == {"estop": worst.sample.time, "closest": pytest.approx(worst.sample.time + worst.stop_instant),
                     "unsafe": result.first_unsafe.time}
    p = worst.predictions[worst.case]  # and the stop's own events after the E-stop instant
    assert [e.time for e in scene.events if e.kind in ("engage", "stick", "slip", "lock", "release")] == \
        pytest.approx([worst.sample.time + e.time for e in p.events if e.time > 0])
    assert not result.safe and any(s.safe for s in result.samples)  # both verdicts are on the timeline
    spans = scene.spans
    assert spans[0].start == 0.0 and spans[-1].end == 0.5
    assert all(a.end == pytest.approx(b.start) for a, b in zip(spans[:-1], spans[1:]))  # no gap, no overlap
    for s in result.samples:
        span = next(sp for sp in spans if sp.start <= s.time <= sp.end)
        assert span.color == (palette.SAFE if s.safe else palette.UNSAFE), s.time
    assert any(f"UNSAFE from t = {result.first_unsafe.time:.3f} s" in line for line in scene.info)


def test_a_check_that_stopped_early_marks_no_stretch_safe(check_view):
    """A check that returned at its first unsafe instants (``complete`` False, as inside the speed-scaling search)
    has not vouched for the instants between and after them: only its unsafe runs are on the timeline."""
    import dataclasses

    from vtm_dynamics.views.clearance_view import sample_spans

    _, _, result, _ = check_view
    early = dataclasses.replace(result, complete=False, safe=False)
    spans = sample_spans(early, 0.0, 0.5)
    assert spans and spans == [sp for sp in sample_spans(result, 0.0, 0.5) if sp.color == palette.UNSAFE]
    assert any(sp.color == palette.SAFE for sp in sample_spans(result, 0.0, 0.5))  # the complete check has some


def test_the_check_view_states_the_speed_scaling_and_whether_its_recheck_passed(check_view):
    import dataclasses

    from vtm_dynamics.core.stopsafe.results import SpeedScaling
    from vtm_dynamics.views.clearance_view import trajectory_check_scene

    robot, geometry, result, plain = check_view
    assert not any("speed scaling" in line for line in plain.info)
    _, trajectory, cell, _, paths = ur5_check()
    for recheck, verdict in ((dataclasses.replace(result, safe=True), "passes"), (result, "FAILS")):
        scaling = SpeedScaling(0.625, 1.0, 0.01, (), True, recheck)
        scene = trajectory_check_scene(robot, trajectory, cell, result, paths, geometry=geometry, scaling=scaling)
        assert f"largest safe speed scaling: 0.625 (re-check at it {verdict})" in " ".join(scene.info)


def test_the_check_view_draws_the_scene_file_as_written(check_view):
    """Against the scene file's mapping itself (not the check's parsed scene)."""
    from vtm_dynamics.views.scene import Mesh
    from vtm_dynamics.views.web_page import scene_payload

    _, _, _, scene = check_view
    shapes = {s.name: s for s in scene.shapes}
    table, pillar, cone, ball, jig = (shapes[f"obstacle_{k}"] for k in range(5))
    assert isinstance(table, Box) and table.size == (0.5, 0.9, 0.04)
    np.testing.assert_allclose(table.pose[:3, 3], (0.65, 0.0, 0.035))
    assert isinstance(pillar, Cylinder) and (pillar.length, pillar.radius, pillar.top_radius) == (0.8, 0.05, None)
    c, s = np.cos(np.pi / 4), np.sin(np.pi / 4)  # the pillar's quaternion turns it by 45 degrees about z
    np.testing.assert_allclose(pillar.pose[:3, :3], [[c, -s, 0], [s, c, 0], [0, 0, 1]], atol=1e-6)
    assert isinstance(cone, Cylinder) and (cone.length, cone.radius, cone.top_radius) == (0.2, 0.06, 0.0)
    assert isinstance(ball, Sphere) and ball.radius == 0.06 and ball.center == (0.3, 0.6, 0.01)
    assert isinstance(jig, Mesh) and jig.triangles.tolist() == CHECK_CELL["scene"]["obstacles"][4]["mesh"]["triangles"]
    floor = shapes["floor"]
    assert floor.pose[2, 3] + 0.5 * floor.size[2] == pytest.approx(-0.1)  # its top at the floor's height
    assert sorted(lb.text for lb in scene.labels if lb.color == palette.OBSTACLE_TEXT) == \
        ["ball", "cone", "jig", "pillar", "table"]
    payload, blocks = scene_payload(scene)
    mesh = next(s for s in payload["shapes"] if s["kind"] == "mesh")
    element, encoding, text = blocks[mesh["mesh"]]
    assert encoding == "deflate" and payload["meshes"][mesh["mesh"]]["format"] == "vtm"  # baked
    drawn = unbaked(zlib.decompress(base64.b64decode(text)))
    written = CHECK_CELL["scene"]["obstacles"][4]["mesh"]
    corners = np.asarray(written["vertices"], dtype=float)[np.asarray(written["triangles"])]
    step = np.ptp(np.asarray(written["vertices"], dtype=float), axis=0).max() / 65535
    np.testing.assert_allclose(drawn.vertices[drawn.triangles], corners, atol=step)  # the file's triangles
    obj = scene_payload(scene, bake=False)[1][mesh["mesh"]][2].decode()
    assert obj.count("v ") == 4 and obj.count("f ") == 4 and "f 2 3 4" in obj  # as OBJ text: 1-based faces


def test_a_mesh_with_a_face_outside_its_vertices_is_refused_in_one_line():
    from vtm_dynamics.views.scene import Mesh, Scene, SceneError, check_scene

    bad = Mesh("jig", np.zeros((3, 3)), np.array([[0, 1, 3]]), np.eye(4), palette.OBSTACLE)
    with pytest.raises(SceneError, match=r"^shapes.jig.triangles: expected vertex indices 0..2$"):
        check_scene(Scene(title="x", geometry=None, shapes=(bad,)))

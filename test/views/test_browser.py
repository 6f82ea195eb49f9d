"""The written view in a REAL headless browser (Chromium): it loads every mesh without an error, a console error
or any request leaving the page, shows the instant asked for, and draws the robot where the camera must see it;
the trajectory check's view also draws its scene where the scene file puts it.

The robot is found by its colour (``palette.ROBOT``) inside the screen region where the page's camera must show
the robot's links, projected here with a pinhole model of that camera (position, target, 75 degree vertical field
of view): not a pixel-exact image, but a check that fails when the robot is missing, hidden, misplaced or of
another colour. The same page with the robot hidden is the control. Chromium is installed by
tools/install_browser.sh (``make test`` and CI run it); without it these tests skip with one line, except in CI
where they fail.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

import numpy as np
import pinocchio as pin
import pytest

from test.views.views_testdata import CHECK_CELL, ur5_check, ur5_geometry, ur5_stop
from vtm_dynamics.views import headless, palette
from vtm_dynamics.views.stop_view import stop_scene
from vtm_dynamics.views.web_page import page_parts, scene_payload, write_page, write_parts

SIZE = (960, 640)
GHOSTS = "start,rest,worst"

if headless.chromium_path() is None:
    if os.environ.get("CI"):
        pytest.fail("Chromium is missing in CI: tools/install_browser.sh must install it", pytrace=False)
    pytest.skip("Chromium not installed (tools/install_browser.sh installs Debian's package)", allow_module_level=True)


@pytest.fixture(scope="module")
def view(tmp_path_factory):
    robot, p, env = ur5_stop()
    scene = stop_scene(robot, p, envelope=env, geometry=ur5_geometry())
    path = write_page(scene, str(tmp_path_factory.mktemp("view") / "stop.html"))
    return path, scene, scene_payload(scene)[0]["camera"]


@pytest.fixture(scope="module")
def robot_only(view, tmp_path_factory):
    """The same page with the moving robot alone (the browser parses its meshes once, not four times)."""
    _, scene, _ = view
    alone = dataclasses.replace(scene, robots=scene.robots[:1], legend=scene.legend[:1])
    path = write_page(alone, str(tmp_path_factory.mktemp("alone") / "robot.html"))
    return path, alone, scene_payload(alone)[0]["camera"]


def _project(points: np.ndarray, camera: dict, size: tuple[int, int]) -> np.ndarray:
    """Pixel coordinates of world points [m] seen by the page's camera (pinhole, z up, 75 degree vertical FOV, the
    picture shifted right by ``shift`` of the half width)."""
    eye, target = np.asarray(camera["position"]), np.asarray(camera["target"])
    f = (target - eye) / np.linalg.norm(target - eye)
    r = np.cross(f, [0.0, 0.0, 1.0])
    r /= np.linalg.norm(r)
    u = np.cross(r, f)
    d = points - eye
    z = d @ f
    t = np.tan(np.radians(75.0) / 2)
    w, h = size
    x = (d @ r) / (z * t * w / h) + camera.get("shift", 0.0)
    y = (d @ u) / (z * t)
    return np.column_stack([(x + 1) / 2 * w, (1 - y) / 2 * h])


def _robot_pixels(png: str) -> np.ndarray:
    """Mask of pixels with the robot's hue: blue clearly above red and green (shading changes brightness only)."""
    from PIL import Image

    img = np.asarray(Image.open(png).convert("RGB"), dtype=int)
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    assert palette.ROBOT[2] > palette.ROBOT[1] > palette.ROBOT[0]  # the rule below is for a blue robot
    return (b > r + 60) & (b > g + 25) & (b > 90)


def test_the_page_loads_every_mesh_without_errors_or_requests_and_shows_the_asked_instant(view):
    path, scene, _ = view
    robot_layer = scene.robots[0]
    t = 0.5 * float(robot_layer.times[-1])
    status = headless.page_status(path, f"t={t}&hide={GHOSTS}")
    assert status["ready"] and status["errors"] == [] and status["mesh_errors"] == 0, status
    assert status["console_errors"] == [] and status["meshes"] == 7 and status["violations"] == 0
    assert status["layers"] == ["robot", "start", "rest", "worst"] and status["t"] == pytest.approx(t)
    # the wrist the page placed at t is the prediction's, interpolated between its samples
    times, last = robot_layer.times, robot_layer.poses[:, -1, :3]
    expected = [np.interp(t, times, last[:, i]) for i in range(3)]
    np.testing.assert_allclose(status["last_link"][:3], expected, atol=1e-4)


def test_the_robot_is_drawn_where_the_camera_must_see_it(robot_only, tmp_path):
    path, scene, camera = robot_only
    shown = headless.screenshot(path, str(tmp_path / "shown.png"), "t=0", size=SIZE)
    hidden = headless.screenshot(path, str(tmp_path / "hidden.png"), "t=0&hide=robot", size=SIZE)
    corners = _project(scene.robots[0].poses[0, :, :3], camera, SIZE)
    lo = np.maximum(corners.min(axis=0) - 70, 0).astype(int)
    hi = np.minimum(corners.max(axis=0) + 70, SIZE).astype(int)
    region = (slice(lo[1], hi[1]), slice(lo[0], hi[0]))
    with_robot, without = _robot_pixels(shown), _robot_pixels(hidden)
    area = (hi[0] - lo[0]) * (hi[1] - lo[1])
    inside = int(with_robot[region].sum())
    assert inside > 0.05 * area, (inside, area, lo.tolist(), hi.tolist())  # the arm covers a good part of it
    assert int(without[region].sum()) < 0.002 * area  # the control: no robot, no robot colour
    outside = int(with_robot.sum()) - inside - (int(without.sum()) - int(without[region].sum()))
    assert outside < 0.1 * inside, json.dumps({"inside": inside, "outside": outside})  # nowhere else


def test_each_mesh_file_is_parsed_once_and_every_copy_of_the_robot_is_drawn_where_its_pose_puts_it(view, tmp_path):
    # four copies of the UR5 (robot, start, rest, worst) over seven mesh files: the viewer's loader runs once per
    # file (it ran 28 times) and the ghosts get the geometry it built; the rest ghost alone must still be drawn, in
    # the region its pose projects to, against the page with every copy hidden
    path, scene, camera = view
    rest = next(layer for layer in scene.robots if layer.name == "rest")
    alone, status = headless.screenshot_with_status(path, str(tmp_path / "rest.png"), "t=0&hide=robot,start,worst",
                                                    size=SIZE)
    assert status["ready"] and status["errors"] == [] and status["mesh_errors"] == 0, status
    assert status["meshes"] == 7 and status["mesh_parses"] == 7, status
    nothing = headless.screenshot(path, str(tmp_path / "none.png"), "t=0&hide=robot,start,rest,worst", size=SIZE)
    changed = _changed_pixels(alone, nothing)
    corners = _project(rest.poses[0, :, :3], camera, SIZE)
    lo = np.maximum(corners.min(axis=0) - 70, 0).astype(int)
    hi = np.minimum(corners.max(axis=0) + 70, SIZE).astype(int)
    inside = int(changed[lo[1]:hi[1], lo[0]:hi[0]].sum())
    assert inside > 0.03 * (hi[0] - lo[0]) * (hi[1] - lo[1]), (inside, lo.tolist(), hi.tolist())
    assert int(changed.sum()) - inside < 0.1 * inside


def test_the_baked_meshes_are_the_triangles_the_viewers_own_collada_loader_reads_and_draw_the_same_picture(
        robot_only, tmp_path):
    """Two independent readers of the UR5's seven COLLADA files: trimesh with pycollada (baked into the page) and
    three.js's COLLADA loader in the browser (the same scene's page with the files themselves). Each mesh has the
    same triangles (count), surface area (to the grid's rounding) and box; the two pictures differ in almost no
    pixel."""
    path, scene, _ = robot_only
    files = write_parts(page_parts(scene, bake=False), str(tmp_path / "files.html"))
    pictures, geometry = {}, {}
    for kind, page in (("baked", path), ("files", files)):
        png, status = headless.screenshot_with_status(page, str(tmp_path / f"{kind}.png"), "t=0", size=SIZE)
        assert status["ready"] and status["errors"] == [] and status["mesh_errors"] == 0, status
        assert status["mesh_parses"] == 7 and sorted(status["geometry"]) == [str(k) for k in range(7)], status
        pictures[kind], geometry[kind] = png, status["geometry"]
    for k, baked in geometry["baked"].items():
        loaded = geometry["files"][k]
        assert baked["triangles"] == loaded["triangles"], k
        assert baked["area"] == pytest.approx(loaded["area"], rel=1e-5), k
        np.testing.assert_allclose(baked["box"], loaded["box"], atol=1e-5, err_msg=f"mesh {k}")
    robot = _robot_pixels(pictures["files"])
    assert robot.sum() > 5000
    assert (_robot_pixels(pictures["baked"]) != robot).sum() < 0.01 * robot.sum()


def test_a_baked_block_that_is_not_a_whole_mesh_is_one_error_and_the_rest_is_drawn(robot_only, tmp_path):
    """The page's decoder checks a baked block as unbaked() does: a block whose first triangle corner names a
    vertex before the first (its code changed, the block packed again with its size) is refused in one error for
    its link; the other six meshes load."""
    import base64
    import zlib

    from vtm_dynamics.views.baked_meshes import HEADER_BYTES

    path, _, _ = robot_only
    text = open(path, encoding="utf-8").read()
    block = re.search(r'(<script type="text/plain" id="vtm-mesh-0" data-encoding="deflate">)([^<]*)<', text)
    data = zlib.decompress(base64.b64decode(block.group(2)))
    nv = int.from_bytes(data[8:12], "little")
    first_code = HEADER_BYTES + 6 * nv + 2 * (nv % 2)
    bad = data[:first_code] + (5).to_bytes(2, "little") + data[first_code + 2:]
    packed = base64.b64encode(zlib.compress(bad)).decode()
    tampered = str(tmp_path / "tampered.html")
    with open(tampered, "w", encoding="utf-8") as fh:
        fh.write(text.replace(block.group(0), block.group(1) + packed + "<", 1))
    status = headless.page_status(tampered, "t=0")
    assert status["ready"] and status["mesh_errors"] == 1 and status["meshes"] == 6, status
    assert len(status["errors"]) == 1 and "names a vertex before its new ones" in status["errors"][0], status


def test_a_request_a_console_error_and_an_exception_on_the_page_are_counted(tmp_path):
    """The control for 'violations == 0' and 'console_errors == []': the same kind of page with one image from a
    web address, one console error and one exception thrown later (as a failing mesh loader would) in it."""
    from vtm_dynamics.cli.predict import run_prediction

    summary, robot, _ = run_prediction("planar_3r")
    page = write_page(stop_scene(robot, summary.prediction), str(tmp_path / "three_r.html"))
    text = open(page, encoding="utf-8").read()
    probes = ('<img src="http://127.0.0.1:9/probe.png" alt="">\n'
              '<script>console.error("probe", 1); setTimeout(function () { null.probe; }, 0);</script>\n')
    with open(page, "w", encoding="utf-8") as fh:  # a tampered copy with the probes at the top
        fh.write(text.replace("<body>\n", "<body>\n" + probes, 1))
    status = headless.page_status(page)
    assert status["ready"] and status["violations"] == 1 and status["errors"] == []
    assert len(status["console_errors"]) == 2, status["console_errors"]
    assert status["console_errors"][0] == "console.error: probe 1"
    assert status["console_errors"][1].startswith("uncaught: ") and "probe" in status["console_errors"][1]


def test_a_packed_block_that_unpacks_to_more_than_its_declared_size_is_refused(tmp_path):
    """The page's script unpacks the viewer to at most the size its scene data declares: a page whose declared
    size is one byte short (as a block swapped for a larger one would be) shows an error and draws nothing."""
    from vtm_dynamics.cli.predict import run_prediction

    summary, robot, _ = run_prediction("planar_3r")
    page = write_page(stop_scene(robot, summary.prediction), str(tmp_path / "three_r.html"))
    text = open(page, encoding="utf-8").read()
    declared = re.search(r'"viewer":\{"element":"vtm-viewer","size":(\d+)\}', text)
    with open(page, "w", encoding="utf-8") as fh:
        fh.write(text.replace(declared.group(0), declared.group(0).replace(declared.group(1),
                                                                          str(int(declared.group(1)) - 1))))
    status = headless.page_status(page)
    assert not status["ready"] and status["layers"] == [], status
    assert status["errors"] == [f"the page could not be unpacked: vtm-viewer: unpacks to more than "
                                f"{int(declared.group(1)) - 1} bytes"], status


@pytest.fixture(scope="module")
def check_page(tmp_path_factory):
    """The view of a trajectory check (the UR5 over a table, the worst stop, the closest approach)."""
    from vtm_dynamics.views.clearance_view import trajectory_check_scene
    from vtm_dynamics.views.robot_geometry import robot_geometry

    robot, trajectory, cell, result, paths = ur5_check()
    scene = trajectory_check_scene(robot, trajectory, cell, result, paths, tcp_frame="tool0",
                                   geometry=robot_geometry(robot.model, robot.urdf_text))
    path = write_page(scene, str(tmp_path_factory.mktemp("check") / "check.html"))
    data = robot.model.createData()  # where the robot stands at the trajectory's start, by Pinocchio
    pin.framesForwardKinematics(robot.model, data, result.samples[0].q)
    links = np.array([data.oMf[robot.model.getFrameId(name)].translation for name in
                      ("base_link", "shoulder_link", "upper_arm_link", "forearm_link", "wrist_1_link", "wrist_2_link",
                       "wrist_3_link")])
    return path, scene, scene_payload(scene)[0]["camera"], links


def _changed_pixels(a: str, b: str) -> np.ndarray:
    from PIL import Image

    x, y = (np.asarray(Image.open(p).convert("RGB"), dtype=int) for p in (a, b))
    return np.abs(x - y).max(axis=-1) > 24


def _region(points: np.ndarray, camera: dict, margin: int) -> tuple[slice, slice]:
    corners = _project(points, camera, SIZE)
    lo = np.maximum(corners.min(axis=0) - margin, 0).astype(int)
    hi = np.minimum(corners.max(axis=0) + margin, SIZE).astype(int)
    return slice(lo[1], hi[1]), slice(lo[0], hi[0])


def test_the_check_view_draws_the_robot_and_the_table_where_they_stand(check_page, tmp_path):
    """The planned motion's robot by its colour in its projected region; the table as the pixels that change when
    only it is hidden, inside the corners the scene file gives it and nowhere else."""
    path, scene, camera, links = check_page
    table = next(s for s in scene.shapes if s.name == "obstacle_0")
    others = [r.name for r in scene.robots[1:]] + [ln.name for ln in scene.lines] + \
        [s.name for s in scene.shapes if s.name != table.name]
    hidden = ",".join(others)
    shown, status = headless.screenshot_with_status(path, str(tmp_path / "shown.png"), f"t=0&hide={hidden}",
                                                    size=SIZE)
    assert status["ready"] and status["errors"] == [] and status["console_errors"] == [], status
    assert status["mesh_errors"] == 0 and status["meshes"] == 7 and status["violations"] == 0, status
    assert status["layers"] == ["robot", "estop", "stop", "stop_rest"]
    without = headless.screenshot(path, str(tmp_path / "without.png"), f"t=0&hide={hidden},{table.name}", size=SIZE)
    robot = _region(links, camera, 70)
    blue = _robot_pixels(shown)
    area = (robot[0].stop - robot[0].start) * (robot[1].stop - robot[1].start)
    inside = int(blue[robot].sum())
    assert inside > 0.05 * area and int(blue.sum()) - inside < 0.1 * inside, (inside, area)
    written = CHECK_CELL["scene"]["obstacles"][0]
    assert written["name"] == "table" and "orientation" not in written["pose"]
    half = 0.5 * np.array(written["primitive"]["dimensions"])
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * half
    box = _region(corners + written["pose"]["position"], camera, 6)
    changed = _changed_pixels(shown, without)
    box_area = (box[0].stop - box[0].start) * (box[1].stop - box[1].start)
    on_table = int(changed[box].sum())
    assert on_table > 0.2 * box_area, (on_table, box_area)
    assert int(changed.sum()) - on_table < 0.02 * on_table  # the table is drawn there and only there


@pytest.mark.parametrize("meter, up_axis", [("1", "Z_UP"), ("0.001", "Z_UP"), ("0.001", "Y_UP")])
def test_a_collada_mesh_in_millimetres_is_drawn_as_large_as_its_unit_says_by_every_copy(tmp_path, meter, up_axis):
    """The 0.1 m cube written in metres (the control) and in millimetres with <unit meter="0.001"/>: the robot and
    a second copy of it (which gets the geometry the viewer's loader built for the first) each fill the region the
    cube's eight corners project to, and nothing else; drawn at the file's numbers the millimetre cube is 100 m
    wide. Its <up_axis> is ignored, as RViz ignores it (turned to z up, the Y_UP cube would stand 0.2 m along -y).
    The file is parsed once. The page with both copies hidden is the control (the legend's swatch has the
    robot's colour)."""
    from test.collada_testdata import CENTRE, EDGE, cube_dae, unit_package, unit_urdf
    from vtm_dynamics.core.robot.model import RobotModel
    from vtm_dynamics.views.robot_geometry import link_poses, robot_geometry
    from vtm_dynamics.views.scene import LegendEntry, RobotLayer, Scene

    pkg = unit_package(str(tmp_path), {"cube.dae": cube_dae(meter, up_axis)})
    text = unit_urdf("cube.dae")
    robot = RobotModel.from_urdf(text)
    g = robot_geometry(robot.model, text, package_roots=[pkg])
    poses = link_poses(robot.model, g, robot.neutral()[None, :])
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * EDGE / 2 + CENTRE
    layers = tuple(RobotLayer(name, name, palette.ROBOT, 1.0, np.zeros(1), poses) for name in ("robot", "copy"))
    scene = Scene("unit", g, robots=layers, legend=(LegendEntry(palette.ROBOT, "robot", ("robot", "copy")),),
                  focus=corners)
    path = write_page(scene, str(tmp_path / "cube.html"))
    camera = scene_payload(scene)[0]["camera"]
    expected = _project(corners, camera, SIZE)
    panel = _robot_pixels(headless.screenshot(path, str(tmp_path / "none.png"), "t=0&hide=robot,copy", size=SIZE))
    for hide in ("copy", "robot"):
        png, status = headless.screenshot_with_status(path, str(tmp_path / f"{hide}.png"), f"t=0&hide={hide}",
                                                      size=SIZE)
        assert status["ready"] and status["errors"] == [] and status["mesh_errors"] == 0, status
        assert status["meshes"] == 1 and status["mesh_parses"] == 1, status
        rows, cols = np.nonzero(_robot_pixels(png) & ~panel)  # not the legend's swatch of the robot's colour
        assert len(rows) > 0, f"{hide} hidden: no cube drawn"
        drawn = np.array([[cols.min(), rows.min()], [cols.max(), rows.max()]], dtype=float)
        np.testing.assert_allclose(drawn, [expected.min(axis=0), expected.max(axis=0)], atol=8,
                                   err_msg=f"{hide} hidden: the cube's drawn extent [px]")

"""The written view in a REAL headless browser (Chromium): it loads every mesh without an error and without any
request leaving the page, shows the instant asked for, and draws the robot where the camera must see it.

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

import numpy as np
import pytest

from test.views.views_testdata import ur5_geometry, ur5_stop
from vtm_dynamics.views import headless, palette
from vtm_dynamics.views.stop_view import stop_scene
from vtm_dynamics.views.web_page import scene_payload, write_page

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
    """Pixel coordinates of world points [m] seen by the page's camera (pinhole, z up, 75 degree vertical FOV)."""
    eye, target = np.asarray(camera["position"]), np.asarray(camera["target"])
    f = (target - eye) / np.linalg.norm(target - eye)
    r = np.cross(f, [0.0, 0.0, 1.0])
    r /= np.linalg.norm(r)
    u = np.cross(r, f)
    d = points - eye
    z = d @ f
    t = np.tan(np.radians(75.0) / 2)
    w, h = size
    x = (d @ r) / (z * t * w / h)
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
    assert status["meshes"] == 7 and status["violations"] == 0
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


def test_a_request_the_page_tried_would_be_refused_and_counted(tmp_path):
    """The control for 'violations == 0': the same kind of page with one image from a web address in it."""
    from vtm_dynamics.cli.predict import run_prediction

    summary, robot, _ = run_prediction("planar_3r")
    page = write_page(stop_scene(robot, summary.prediction), str(tmp_path / "three_r.html"))
    text = open(page, encoding="utf-8").read()
    with open(page, "w", encoding="utf-8") as fh:  # a tampered copy: an image from elsewhere at the top
        fh.write(text.replace("<body>\n", '<body>\n<img src="http://127.0.0.1:9/probe.png" alt="">\n', 1))
    status = headless.page_status(page)
    assert status["ready"] and status["violations"] == 1

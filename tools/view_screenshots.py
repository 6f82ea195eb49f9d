#!/usr/bin/env python3
"""Write the example 3-D views and their screenshots (headless Chromium) into a directory (default out/views).

    python tools/view_screenshots.py [OUT_DIR]

Views: the UR5 demo stop with its envelope (screenshots at the E-stop, mid-stop and at rest), a stopping map of
the UR5 in a cell box (its worst state replayed), the solvability report of the parallelogram four-bar and of the
Stewart platform, and the clearance building blocks (a UR5 motion past a table and a pillar, the closest approach
and a predicted stop from the closest instant). Needs Chromium (tools/install_browser.sh).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from vtm_dynamics.views import headless  # noqa: E402
from vtm_dynamics.views.web_page import write_page  # noqa: E402


def stop_views(out: str) -> list[str]:
    from vtm_dynamics.cli.predict import run_prediction
    from vtm_dynamics.views.stop_view import stop_scene

    summary, robot, _ = run_prediction("ur5", envelope=8)
    page = write_page(stop_scene(robot, summary.prediction, envelope=summary.envelope), os.path.join(out, "stop.html"))
    t = summary.prediction.stop_time
    return [headless.screenshot(page, os.path.join(out, f"stop_{name}.png"), frag) for name, frag in
            (("start", "t=0"), ("mid", f"t={0.45 * t:.4f}"), ("rest", "t=end"))]


def map_view(out: str) -> list[str]:
    from vtm_dynamics.cli.stopping_robots import load_robot
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.stopping.workspace_map import MapSpec, evaluate_chunk
    from vtm_dynamics.views.map_view import map_scene, replay_row, worst_rows

    loaded = load_robot("ur5")
    spec = MapSpec(n_states=300, tcp_frame="tool0", payload_frame="tool0", chunk_size=300, seed=1,
                   cell_box=((0.2, -0.5, 0.0), (0.8, 0.5, 0.6)), payloads=(0.0, 5.0))
    columns = evaluate_chunk(loaded.robot, brakes_from_config(loaded.robot, loaded.brake_config), spec, 0)
    brakes = brakes_from_config(loaded.robot, loaded.brake_config)
    worst = [(row, replay_row(loaded.robot, brakes, spec, columns, row)) for row in worst_rows(columns, 3)]
    page = write_page(map_scene(loaded.robot, columns, cell_box=spec.cell_box, worst=worst),
                      os.path.join(out, "map.html"))
    return [headless.screenshot(page, os.path.join(out, "map.png"), "t=end")]


def solvability_views(out: str) -> list[str]:
    import pinocchio as pin

    from vtm_dynamics.core.reactions.model_limits import load_for_analysis
    from vtm_dynamics.core.reactions.pair_frames import pair_placements
    from vtm_dynamics.core.reactions.solvability import analyze_solvability
    from vtm_dynamics.core.robot.urdf_extension import read_urdf_file
    from vtm_dynamics.views.robot_geometry import robot_geometry
    from vtm_dynamics.views.solvability_view import solvability_scene

    shots = []
    for name in ("parallelogram_4bar", "huang_stewart_platform"):
        text = read_urdf_file(os.path.join(ROOT, "urdf", f"{name}.urdf"))
        report = analyze_solvability(text)
        model = load_for_analysis(text, False, 200)
        q = np.asarray(report.q) if report.q is not None else pin.neutral(model.pin_model)
        scene = solvability_scene(model.pin_model, robot_geometry(model.pin_model, text), q, report,
                                  pair_placements(model, q, report))
        page = write_page(scene, os.path.join(out, f"solvability_{name}.html"))
        shots.append(headless.screenshot(page, os.path.join(out, f"solvability_{name}.png")))
    return shots


def clearance_view(out: str) -> list[str]:
    from vtm_dynamics.cli.predict import load_robot
    from vtm_dynamics.core.estop import predict_stop
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.cli.predict import default_brakes_path
    from vtm_dynamics.views import palette
    from vtm_dynamics.views.clearance_view import ClosestApproach, clearance_scene
    from vtm_dynamics.views.robot_geometry import frame_positions
    from vtm_dynamics.views.scene import Box, Cylinder

    _, robot, _ = load_robot("ur5")
    brakes = brakes_from_config(robot, default_brakes_path("ur5"))
    t = np.linspace(0.0, 2.0, 201)
    a = np.array([-0.9, -1.4, 1.6, -1.8, -1.57, 0.0])
    b = np.array([0.9, -1.0, 1.2, -1.8, -1.57, 0.0])
    s = 0.5 - 0.5 * np.cos(np.pi * t / t[-1])
    qs = a + s[:, None] * (b - a)
    table = np.eye(4)
    table[:3, 3] = (0.45, 0.0, -0.05)
    radius = 0.08
    tcp = frame_positions(robot.model, "tool0", qs)
    mid = tcp[len(t) // 2]  # a pillar 6 cm outside the TCP's arc at mid-motion, where it moves fastest
    outward = np.array([mid[0], mid[1], 0.0]) / np.linalg.norm(mid[:2])
    pillar = np.eye(4)
    pillar[:3, 3] = mid * [1, 1, 0] + (radius + 0.06) * outward + [0.0, 0.0, 0.4]
    d = np.linalg.norm(tcp[:, :2] - pillar[:2, 3], axis=1) - radius  # TCP to the pillar's axis, minus its radius
    k = int(np.argmin(d))
    toward = (tcp[k, :2] - pillar[:2, 3]) / np.linalg.norm(tcp[k, :2] - pillar[:2, 3])
    closest = ClosestApproach(float(t[k]), float(d[k]), tuple(tcp[k]),
                              (*(pillar[:2, 3] + radius * toward), float(tcp[k, 2])), "tool0", "pillar")
    v = (qs[min(k + 1, len(t) - 1)] - qs[max(k - 1, 0)]) / (t[2] - t[0])
    stop = predict_stop(robot, brakes, qs[k], v, tcp_frame="tool0")
    scene = clearance_scene(robot, t, qs, (Box("table", (0.8, 1.2, 0.1), table, palette.OBSTACLE, 0.8),
                                           Cylinder("pillar", radius, 0.8, pillar, palette.OBSTACLE, 0.8)),
                            closest=closest, stop=(float(t[k]), stop), tcp_frame="tool0")
    page = write_page(scene, os.path.join(out, "clearance.html"))
    return [headless.screenshot(page, os.path.join(out, "clearance.png"), f"t={t[k]:.3f}")]


def main(argv: list[str]) -> int:
    out = argv[1] if len(argv) > 1 else os.path.join(ROOT, "out", "views")
    os.makedirs(out, exist_ok=True)
    if headless.chromium_path() is None:
        print("view_screenshots: no Chromium (tools/install_browser.sh)", file=sys.stderr)
        return 2
    for make in (stop_views, map_view, solvability_views, clearance_view):
        start = time.monotonic()
        for path in make(out):
            print(f"wrote {path}")
        print(f"  ({make.__name__}: {time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

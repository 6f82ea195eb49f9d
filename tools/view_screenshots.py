#!/usr/bin/env python3
"""Write the example 3-D views and their screenshots (headless Chromium) into a directory (default out/views).

    python tools/view_screenshots.py [OUT_DIR]

Views: the UR5 demo stop with its envelope (screenshots at the E-stop, mid-stop and at rest), a stopping map of
the UR5 in a cell box (its worst state replayed), the solvability report of the parallelogram four-bar and of the
Stewart platform, and a stop-safe trajectory check (``vtm-check-trajectory --view``: a UR5 motion down towards a
table in a cell with every kind of obstacle; screenshots of the planned motion, the worst stop at its closest
approach and its rest). Needs Chromium (tools/install_browser.sh).
"""

from __future__ import annotations

import json
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
    from vtm_dynamics.views.map_sample import columns_reader, sample_map
    from vtm_dynamics.views.map_view import map_scene, replay_worst

    loaded = load_robot("ur5")
    spec = MapSpec(n_states=300, tcp_frame="tool0", payload_frame="tool0", chunk_size=300, seed=1,
                   cell_box=((0.2, -0.5, 0.0), (0.8, 0.5, 0.6)), payloads=(0.0, 5.0))
    columns = evaluate_chunk(loaded.robot, brakes_from_config(loaded.robot, loaded.brake_config), spec, 0)
    brakes = brakes_from_config(loaded.robot, loaded.brake_config)
    sample = sample_map(columns_reader(columns), 3)
    page = write_page(map_scene(loaded.robot, sample, cell_box=spec.cell_box,
                                worst=replay_worst(loaded.robot, brakes, spec, sample)),
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


def trajectory_check_view(out: str) -> list[str]:
    """``vtm-check-trajectory --view`` on a UR5 motion that drives the wrist down towards a table and back up,
    in a cell with a wall, the floor, a pillar, a cone, a ball and a mesh fixture (every kind of obstacle)."""
    import yaml

    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import stopsafe_scenarios as S
    from vtm_dynamics.cli.check_trajectory import main as check

    names = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
             "wrist_3_joint"]
    plan = S.rest_to_rest(names, [[-0.6, -1.45, 1.35, -1.9, -1.57, 0.0], [0.0, -1.1, 1.75, -1.9, -1.57, 0.0],
                                  [0.6, -1.45, 1.35, -1.9, -1.57, 0.0]], [0.8, 0.8])
    cell = S.cell("ur5", table_top=0.095, tilt=0.0)
    pyramid = {"vertices": [[-0.08, -0.08, 0.0], [0.08, -0.08, 0.0], [0.08, 0.08, 0.0], [-0.08, 0.08, 0.0],
                            [0.0, 0.0, 0.14]],
               "triangles": [[0, 2, 1], [0, 3, 2], [0, 1, 4], [1, 2, 4], [2, 3, 4], [3, 0, 4]]}
    cell["scene"]["obstacles"] += [
        {"name": "pillar", "primitive": {"type": "cylinder", "dimensions": [0.9, 0.05]},
         "pose": {"position": [0.1, -0.75, 0.45]}},
        {"name": "cone", "primitive": {"type": "cone", "dimensions": [0.25, 0.08]},
         "pose": {"position": [0.75, 0.35, 0.185]}},
        {"name": "ball", "primitive": {"type": "sphere", "dimensions": [0.07]},
         "pose": {"position": [0.3, -0.6, 0.02]}},
        {"name": "fixture", "mesh": pyramid, "pose": {"position": [0.5, 0.55, 0.06]}},
    ]
    with open(os.path.join(out, "check_plan.yaml"), "w", encoding="utf-8") as fh:
        yaml.safe_dump(plan.as_message_dict(), fh)
    with open(os.path.join(out, "check_cell.yaml"), "w", encoding="utf-8") as fh:
        yaml.safe_dump(cell, fh)
    page = os.path.join(out, "check.html")
    json_path = os.path.join(out, "check.json")
    status = check([os.path.join(out, "check_plan.yaml"), "--scene", os.path.join(out, "check_cell.yaml"),
                    "--tolerance", "0.01", "--margin", "0.01", "--quiet", "--view", page, "--json", json_path])
    if status not in (0, 1):
        raise RuntimeError("vtm-check-trajectory failed")
    with open(json_path, encoding="utf-8") as fh:
        worst = json.load(fh)["viewer"]["worst"]
    t0 = worst["sample_time_s"]
    closest = t0 + worst["stop_instant_s"]
    return [headless.screenshot(page, os.path.join(out, f"check_{name}.png"), frag) for name, frag in
            (("plan", f"t={0.5 * t0:.4f}"), ("stop", f"t={closest:.4f}&hide=robot,plan_tcp,estop"),
             ("end", "t=end"))]


def main(argv: list[str]) -> int:
    out = argv[1] if len(argv) > 1 else os.path.join(ROOT, "out", "views")
    os.makedirs(out, exist_ok=True)
    if headless.chromium_path() is None:
        print("view_screenshots: no Chromium (tools/install_browser.sh)", file=sys.stderr)
        return 2
    for make in (stop_views, map_view, solvability_views, trajectory_check_view):
        start = time.monotonic()
        for path in make(out):
            print(f"wrote {path}")
        print(f"  ({make.__name__}: {time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""``vtm-stopping-data``: ISO 10218-1 style stopping data of a robot, as files a safety engineer can file.

Examples::

    vtm-stopping-data ur5 --out stopping_ur5          # CSV, JSON, vendor-style charts, one PDF report
    vtm-stopping-data ur3 --out stopping_ur3
    vtm-stopping-data --urdf arm.urdf --brakes arm_brakes.yaml --tcp-frame tool0 --max-payload 4 --out arm

Stop categories 0 and 1; the three joints with the greatest displacement; 33/66/100 % of maximum speed x extension
x payload; each point with the band of the envelope's brake-torque and delay tolerances. The test motions and every
assumption are printed in the report (:mod:`vtm_dynamics.core.stopping.iso10218`,
:mod:`vtm_dynamics.cli.stopping_robots`). For the named robots the 100/100/100 category-0 points are compared with
the published figures. Bad input prints one line ``vtm-stopping-data: error: <field>: <reason>`` (status 2).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import os
import sys
from dataclasses import asdict
from typing import Sequence

from vtm_dynamics.cli.stopping_robots import LoadedRobot, add_robot_arguments, load_robot
from vtm_dynamics.core.estop import StopInputError
from vtm_dynamics.core.estop.brakes import BrakeSet, brakes_from_config
from vtm_dynamics.core.estop.defaults import CATEGORY1_DECELERATION
from vtm_dynamics.core.robot.catalogue import ROBOTS
from vtm_dynamics.core.stopping.iso10218 import (
    LEVELS, StoppingPoint, StoppingTestSpec, extension_pose, greatest_displacement_joints, stopping_points,
)

PROG = "vtm-stopping-data"

# the published category-0 figures the default brakes were fitted to (one home: core.robot.catalogue)
PUBLISHED = {name: robot.published_stops for name, robot in ROBOTS.items() if robot.published_stops}
PUBLISHED_SOURCE = "Universal Robots CB3 user manual, Appendix A (stop category 0, 100 % extension/speed/payload)"


def fold_joint(robot, base: Sequence[float], joints: Sequence[str], frame: str, given: str | None) -> str:
    """The joint that folds the arm to lower extensions: ``given``, else the outermost tested joint that can bring
    ``frame`` to the lowest level (then the next one inwards): an elbow where there is one."""
    candidates = [given] if given else [j for j in reversed(joints[1:])]
    reason, closest = "", None
    for fold in candidates:
        if fold not in robot.joint_names:
            raise StopInputError(f"fold: {fold!r} is not a joint of {robot.name!r}")
        try:
            extension_pose(robot, base, joints[0], fold, frame, min(LEVELS))
            return fold
        except StopInputError as err:
            reason = str(err)
        _, reach = extension_pose(robot, base, joints[0], fold, frame, min(LEVELS), strict=False)
        _, full = extension_pose(robot, base, joints[0], fold, frame, 1.0)
        if reach < 0.99 * full and (closest is None or reach < closest[1]):
            closest = (fold, reach)  # folds, if not all the way: the report states the extension reached
    if closest is not None:
        return closest[0]
    raise StopInputError(reason or "fold: no joint can fold the arm to the lowest extension")


def spec_for(loaded: LoadedRobot, args: argparse.Namespace) -> StoppingTestSpec:
    """The stated test for a named robot (its defaults) or for a URDF (computed joints, given payload/speeds)."""
    robot, d = loaded.robot, loaded.defaults
    frame = args.tcp_frame or (d.tcp_frame if d else None)
    if frame is None:
        raise StopInputError("tcp_frame: --tcp-frame is required with --urdf")
    base = tuple(args.base_pose) if args.base_pose else (d.stopping_tests.base_pose if d else tuple([0.0] * robot.nq))
    if len(base) != robot.nq:
        raise StopInputError(f"base_pose: expected {robot.nq} angles [rad], got {len(base)}")
    if d is not None:
        joints, folds, payload = d.stopping_tests.joints, d.stopping_tests.fold_joints, d.rated_payload
        limit = robot.model.velocityLimit  # the stated speeds, capped by the URDF (the prediction refuses more)
        speeds = tuple(min(sp, float(limit[robot.joint(j).idx_v])) if limit[robot.joint(j).idx_v] > 0 else sp
                       for j, sp in zip(joints, map(d.max_speed, joints)))
    else:
        joints = greatest_displacement_joints(robot, base, frame)
        folds = (fold_joint(robot, base, joints, frame, args.fold),) * len(joints)
        speeds = tuple(float(robot.model.velocityLimit[robot.joint(j).idx_v]) for j in joints)
        payload = 0.0
    if args.max_speeds:
        if len(args.max_speeds) != len(joints):
            raise StopInputError(f"max_speeds: expected {len(joints)} speeds [rad/s] for {', '.join(joints)}")
        speeds = tuple(args.max_speeds)
    if args.max_payload is not None:
        payload = args.max_payload
    return StoppingTestSpec(joints=tuple(joints), fold_joints=tuple(folds), max_speeds=tuple(speeds),
                          max_payload=payload, payload_frame=frame, base_pose=base, extension_joint=joints[0],
                          categories=tuple(args.category), category1_deceleration=args.decel,
                          hold_others=args.others == "held")


def assumptions(loaded: LoadedRobot, spec: StoppingTestSpec,
                points: Sequence[StoppingPoint] = ()) -> list[str]:
    deg = 180 / math.pi
    lines = [
        "Test motion per tested joint (ASSUMED: ISO 10218-1 does not fix it, the vendor manuals do not state it):",
        "  the joint alone, through the test pose, at the speed fraction x its maximum speed, moving the way",
        "  gravity pulls (the longer stop; + without gravity torque); the other joints at rest and "
        + ("held rigid (locked at t = 0)." if spec.hold_others else "braked like the tested joint (true category 0:"),
        "  " + ("the drives hold them during a category-1 ramp." if spec.hold_others else
                "their brakes engage after their delay and may slip under the load; the drives hold them during a "
                "category-1 ramp)."),
        f"  100 % extension pose q = {list(spec.base_pose)} rad; extension = distance of {spec.payload_frame} from the",
        f"  axis of {spec.extension_joint}; lower extensions fold " + ", ".join(
            f"{j} with {f}" for j, f in zip(spec.joints, spec.fold_joints)) + " (smallest angle).",
        "  Maximum speeds: " + ", ".join(f"{j} {s:.4g} rad/s ({s * deg:.0f} deg/s)" for j, s in
                                          zip(spec.joints, spec.max_speeds)) + ".",
        f"  Maximum payload {spec.max_payload:g} kg as a point mass at {spec.payload_frame}.",
        f"  Category 1: straight ramp of the tested joint at {spec.category1_deceleration:g} rad/s^2, power off at"
        " standstill, then the brakes engage.",
        f"  Band: every corner of brake torque x {spec.torque_factor} and engage delay x {spec.delay_factor}.",
        "  Stopping distance = the tested joint's angle travelled after the stop command; time = until it rests.",
    ]
    short = sorted({(p.joint, p.extension_fraction, round(p.extension_actual, 3)) for p in points
                    if abs(p.extension_actual - p.extension_fraction) > 0.005})
    for joint, level, actual in short:
        lines.append(f"  NOTE: {joint} test, extension {level:.0%}: folding reaches only {actual:.0%} (lateral "
                     "offsets keep the payload off the axis); that pose is used and labelled.")
    if loaded.defaults is not None:
        lines += ["  Robot defaults (stated assumptions): see vtm_dynamics/core/robot/catalogue.py: maximum speeds",
                  "  from the vendor's joint speed limits, capped by the URDF velocity limits."]
    return lines


def brake_lines(loaded: LoadedRobot, brakes: BrakeSet) -> list[str]:
    lines = [f"Brakes from {os.path.basename(loaded.brake_source)} (joint side):",
             f"  {'joint':<22}{'delay [s]':>10}{'sliding [N m]':>15}{'viscous [N m s/rad]':>21}{'holding [N m]':>15}"]
    for i, name in enumerate(brakes.joint_names):
        if brakes.braked[i]:
            lines.append(f"  {name:<22}{brakes.engage_delay[i]:>10.4f}{brakes.sliding_torque[i]:>15.3f}"
                         f"{brakes.viscous[i]:>21.3f}{brakes.holding_torque[i]:>15.3f}")
    try:
        with open(loaded.brake_source, encoding="utf-8") as fh:
            notes = [ln.rstrip()[1:].strip() for ln in fh if ln.startswith("#")]
    except OSError:
        notes = []
    if notes:
        lines += ["Source and assumptions stated in the brake file:"] + [f"  {n}" for n in notes[:30]]
    return lines


def published_table(name: str, points: Sequence[StoppingPoint]) -> list[dict]:
    rows = []
    for fig in PUBLISHED.get(name, ()):
        match = [p for p in points if p.category == 0 and p.joint == fig.joint and p.speed_fraction == 1.0
                 and p.extension_fraction == 1.0 and p.payload_fraction == 1.0]
        if not match:
            continue
        p = match[0]
        rows.append({"joint": fig.joint, "published_angle_rad": fig.angle, "published_time_s": fig.time,
                     "predicted_angle_rad": p.angle, "predicted_time_s": p.time,
                     "angle_error_rad": p.angle - fig.angle, "time_error_s": p.time - fig.time,
                     "band_angle_rad": [p.angle_min, p.angle_max], "band_time_s": [p.time_min, p.time_max]})
    return rows


def table_lines(rows: list[dict]) -> list[str]:
    if not rows:
        return ["No published figures for this robot."]
    out = [f"100 % points (category 0) against {PUBLISHED_SOURCE}:",
           f"  {'joint':<22}{'published':>20}{'predicted':>20}{'error':>20}{'band (envelope)':>30}"]
    for r in rows:
        out.append(f"  {r['joint']:<22}{r['published_angle_rad']:>9.3f} rad {1e3 * r['published_time_s']:>4.0f} ms"
                   f"{r['predicted_angle_rad']:>9.3f} rad {1e3 * r['predicted_time_s']:>4.0f} ms"
                   f"{r['angle_error_rad']:>+9.3f} rad {1e3 * r['time_error_s']:>+4.0f} ms"
                   f"{r['band_angle_rad'][0]:>9.3f}-{r['band_angle_rad'][1]:.3f} rad "
                   f"{1e3 * r['band_time_s'][0]:.0f}-{1e3 * r['band_time_s'][1]:.0f} ms")
    return out


def write_csv(path: str, points: Sequence[StoppingPoint]) -> None:
    keys = [k for k in asdict(points[0]) if k != "q_test"]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(keys + ["q_test"])
        for p in points:
            d = asdict(p)
            w.writerow([repr(d[k]) if isinstance(d[k], float) else d[k] for k in keys]
                       + [" ".join(repr(x) for x in p.q_test)])


def _text_page(pdf, title: str, lines: list[str]) -> None:
    from vtm_dynamics.cli.plots import pyplot

    plt = pyplot()
    for start in range(0, max(len(lines), 1), 60):
        fig = plt.figure(figsize=(11.7, 8.3))
        fig.text(0.04, 0.96, title, fontsize=13, weight="bold", va="top")
        fig.text(0.04, 0.92, "\n".join(lines[start:start + 60]), fontsize=7.2, family="monospace", va="top")
        pdf.savefig(fig)
        plt.close(fig)


def write_report(path: str, loaded: LoadedRobot, brakes: BrakeSet, spec: StoppingTestSpec,
                 points: Sequence[StoppingPoint], rows: list[dict]) -> None:
    """One PDF: model, brakes and their source, test motions and assumptions, the published comparison, charts."""
    from matplotlib.backends.backend_pdf import PdfPages

    from vtm_dynamics.cli.plots import pyplot
    from vtm_dynamics.cli.stopping_charts import vendor_chart

    plt = pyplot()
    robot = loaded.robot
    model = [f"Robot {loaded.name}: URDF model {robot.name!r}, {robot.nv} joints, sha256 "
             f"{hashlib.sha256(loaded.text.encode()).hexdigest()[:16]}",
             f"Tested joints (greatest displacement): {', '.join(spec.joints)}",
             f"Stop categories {', '.join(map(str, spec.categories))}; levels {', '.join(f'{x:.0%}' for x in LEVELS)}"
             " of speed, extension and payload; prediction: vtm_dynamics E-stop model (multibody, brakes with",
             "sliding, viscous and holding torque, stick/slip, momentum-consistent locks).", ""]
    with PdfPages(path) as pdf:
        _text_page(pdf, f"Stopping data (ISO 10218-1 style): {loaded.name}",
                   model + brake_lines(loaded, brakes) + [""] + assumptions(loaded, spec, points) + [""]
                   + table_lines(rows))
        for cat in spec.categories:
            for joint in spec.joints:
                fig = vendor_chart(points, cat, joint, f"{loaded.name}: stop category {cat}, {joint} "
                                   "(band: brake torque and delay tolerances)")
                pdf.savefig(fig)
                plt.close(fig)
        info = pdf.infodict()
        info["Title"] = f"Stopping data {loaded.name}"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=PROG, description="ISO 10218-1 style stopping data: charts, CSV/JSON and a "
                                 "PDF report.")
    add_robot_arguments(ap, tcp_help="payload / TCP frame")
    ap.add_argument("--max-payload", type=float, help="maximum payload [kg]")
    ap.add_argument("--max-speeds", type=float, nargs="+", help="100 %% speed [rad/s] of each tested joint")
    ap.add_argument("--fold", help="joint that folds the arm to 33/66 %% extension (default: the elbow-like joint)")
    ap.add_argument("--base-pose", type=float, nargs="+", help="100 %% extension pose [rad]")
    ap.add_argument("--category", type=int, nargs="+", default=[0, 1], choices=(0, 1))
    ap.add_argument("--others", choices=("braked", "held"), default="braked",
                    help="the joints not under test: braked like the tested joint (true category 0, the test the "
                    "default brakes were fitted with) or held rigid (locked at t = 0)")
    ap.add_argument("--decel", type=float, default=CATEGORY1_DECELERATION,
                    help="category 1: deceleration [rad/s^2] (assumed)")
    ap.add_argument("--out", required=True, help="output directory")
    return ap


def run(args: argparse.Namespace, progress=None) -> dict:
    loaded = load_robot(None if args.urdf else args.robot, args.urdf, args.brakes)
    brakes = brakes_from_config(loaded.robot, loaded.brake_config)
    spec = spec_for(loaded, args)
    points = stopping_points(loaded.robot, brakes, spec, progress=progress)
    rows = published_table(loaded.name if loaded.defaults else "", points)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"{loaded.name}_stopping_data")
    write_csv(stem + ".csv", points)
    with open(stem + ".json", "w", encoding="utf-8") as fh:
        json.dump({"robot": loaded.name, "spec": asdict(spec), "points": [asdict(p) for p in points],
                   "published_comparison": rows, "assumptions": assumptions(loaded, spec, points)}, fh, indent=1)
    from vtm_dynamics.cli.stopping_charts import save_vendor_charts

    charts = save_vendor_charts(args.out, points, loaded.name)
    write_report(stem + ".pdf", loaded, brakes, spec, points, rows)
    return {"points": points, "rows": rows, "files": [stem + ".csv", stem + ".json", *charts, stem + ".pdf"]}


def main(argv: Sequence[str] | None = None) -> int:
    ap = build_parser()
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)

    def progress(done: int, total: int) -> None:
        sys.stderr.write(f"\rstopping data: {done}/{total} test points")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    try:
        result = run(args, progress)
    except (ValueError, OSError) as err:
        msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        sys.stderr.write(f"{PROG}: error: {msg}\n")
        return 2
    print("\n".join(table_lines(result["rows"])))
    for f in result["files"]:
        print(f"wrote {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

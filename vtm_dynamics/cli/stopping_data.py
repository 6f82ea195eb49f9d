"""``vtm-stopping-data``: ISO 10218-1 style stopping data of a robot, as files a safety engineer can file.

Examples::

    vtm-stopping-data ur5 --out stopping_ur5          # CSV, JSON, vendor-style charts, one PDF report
    vtm-stopping-data ur3 --out stopping_ur3
    vtm-stopping-data --urdf arm.urdf --brakes arm_brakes.yaml --tcp-frame tool0 --max-payload 4 --out arm

Stop category 0 (category 1 only from a stated deceleration, ``--category 0 1 --decel X``: the published data
give none); the three joints with the greatest displacement; 33/66/100 % of maximum speed x extension x payload;
each point with the band of the envelope's brake-torque and delay tolerances and the TCP's stopping distance. The
test motions and every assumption are printed in the report (:mod:`vtm_dynamics.core.stopping.iso10218`,
:mod:`vtm_dynamics.cli.stopping_robots`), every page says that the figures are simulated, and carries the document
control (:mod:`vtm_dynamics.cli.stopping_report`). For the named robots the 100/100/100 category-0 points are
compared with the published figures. Bad input prints one line ``vtm-stopping-data: error: <field>: <reason>``
(status 2).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Sequence

from vtm_dynamics.cli import provenance
from vtm_dynamics.cli.arguments import Parser, add_torque_limits_option, parse_or_exit_status, quiet_when_output_closed
from vtm_dynamics.cli.published_comparison import published_figures, published_table, table_lines
from vtm_dynamics.cli.stopping_robots import LoadedRobot, add_robot_arguments, load_robot
from vtm_dynamics.core.excerpt import first_line

if TYPE_CHECKING:  # the core is imported when the data are computed, not for --help
    from vtm_dynamics.core.estop.brakes import BrakeSet
    from vtm_dynamics.core.stopping.iso10218 import StoppingPoint, StoppingTestSpec

PROG = "vtm-stopping-data"

def fold_joint(robot, base: Sequence[float], joints: Sequence[str], frame: str, given: str | None) -> str:
    """The joint that folds the arm to lower extensions: ``given``, else the outermost tested joint that can bring
    ``frame`` to the lowest level (then the next one inwards): an elbow where there is one."""
    from vtm_dynamics.core.estop import StopInputError
    from vtm_dynamics.core.stopping.iso10218 import LEVELS, extension_pose

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
    from vtm_dynamics.core.estop import StopInputError
    from vtm_dynamics.core.estop.inputs import torque_limits_from_text
    from vtm_dynamics.core.stopping.iso10218 import StoppingTestSpec, greatest_displacement_joints

    robot, d = loaded.robot, loaded.defaults
    frame = args.tcp_frame or (d.tcp_frame if d else None)
    if frame is None:
        raise StopInputError("tcp_frame: --tcp-frame is required with --urdf")
    base = tuple(args.base_pose) if args.base_pose else (d.stopping_tests.base_pose if d else tuple([0.0] * robot.nq))
    if len(base) != robot.nq:
        raise StopInputError(f"base_pose: expected {robot.nq} angles [rad], got {len(base)}")
    categories = tuple(sorted(set(args.category)))
    if 1 in categories and args.decel is None:
        raise StopInputError("category: category 1 needs the controller's deceleration ramp, --decel [rad/s^2]: the "
                             "published data give none, so the report models category 1 only from a value you state")
    if d is not None:
        joints, folds, payload = d.stopping_tests.joints, d.stopping_tests.fold_joints, d.rated_payload
        limit = robot.model.velocityLimit  # the stated speeds, capped by the URDF (the prediction refuses more)
        speeds = tuple(min(sp, float(limit[robot.joint(j).idx_v])) if limit[robot.joint(j).idx_v] > 0 else sp
                       for j, sp in zip(joints, map(d.max_speed, joints)))
        if args.fold:  # checked as for a URDF: a joint of the robot that folds the arm
            folds = (fold_joint(robot, base, joints, frame, args.fold),) * len(joints)
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
    extra = {} if args.decel is None else {"category1_deceleration": args.decel}
    extra["category1_torque_limits"] = torque_limits_from_text(args.torque_limits)
    return StoppingTestSpec(joints=tuple(joints), fold_joints=tuple(folds), max_speeds=tuple(speeds),
                            max_payload=payload, payload_frame=d.payload_frame_or(frame) if d else frame,
                            base_pose=base, extension_joint=joints[0], categories=categories,
                            hold_others=args.others == "held", tcp_frame=frame, **extra)


def level_lines(spec: StoppingTestSpec, points: Sequence[StoppingPoint]) -> list[str]:
    """The levels as absolute values: speed [rad/s] per joint, reach [m] per joint and extension, payload [kg]."""
    lines = ["Levels in absolute values:"]
    for joint, vmax in zip(spec.joints, spec.max_speeds):
        lines.append(f"  {joint:<22} speed " + ", ".join(f"{lv:.0%} = {lv * vmax:.3f} rad/s" for lv in
                                                          spec.speed_levels))
        reach = {p.extension_fraction: (p.reach, p.extension_actual) for p in points if p.joint == joint}
        lines.append(f"  {'':<22} extension " + ", ".join(
            f"{lv:.0%} = {reach[lv][0]:.3f} m" + (f" (reached {reach[lv][1]:.0%})"
                                                   if abs(reach[lv][1] - lv) > 0.005 else "")
            for lv in spec.extension_levels if lv in reach))
    lines.append(f"  payload at {spec.payload_frame}: " + ", ".join(f"{lv:.0%} = {lv * spec.max_payload:.2f} kg"
                                                                    for lv in spec.payload_levels))
    return lines


def assumptions(loaded: LoadedRobot, spec: StoppingTestSpec,
                points: Sequence[StoppingPoint] = ()) -> list[str]:
    from vtm_dynamics.core.estop.inputs import torque_limits_text

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
        (f"  Category 1: straight ramp of the tested joint at {spec.category1_deceleration:g} rad/s^2 (STATED by the "
         "user with --decel, not from the robot maker), power off at standstill, then the brakes engage."
         if 1 in spec.categories else
         "  Category 1: not in this report (the published data give no category-1 deceleration; give the "
         "controller's with --category 0 1 --decel X)."),
        *([f"  Category 1 drive torque limits: {torque_limits_text(spec.category1_torque_limits)}"
           + (" (--torque-limits: a ramp that needs more torque is lengthened until it fits)."
              if spec.category1_torque_limits is not None else ".")] if 1 in spec.categories else []),
        f"  Band: every corner of brake torque x {spec.torque_factor} and engage delay x {spec.delay_factor}.",
        "  Stopping angle = the farthest the tested joint got from its angle at the stop command (a joint that swings",
        "  past and back counts its farthest point, not its net displacement); time = until it rests, unbounded (inf)",
        "  while any joint of the arm still moves at the horizon (NOT AT REST: angle and TCP distance lower bounds);",
        f"  TCP distance = the largest straight distance of {spec.distance_frame} from its position at the stop command",
        "  until rest (the start-to-rest distance where the path does not turn back).",
    ]
    short = sorted({(p.joint, p.extension_fraction, round(p.extension_actual, 3)) for p in points
                    if abs(p.extension_actual - p.extension_fraction) > 0.005})
    for joint, level, actual in short:
        lines.append(f"  NOTE: {joint} test, extension {level:.0%}: folding reaches only {actual:.0%} (lateral "
                     "offsets keep the payload off the axis); that pose is used and labelled.")
    if loaded.defaults is not None:
        lines += ["  Robot defaults (stated assumptions): see vtm_dynamics/core/robot/catalogue.py: maximum speeds",
                  "  from the vendor's joint speed limits, capped by the URDF velocity limits."]
    if points:
        lines += [""] + level_lines(spec, points)
    return lines


def _cell(x: float, spec: str) -> str:
    return format(x, spec) if math.isfinite(x) and x != 0.0 else "-"


def brake_lines(loaded: LoadedRobot, brakes: BrakeSet) -> list[str]:
    """Every term of the brake model per braked joint (joint side), then the notes of the brake file."""
    lines = [f"Brakes from {os.path.abspath(loaded.brake_source)} (joint side; - = term off):",
             f"  {'joint':<22}{'delay':>8}{'rise':>8}{'sliding':>10}{'breakaway':>11}{'v_s':>8}{'holding':>10}"
             f"{'viscous':>10}{'armature':>10}{'pawl':>8}",
             f"  {'':<22}{'[ms]':>8}{'[ms]':>8}{'[N m]':>10}{'[N m]':>11}{'[rad/s]':>8}{'[N m]':>10}"
             f"{'[N m s]':>10}{'[kg m2]':>10}{'[ms]':>8}"]
    for i, name in enumerate(brakes.joint_names):
        if brakes.braked[i]:
            stribeck = bool(brakes.stribeck[i])
            lines.append(
                f"  {name:<22}{1e3 * brakes.engage_delay[i]:>8.1f}{_cell(1e3 * brakes.rise_time[i], '.1f'):>8}"
                f"{brakes.sliding_torque[i]:>10.2f}"
                f"{_cell(brakes.breakaway_torque[i] if stribeck else 0.0, '.2f'):>11}"
                f"{_cell(brakes.stribeck_velocity[i] if stribeck else 0.0, '.3f'):>8}"
                f"{brakes.holding_torque[i]:>10.2f}{_cell(brakes.viscous[i], '.3f'):>10}"
                f"{_cell(brakes.armature[i], '.3f'):>10}{_cell(1e3 * brakes.pawl_delay[i], '.1f'):>8}")
    lines.append("  Model: torque = r(t) [sliding + (breakaway - sliding) exp(-(v/v_s)^2)] + viscous v against the "
                 "motion, r rising from 0 to 1 over 'rise' after 'delay';")
    lines.append("  the joint sticks while the load stays within r(t) x holding; armature = rotor inertia reflected "
                 "to the joint (docs/estop.md, 'Brake model').")
    try:
        with open(loaded.brake_source, encoding="utf-8") as fh:
            notes = [ln.rstrip()[1:].strip() for ln in fh if ln.startswith("#")]
    except OSError:
        notes = []
    if notes:
        lines += ["Source and assumptions stated in the brake file:"] + [f"  {n}" for n in notes[:30]]
    return lines


def write_csv(path: str, points: Sequence[StoppingPoint], document: dict | None = None) -> None:
    """One row per point (the test pose last), headed by ``# key: value`` lines saying what produced it and a
    ``# units: {...}`` line giving each column's unit (SI: rad, s, m, kg; readers that skip comments read on)."""
    from vtm_dynamics.core.stopping.iso10218 import POINT_UNITS

    keys = [k for k in asdict(points[0]) if k != "q_test"]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        if document:
            fh.write("\n".join(provenance.comment_lines((f"vtm-stopping-data {k}", json.dumps(v))
                                                        for k, v in document.items())) + "\n")
        units = {k: POINT_UNITS[k] for k in keys + ["q_test"]}
        fh.write("\n".join(provenance.comment_lines([("units", json.dumps(units))])) + "\n")
        w = csv.writer(fh)
        w.writerow(keys + ["q_test"])
        for p in points:
            d = asdict(p)
            w.writerow([repr(d[k]) if isinstance(d[k], float) else "; ".join(d[k]) if isinstance(d[k], tuple) else d[k]
                        for k in keys]
                       + [" ".join(repr(x) for x in p.q_test)])


def category1_page(spec: StoppingTestSpec, points: Sequence[StoppingPoint]) -> tuple[list[str], dict[int, tuple]]:
    """What the report says about category 1, and the joints charted per category (category 1: one chart when the
    three joints' points are identical)."""
    from vtm_dynamics.core.estop.inputs import torque_limits_text

    if 1 not in spec.categories:
        return (["Stop category 1 is LEFT OUT of this report.", "",
                 "Why: a category-1 stop is a controlled ramp of the drives before the power is cut. Its deceleration "
                 "is a setting of the robot controller,", "and the published data (the makers' category-0 figures "
                 "the brakes were fitted to) give none. A chart computed from an assumed",
                 "deceleration shows the assumption (angle v^2 / 2a and time v / a at every point), not the robot.",
                 "", "To include it, state your controller's ramp: vtm-stopping-data ... --category 0 1 --decel X "
                 "(rad/s^2); the report then says", "on its category-1 pages that the deceleration is the value you "
                 "stated."], {0: tuple(spec.joints)})
    cat1 = [p for p in points if p.category == 1]
    by_joint = {}
    for p in cat1:
        by_joint.setdefault(p.joint, []).append((p.speed_fraction, p.extension_fraction, p.payload_fraction,
                                                 round(p.angle, 6), round(p.time, 6)))
    shapes = {tuple(sorted((a, t) for *_, a, t in v)) for v in by_joint.values()}
    same = len(shapes) == 1 and len(by_joint) > 1
    a = spec.category1_deceleration
    note = [f"Stop category 1 modelled from a STATED deceleration: {a:g} rad/s^2 (--decel, given by the user; not "
            "from the robot maker).", "", "Each tested joint ramps down at that deceleration (angle v^2 / 2a, time "
            "v / a), power is removed at standstill and the brakes engage;",
            *([f"where the drives' torque limits ({torque_limits_text(spec.category1_torque_limits)}) cannot give "
               "that deceleration, the ramp is lengthened until they can (angle and time above v^2 / 2a, v / a);"]
              if spec.category1_torque_limits is not None else []),
            "the band shows what the brakes add after power-off (a shoulder or elbow may sag during the engage delay "
            "and rise)."]
    if same:
        note += ["", f"The three joints' category-1 points are identical to 1e-6 (the same ramp for each): one chart "
                 f"({spec.joints[0]}) stands for all of them."]
    return note, {0: tuple(spec.joints), 1: tuple(spec.joints[:1]) if same else tuple(spec.joints)}


def document_control(loaded: LoadedRobot, argv: Sequence[str] | None) -> dict:
    """What identifies the data set: robot, URDF hash, brake file and hash, software, date, command line."""
    return {"robot": loaded.name, "model_sha256": provenance.text_sha256(loaded.text),
            "brakes_file": os.path.abspath(loaded.brake_source),
            "brakes_sha256": provenance.file_sha256(loaded.brake_source), "software": provenance.software(),
            "date_utc": provenance.now_utc(),
            "command": "vtm-stopping-data " + " ".join(argv if argv is not None else sys.argv[1:]),
            "statement": "simulated: predictions of the vtm_dynamics model with brakes fitted to three published "
                         "values per robot; not measured"}


def write_report(path: str, loaded: LoadedRobot, brakes: BrakeSet, spec: StoppingTestSpec,
                 points: Sequence[StoppingPoint], rows: list[dict], document: dict) -> int:
    """The PDF (:mod:`vtm_dynamics.cli.stopping_report`); returns its number of pages."""
    from vtm_dynamics.cli import stopping_report as report
    from vtm_dynamics.cli.stopping_charts import vendor_chart
    from vtm_dynamics.core.stopping.iso10218 import LEVELS

    sw = document["software"]
    software = f"{sw['name']} {sw['version']}" + (f" (git {sw['git_commit']})" if sw["git_commit"] else "")
    control = report.DocumentControl(loaded.name, document["model_sha256"], document["brakes_file"],
                                     document["brakes_sha256"], software, document["date_utc"], document["command"])
    robot = loaded.robot
    cat1_note, charted = category1_page(spec, points)
    summary = [
        f"Robot {loaded.name}: URDF model {robot.name!r}, {robot.nv} joints, sha256 {control.model_sha256}",
        f"Brakes {control.brake_file}, sha256 {control.brake_sha256}",
        f"Software {software}; made {control.date}",
        f"Command: {control.command}",
        "",
        "What this document holds: the stopping angle and time of the three joints of greatest displacement (ISO "
        "10218-1 style), at",
        f"{', '.join(f'{x:.0%}' for x in LEVELS)} of speed, extension and payload, for stop categor"
        + ("ies 0 and 1" if 1 in spec.categories else "y 0 (category 1: see its page)")
        + ", each with the band over the brake tolerances and the TCP's",
        "stopping distance. Pages: this summary, the brakes and assumptions, the test poses, one chart per joint, "
        "the numeric table of every point.",
        f"Tested joints: {', '.join(spec.joints)}; payload frame {spec.payload_frame}; TCP {spec.distance_frame}; "
        f"others {'held' if spec.hold_others else 'braked'}.",
        "",
        "How the figures were made: each point is one prediction of the multibody E-stop model (rigid links, "
        "brakes with delay, rise,",
        "sliding/breakaway/viscous torque, holding capacity, rotor inertia; stick/slip and momentum-consistent "
        "locks), repeated at every",
        "corner of the brake band. The brake parameters were FITTED to three published figures per robot; nothing "
        "here is a measurement.",
        "",
    ] + table_lines(rows)
    charts = [(f"Stop category {cat}: {joint}",
               lambda fig, c=cat, j=joint: vendor_chart(
                   points, c, j, f"{loaded.name}, stop category {c}, {j}: stopping angle and time against speed",
                   fig=fig, published=next((f for f in published_figures(loaded.name if loaded.defaults else "")
                                            if f.joint == j), None) if c == 0 else None))
              for cat, joints in charted.items() for joint in joints]
    return report.write_pdf(path, control, summary, brake_lines(loaded, brakes),
                            assumptions(loaded, spec, points), charts, report.points_table(points),
                            lambda fig: report.pose_figure(robot, spec, [p for p in points if p.category == 0]
                                                           or points, fig),
                            cat1_note)


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog=PROG, description="ISO 10218-1 style stopping data: charts, CSV/JSON and a PDF report (every "
                "figure simulated).")
    add_robot_arguments(ap, tcp_help="frame whose stopping distance is reported (default: the robot's TCP); the "
                        "payload and the extension stay at the robot's payload frame (tool0 for the URs; with --urdf: "
                        "this frame)")
    ap.add_argument("--max-payload", type=float, help="maximum payload [kg] (default: the robot's rated payload)")
    ap.add_argument("--max-speeds", type=float, nargs="+", help="100 %% speed [rad/s] of each tested joint (default: "
                    "the vendor's joint speed limits, capped by the URDF)")
    ap.add_argument("--fold", help="joint that folds the arm to 33/66 %% extension for every tested joint (default: "
                    "the robot's stated fold joints; for --urdf the elbow-like joint)")
    ap.add_argument("--base-pose", type=float, nargs="+", help="100 %% extension pose [rad] (default: q = 0)")
    ap.add_argument("--category", type=int, nargs="+", default=[0], choices=(0, 1),
                    help="stop categories; 1 needs --decel (the published data give no category-1 deceleration)")
    ap.add_argument("--others", choices=("braked", "held"), default="braked",
                    help="the joints not under test: braked like the tested joint (true category 0, the test the "
                    "default brakes were fitted with) or held rigid (locked at t = 0)")
    ap.add_argument("--decel", type=float, help="category 1: your controller's deceleration ramp [rad/s^2], stated "
                    "in the report as its source (no default)")
    add_torque_limits_option(ap)
    ap.add_argument("--out", required=True, help="output directory")
    return ap


def run(args: argparse.Namespace, progress=None, argv: Sequence[str] | None = None) -> dict:
    from vtm_dynamics.cli.stopping_charts import save_vendor_charts
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.stopping.iso10218 import POINT_UNITS, stopping_points

    loaded = load_robot(None if args.urdf else args.robot, args.urdf, args.brakes)
    brakes = brakes_from_config(loaded.robot, loaded.brake_config)
    spec = spec_for(loaded, args)
    points = stopping_points(loaded.robot, brakes, spec, progress=progress)
    name = loaded.name if loaded.defaults else ""
    rows = published_table(name, points)
    document = document_control(loaded, argv)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"{loaded.name}_stopping_data")
    write_csv(stem + ".csv", points, document)
    with open(stem + ".json", "w", encoding="utf-8") as fh:
        json.dump(provenance.json_ready({  # strict JSON: a time of a point that did not stop is null
            "document": document, "robot": loaded.name, "spec": asdict(spec), "point_units": POINT_UNITS,
            "points": [asdict(p) for p in points], "published_comparison": rows,
            "assumptions": assumptions(loaded, spec, points)}), fh, indent=1, allow_nan=False)
    sw = document["software"]
    source = (f"{loaded.name} (URDF {document['model_sha256'][:10]}), brakes {os.path.basename(loaded.brake_source)} "
              f"({document['brakes_sha256'][:10]}); simulated, brakes fitted to published figures; {sw['name']} "
              f"{sw['version']}" + (f" {sw['git_commit']}" if sw["git_commit"] else "") + f"; {document['date_utc']}")
    published = {f.joint: f for f in published_figures(name)}
    charts = save_vendor_charts(args.out, points, loaded.name, published, source,
                                category1_page(spec, points)[1])
    pages = write_report(stem + ".pdf", loaded, brakes, spec, points, rows, document)
    return {"points": points, "rows": rows, "pages": pages,
            "files": [stem + ".csv", stem + ".json", *charts, stem + ".pdf"]}


@quiet_when_output_closed
def main(argv: Sequence[str] | None = None) -> int:
    args = parse_or_exit_status(build_parser(), argv)
    if isinstance(args, int):  # argparse printed its one line or the help
        return args

    def progress(done: int, total: int) -> None:
        sys.stderr.write(f"\rstopping data: {done}/{total} test points")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    try:
        result = run(args, progress, argv)
    except (ValueError, OSError) as err:
        sys.stderr.write(f"{PROG}: error: {first_line(err)}\n")
        return 2
    print("\n".join(table_lines(result["rows"])))
    for f in result["files"]:
        print(f"wrote {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

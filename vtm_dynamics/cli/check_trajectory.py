"""``vtm-check-trajectory``: does every emergency stop along a planned trajectory end clear of the scene, and how
fast may the trajectory run so that it does (docs/stopsafe.md).

Examples::

    vtm-check-trajectory plan.yaml --scene cell.yaml                      # UR5, category 0, 9-case envelope
    vtm-check-trajectory plan.csv --scene cell.yaml --scale --plots out/ --json out/check.json
    vtm-check-trajectory rec_bag --topic /planned --scene cell.yaml --rate 100
    vtm-check-trajectory plan.yaml --scene cell.yaml --view check.html   # the check in 3-D (or --serve)
    vtm-check-trajectory plan.yaml --scene cell.yaml --urdf arm.urdf --brakes arm_brakes.yaml \\
        --package-dir ~/ws/src --fixed-joint finger_joint1=0.02 --mesh fixture=fixture.stl

The trajectory is a YAML or CSV file (JointTrajectory fields) or a rosbag2 folder with JointTrajectory messages.
Exit status: 0 every stop ends clear, 1 some stop does not (the first is named), 2 bad input (one line
``vtm-check-trajectory: error: <field>: <reason>``). Long runs state their estimated cost first and show a progress
bar; runs estimated above ``--max-minutes`` are refused.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
from typing import TYPE_CHECKING, Sequence

import numpy as np
import yaml

from vtm_dynamics.cli.stopsafe_setup import LoadedSetup, ProgressBar, add_robot_arguments, fmt_seconds, load_setup
from vtm_dynamics.core.estop import StopInputError
from vtm_dynamics.core.estop.limit_crossings import crossings_text
from vtm_dynamics.core.stopsafe.results import SpeedScaling, TrajectoryCheck
from vtm_dynamics.core.stopsafe.scene import MAX_SCENE_BYTES, Scene, load_mesh_file, scene_from_yaml_text
from vtm_dynamics.core.excerpt import first_line
from vtm_dynamics.cli.arguments import (
    Parser, RawDescriptionHelpFormatter, parse_or_exit_status, quiet_when_output_closed,
)

if TYPE_CHECKING:  # the check (Pinocchio, coal, the engine) is imported when it runs, not for --help
    from vtm_dynamics.core.stopsafe.check import TrajectoryChecker
    from vtm_dynamics.core.stopsafe.trajectory import PlannedTrajectory

PROG = "vtm-check-trajectory"
MAX_MESHES = 64
SCALING_TRIALS_ESTIMATE = 9  # bisection to 1 % from one end plus the monotonicity probes and the re-check


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog=PROG, description=__doc__.split("\n\n")[0].replace("``", ""), formatter_class=RawDescriptionHelpFormatter)
    ap.add_argument("trajectory", help="trajectory: .yaml/.yml/.csv file or a rosbag2 folder")
    ap.add_argument("--scene", required=True, help="scene YAML (docs/stopsafe.md)")
    ap.add_argument("--mesh", action="append", default=[], metavar="NAME=FILE",
                    help="a mesh file the scene names by mesh_name (repeatable)")
    ap.add_argument("--topic", help="bag: the JointTrajectory topic (default: the only one)")
    ap.add_argument("--index", type=int, default=0, help="bag: which message (0 first, -1 last)")
    add_robot_arguments(ap)
    k = ap.add_argument_group("check")
    k.add_argument("--margin", type=float, default=0.02, help="clearance required from the scene [m]")
    k.add_argument("--self-margin", type=float, default=0.0, help="clearance between the robot's parts [m]")
    k.add_argument("--rate", type=float, help="fixed E-stop instants per second [Hz] (default: refined until the "
                                              "bound between instants meets --tolerance)")
    k.add_argument("--tolerance", type=float, default=0.005, help="bound between E-stop instants [m]")
    k.add_argument("--pose-tolerance", type=float, default=0.005, help="resolution within a stop [m]")
    k.add_argument("--max-samples", type=int, default=20_000, help="cap on E-stop instants")
    k.add_argument("--max-minutes", type=float, default=30.0, help="refuse runs estimated longer [min]")
    s = ap.add_argument_group("speed scaling")
    s.add_argument("--scale", action="store_true", help="find the largest safe speed scaling (bisection)")
    s.add_argument("--max-scaling", type=float, default=1.0, help="largest scaling tried")
    s.add_argument("--scale-tolerance", type=float, default=0.01, help="relative width of the bisection")
    s.add_argument("--per-segment", action="store_true", help="also one scaling per segment")
    s.add_argument("--write-scaled", metavar="YAML", help="write the trajectory re-timed at the scaling found")
    o = ap.add_argument_group("output")
    o.add_argument("--json", help="write the full result (with the 3-D viewer data) as JSON")
    o.add_argument("--csv", help="write one row per E-stop instant")
    o.add_argument("--plots", metavar="DIR", help="write clearance.png and worst_stop.png")
    o.add_argument("--quiet", action="store_true", help="no progress output")
    from vtm_dynamics.cli.view_output import add_view_arguments

    add_view_arguments(ap, "the check (the robot along the trajectory through the scene, the worst stop with its "
                       "rest pose, the closest approach, safe and unsafe E-stop instants on the timeline)")
    return ap


def load_trajectory(args: argparse.Namespace) -> PlannedTrajectory:
    from vtm_dynamics.core.stopsafe.trajectory_files import read_trajectory_file

    if os.path.isdir(args.trajectory):
        from vtm_dynamics.recordings.planned_trajectories import read_planned_trajectory

        return read_planned_trajectory(args.trajectory, args.topic, args.index)
    return read_trajectory_file(args.trajectory)


def load_scene(args: argparse.Namespace) -> Scene:
    from vtm_dynamics.core.stopsafe.trajectory_files import read_text_file

    if len(args.mesh) > MAX_MESHES:
        raise StopInputError(f"mesh: at most {MAX_MESHES} meshes")
    meshes = {}
    for item in args.mesh:
        name, _, path = item.partition("=")
        if not name or not path:
            raise StopInputError(f"mesh: expected NAME=FILE, got {item[:60]!r}")
        meshes[name] = load_mesh_file(path)
    text = read_text_file(args.scene, "scene", MAX_SCENE_BYTES, StopInputError)
    return scene_from_yaml_text(text, meshes, os.path.basename(args.scene)[:120])


# ------------------------------------------------------------------------------------------------ output
def summary_text(loaded: LoadedSetup, traj: PlannedTrajectory, result: TrajectoryCheck,
                 scaling: SpeedScaling | None) -> str:
    lines = [f"Stop-safe check: {loaded.name} ({len(loaded.robot.joint_names)} joints), "
             f"{traj.n_points} points, {traj.duration:.3f} s, {traj.interpolation} interpolation",
             f"cases per E-stop instant: {len(result.cases)} ({loaded.sources['envelope']})",
             *([f"category 1: {loaded.sources['category1']}"] if loaded.sources.get("category1") else []),
             f"E-stop instants: {len(result.samples)}, stops predicted: {result.n_stops}, exact distances: "
             f"{result.exact_calls}"]
    tol = "fixed rate" if result.tolerance is None else f"tolerance {result.tolerance:g} m"
    lines.append(f"sampling bound between instants: max {result.max_sampling_bound:.4f} m ({tol}, "
                 f"{result.rounds} refinement rounds, {result.intervals_over_tolerance} intervals above the "
                 f"tolerance, {result.suspect_intervals} suspect)")
    lines.append("")
    cc = result.column("certified_clearance")
    i = int(np.argmin(cc)) if len(cc) else 0
    if result.samples:
        w = result.samples[i]
        lines.append(f"smallest certified clearance: {cc[i]:.4f} m at t = {w.time:.4f} s "
                     f"({w.pair[0]} - {w.pair[1]}), margin {result.margin:g} m")
        sc = result.column("certified_self_clearance")
        j = int(np.argmin(sc))
        if math.isfinite(sc[j]):
            lines.append(f"smallest certified self clearance: {sc[j]:.4f} m at t = {result.samples[j].time:.4f} s "
                         f"({result.samples[j].self_pair[0]} - {result.samples[j].self_pair[1]}), "
                         f"self margin {result.self_margin:g} m")
        st = result.column("stop_time")
        td = result.column("tcp_distance")
        lines.append(f"longest stop: {np.max(st):.4f} s; longest TCP stopping distance: {np.nanmax(td) if np.isfinite(td).any() else math.nan:.4f} m")
    crossed = [s for s in result.samples if s.limit_crossings]
    if crossed:  # the model has no end stops: such a stop is not the robot's, whatever its clearance
        lines.append(f"E-stop instants whose stop goes past a joint limit: {len(crossed)} of {len(result.samples)}, "
                     f"first at t = {crossed[0].time:.4f} s: {crossings_text(crossed[0].limit_crossings)}")
    if result.safe:
        lines.append("RESULT: every predicted stop ends clear")
    else:
        f = result.first_unsafe
        lines.append(f"RESULT: UNSAFE - first at t = {f.time:.4f} s: {f.reason}" if f else "RESULT: UNSAFE")
    if scaling is not None:
        lines.append("")
        lines.append(f"largest safe speed scaling: {scaling.scaling:.4f} (upper limit {scaling.upper_limit:.4f}, "
                     f"tolerance {scaling.tolerance:g}); monotone in the trials: {'yes' if scaling.monotone else 'NO'}; "
                     f"re-check at it: {'passes' if scaling.recheck is not None and scaling.recheck.safe else 'FAILS'}")
        lines.append("  trials: " + ", ".join(f"{t.scaling:.4f} {'ok' if t.safe else 'unsafe'}" for t in scaling.trials))
        if scaling.per_segment is not None:
            ok = scaling.per_segment_recheck is not None and scaling.per_segment_recheck.safe
            lines.append("  per segment: " + ", ".join(f"{x:.3f}" for x in scaling.per_segment)
                         + f" (re-check {'passes' if ok else 'FAILS'})")
    return "\n".join(lines)


def _f(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def result_to_dict(loaded: LoadedSetup, traj: PlannedTrajectory, scene, result: TrajectoryCheck,
                   scaling: SpeedScaling | None) -> dict:
    """JSON-ready dict: inputs, per-sample rows, summary, scaling, and ``viewer`` (scene, worst stop paths,
    closest points) for a 3-D viewer."""
    rows = [{
        "time_s": s.time, "stop_time_s": _f(s.stop_time), "tcp_distance_m": _f(s.tcp_distance), "stopped": s.stopped,
        "clearance_m": _f(s.clearance), "resolution_m": s.resolution, "sampling_bound_m": s.sampling_bound,
        "certified_clearance_m": _f(s.certified_clearance), "pair": list(s.pair), "case": s.case,
        "stop_instant_s": _f(s.stop_instant), "self_clearance_m": _f(s.self_clearance),
        "certified_self_clearance_m": _f(s.certified_self_clearance), "self_pair": list(s.self_pair),
        "safe": s.safe, "reason": s.reason, "limit_crossings": list(s.limit_crossings),
    } for s in result.samples]
    out = {
        "robot": loaded.name, "joint_names": list(loaded.robot.joint_names), "sources": loaded.sources,
        "trajectory": {"points": traj.n_points, "duration_s": traj.duration, "interpolation": traj.interpolation},
        "margin_m": result.margin, "self_margin_m": result.self_margin, "cases": list(result.cases),
        "safe": result.safe, "complete": result.complete,
        "first_unsafe_time_s": result.first_unsafe.time if result.first_unsafe else None,
        "past_limit_instants": sum(bool(s.limit_crossings) for s in result.samples),
        "sampling": {"tolerance_m": result.tolerance, "max_bound_m": result.max_sampling_bound,
                     "intervals_over_tolerance": result.intervals_over_tolerance,
                     "suspect_intervals": result.suspect_intervals, "rounds": result.rounds},
        "n_stops": result.n_stops, "exact_calls": result.exact_calls, "samples": rows,
        "viewer": viewer_data(loaded, scene, result),
    }
    if scaling is not None:
        out["speed_scaling"] = {
            "scaling": scaling.scaling, "upper_limit": scaling.upper_limit, "tolerance": scaling.tolerance,
            "monotone": scaling.monotone, "recheck_safe": bool(scaling.recheck and scaling.recheck.safe),
            "trials": [{"scaling": t.scaling, "safe": t.safe, "min_certified_clearance_m": _f(t.min_certified_clearance),
                        "complete": t.complete} for t in scaling.trials],
            "per_segment": None if scaling.per_segment is None else scaling.per_segment.tolist(),
        }
    return out


def viewer_data(loaded: LoadedSetup, scene, result: TrajectoryCheck) -> dict:
    """The worst stop, the scene and the closest points as plain data (world frame, m, s, rad)."""
    from vtm_dynamics.core.stopsafe.viewer_data import worst_stop_paths

    data: dict = {"scene": scene.as_dict()["scene"], "worst": None}
    if result.worst is not None:
        data["worst"] = worst_stop_paths(loaded.geometry, result.worst, loaded.tcp_frame)
    return data


def write_csv(path: str, result: TrajectoryCheck) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["time_s", "stop_time_s", "tcp_distance_m", "clearance_m", "resolution_m", "sampling_bound_m",
                    "certified_clearance_m", "link", "obstacle", "self_clearance_m", "certified_self_clearance_m",
                    "self_link_a", "self_link_b", "safe", "reason"])
        for s in result.samples:
            w.writerow([repr(s.time), repr(s.stop_time), repr(s.tcp_distance), repr(s.clearance), repr(s.resolution),
                        repr(s.sampling_bound), repr(s.certified_clearance), s.pair[0], s.pair[1],
                        repr(s.self_clearance), repr(s.certified_self_clearance), s.self_pair[0], s.self_pair[1],
                        int(s.safe), s.reason])


# ------------------------------------------------------------------------------------------------ run
def estimate(checker: TrajectoryChecker, traj: PlannedTrajectory) -> tuple[int, float]:
    """(E-stop instants, seconds) the check is expected to take, from two predicted and swept stops."""
    from vtm_dynamics.core.stopsafe.sampling import estimated_instants
    from vtm_dynamics.core.stopsafe.stop_cases import predict_stops, stop_times
    from vtm_dynamics.core.stopsafe.trajectory import check_limits, model_order

    order = model_order(checker.setup.robot, traj)
    check_limits(checker.setup.robot, traj, order)
    per_stop = checker.seconds_per_stop(traj)
    q0 = order.columns(traj.evaluate([traj.start], 0))
    v0 = order.columns(traj.evaluate([traj.start], 1))
    _, T = stop_times(predict_stops(checker.setup, q0, v0, cases=checker.setup.worst_corner)[0])
    T = np.maximum(T, 1.5 * float(np.max(T)))  # the stops elsewhere can be longer than the first one
    n = estimated_instants(traj, order, checker.settings.sampling, T, checker.sweeper.weights)
    return n, n * len(checker.setup.cases) * per_stop


def run(args: argparse.Namespace) -> tuple[int, str, bytes]:
    """(exit status, the summary and the files written, the page to serve for ``--serve`` or b"")."""
    from vtm_dynamics.cli import view_output
    from vtm_dynamics.core.stopsafe.check import CheckSettings, TrajectoryChecker
    from vtm_dynamics.core.stopsafe.sampling import SamplingSpec
    from vtm_dynamics.core.stopsafe.speed_scaling import largest_speed_scaling

    view_output.check_view_target(args)  # before the check: a long run must not end in an unwritable view
    loaded = load_setup(args)
    traj = load_trajectory(args)
    scene = load_scene(args)
    settings = CheckSettings(margin=args.margin, self_margin=args.self_margin, pose_tolerance=args.pose_tolerance,
                             sampling=SamplingSpec(rate=args.rate, tolerance=args.tolerance,
                                                   max_samples=args.max_samples))
    checker = TrajectoryChecker(loaded.setup, loaded.geometry, scene, settings, loaded.tcp_frame)
    n, seconds = estimate(checker, traj)
    if args.scale:
        seconds *= SCALING_TRIALS_ESTIMATE
    if seconds > 60.0 * args.max_minutes:
        raise StopInputError(f"cost: about {n} E-stop instants x {len(checker.setup.cases)} cases would take "
                             f"{fmt_seconds(seconds)} here, more than --max-minutes {args.max_minutes:g} (lower "
                             "--rate, raise --tolerance or --max-minutes)")
    if seconds > 10.0 and not args.quiet:
        sys.stderr.write(f"{PROG}: about {n} E-stop instants x {len(checker.setup.cases)} cases = "
                         f"{n * len(checker.setup.cases)} stops, estimated {fmt_seconds(seconds)}"
                         f"{' with the speed-scaling search' if args.scale else ''}\n")
    bar = ProgressBar("checking", args.quiet)
    result = checker.check(traj, progress=bar)
    bar.close()
    scaling = None
    if args.scale:
        scaling = largest_speed_scaling(checker, traj, max_scaling=args.max_scaling, per_segment=args.per_segment,
                                        tolerance=args.scale_tolerance,
                                        progress=None if args.quiet else
                                        (lambda text: sys.stderr.write(f"{PROG}: {text}\n")))
    files = []
    if args.write_scaled and scaling is not None and scaling.scaling > 0:
        scaled = traj.retimed(scaling.scaling)
        with open(args.write_scaled, "w", encoding="utf-8") as fh:
            yaml.safe_dump(scaled.as_message_dict(), fh, sort_keys=False)
        files.append(args.write_scaled)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result_to_dict(loaded, traj, scene, result, scaling), fh, indent=1)
        files.append(args.json)
    if args.csv:
        write_csv(args.csv, result)
        files.append(args.csv)
    if args.plots:
        from vtm_dynamics.cli import stopsafe_plots

        os.makedirs(args.plots, exist_ok=True)
        files += stopsafe_plots.check_plots(args.plots, loaded, scene, result)
    text = summary_text(loaded, traj, result, scaling) + "".join(f"\nwrote {f}" for f in files)
    page = b""
    if view_output.wants_view(args):
        said: list[str] = []
        page = view_output.show_check(args, loaded, traj, scene, result, scaling, said.append, serve=False)
        text += "".join(f"\n{line}" for line in said)
    return (0 if result.safe else 1), text, page


@quiet_when_output_closed
def main(argv: Sequence[str] | None = None) -> int:
    args = parse_or_exit_status(build_parser(), argv)
    if isinstance(args, int):  # argparse printed its one line or the help
        return args
    from vtm_dynamics.core.stopsafe.stop_cases import CheckCancelled  # after parsing: --help stays light
    from vtm_dynamics.views.web_page import ViewError

    try:
        status, text, page = run(args)
    except (ValueError, OSError, CheckCancelled, ViewError) as err:  # our errors are one line naming the field
        msg = first_line(err)
        sys.stderr.write(f"{PROG}: error: {msg}\n")
        return 2
    print(text, flush=True)
    if page:
        from vtm_dynamics.views.serve import serve_until_interrupted

        try:
            serve_until_interrupted(page, args.port)
        except OSError as err:  # the port is taken or not allowed
            sys.stderr.write(f"{PROG}: error: serve: port {args.port}: {err.strerror or type(err).__name__}\n")
            return 2
    return status


if __name__ == "__main__":
    sys.exit(main())

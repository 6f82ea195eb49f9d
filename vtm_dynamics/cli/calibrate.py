"""``vtm-calibrate``: fit per-joint brake parameters to recorded stops (rosbag2, sqlite3 or MCAP).

Examples::

    vtm-calibrate stops_1 stops_2 --robot ur5 --out ur5_site_brakes.yaml --report fit.json --plots fit_plots/
    vtm-calibrate bag --urdf my_arm.urdf --prior my_brakes.yaml --tcp-frame tool0 --out fitted.yaml
    vtm-calibrate bag --robot ur5 --out b.yaml --trigger-topic /io_and_status_controller/safety_mode \\
        --trigger-type ur_dashboard_msgs/msg/SafetyMode --trigger-field mode \\
        --trigger-values ROBOT_EMERGENCY_STOP SYSTEM_EMERGENCY_STOP

It reads every bag (``vtm_dynamics.recordings``), finds every stop (trigger edges, rest), fits the brake
parameters of the prior configuration (default: the robot's shipped brakes) to all stops by nonlinear least squares
(``vtm_dynamics.core.estop.identification``), prints the parameters with their 1-sigma, the parameters the stops
cannot identify with the test motion that would, and per stop the predicted vs recorded stopping angle, time and
TCP distance, and writes the brake YAML that ``vtm-predict`` and the ``estop_predictor`` node load. ``--holdout N``
keeps the last N stops out of the fit and reports how well they are predicted.

Bad input (no such topic, joints that do not match the model, a corrupt or truncated bag, a stop cut off by the end
of the recording, a trigger field that the type does not have) prints one line ``vtm-calibrate: error: ...`` and
exits with status 2; no YAML, report or plot is written then (files are written only after the fit succeeded,
each through a temporary file and a rename).
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Sequence

from vtm_dynamics.cli import stop_report
from vtm_dynamics.cli.arguments import Parser
from vtm_dynamics.cli.recorded_stops import add_recording_options, read_stops
from vtm_dynamics.cli.robot_choice import ROBOT_HELP, default_brakes_path, default_tcp_frame, load_robot
from vtm_dynamics.core.estop.brakes import BRAKE_FIELDS, brakes_from_config
from vtm_dynamics.core.estop.identification import (
    DEFAULT_FIELDS, Identification, compare_stops, default_parameters, identify_brakes,
)
from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.robot.catalogue import DEFAULT_ROBOT

PROG = "vtm-calibrate"


def parse_assumed(items: Sequence[str]) -> dict[str, float]:
    """``FIELD=REL`` items as {field: relative 1-sigma}; ValueError naming the item."""
    out = {}
    for item in items:
        field, _, text = item.partition("=")
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if field not in BRAKE_FIELDS or field == "side" or not (math.isfinite(value) and value > 0):
            raise ValueError(f"assume: {item!r} is not FIELD=REL with a brake field and a relative 1-sigma > 0")
        out[field] = value
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog=PROG, description="Fit brake parameters to recorded stops (rosbag2).")
    ap.add_argument("bags", nargs="+", help="rosbag2 directories (sqlite3 or MCAP storage)")
    ap.add_argument("--robot", default=DEFAULT_ROBOT, help=f"robot: {ROBOT_HELP} (ignored with --urdf)")
    ap.add_argument("--urdf", help="URDF file of another robot (then --prior is required)")
    ap.add_argument("--payload", type=float, default=0.0, help="payload mass at the TCP during the recording [kg]")
    ap.add_argument("--tcp-frame", help="frame whose stopping distance is reported (default: the robot's TCP)")
    ap.add_argument("--prior", help="brake YAML to start from (default: the robot's shipped brakes)")
    ap.add_argument("--fields", nargs="+", default=list(DEFAULT_FIELDS),
                    help="brake fields to fit")
    ap.add_argument("--noise", type=float, default=1e-4, help="position noise of the recording, 1-sigma [rad]")
    ap.add_argument("--assume", nargs="+", default=[], metavar="FIELD=REL",
                    help="fields not fitted whose prior value is uncertain by REL (relative 1-sigma), e.g. "
                         "stribeck_velocity=0.25: their possible error is added to the fitted values' uncertainty")
    ap.add_argument("--holdout", type=int, default=0, help="keep the last N stops out of the fit, to validate")
    ap.add_argument("--out", required=True, help="brake YAML to write")
    ap.add_argument("--report", help="JSON report to write")
    ap.add_argument("--plots", help="folder for the overlay plots (PNG)")
    add_recording_options(ap)
    return ap


def run(args: argparse.Namespace, say=print) -> tuple[Identification, list, list]:
    """The tool's work: returns (identification, comparisons of the fitted stops, comparisons of the held-out)."""
    robot_name = None if args.urdf else args.robot
    _, robot, _ = load_robot(robot_name, args.urdf, args.payload, args.tcp_frame)
    tcp = default_tcp_frame(robot_name, args.tcp_frame)
    prior = brakes_from_config(robot, args.prior or default_brakes_path(robot_name, args.urdf))
    stops = read_stops(args.bags, robot, args, say)
    if not 0 <= args.holdout < len(stops):
        raise ValueError(f"holdout: must leave at least one of the {len(stops)} stops for the fit")
    fit, held = stops[: len(stops) - args.holdout], stops[len(stops) - args.holdout:]
    params = default_parameters(prior.brakes, args.fields)
    ident = identify_brakes(robot, prior.brakes, fit, params, noise=args.noise, assumed=parse_assumed(args.assume),
                            progress=lambda text: sys.stderr.write(text + "\n"))
    fitted = BrakeSet.from_brakes(robot, list(ident.brakes))
    comp = compare_stops(robot, fitted, fit, tcp)
    comp_held = compare_stops(robot, fitted, held, tcp) if held else []
    say("")
    say(stop_report.parameter_table(ident))
    say("")
    say(f"fitted stops ({len(fit)}), residual RMS {ident.residual_rms:.3g} rad, {ident.n_predictions} predictions "
        f"in {ident.seconds:.1f} s:")
    say(stop_report.comparison_table(robot, comp))
    if ident.residual_rms > 2.0 * args.noise:
        say(f"warning: the residual RMS {ident.residual_rms:.3g} rad is more than twice the stated noise "
            f"{args.noise:g} rad: the brake model misses an effect in these stops (try --fields with "
            f"breakaway_torque stribeck_velocity rise_time) or the fit stopped in a local minimum (try a prior "
            f"closer to the robot); check the overlay plots before using the YAML")
    if comp_held:
        say("")
        say(f"held-out stops ({len(held)}), not used in the fit:")
        say(stop_report.comparison_table(robot, comp_held))
    names = [b.rstrip("/").rsplit("/", 1)[-1] for b in args.bags]
    files = [stop_report.write_atomic(args.out, stop_report.brake_yaml(ident, names))]
    if args.report:
        data = stop_report.identification_dict(ident, robot, comp)
        data["held_out"] = stop_report.identification_dict(ident, robot, comp_held)["stops"]
        files.append(stop_report.write_json(args.report, data))
    if args.plots:
        files.extend(stop_report.overlay_plots(args.plots, robot, fit + held, comp + comp_held))
    for f in files:
        say(f"wrote {f}")
    return ident, comp, comp_held


def main(argv: Sequence[str] | None = None) -> int:
    ap = build_parser()
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        run(args)
    except (ValueError, OSError) as err:  # our errors are ValueError subclasses with one line naming the problem
        msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        sys.stderr.write(f"{PROG}: error: {msg}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

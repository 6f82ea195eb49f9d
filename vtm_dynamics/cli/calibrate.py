"""``vtm-calibrate``: fit per-joint brake parameters to recorded stops (rosbag2, sqlite3 or MCAP).

Examples::

    vtm-calibrate stops_1 stops_2 --robot ur5 --out ur5_site_brakes.yaml --report fit.json --plots fit_plots/
    vtm-calibrate bag --urdf my_arm.urdf --prior my_brakes.yaml --tcp-frame tool0 --out fitted.yaml
    vtm-calibrate bag --robot ur5 --out b.yaml --trigger-topic /io_and_status_controller/safety_mode \\
        --trigger-type ur_dashboard_msgs/msg/SafetyMode --trigger-field mode \\
        --trigger-values ROBOT_EMERGENCY_STOP SYSTEM_EMERGENCY_STOP

It reads every bag (``vtm_dynamics.recordings``), finds every stop (trigger edges, rest), measures each joint's
engage delay, sliding law and stick/slip record directly, fits the brake parameters of the prior configuration
(default: the robot's shipped brakes) to all stops from several starts (``vtm_dynamics.core.estop.identification``),
prints the parameters with their 1-sigma and interval, the holding capacities as the stick/slip decisions bound
them, how many starts reached the best optimum, per stop the predicted vs recorded stopping angle, time and TCP
distance, and the leave-one-out cross-validation; then writes the brake YAML that ``vtm-predict`` and the
``estop_predictor`` node load (``--conservative``: the conservative one), with the residual RMS of exactly that
file in its header. ``--holdout N`` keeps the last N stops out of the fit and reports how well they are predicted.

Exit status: 0 when the fit converged and no cross-validated (or held-out) stop is predicted shorter than recorded
by more than ``--tolerance``; 3 (one line: "non-conservative: ...") when one is, or when ``--conservative`` is
asked for and a delay, rise time or armature is not identified (the stops give no upper bound for it), 4 ("not
converged: ...") when the starts of the global fit disagree or agree on an optimum that leaves more than twice the
noise ("inadequate fit: ...", "model: ..."). Neither writes the brake YAML unless accepted explicitly
(``--accept-nonconservative``, ``--accept-unconverged``); the report and plots are written for the diagnosis.

Bad input (no such topic, joints that do not match the model, a corrupt or truncated bag, a stop cut off by the end
of the recording or by a gap in the joint states before rest, a trigger field that the type does not have) prints one line ``vtm-calibrate: error: ...`` and
exits with status 2; no YAML, report or plot is written then (files are written only after the fit succeeded,
each through a temporary file and a rename).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from typing import Sequence

from vtm_dynamics.cli import stop_report
from vtm_dynamics.cli.arguments import Parser, parse_or_exit_status, quiet_when_output_closed
from vtm_dynamics.cli.recorded_stops import (
    EXIT_NONCONSERVATIVE, SHORTFALL_TOLERANCE, add_recording_options, read_stops, shortfall_line,
)
from vtm_dynamics.cli.robot_choice import ROBOT_HELP, default_brakes_path, default_tcp_frame, load_robot
from vtm_dynamics.core.estop.brakes import BRAKE_FIELDS, brakes_from_config
from vtm_dynamics.core.estop.identification import (
    DEFAULT_FIELDS, DEFAULT_STARTS, INADEQUATE_MISFIT, MODEL_MISFIT, Identification, compare_stops,
    default_parameters, identify_brakes,
)
from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.estop.stop_comparison import shortfalls
from vtm_dynamics.core.robot.catalogue import DEFAULT_ROBOT
from vtm_dynamics.core.excerpt import first_line

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


TOLERANCE = SHORTFALL_TOLERANCE  # a cross-validated stop figure this much shorter than recorded is non-conservative
EXIT_UNCONVERGED = 4


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog=PROG, description="Fit brake parameters to recorded stops (rosbag2).")
    ap.add_argument("bags", nargs="+", help="rosbag2 directories (sqlite3 or MCAP storage)")
    ap.add_argument("--robot", default=DEFAULT_ROBOT, help=f"robot: {ROBOT_HELP} (ignored with --urdf)")
    ap.add_argument("--urdf", help="URDF file of another robot (then --prior is required)")
    ap.add_argument("--payload", type=float, default=0.0,
                    help="payload mass during the recording [kg], a point mass at the robot's payload frame (UR: "
                         "tool0; with --urdf: --tcp-frame)")
    ap.add_argument("--tcp-frame", help="frame whose stopping distance is reported (default: the robot's TCP)")
    ap.add_argument("--prior", help="brake YAML to start from (default: the robot's shipped brakes); its fields "
                                    "name the brake model's terms (leave a term out to switch it off)")
    ap.add_argument("--fields", nargs="+", default=list(DEFAULT_FIELDS),
                    help="brake fields to fit (default: %(default)s)")
    ap.add_argument("--noise", type=float, help="the residual RMS a perfect model would leave on these recordings "
                                                "[rad] (default: estimated from them: encoder noise and timestamp "
                                                "jitter)")
    ap.add_argument("--assume", nargs="+", default=[], metavar="FIELD=REL",
                    help="fields not fitted whose prior value is uncertain by REL (relative 1-sigma), e.g. "
                         "stribeck_velocity=0.25: their possible error is added to the fitted values' uncertainty")
    ap.add_argument("--starts", type=int, default=DEFAULT_STARTS,
                    help="starts of the global fit: the direct measurement, the prior, then perturbed values "
                         "(default %(default)s)")
    ap.add_argument("--confidence", type=float, default=0.95, help="confidence of the reported intervals and of "
                                                                   "the conservative file (default %(default)s)")
    ap.add_argument("--tolerance", type=float, default=TOLERANCE,
                    help="a cross-validated stop time or TCP distance shorter than recorded by more than this "
                         "(relative) is a non-conservative result (default %(default)s)")
    ap.add_argument("--conservative", action="store_true",
                    help="write the conservative brakes: every fitted value at the end of its interval that "
                         "lengthens the stop, every capacity at the smallest value the stops allow (for safety "
                         "calculations)")
    ap.add_argument("--accept-nonconservative", action="store_true",
                    help="write the brake file and exit 0 even when its cross-validated stops are shorter than "
                         "recorded")
    ap.add_argument("--accept-unconverged", action="store_true",
                    help="write the brake file and exit 0 even when the starts of the global fit disagree")
    ap.add_argument("--holdout", type=int, default=0, help="keep the last N stops out of the fit, to validate")
    ap.add_argument("--out", required=True, help="brake YAML to write")
    ap.add_argument("--report", help="JSON report to write")
    ap.add_argument("--plots", help="folder for the overlay plots (PNG)")
    add_recording_options(ap)
    return ap


@dataclass(frozen=True)
class CalibrationRun:
    """What a run produced: the identification, the comparisons of the fitted and held-out stops (with the
    brakes written), the verdict lines, the exit status and the files written."""

    ident: Identification
    fitted: list
    held: list
    verdicts: tuple[str, ...]
    status: int
    files: tuple[str, ...]


def verdicts(ident: Identification, checked: Sequence, tolerance: float, noise: float,
             accept_nonconservative: bool, accept_unconverged: bool,
             conservative: bool = False) -> tuple[list[str], int]:
    """The run's verdict lines and exit status: 0 fine, ``EXIT_UNCONVERGED`` when the starts of the global fit
    disagree or agree on an optimum whose residual is over ``MODEL_MISFIT`` times the noise (``INADEQUATE_MISFIT``
    times: a wrong basin as likely as a missing effect; the residual is ``ident.adequacy_residual``, with the
    trigger states of stops recorded without velocities free within their uncertainty), ``EXIT_NONCONSERVATIVE``
    when a cross-validated or held-out stop of the brakes written is shorter than recorded by more than
    ``tolerance``, or when the ``conservative`` file is asked for and some value that lengthens the stop when
    larger (a delay, a rise time, an armature) is not identified: the stops give no upper bound for it (either
    may be accepted explicitly)."""
    lines: list[str] = []
    status = 0
    unbounded = [f"{e.joint}.{e.field}" for e in ident.estimates
                 if e.field != "holding_torque" and not math.isfinite(e.conservative)]
    if conservative and unbounded:
        lines.append(f"non-conservative: {', '.join(unbounded)} not identified by the stops, which give no upper "
                     "bound for it, so the conservative file cannot be at the end that lengthens the stop"
                     + (" (accepted: --accept-nonconservative; written at the nominal value)"
                        if accept_nonconservative else
                        "; the brake file is not written (record the test motion named above, or "
                        "--accept-nonconservative writes it with the nominal value)"))
        status = 0 if accept_nonconservative else EXIT_NONCONSERVATIVE
    if not ident.converged:
        lines.append(f"not converged: only {ident.agreeing} of {len(ident.starts)} starts of the global fit reached "
                     "the best optimum, so it may not be the right one; try more --starts or stops that exercise "
                     "the joints named above" + (" (accepted: --accept-unconverged)" if accept_unconverged else ""))
        status = status or (0 if accept_unconverged else EXIT_UNCONVERGED)
    short = shortfalls(checked, tolerance)
    if short:
        lines.append(shortfall_line(short, tolerance, "cross-validated stop figure(s)")
                     + (" (accepted: --accept-nonconservative)" if accept_nonconservative else
                        "; the brake file is not written (--conservative writes the conservative one, "
                        "--accept-nonconservative writes it anyway)"))
        status = status or (0 if accept_nonconservative else EXIT_NONCONSERVATIVE)
    edge = [f"{e.joint}.{e.field}" for e in ident.estimates if "edge of its search range" in e.reason]
    # stops recorded without velocities are judged with their trigger states free within their uncertainty
    # (Identification.adequacy_residual): the error of a state derived from positions is no misfit of the model
    judged = ident.adequacy_residual
    residual = (f"{ident.residual_rms:.3g} rad ({judged:.3g} rad with the trigger states of the stops recorded "
                "without velocities free within their uncertainty)" if ident.state_free_residual_rms is not None
                else f"{judged:.3g} rad")
    if ident.converged and judged > INADEQUATE_MISFIT * noise:
        # the starts agree on an optimum that misses the recordings: a wrong basin all starts fell into, or an
        # effect the brake model lacks; the tool cannot tell which, so it proposes neither as "the" fix
        ratio = judged / noise
        lines.append(f"inadequate fit: the residual RMS {residual} is {ratio:.1f} x what a perfect "
                     f"model would leave ({noise:.3g} rad)"
                     + (f"; {', '.join(edge)} ran to the edge of the search (a wrong basin is likely)" if edge else "")
                     + "; check the overlay plots, the capacities and the prior before using any file"
                     + (" (accepted: --accept-unconverged)" if accept_unconverged else ""))
        status = status or (0 if accept_unconverged else EXIT_UNCONVERGED)
    elif ident.converged and judged > MODEL_MISFIT * noise:
        # only a converged fit close to the data may blame the model: an unconverged one has not shown what the
        # model can do. A model that misses an effect still moves its fitted values to make up for it (a torque
        # rise left out comes back as engagement delays 10-30 sigma late), and no interval shows such a shared
        # bias: the file is refused like an unconverged one
        lines.append(f"model: the residual RMS {residual} is more than twice the noise {noise:.3g} "
                     "rad at an optimum the starts agree on: the brake model may miss an effect in these stops (the "
                     "terms it can switch on: --fields ... breakaway_torque stribeck_velocity rise_time armature), "
                     "and its fitted values may make up for it beyond their intervals; check the overlay plots"
                     + (" (accepted: --accept-unconverged)" if accept_unconverged else
                        "; the brake file is not written (--accept-unconverged writes it anyway)"))
        status = status or (0 if accept_unconverged else EXIT_UNCONVERGED)
    return lines, status


def run(args: argparse.Namespace, say=print) -> CalibrationRun:
    """The tool's work (files written, verdicts decided); errors are ValueErrors with one line."""
    robot_name = None if args.urdf else args.robot
    _, robot, payload_frame = load_robot(robot_name, args.urdf, args.payload, args.tcp_frame)
    tcp = default_tcp_frame(robot_name, args.tcp_frame)
    prior = brakes_from_config(robot, args.prior or default_brakes_path(robot_name, args.urdf))
    if not (0.0 < args.tolerance < 1.0):
        raise ValueError(f"tolerance: {args.tolerance} is not between 0 and 1")
    stops = read_stops(args.bags, robot, args, say)
    if not 0 <= args.holdout < len(stops):
        raise ValueError(f"holdout: must leave at least one of the {len(stops)} stops for the fit")
    fit, held = stops[: len(stops) - args.holdout], stops[len(stops) - args.holdout:]
    params = default_parameters(prior.brakes, args.fields)
    ident = identify_brakes(robot, prior.brakes, fit, params, noise=args.noise, assumed=parse_assumed(args.assume),
                            starts=args.starts, confidence=args.confidence, tcp_frame=tcp,
                            progress=lambda text: sys.stderr.write(text + "\n"))
    written = ident.conservative_brakes if args.conservative else ident.brakes
    brakes = BrakeSet.from_brakes(robot, list(written))
    comp = compare_stops(robot, brakes, fit, tcp)
    comp_held = compare_stops(robot, brakes, held, tcp) if held else []
    which = "conservative" if args.conservative else "nominal"
    say("")
    say(stop_report.direct_table(ident, robot))
    say("")
    say(stop_report.starts_line(ident))
    say("")
    say(stop_report.parameter_table(ident))
    caps = stop_report.capacity_table(ident)
    if caps:
        say("")
        say(caps)
    say("")
    rms = ident.conservative_residual_rms if args.conservative else ident.residual_rms
    free = (f"; the nominal brakes' {ident.state_free_residual_rms:.3g} rad with the trigger states of the stops "
            "recorded without velocities free within their uncertainty" if ident.state_free_residual_rms is not None
            else "")
    say(f"fitted stops ({len(fit)}) with the {which} brakes, residual RMS {rms:.3g} rad (noise {ident.noise:.3g} "
        f"rad{free}), {ident.n_predictions} predictions in {ident.seconds:.1f} s:")
    say(stop_report.comparison_table(robot, comp))
    cv = ident.conservative_cross_validation if args.conservative else ident.cross_validation
    if cv:
        say("")
        say(f"cross-validation (each stop predicted by the {which} brakes refitted without it):")
        say(stop_report.comparison_table(robot, cv))
    if comp_held:
        say("")
        say(f"held-out stops ({len(held)}), not used in the fit, {which} brakes:")
        say(stop_report.comparison_table(robot, comp_held))
    lines, status = verdicts(ident, list(cv) + list(comp_held), args.tolerance, ident.noise,
                             args.accept_nonconservative, args.accept_unconverged, args.conservative)
    say("")
    for line in lines or ["verdict: converged; every cross-validated stop within the tolerance or longer than recorded"]:
        say(line)
    names = [b.rstrip("/").rsplit("/", 1)[-1] for b in args.bags]
    payload = f"payload {args.payload:g} kg at {payload_frame}" if args.payload else "no payload"
    files = []
    if status == 0:
        files.append(stop_report.write_atomic(args.out, stop_report.brake_yaml(
            ident, names, conservative=args.conservative, payload=payload)))
    if args.report:
        data = stop_report.identification_dict(ident, robot, comp)
        data["held_out"] = stop_report.identification_dict(ident, robot, comp_held)["stops"]
        data["written"] = which if status == 0 else None
        data["verdicts"] = lines
        files.append(stop_report.write_json(args.report, data))
    if args.plots:
        files.extend(stop_report.overlay_plots(args.plots, robot, fit + held, comp + comp_held))
    for f in files:
        say(f"wrote {f}")
    return CalibrationRun(ident, comp, comp_held, tuple(lines), status, tuple(files))


@quiet_when_output_closed
def main(argv: Sequence[str] | None = None) -> int:
    args = parse_or_exit_status(build_parser(), argv)
    if isinstance(args, int):  # argparse printed its one line or the help
        return args
    try:
        result = run(args)
    except (ValueError, OSError) as err:  # our errors are ValueError subclasses with one line naming the problem
        msg = first_line(err)
        sys.stderr.write(f"{PROG}: error: {msg}\n")
        return 2
    if result.status:
        sys.stderr.write(f"{PROG}: {result.verdicts[0] if result.verdicts else 'failed'}\n")
    return result.status


if __name__ == "__main__":
    sys.exit(main())

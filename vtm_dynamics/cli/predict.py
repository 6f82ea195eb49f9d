"""``vtm-predict``: predict an emergency stop from the command line (summary table, JSON/CSV, PNG plots, envelope).

Examples::

    vtm-predict ur5                                   # default state, calibrated UR5 brakes, category 0
    vtm-predict ur5 --q 0 -1.2 1.5 -0.8 0.5 0.2 --v 2 -2.5 2.8 1.5 -2 3 --json stop.json --plots out/
    vtm-predict planar_3r --category 1 --decel 4 --csv stop.csv
    vtm-predict --urdf my_arm.urdf --brakes my_brakes.yaml --q ... --v ... --tcp-frame tool0 --envelope 20
    vtm-predict ur5 --bag site_stops --brakes fitted.yaml   # replay recorded stops: predicted vs what the robot did
    vtm-predict ur5 --envelope 20 --view stop.html          # the stop in 3-D: one HTML file, opens offline
    vtm-predict ur5 --serve                                 # ... shown live on http://127.0.0.1:PORT/

Bad input (unknown joint in the brake file, negative torques, NaN or out-of-limit state) prints one line
``vtm-predict: error: <field>: <reason>`` and exits with status 2. With ``--bag``, status 3 when a recorded stop's
time or TCP distance is predicted shorter than recorded by more than ``--tolerance`` (non-conservative brakes).

The summary, the JSON (``inputs``) and the CSV header state what produced them: robot and model hash, brake file
and hash, payload, stop category and its parameters, integration step and horizon, the envelope's ranges, the
software version and commit (:mod:`vtm_dynamics.cli.provenance`). A stop that carries a joint past its position
limit is marked NOT VALID in the summary, ``"valid": false`` with ``limit_crossings`` in the JSON, ``# vtm-predict
valid: false`` with the reason in the CSV, and in the titles of the plots and of the 3-D view.

Size: about 440 lines: the summary table, the JSON and the CSV share the per-joint units and provenance of one
prediction; split apart, each would repeat them.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from vtm_dynamics.cli import provenance
from vtm_dynamics.cli.arguments import (
    Parser, add_torque_limits_option, parse_or_exit_status, quiet_when_output_closed, robot_name,
)
from vtm_dynamics.cli.prediction_inputs import inputs_lines, plot_source, prediction_inputs
from vtm_dynamics.cli.recorded_stops import EXIT_NONCONSERVATIVE, SHORTFALL_TOLERANCE, shortfall_line
from vtm_dynamics.cli.robot_choice import ROBOT_HELP, default_brakes_path, default_tcp_frame, load_robot
from vtm_dynamics.core.estop.defaults import (
    CATEGORY, CATEGORY1_DECELERATION, ENVELOPE_DELAY_FACTOR, ENVELOPE_TORQUE_FACTOR, INTEGRATION_STEP, PAYLOAD,
)
from vtm_dynamics.core.robot.catalogue import DEFAULT_ROBOT, ROBOTS
from vtm_dynamics.core.excerpt import first_line

if TYPE_CHECKING:  # the engine (Pinocchio, Numba) and matplotlib are imported when a prediction runs, not for --help
    from vtm_dynamics.core.estop import LockEvent, StopPrediction
    from vtm_dynamics.core.estop.brakes import BrakeSet
    from vtm_dynamics.core.estop.envelope import StopEnvelope
    from vtm_dynamics.core.robot.model import RobotModel

PROG = "vtm-predict"


@dataclass(frozen=True)
class PredictionSummary:
    """What a run produced: the prediction (and envelope), the robot name, the files written and ``inputs``, what
    produced them (:func:`prediction_inputs`)."""

    robot: str
    prediction: StopPrediction
    envelope: StopEnvelope | None
    files: tuple[str, ...]
    inputs: dict | None = None


# ---------------------------------------------------------------------------------------------------- output
def summary_table(robot: RobotModel, brakes: BrakeSet, p: StopPrediction, env: StopEnvelope | None = None,
                  inputs: dict | None = None) -> str:
    """Readable plain-text summary of a prediction (the CLI's stdout), headed by its ``inputs``."""
    lines = []
    cat = f"category {p.category}" + (f" (power off at {p.power_off_time:.4f} s)" if p.category == 1 else "")
    label = inputs["robot"] if inputs else robot.name
    lines.append(f"E-stop prediction: {label}, {cat}, {robot.nv} joints")
    if inputs:
        lines += inputs_lines(inputs) + [""]
    if p.stopped:
        lines.append(f"stop time        {p.stop_time:9.4f} s   (all joints held)")
    else:
        lines.append(f"stop time        {p.not_stopped_text(brakes.braked)}")
    lines += [f"NOT VALID        {p.limit_text()}"] if p.limit_crossings else []
    if p.tcp_frame:
        lines.append(f"TCP '{p.tcp_frame}'      straight {p.tcp_straight_distance:.4f} m, path {p.tcp_path_length:.4f} m")
    lines.append(f"energy           brakes {p.brake_energy + 0.0:.3f} J, impulsive locks {p.impulse_energy + 0.0:.3f} J")
    lines.append("")
    # a prismatic joint's figures are in m, m/s and N: the units then move from the header into every row
    linear = any(j.prismatic for j in robot.joints)
    if linear:
        hdr = (f"{'joint':<22}{'q0':>10}{'v0':>12}{'travel':>13}{'stop [s]':>10}{'hold':>12}{'cap':>11}"
               "  units (q0 and travel; v0; hold and cap)")
    else:
        hdr = (f"{'joint':<22}{'q0 [rad]':>10}{'v0 [rad/s]':>12}{'angle [rad]':>13}{'stop [s]':>10}"
               f"{'hold [N m]':>12}{'cap [N m]':>11}")
    lines.append(hdr)
    lines.append("-" * len(hdr))
    q0 = robot.joint_positions(p.q[0])  # a continuous joint's angle from its (cos, sin)
    for i, joint in enumerate(robot.joints):
        st = p.joint_stop_times[i]
        lines.append(
            f"{joint.name:<22}{q0[i]:>10.4f}{p.v[0][i]:>12.4f}"
            f"{p.stopping_angles[i]:>13.5f}{st if np.isfinite(st) else float('nan'):>10.4f}"
            f"{p.holding_torques[i]:>12.2f}{brakes.holding_torque[i]:>11.2f}"
            + (f"  {'; '.join(joint.units)}" if linear else "")
        )
    lines.append("")
    lines.append(f"events ({len(p.events)}):")
    for e in p.events:
        jump = float(np.max(np.abs(e.dv))) if e.dv.size else 0.0
        extra = f"  max|dv| {jump:.4f} rad/s, loss {e.energy_loss:.4f} J" if e.kind == "lock" else ""
        lines.append(f"  {e.time:9.5f} s  {e.kind:<8} {', '.join(e.joints)}{extra}")
    if env is not None:
        lines.append("")
        lines.append(f"envelope over {len(env.cases)} cases (torque x, delay x, payload kg):")
        for label, c in (("nominal", env.nominal), ("worst distance", env.worst_distance),
                         ("best distance", env.best_distance), ("worst time", env.worst_time),
                         ("best time", env.best_time)):
            dist = c.tcp_straight_distance if env.tcp_frame else c.max_stopping_angle
            unit = "m" if env.tcp_frame else "rad"
            lines.append(f"  {label:<15} ({c.torque_factor:.3f}, {c.delay_factor:.3f}, {c.payload:.2f}):"
                         f" distance {dist:.4f} {unit}, stop time {c.stop_time:.4f} s"
                         + ("" if c.valid else "  NOT VALID"))
        if not env.valid:
            lines.append(f"  NOT VALID: {env.invalid_text()}; the worst values are not stopping figures")
    return "\n".join(lines)


def prediction_to_dict(robot: RobotModel, p: StopPrediction, env: StopEnvelope | None = None,
                       inputs: dict | None = None) -> dict:
    """JSON-ready dict: what produced it (``inputs``), summary, events and time series (SI units, keys name them;
    per joint, ``joint_units`` names the units of its position, velocity and effort: a prismatic joint's entries
    of the ``_rad``, ``_rad_s`` and ``_Nm`` lists are in m, m/s and N). ``rest_positions`` has one position per
    joint (a continuous joint's angle, continuous with its start); ``q_final`` and the series' ``q`` are the
    model's configuration (nq entries: a continuous joint as cos, sin; then the series also carries
    ``positions``, one per joint)."""
    from vtm_dynamics.core.estop.series import position_series

    positions = position_series(robot, p.q)

    def f(x):
        return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x

    out = {
        "inputs": inputs,
        "robot": robot.name, "joint_names": list(robot.joint_names),
        "joint_units": {k: [j.units[n] for j in robot.joints] for n, k in enumerate(("position", "velocity",
                                                                                    "effort"))},
        "category": p.category,
        "stopped": p.stopped, "valid": p.valid, "limit_crossings": list(p.limit_crossings),
        "stop_time_s": f(p.stop_time), "power_off_time_s": p.power_off_time,
        "joint_stop_times_s": [f(float(x)) for x in p.joint_stop_times],
        "stopping_angles_rad": p.stopping_angles.tolist(), "q_final": p.q_final.tolist(),
        "rest_positions": positions[-1].tolist(),
        "tcp_frame": p.tcp_frame, "tcp_straight_distance_m": f(p.tcp_straight_distance),
        "tcp_path_length_m": f(p.tcp_path_length), "brake_energy_J": p.brake_energy,
        "impulse_energy_J": p.impulse_energy, "holding_torques_Nm": [f(float(x)) for x in p.holding_torques],
        "rest_wrenches_N_Nm": p.rest_wrenches.tolist(),
        "events": [{
            "time_s": e.time, "kind": e.kind, "joints": list(e.joints), "v_minus": e.v_minus.tolist(),
            "v_plus": e.v_plus.tolist(), "dv": e.dv.tolist(), "impulses_Nms": e.impulses.tolist(),
            "impulse_joints": list(e.impulse_joints), "energy_loss_J": e.energy_loss,
            "holding_torques_Nm": [f(float(x)) for x in e.holding_torques], "wrenches_N_Nm": e.wrenches.tolist(),
        } for e in p.events],
        "series": {"t_s": p.t.tolist(), "q": p.q.tolist(), "v": p.v.tolist(), "tau_brake_Nm": p.tau_brake.tolist(),
                   "tau_drive_Nm": p.tau_drive.tolist(), "locked": p.locked.astype(int).tolist(),
                   "brake_work_J": p.brake_work.tolist(), "impulse_loss_J": p.impulse_loss.tolist()},
    }
    if robot.nq != robot.nv:
        out["series"]["positions"] = positions.tolist()
    if env is not None:
        out["envelope"] = {
            "cases": [{"torque_factor": c.torque_factor, "delay_factor": c.delay_factor, "payload_kg": c.payload,
                       "stop_time_s": f(c.stop_time), "tcp_straight_distance_m": f(c.tcp_straight_distance),
                       "max_stopping_angle_rad": c.max_stopping_angle, "stopped": c.stopped, "valid": c.valid,
                       "limit_crossings": list(c.limit_crossings)} for c in env.cases],
            "valid": env.valid,
            "worst_distance_index": env.cases.index(env.worst_distance),
            "worst_time_index": env.cases.index(env.worst_time),
        }
    return out


def write_csv(path: str, robot: RobotModel, p: StopPrediction, inputs: dict | None = None) -> None:
    """Time series as CSV: ``# key: value`` lines stating the inputs and whether the rows are a valid stop
    (``stopped``, ``valid``, ``limit_crossings``; ``not_valid`` says why not), then the header t, q_, v_, tau_brake_,
    locked_ per joint, brake work and jump losses, then one row per sample. q_ is one position per joint (a
    continuous joint's angle, continuous with its start; prismatic joints in m, m/s, N)."""
    from vtm_dynamics.core.estop.series import position_series

    names = robot.joint_names
    positions = position_series(robot, p.q)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        if inputs:
            fh.write("\n".join(provenance.comment_lines(("vtm-predict " + k, json.dumps(v)) for k, v in
                                                        inputs.items())) + "\n")
        # whether the rows are a stop the robot can make: the samples of a stop past a joint limit or cut off by
        # the horizon read like any other
        verdict = {"stopped": p.stopped, "valid": p.valid, "limit_crossings": list(p.limit_crossings)}
        if not p.valid:
            verdict["not_valid"] = p.invalid_text()
        fh.write("\n".join(provenance.comment_lines(("vtm-predict " + k, json.dumps(v)) for k, v in
                                                    verdict.items())) + "\n")
        w = csv.writer(fh)
        w.writerow(["t_s"] + [f"q_{n}" for n in names] + [f"v_{n}" for n in names] + [f"tau_brake_{n}" for n in names]
                   + [f"locked_{n}" for n in names] + ["brake_work_J", "impulse_loss_J"])
        for k in range(len(p.t)):
            w.writerow([repr(float(p.t[k]))] + [repr(float(x)) for x in positions[k]]
                       + [repr(float(x)) for x in p.v[k]]
                       + [repr(float(x)) for x in p.tau_brake[k]] + [int(x) for x in p.locked[k]]
                       + [repr(float(p.brake_work[k])), repr(float(p.impulse_loss[k]))])


# ---------------------------------------------------------------------------------------------------- run
def run_prediction(
    robot_name: str | None = DEFAULT_ROBOT, *, urdf: str | None = None, q: Sequence[float] | None = None,
    v: Sequence[float] | None = None, state: str = "demo", category: int = CATEGORY,
    deceleration: float = CATEGORY1_DECELERATION, max_duration: float | None = None,
    torque_limits: str | Sequence[float] | None = None, brakes_path: str | None = None, tcp_frame: str | None = None,
    payload: float = PAYLOAD, payload_frame: str | None = None,
    locks: Sequence[LockEvent] = (), json_path: str | None = None, csv_path: str | None = None,
    plots_dir: str | None = None, envelope: int | None = None, step: float | None = None, progress=None,
) -> tuple[PredictionSummary, RobotModel, BrakeSet]:
    """The CLI's work as a function (numpy in, dataclasses out; files only when paths are given)."""
    from vtm_dynamics.cli import plots
    from vtm_dynamics.core.estop import CategoryOne, StopInputError, StopSettings, predict_stop
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.estop.envelope import EnvelopeSpec, stop_envelope

    spec = ROBOTS.get(robot_name or "")
    bare, robot, payload_frame = load_robot(robot_name, urdf, payload, tcp_frame, payload_frame)
    brakes_path = brakes_path or default_brakes_path(robot_name, urdf)
    brakes = brakes_from_config(robot, brakes_path)
    if q is None or v is None:
        named = spec.state(state) if spec else None
        if named is None:
            known = spec.state_names if spec else ()
            raise StopInputError(f"state: {state!r} is not a named state of {robot.name!r}"
                                 + (f" (known: {', '.join(known)})" if known else "; give --q and --v"))
        q = named.q if q is None else q
        v = named.v if v is None else v
    tcp_frame = default_tcp_frame(robot_name, tcp_frame)
    qa = np.asarray(q, dtype=float)
    if robot.nq != robot.nv and qa.shape == (robot.nv,):
        qa = robot.configuration_from_angles(qa)
    settings = StopSettings() if step is None else StopSettings(step=step)
    limits = tuple(float(x) for x in torque_limits) if torque_limits not in (None, "urdf") else torque_limits
    c1 = CategoryOne(deceleration=deceleration, max_duration=max_duration, torque_limits=limits) \
        if category == 1 else None
    p = predict_stop(robot, brakes, qa, v, category=category, category_one=c1, lock_events=locks,
                     tcp_frame=tcp_frame, settings=settings)
    env, env_inputs = None, None
    if envelope:
        # the envelope attaches its payload cases to the bare robot: the payload range is the TOTAL payload, so
        # its nominal case (factors 1, least payload) is the main prediction above, the same category-1 ramp included
        rated = spec.rated_payload if spec is not None and urdf is None else None
        pl = (PAYLOAD, rated) if rated and not payload else (payload, payload)
        env = stop_envelope(bare, brakes, qa, v, EnvelopeSpec(payload=pl, payload_frame=payload_frame,
                                                              n_random=envelope),
                            category=category, category_one=c1, lock_events=locks, tcp_frame=tcp_frame,
                            settings=settings, progress=progress)
        env_inputs = {"torque_factor": list(ENVELOPE_TORQUE_FACTOR), "delay_factor": list(ENVELOPE_DELAY_FACTOR),
                      "payload_kg": list(pl), "payload_frame": payload_frame if pl[1] > 0 else None,
                      "n_random": int(envelope), "cases": len(env.cases)}
    inputs = prediction_inputs(robot_name if urdf is None and robot_name else os.path.abspath(urdf or ""), robot,
                               brakes_path, payload=payload, payload_frame=payload_frame, tcp_frame=tcp_frame,
                               category=category, deceleration=deceleration, max_duration=max_duration,
                               torque_limits=limits, settings=settings, envelope=env_inputs, q0=robot.joint_positions(p.q[0]),
                               v0=p.v[0])
    files = []
    if json_path:
        with open(json_path, "w", encoding="utf-8") as fh:
            json.dump(prediction_to_dict(robot, p, env, inputs), fh, indent=1)
        files.append(json_path)
    if csv_path:
        write_csv(csv_path, robot, p, inputs)
        files.append(csv_path)
    if plots_dir:
        files.extend(plots.prediction_report_plots(plots_dir, robot, p, source=plot_source(inputs),
                                                   armature=brakes.armature))
    return PredictionSummary(robot.name, p, env, tuple(files), inputs), robot, brakes


def run_default_demo(out_dir: str) -> PredictionSummary:
    """The default demo: UR5 with its calibrated brakes, category 0 from the 'demo' state; writes stop.json,
    stop.csv and the PNG plots into ``out_dir`` and returns the summary."""
    os.makedirs(out_dir, exist_ok=True)
    summary, _, _ = run_prediction(
        DEFAULT_ROBOT, json_path=os.path.join(out_dir, "stop.json"), csv_path=os.path.join(out_dir, "stop.csv"),
        plots_dir=out_dir,
    )
    return summary


def _parse_lock(text: str) -> LockEvent:
    from vtm_dynamics.core.estop import LockEvent, StopInputError

    try:
        joints, time = text.rsplit("@", 1)
        return LockEvent(float(time), joints.split(","))
    except ValueError:
        raise StopInputError(f"lock: expected JOINT[,JOINT...]@TIME, got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    from vtm_dynamics.cli.recorded_stops import add_recording_options

    ap = Parser(prog=PROG, description="Predict an emergency stop (stopping time, angles, TCP distance, events) of a "
                "robot with joint brakes.")
    ap.add_argument("robot", nargs="?", default=DEFAULT_ROBOT, type=robot_name(ROBOTS),
                    help=f"robot: {ROBOT_HELP}, any case (ignored with --urdf)")
    ap.add_argument("--urdf", help="URDF file of another robot (then --brakes is required)")
    ap.add_argument("--q", type=float, nargs="+", help="joint positions [rad; m for prismatic joints] in model order, "
                    "one per joint (default: --state's)")
    ap.add_argument("--v", type=float, nargs="+", help="joint velocities [rad/s; m/s for prismatic joints] in model "
                    "order (default: --state's)")
    ap.add_argument("--state", default="demo", help="named state of the robot used when --q/--v are not given")
    ap.add_argument("--category", type=int, default=CATEGORY, choices=(0, 1), help="IEC 60204-1 stop category")
    ap.add_argument("--decel", type=float, default=CATEGORY1_DECELERATION, help="category 1: joint deceleration limit of the controlled "
                    "ramp [rad/s^2] (an assumption: give your controller's)")
    ap.add_argument("--max-duration", type=float, help="category 1: power is cut after this time [s] (default: at "
                    "standstill)")
    add_torque_limits_option(ap)
    ap.add_argument("--brakes", help="brake YAML (default: the robot's config/<robot>_brakes.yaml)")
    ap.add_argument("--tcp-frame", help="frame whose stopping distance is reported (default: the robot's TCP)")
    ap.add_argument("--payload", type=float, default=PAYLOAD,
                    help="payload mass [kg], a point mass at --payload-frame")
    ap.add_argument("--payload-frame", help="frame carrying the payload and the envelope's payloads (default: the "
                                            "robot's flange, UR: tool0; with --urdf: --tcp-frame)")
    ap.add_argument("--lock", action="append", default=[], help="abrupt lock JOINT[,JOINT]@TIME [s] (repeatable)")
    ap.add_argument("--step", type=float, help=f"maximum integration step [s] (default: the core's, "
                    f"{INTEGRATION_STEP:g})")
    ap.add_argument("--json", help="write the prediction as JSON")
    ap.add_argument("--csv", help="write the time series as CSV")
    ap.add_argument("--plots", help="directory for PNG plots")
    ap.add_argument("--envelope", type=int, metavar="N", help="also run an uncertainty envelope with N random cases "
                    f"(brake torque x {ENVELOPE_TORQUE_FACTOR[0]:g}-{ENVELOPE_TORQUE_FACTOR[1]:g}, delay x "
                    f"{ENVELOPE_DELAY_FACTOR[0]:g}-{ENVELOPE_DELAY_FACTOR[1]:g}, payload 0-rated)")
    ap.add_argument("--bag", nargs="+", metavar="BAG", help="replay recorded stops (rosbag2): predict each from the "
                    "recorded state at the trigger and compare with what the robot did")
    add_recording_options(ap)
    ap.add_argument("--tolerance", type=float, default=SHORTFALL_TOLERANCE,
                    help="with --bag: a stop time or TCP distance predicted shorter than recorded by more than this "
                         f"(relative) is non-conservative: exit status {EXIT_NONCONSERVATIVE} (default %(default)s)")
    from vtm_dynamics.cli.view_output import add_view_arguments

    add_view_arguments(ap, "the predicted stop (robot, ghosts of start, rest and worst-case rest, TCP path, events)")
    return ap


def replay_bags(args: argparse.Namespace, say=print) -> tuple[list, list]:
    """``--bag``: every recorded stop predicted from the recorded state at its trigger with the given brakes,
    printed against the recording (angle, time, TCP distance), with the verdict: the stop figures predicted shorter
    than recorded beyond ``--tolerance`` (``shortfalls``); ``--json`` and ``--plots`` write the comparison.
    Returns (comparisons, shortfalls)."""
    from vtm_dynamics.cli import stop_report
    from vtm_dynamics.cli.recorded_stops import read_stops
    from vtm_dynamics.core.estop import StopSettings
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.estop.identification import compare_stops
    from vtm_dynamics.core.estop.stop_comparison import shortfalls

    if not 0.0 < args.tolerance < 1.0:
        raise ValueError(f"tolerance: {args.tolerance} is not between 0 and 1")
    robot_name = None if args.urdf else args.robot
    _, robot, _ = load_robot(robot_name, args.urdf, args.payload, args.tcp_frame, args.payload_frame)
    brakes = brakes_from_config(robot, args.brakes or default_brakes_path(robot_name, args.urdf))
    tcp = default_tcp_frame(robot_name, args.tcp_frame)
    stops = read_stops(args.bag, robot, args, say)
    settings = StopSettings() if args.step is None else StopSettings(step=args.step)
    comparisons = compare_stops(robot, brakes, stops, tcp, settings=settings)
    say(f"recorded stops replayed with {os.path.basename(brakes.source) or 'the given brakes'}:")
    say(stop_report.comparison_table(robot, comparisons))
    short = shortfalls(comparisons, args.tolerance)
    say("")
    say(shortfall_line(short, args.tolerance) if short else
        f"verdict: every stop figure within {100 * args.tolerance:g} % of the recording or longer")
    if args.json:
        data = {"stops": [{"label": c.label, "recorded_angles_rad": c.recorded_angles.tolist(),
                           "predicted_angles_rad": c.predicted_angles.tolist(),
                           "recorded_time_s": c.recorded_time if math.isfinite(c.recorded_time) else None,
                           "predicted_time_s": c.predicted_time if math.isfinite(c.predicted_time) else None,
                           "recorded_tcp_m": c.recorded_tcp if math.isfinite(c.recorded_tcp) else None,
                           "predicted_tcp_m": c.predicted_tcp if math.isfinite(c.predicted_tcp) else None,
                           "rms_residual_rad": c.rms_residual, "failure": c.failure or None}
                          for c in comparisons],
                "joint_names": list(robot.joint_names), "joint_units": stop_report.position_units(robot),
                "tolerance": args.tolerance,
                "shortfalls": [{"label": x.label, "what": x.what,
                                "relative": x.relative if math.isfinite(x.relative) else None,
                                "failure": x.failure or None} for x in short]}
        say(f"wrote {stop_report.write_json(args.json, data)}")
    if args.plots:
        for f in stop_report.overlay_plots(args.plots, robot, stops, comparisons):
            say(f"wrote {f}")
    return comparisons, short


@quiet_when_output_closed
def main(argv: Sequence[str] | None = None) -> int:
    args = parse_or_exit_status(build_parser(), argv)
    if isinstance(args, int):  # argparse printed its one line or the help
        return args

    def progress(done: int, total: int) -> None:
        sys.stderr.write(f"\renvelope: {done}/{total} cases")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    if args.bag:
        try:
            _, short = replay_bags(args)
        except (ValueError, OSError) as err:
            msg = first_line(err)
            sys.stderr.write(f"{PROG}: error: {msg}\n")
            return 2
        return EXIT_NONCONSERVATIVE if short else 0
    try:
        from vtm_dynamics.core.estop.inputs import torque_limits_from_text

        locks = [_parse_lock(s) for s in args.lock]
        summary, robot, brakes = run_prediction(
            None if args.urdf else args.robot, urdf=args.urdf, q=args.q, v=args.v, state=args.state,
            category=args.category, deceleration=args.decel, max_duration=args.max_duration,
            torque_limits=torque_limits_from_text(args.torque_limits), brakes_path=args.brakes, tcp_frame=args.tcp_frame,
            payload=args.payload, payload_frame=args.payload_frame, locks=locks,
            json_path=args.json, csv_path=args.csv, plots_dir=args.plots, envelope=args.envelope, step=args.step,
            progress=progress,
        )
    except (ValueError, OSError) as err:  # our errors are ValueError subclasses with one line naming the field
        msg = first_line(err)
        sys.stderr.write(f"{PROG}: error: {msg}\n")
        return 2
    print(summary_table(robot, brakes, summary.prediction, summary.envelope, summary.inputs))
    for f in summary.files:
        print(f"wrote {f}")
    from vtm_dynamics.cli import view_output

    if view_output.wants_view(args):
        try:
            view_output.show_stop(args, robot, summary.prediction, summary.envelope, urdf_path=args.urdf)
        except (ValueError, OSError, RuntimeError) as err:
            sys.stderr.write(f"{PROG}: error: {str(err).strip().splitlines()[0]}\n")
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``vtm-safety-distance``: safety distances from predicted stops (docs/stopsafe.md).

Subcommands::

    vtm-safety-distance iso13855 --state demo --device light_curtain --d 14 --detection-response 0.02 \\
        --control-response 0.015                  # ISO 13855 S = K T + C, T with the predicted stopping time
    vtm-safety-distance iso13855 --trajectory plan.yaml --device parallel --d 70 --height 300 ...
    vtm-safety-distance ssm --state demo --person 1.2 0.4 0.9 --reaction-time 0.1
                                                  # ISO/TS 15066 protective separation distance S_p, every term
    vtm-safety-distance ssm-map map/result.parquet --person 1.2 0.4 0.9 --csv ssm.csv
                                                  # S_p over the rows of a workspace map (vtm-stopping-map)

The stopping time is the worst case over the stop cases (categories x the envelope, ``--nominal`` for the brakes
alone); every input of the report says where it came from. Bad input: one line and exit status 2.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from typing import TYPE_CHECKING, Sequence

import numpy as np

from vtm_dynamics.core.robot.catalogue import ROBOTS
from vtm_dynamics.cli.stopsafe_setup import LoadedSetup, ProgressBar, add_robot_arguments, fmt_seconds, load_setup
from vtm_dynamics.core.estop import StopInputError
from vtm_dynamics.core.estop.defaults import CATEGORY1_DECELERATION
from vtm_dynamics.core.stopsafe.iso13855 import (
    DEVICES, MinimumDistance, Safeguard, intrusion_from_detection_capability, minimum_distance,
)

if TYPE_CHECKING:  # the modules below import Pinocchio: loaded where used, so that --help answers at once
    from vtm_dynamics.core.stopsafe.separation import SeparationParameters
from vtm_dynamics.core.excerpt import first_line
from vtm_dynamics.cli.arguments import (
    Parser, RawDescriptionHelpFormatter, parse_or_exit_status, quiet_when_output_closed,
)

PROG = "vtm-safety-distance"
MAX_STATE_SAMPLES = 5000


def _state_arguments(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("state")
    g.add_argument("--state", default="demo", help="a named state of the known robot")
    g.add_argument("--q", type=float, nargs="+", help="joint positions [rad] (model order, or with --joint-names)")
    g.add_argument("--v", type=float, nargs="+", help="joint velocities [rad/s]")
    g.add_argument("--joint-names", nargs="+", help="names for --q/--v (a JointState: any order)")


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog=PROG, description=__doc__.split("\n\n")[0].replace("``", ""), formatter_class=RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True, help="what to compute")
    iso = sub.add_parser("iso13855", help="ISO 13855 minimum distance S = K T + C")
    add_robot_arguments(iso)
    _state_arguments(iso)
    iso.add_argument("--trajectory", help="the stopping time is the worst over this trajectory's E-stop instants")
    iso.add_argument("--rate", type=float, default=20.0,
                     help="E-stop instants per second on --trajectory (20), besides its points and speed extremes")
    iso.add_argument("--device", choices=DEVICES, required=True, help="safeguard type")
    iso.add_argument("--d", type=float, help="detection capability d [mm]")
    iso.add_argument("--beams", type=int, help="multi-beam: number of beams (2, 3, 4)")
    iso.add_argument("--height", type=float, help="parallel ESPE: detection zone height H [mm]; mat: step height")
    iso.add_argument("--detection-response", type=float, required=True, help="device response time t1 [s]")
    iso.add_argument("--control-response", type=float, required=True, help="control response time t2 [s]")
    iso.add_argument("--json", help="write the report as JSON")
    ssm = sub.add_parser("ssm", help="ISO/TS 15066 protective separation distance at one state")
    add_robot_arguments(ssm)
    _state_arguments(ssm)
    _ssm_arguments(ssm)
    ssm.add_argument("--json", help="write the report as JSON")
    smap = sub.add_parser("ssm-map", help="ISO/TS 15066 S_p over the rows of a workspace map")
    smap.add_argument("map", help="a finished map (the Parquet result file of vtm-stopping-map)")
    add_robot_arguments(smap)
    _ssm_arguments(smap)
    smap.add_argument("--max-rows", type=int, default=20_000, help="refuse maps with more rows")
    smap.add_argument("--max-minutes", type=float, default=30.0, help="refuse runs estimated longer [min]")
    smap.add_argument("--csv", help="write one row per map state")
    smap.add_argument("--quiet", action="store_true", help="no progress output")
    smap.set_defaults(category=None, decel=None)  # default: the map's own (its manifest), see map_stop_category
    return ap


def _ssm_arguments(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("ISO/TS 15066 terms")
    g.add_argument("--person", type=float, nargs=3, required=True, metavar=("X", "Y", "Z"),
                   help="the person's closest point [m], world frame")
    g.add_argument("--human-speed", type=float, default=1.6, help="v_h [m/s] (1.6: ISO 13855 walking speed)")
    g.add_argument("--reaction-time", type=float, required=True, help="T_r [s]: detection until the stop command")
    c = g.add_mutually_exclusive_group()
    c.add_argument("--intrusion", type=float, default=None, help="C [m]")
    c.add_argument("--detection-capability", type=float, help="d [mm]: C from ISO 13855's light-curtain rule")
    g.add_argument("--zd", type=float, default=0.0, help="Z_d [m] person position uncertainty")
    g.add_argument("--zr", type=float, default=0.0, help="Z_r [m] robot position uncertainty")
    g.add_argument("--all-cases", action="store_true", help="every case of the envelope (default: worst corner)")


# ------------------------------------------------------------------------------------------------ states
def _state(loaded: LoadedSetup, args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, str]:
    robot = loaded.robot
    if args.q is not None or args.v is not None:
        if args.q is None or args.v is None:
            raise StopInputError("state: give both --q and --v")
        from vtm_dynamics.core.estop import state_from_joint_names

        names = args.joint_names or list(robot.joint_names)
        q, v = state_from_joint_names(robot, names, args.q, args.v)
        return q, v, "given (--q, --v)"
    spec = ROBOTS.get(args.robot) if not args.urdf else None
    named = spec.state(args.state) if spec else None
    if named is None:
        known = ", ".join(spec.state_names) if spec else ""
        raise StopInputError(f"state: {args.state!r} is not a named state (known: {known or 'none'}); "
                             "give --q and --v")
    return np.array(named.q), np.array(named.v), f"named state {args.state!r}"


def worst_stopping_time(loaded: LoadedSetup, args: argparse.Namespace) -> tuple[float, str]:
    """The predicted worst stopping time [s] and its source text (a state, or a trajectory's instants)."""
    from vtm_dynamics.core.stopsafe.sampling import states, uniform_instants
    from vtm_dynamics.core.stopsafe.stop_cases import predict_stops
    from vtm_dynamics.core.stopsafe.trajectory import check_limits, critical_times, model_order
    from vtm_dynamics.core.stopsafe.trajectory_files import read_trajectory_file

    setup = loaded.setup
    if args.trajectory:
        traj = read_trajectory_file(args.trajectory)
        order = model_order(setup.robot, traj)
        check_limits(setup.robot, traj, order)
        # the grid, and every point and in-segment speed extreme of any joint (a peak between grid instants)
        extra = np.unique(np.concatenate(critical_times(traj, 1)))
        inst = uniform_instants(traj, args.rate, MAX_STATE_SAMPLES).merged(
            extra[(extra >= traj.start) & (extra <= traj.end)])
        if len(inst) > MAX_STATE_SAMPLES:
            raise StopInputError(f"sampling: {len(inst)} E-stop instants, more than {MAX_STATE_SAMPLES}")
        q, v = states(traj, order, inst)
        where = (f"{len(q)} E-stop instants of the trajectory ({args.rate:g} Hz, its points and every joint's speed "
                 "extremes)")
    else:
        q0, v0, where = _state(loaded, args)
        q, v = q0[None], v0[None]
    worst, label = -1.0, ""
    for preds in predict_stops(setup, q, v):
        for case, p in zip(setup.cases, preds):
            if not p.stopped:
                raise StopInputError(f"stopping_time: a case ({case.label()}) does not stop within the horizon")
            if p.limit_crossings:  # the model has no end stops: its stop time is not the robot's
                raise StopInputError(f"stopping_time: a case ({case.label()}) goes {p.limit_text()}")
            if p.stop_time > worst:
                worst, label = p.stop_time, case.label()
    return worst, f"predicted: worst of {len(setup.cases)} cases over {where} ({label})"


def iso13855_report(result: MinimumDistance) -> str:
    lines = [f"ISO 13855 minimum distance: S = {result.S:.1f} mm ({result.rule})", ""]
    lines.append(f"{'term':<5} {'quantity':<44} {'value':>12} {'unit':<5} source")
    lines.append("-" * 110)
    for t in result.terms:
        lines.append(f"{t.symbol:<5} {t.name:<44} {t.value:>12.4f} {t.unit:<5} {t.source}")
    lines += [""] + [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


def ssm_report(r, sources: dict) -> str:
    rows = [
        ("v_h", "person's approach speed", r.v_h, "m/s", sources["v_h"]),
        ("T_r", "reaction time", r.T_r, "s", "given"),
        ("T_s", "robot stopping time", r.T_s, "s", f"predicted ({sources['cases']})"),
        ("v_r", "limiting point's speed towards the person", r.v_r, "m/s", f"state, point on {r.link}"),
        ("S_h", "v_h (T_r + T_s)", r.S_h, "m", "ISO/TS 15066, 5.5.4"),
        ("S_r", "v_r T_r", r.S_r, "m", "ISO/TS 15066, 5.5.4"),
        ("S_s", "limiting point's stopping travel towards the person", r.S_s, "m", f"predicted ({r.case})"),
        ("C", "intrusion distance", r.C, "m", sources["C"]),
        ("Z_d", "person position uncertainty", r.Z_d, "m", "given"),
        ("Z_r", "robot position uncertainty", r.Z_r, "m", "given"),
        ("S_p", "protective separation distance", r.S_p, "m", "ISO/TS 15066, 5.5.4, formula (1)"),
        ("d", "current separation (limiting point to the person)", r.separation, "m", "state and --person"),
    ]
    if r.valid:
        lines = [f"ISO/TS 15066 protective separation distance: S_p = {r.S_p:.4f} m; separation {r.separation:.4f} m; "
                 f"{'SAFE' if r.safe else 'NOT SAFE'} (margin {r.margin:+.4f} m)", ""]
    else:  # the terms below are what the model predicts, not the robot's stop
        lines = [f"ISO/TS 15066 protective separation distance: NO VALUE, NOT SAFE: {r.invalid_reason()}",
                 "the terms below are the prediction's, not the robot's stop; they are no value for S_p", ""]
    lines.append(f"{'term':<5} {'quantity':<52} {'value':>10} {'unit':<4} source")
    lines.append("-" * 110)
    for sym, name, value, unit, src in rows:
        lines.append(f"{sym:<5} {name:<52} {value:>10.4f} {unit:<4} {src}")
    lines.append("")
    if sources.get("category1"):
        lines.append(f"category 1: {sources['category1']}")
    lines.append(f"limiting point {np.round(r.closest_point, 4).tolist()} on {r.link} (the smallest margin over the "
                 f"robot's parts), person {r.person.tolist()}")
    if r.closest_link and r.closest_link != r.link:
        lines.append(f"the nearest part, {r.closest_link} at {r.closest_separation:.4f} m, has a larger margin")
    return "\n".join(lines)


def _parameters(args: argparse.Namespace) -> tuple[SeparationParameters, dict]:
    from vtm_dynamics.core.stopsafe.separation import SeparationParameters

    if args.detection_capability is not None:
        C = intrusion_from_detection_capability(args.detection_capability) / 1000.0
        c_source = f"ISO 13855 rule from d = {args.detection_capability:g} mm"
    else:
        C = args.intrusion if args.intrusion is not None else 0.0
        c_source = "given" if args.intrusion is not None else "not given: 0"
    params = SeparationParameters(args.human_speed, args.reaction_time, C, args.zd, args.zr,
                                  "all" if args.all_cases else "corner")
    sources = {"C": c_source, "v_h": "given" if args.human_speed != 1.6 else "default 1.6 m/s (ISO 13855 walking)",
               "cases": "every envelope case" if args.all_cases else "the envelope's worst corner"}
    return params, sources


def _ssm_dict(r) -> dict:
    out = {k: getattr(r, k) for k in ("S_p", "S_h", "S_r", "S_s", "C", "Z_d", "Z_r", "T_r", "T_s", "v_h", "v_r",
                                      "link", "separation", "margin", "safe", "case", "stopped",
                                      "closest_link", "closest_separation")}
    out.update(closest_point=r.closest_point.tolist(), person=r.person.tolist(), direction=r.direction.tolist(),
               parts=[{"link": x.link, "separation": x.separation, "v_r": x.v_r, "S_s": x.S_s, "S_p": x.S_p,
                       "margin": x.margin} for x in r.parts],
               valid=r.valid, invalid_reason=r.invalid_reason(), limit_crossings=list(r.limit_crossings))
    return out


def map_stop_category(path: str) -> tuple[int | None, float | None, list[str] | None]:
    """The stop category, category-1 deceleration [rad/s^2] and the drives' torque limits (as ``--torque-limits``
    words, None: none) a map was built with, from the ``manifest.json`` beside its result file when that manifest
    belongs to it (same inputs hash); (None, None, None) when not recorded (no manifest, or one of another run). The
    manifest is data: one that cannot be read safely (:func:`vtm_dynamics.scaleout.chunk_store.read_manifest`: a
    FIFO, a special file, over its byte cap, not a JSON object) or that belongs to the map but records a category
    other than 0 or 1, a deceleration that is not positive and finite or torque limits that are neither 'urdf' nor
    numbers is a one-line :class:`StopInputError`; a category is never rounded (1.9 is not 1)."""
    import math
    import os

    import pyarrow.parquet as pq

    from vtm_dynamics.scaleout.chunk_store import StoreError, read_manifest

    manifest = os.path.join(os.path.dirname(os.path.abspath(path)), "manifest.json")
    try:
        digest = (pq.read_schema(path).metadata or {}).get(b"vtm_inputs_hash")
    except (OSError, ValueError):
        return None, None, None  # not a map: said when its rows are read
    try:
        data = read_manifest(manifest)
    except StoreError as err:
        raise StopInputError(f"map: the manifest beside the map, {err} (repair it, or give the map without it "
                             "and --category, --decel)") from None
    if data is None or digest is None or not isinstance(data.get("inputs_hash"), str) \
            or data["inputs_hash"].encode() != digest:
        return None, None, None
    spec = data.get("inputs", {}).get("spec") if isinstance(data.get("inputs"), dict) else None
    category = spec.get("category") if isinstance(spec, dict) else None
    decel = spec.get("category1_deceleration") if isinstance(spec, dict) else None
    if isinstance(category, bool) or category not in (0, 1) or not isinstance(category, int):
        raise StopInputError(f"map: manifest.json records the stop category {str(category)[:40]!r}, not 0 or 1")
    if isinstance(decel, bool) or not isinstance(decel, (int, float)) or not (math.isfinite(decel) and decel > 0):
        raise StopInputError(f"map: manifest.json records the category-1 deceleration {str(decel)[:40]!r}, not a "
                             "positive finite number [rad/s^2]")
    limits = spec.get("category1_torque_limits")  # maps made before the option: none
    if limits is None or limits == "urdf":
        return category, float(decel), None if limits is None else [limits]
    if not isinstance(limits, list) or len(limits) > 4096 or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0 for x in limits):
        raise StopInputError(f"map: manifest.json records the torque limits {str(limits)[:40]!r}, neither 'urdf' "
                             "nor numbers >= 0 [N m]")
    return category, float(decel), [repr(float(x)) for x in limits]


def _map_categories(args: argparse.Namespace) -> None:
    """Resolve ``--category`` / ``--decel`` / ``--torque-limits`` of ``ssm-map``: the map's recorded stop unless
    given; a single category other than the recorded one is refused (the rows' stops would be re-predicted as
    another kind of stop), and so are torque limits other than the map's."""
    from vtm_dynamics.core.estop.inputs import torque_limits_from_text

    recorded, decel, limits = map_stop_category(args.map)
    if args.category is None:
        args.category = str(recorded) if recorded is not None else "0"
    elif recorded is not None and args.category != "both" and int(args.category) != recorded:
        raise StopInputError(f"category: the map was built with category {recorded}, not --category "
                             f"{args.category} (omit --category to use the map's, or give both)")
    if args.torque_limits is None:
        args.torque_limits = limits
    elif recorded is not None and torque_limits_from_text(args.torque_limits) != torque_limits_from_text(limits):
        raise StopInputError(f"torque_limits: the map was built with {' '.join(limits or ['none'])}, not "
                             f"--torque-limits {' '.join(args.torque_limits)[:80]} (omit it to use the map's)")
    if args.decel is None:
        args.decel = decel if decel is not None else CATEGORY1_DECELERATION


def run(args: argparse.Namespace) -> str:
    from vtm_dynamics.core.stopsafe.separation import SeparationMonitor, separation_table

    if args.command == "ssm-map":
        import os

        if not os.path.isfile(args.map):  # a FIFO or device is not opened (a FIFO blocked the command for ever)
            raise StopInputError(f"map: {os.path.basename(args.map)[:80]}: not found or not a regular file")
        _map_categories(args)
    loaded = load_setup(args)
    if args.command == "iso13855":
        ts, source = worst_stopping_time(loaded, args)
        result = minimum_distance(Safeguard(args.device, args.d, args.beams, args.height), args.detection_response,
                                  args.control_response, ts, source)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump({"S_mm": result.S, "K_mm_s": result.K, "T_s": result.T, "C_mm": result.C,
                           "rule": result.rule, "notes": list(result.notes),
                           "terms": [t.__dict__ for t in result.terms], "robot": loaded.sources}, fh, indent=1)
        return iso13855_report(result) + (f"\nwrote {args.json}" if args.json else "")
    params, sources = _parameters(args)
    sources["category1"] = loaded.sources.get("category1")
    monitor = SeparationMonitor(loaded.setup, loaded.geometry, params)
    if args.command == "ssm":
        q, v, _ = _state(loaded, args)
        r = monitor.evaluate(q, v, args.person)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump({**_ssm_dict(r), "robot": loaded.sources}, fh, indent=1)
        return ssm_report(r, sources) + (f"\nwrote {args.json}" if args.json else "")
    from vtm_dynamics.core.stopsafe.separation import MAX_TABLE_ROWS, table_columns
    from vtm_dynamics.scaleout.result_file import MapFileError, read_columns, result_rows

    unreadable = f"map: cannot read {args.map.rsplit('/', 1)[-1][:80]}"
    try:  # the row count from the file's metadata: an oversized map is refused before any column is read
        n = result_rows(args.map)
    except Exception as err:  # noqa: BLE001 - pyarrow raises many kinds; one line
        raise StopInputError(f"{unreadable} ({type(err).__name__})") from None
    if n > args.max_rows:
        raise StopInputError(f"map: {n} rows, more than --max-rows {args.max_rows}")
    if n > MAX_TABLE_ROWS:
        raise StopInputError(f"map: {n} rows, more than the {MAX_TABLE_ROWS} rows a table can hold")
    try:  # only the columns the table needs (16 for a 6-joint arm), not the rows' results
        columns = read_columns(args.map, table_columns(monitor.setup.robot.joint_names))
    except MapFileError as err:
        raise StopInputError(str(err)) from None
    except Exception as err:  # noqa: BLE001 - pyarrow raises many kinds; one line
        raise StopInputError(f"{unreadable} ({type(err).__name__})") from None
    import time

    start = time.perf_counter()
    monitor.evaluate(loaded.robot.neutral(), np.zeros(loaded.robot.nv), args.person)
    seconds = n * (time.perf_counter() - start)
    if seconds > 60 * args.max_minutes:
        raise StopInputError(f"cost: {n} rows would take about {fmt_seconds(seconds)}, more than --max-minutes "
                             f"{args.max_minutes:g}")
    if seconds > 10 and not args.quiet:
        sys.stderr.write(f"{PROG}: {n} map rows, estimated {fmt_seconds(seconds)}\n")
    categories = (0, 1) if args.category == "both" else (int(args.category),)
    bar = ProgressBar("ssm-map", args.quiet)
    rows = separation_table(monitor, columns, args.person, category=categories, max_rows=args.max_rows,
                            progress=bar)
    bar.close()
    if args.csv:
        with open(args.csv, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["state", "S_p_m", "S_h_m", "S_r_m", "S_s_m", "C_m", "Z_d_m", "Z_r_m", "T_s_s", "v_r_m_s",
                        "separation_m", "margin_m", "safe", "link", "category", "valid", "invalid_reason"])
            for row in rows:
                r = row.result
                w.writerow([row.state, repr(r.S_p), repr(r.S_h), repr(r.S_r), repr(r.S_s), repr(r.C), repr(r.Z_d),
                            repr(r.Z_r), repr(r.T_s), repr(r.v_r), repr(r.separation), repr(r.margin), int(r.safe),
                            r.link, row.category, int(r.valid), r.invalid_reason()])
    text = text_of_table(rows, args, len(categories))
    if sources.get("category1"):
        text += f"\ncategory 1: {sources['category1']}"
    return text + (f"\nwrote {args.csv}" if args.csv else "")


def text_of_table(rows, args: argparse.Namespace, n_categories: int) -> str:
    """The summary of an ``ssm-map`` table: S_p statistics over the states with a valid S_p (every case at rest
    within the horizon and within the joints' limits), the states without one counted and the first named."""
    valid = [row for row in rows if row.result.valid]
    invalid = [row for row in rows if not row.result.valid]
    unsafe = sum(not row.result.safe for row in rows)
    head = f"ISO/TS 15066 S_p over {len(rows)} map states (person at {list(args.person)}, category {args.category}): "
    if valid:
        sp = np.array([row.result.S_p for row in valid])
        k = int(np.argmax(sp))
        text = (head + f"median {np.median(sp):.4f} m, 90 % {np.percentile(sp, 90):.4f} m, largest {sp[k]:.4f} m "
                f"(state {valid[k].state}, category {valid[k].category})")
    else:
        text = head + "no state has a valid S_p"
    text += f"; {unsafe} states not safe (closer than their S_p, or no valid S_p)"
    if invalid:
        text += (f"\n{len(invalid)} states have no valid S_p (CSV column valid 0), e.g. state {invalid[0].state}: "
                 f"{invalid[0].result.invalid_reason()}")
    if n_categories > 1:
        ones = sum(row.category == 1 for row in rows)
        text += f"\nthe larger S_p of both categories per state: category 1 in {ones}, category 0 in {len(rows) - ones}"
    return text


@quiet_when_output_closed
def main(argv: Sequence[str] | None = None) -> int:
    args = parse_or_exit_status(build_parser(), argv)
    if isinstance(args, int):  # argparse printed its one line or the help
        return args
    from vtm_dynamics.core.stopsafe.stop_cases import CheckCancelled  # after parsing: --help stays light

    try:
        text = run(args)
    except (ValueError, OSError, CheckCancelled) as err:
        msg = first_line(err)
        sys.stderr.write(f"{PROG}: error: {msg}\n")
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

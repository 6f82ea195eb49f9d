"""``vtm-estop-demo``: the E-stop prediction graph in one process (robot_sim + estop_predictor), a console program
over the nodes (it composes them; the nodes never import it).

The same nodes and the same YAML as ``ros2 launch vtm_dynamics estop_predict.launch.py``, composed in one process
on a ``MultiThreadedExecutor`` (messages still go through the ROS 2 middleware, on loopback). It waits until the
simulated robot is at rest and the prediction has been checked against it, prints a summary (robot, stop category,
predicted vs. simulated stop time and distance, events) and writes plots and a JSON summary into ``--output-dir``.

Isolation: unless ``ROS_DOMAIN_ID`` is set, the demo runs in a private random domain (1..101) that no other
process on this machine uses, so two demos side by side never hear each other; discovery stays on this machine
and the DDS sockets bind loopback (``graph.apply_isolation_defaults``). It prints the domain it uses. All of this is
done in ``main`` before ``rclpy.init``, never at import.

Exit status: 0 when the prediction arrived and agreed with the simulation within the tolerances, 3 when it
arrived and did not (the summary says OUTSIDE TOLERANCE; plots and JSON are still written) or when the predictor
answered the E-stop with a failure (its reason is printed, at once), 1 on a timeout, 2 on bad
arguments/parameters or environment (a malformed ``ROS_DOMAIN_ID``, a middleware that refuses to start).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
from typing import Any, MutableMapping

import numpy as np
import yaml

from vtm_dynamics.cli.arguments import quiet_when_output_closed
from vtm_dynamics.cli import plots
from vtm_dynamics.nodes.model_source import ROBOT_NAMES

DEFAULT_OUTPUT = os.path.join("out", "estop_demo")
MAX_CONFIG_BYTES = 1024 * 1024  # the shipped parameter file is 6 kB
MAX_CONFIG_DEPTH = 20  # ROS 2 parameter files need 4 levels (node, ros__parameters, value, list)
EXIT_CHECK_FAILED = 3  # the prediction failed, or disagreed with the simulated stop beyond the tolerances


def default_config_path() -> str:
    from vtm_dynamics.core.package_data import package_data_file

    path = package_data_file("config", "estop_predict.yaml")
    if path is None:
        raise FileNotFoundError("config/estop_predict.yaml not found in this installation; give --config FILE")
    return path


def node_parameters(config: dict, node_name: str) -> dict[str, Any]:
    """``ros__parameters`` of ``node_name`` from a ROS 2 parameter YAML dict (``/**`` wildcard entries first)."""
    out: dict[str, Any] = {}
    for key in ("/**", "**", node_name, f"/{node_name}"):
        section = config.get(key) or {}
        out.update(section.get("ros__parameters") or {})
    return out


def parameter_list(values: dict[str, Any]) -> list:
    from rclpy.parameter import Parameter

    return [Parameter(name, value=value) for name, value in values.items()]


def build_parser() -> argparse.ArgumentParser:
    from vtm_dynamics.cli.arguments import Parser

    ap = Parser(prog="vtm-estop-demo", description="The E-stop prediction graph in one process (robot_sim and "
                "estop_predictor, the nodes of the launch file): waits for the stop, compares the prediction with "
                "the simulated robot, prints a summary and writes plots.")
    ap.add_argument("--config", default="", help="parameter YAML (default: the package's config/estop_predict.yaml)")
    ap.add_argument("--robot", choices=ROBOT_NAMES, type=str.lower, help="override the robot of both nodes")
    ap.add_argument("--urdf", default="", help="URDF file for both nodes (overrides --robot)")
    ap.add_argument("--brake-config", default="", help="brake YAML for both nodes")
    ap.add_argument("--estop-time", type=float, help="simulated time of the E-stop [s]")
    ap.add_argument("--output-dir", default=DEFAULT_OUTPUT, help="where plots and summary go")
    ap.add_argument("--timeout", type=float, default=60.0, help="give up after this many wall-clock seconds")
    ap.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    from vtm_dynamics.cli.view_output import add_view_arguments

    add_view_arguments(ap, "the predicted stop beside the reference simulation")
    return ap


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def build_parameters(args: argparse.Namespace) -> tuple[dict, dict]:
    from vtm_dynamics.core.limited_yaml import load_yaml_text
    from vtm_dynamics.core.stopsafe.trajectory_files import read_text_file

    path = args.config or default_config_path()
    # bounded like every file the suite reads: a regular file (a FIFO hung the demo), MAX_CONFIG_BYTES, depth and
    # nodes counted while parsing (20,000 nested brackets ended in RecursionError)
    text = read_text_file(path, "config", MAX_CONFIG_BYTES, ValueError)
    config = load_yaml_text(text, "config", ValueError, max_bytes=MAX_CONFIG_BYTES, max_depth=MAX_CONFIG_DEPTH,
                            allow_aliases=True, source=os.path.basename(path)) or {}
    pred = node_parameters(config, "estop_predictor")
    sim = node_parameters(config, "robot_sim")
    if args.robot:
        from vtm_dynamics.nodes.model_source import SIM_OVERRIDES

        pred["robot"] = sim["robot"] = args.robot
        sim.update(SIM_OVERRIDES.get(args.robot, {}))
        if "tcp_frame" in SIM_OVERRIDES.get(args.robot, {}):
            pred["tcp_frame"] = SIM_OVERRIDES[args.robot]["tcp_frame"]
    if args.urdf:
        pred["urdf_path"] = sim["urdf_path"] = os.path.abspath(args.urdf)
        pred["tcp_frame"] = sim["tcp_frame"] = ""
    if args.brake_config:
        pred["brake_config"] = sim["brake_config"] = os.path.abspath(args.brake_config)
    if args.estop_time is not None:
        sim["estop_time"] = float(args.estop_time)
    # the check compares the TCP figures of the frame the prediction reports: a configuration naming another frame
    # for the simulated robot had the TCP rows compare two different frames under the predictor's frame name
    sim["tcp_frame"] = pred.get("tcp_frame", "")
    # the in-process graph has no robot_state_publisher: the sim publishes the description, as a robot would
    sim["publish_robot_description"] = True
    # the check must not feed the predictor its own answer: a standstill LOCK at the simulated rest time revised a
    # prediction that ran longer than the simulation into one with a lock there, and the demo compared that revision
    # (2.2 ms of difference printed as 2e-8 s)
    sim["lock_on_rest"] = False
    return pred, sim


def prepare_environment(environ: MutableMapping[str, str] | None = None) -> tuple[list[str], int]:
    """Isolation for one demo run, applied to ``environ`` (default ``os.environ``) before ``rclpy.init``:
    discovery range and loopback profile (``apply_isolation_defaults``; empty or unknown ranges become LOCALHOST),
    a private random ``ROS_DOMAIN_ID`` unless one is set, ``MPLBACKEND=Agg`` unless set. Returns the lines to print
    and 0, or the error lines and 2 (a malformed ``ROS_DOMAIN_ID``, no free private domain)."""
    from vtm_dynamics.nodes.fastdds_profile import PROFILE_VARIABLE, fastdds_profile_path
    from vtm_dynamics.nodes.graph import DISCOVERY_VARIABLE, apply_isolation_defaults
    from vtm_dynamics.nodes.private_domain import choose_domain

    env = os.environ if environ is None else environ
    lines = [f"vtm-estop-demo: warning: {w}" for w in apply_isolation_defaults(env)]
    env.setdefault("MPLBACKEND", "Agg")
    try:
        choice = choose_domain(env)
    except (ValueError, RuntimeError) as err:
        return lines + [f"vtm-estop-demo: {err}"], 2
    profile = env.get(PROFILE_VARIABLE, "")
    if profile and profile == fastdds_profile_path():
        transports = "DDS sockets on loopback only"
    elif profile:
        transports = f"Fast DDS profile {profile} (yours)"
    else:
        transports = "Fast DDS default transports (all interfaces)"
    lines.append(f"vtm-estop-demo: {choice.describe()}, discovery {env[DISCOVERY_VARIABLE]}, {transports}")
    return lines, 0


def run(args: argparse.Namespace, pages: list | None = None) -> int:
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

    from vtm_dynamics.nodes.estop_predictor import SWITCH_INTERVAL, EstopPredictor
    from vtm_dynamics.nodes.fastdds_profile import rcl_init_environment
    from vtm_dynamics.nodes.graph import one_line
    from vtm_dynamics.nodes.node_main import settle_heap, use_switch_interval
    from vtm_dynamics.nodes.params import ParameterError
    from vtm_dynamics.nodes.robot_sim import RobotSim

    try:
        pred_params, sim_params = build_parameters(args)
    except (OSError, ValueError, yaml.YAMLError) as err:
        print(f"vtm-estop-demo: cannot read the configuration: {err}", file=sys.stderr)
        return 2
    use_switch_interval(SWITCH_INTERVAL)  # a process running the predictor (run_node does it for its executable)
    try:
        with rcl_init_environment():  # the loopback profile, not rmw's all-interface UDP transport
            rclpy.init(args=[])
    except _rclpy.RCLError as err:  # e.g. a malformed ROS_* variable
        print(f"vtm-estop-demo: cannot start: {one_line(err, 500)}", file=sys.stderr)
        return 2
    nodes = []
    try:
        try:
            sim = RobotSim(parameter_overrides=parameter_list(sim_params))
            nodes.append(sim)
            predictor = EstopPredictor(parameter_overrides=parameter_list(pred_params))
            nodes.append(predictor)
        except (ParameterError, ValueError) as err:
            print(f"vtm-estop-demo: {err}", file=sys.stderr)
            return 2
        except _rclpy.RCLError as err:  # the middleware refused the participant (e.g. security it cannot provide)
            print(f"vtm-estop-demo: cannot start: {one_line(err, 500)}", file=sys.stderr)
            return 2
        settle_heap()  # as run_node: no full garbage collection of the start-up heap during the stop
        executor = MultiThreadedExecutor(num_threads=3)
        for n in nodes:
            executor.add_node(n)
        spinner = threading.Thread(target=executor.spin, name="vtm-estop-demo-executor", daemon=True)
        spinner.start()
        deadline = time.monotonic() + args.timeout
        print(f"vtm-estop-demo: {sim.robot.name} moving, E-stop at t = {sim.p['estop_time']:g} s ...", flush=True)
        done, failure = False, ""
        while time.monotonic() < deadline:
            done, failure = settled(sim, predictor), failed_prediction(predictor)
            if done or failure:
                break
            time.sleep(0.02)
        for n in nodes:  # stop the periodic work first, so no callback is in flight while the nodes are destroyed
            for timer in list(n.timers):
                timer.cancel()
        time.sleep(0.2)  # let the executor drain the callbacks already queued (rclpy's worker threads may otherwise
        # finish a task after shutdown destroyed its guard condition and print an unretrieved InvalidHandle)
        executor.shutdown(timeout_sec=5.0)
        spinner.join(timeout=5.0)
        if failure:
            print(f"vtm-estop-demo: the predictor answered the E-stop with a failure, nothing to compare: {failure}",
                  file=sys.stderr)
            return EXIT_CHECK_FAILED
        if not done:
            print(f"vtm-estop-demo: timeout after {args.timeout:g} s: {waiting_for(sim, predictor)}", file=sys.stderr)
            return 1
        summary = summarize(sim, predictor)
        print(format_summary(summary))
        os.makedirs(args.output_dir, exist_ok=True)
        with open(os.path.join(args.output_dir, "summary.json"), "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
        written = [] if args.no_plots else plots.prediction_vs_simulation_plots(
            args.output_dir, predictor.robot, predictor.outputs.last_result, sim.plant) + \
            plots.prediction_report_plots(args.output_dir, predictor.robot, predictor.outputs.last_result,
                                          armature=None if predictor.model.brakes is None
                                          else predictor.model.brakes.armature)
        for p in [os.path.join(args.output_dir, "summary.json")] + written:
            print(f"wrote {p}")
        from vtm_dynamics.cli import view_output

        if view_output.wants_view(args):  # served by main once the nodes are gone
            page = view_output.show_stop(args, predictor.robot, predictor.outputs.last_result,
                                         reference=view_output.reference_motion(sim.plant), serve=False)
            if pages is not None:
                pages.append(page)
        return 0 if summary["within_tolerance"] else EXIT_CHECK_FAILED
    finally:
        for n in nodes:
            n.destroy_node()
        rclpy.try_shutdown()


def settled(sim: Any, predictor: Any) -> bool:
    """True once the simulated stop has been compared with the predictor's latest revision of that stop."""
    stop, c = predictor.stop, sim.comparison
    if c is None or stop is None or not stop.predicted or predictor.pending is not None:
        return False
    return c.scenario_id == f"estop-{stop.number}" + (f"-rev{stop.revision}" if stop.revision else "")


def failed_prediction(predictor: Any) -> str:
    """"<scenario>: <reason>" when the predictor's latest E-stop prediction is a failure and no other prediction of
    the stop is due (the check can then never happen), else ""."""
    msg = predictor.outputs.last_prediction
    if msg is None or msg.success or not msg.scenario_id.startswith("estop") or predictor.pending is not None:
        return ""
    return f"{msg.scenario_id}: {msg.message}"


def waiting_for(sim: Any, predictor: Any) -> str:
    """What the demo was still waiting for when it gave up."""
    if predictor.outputs.last_prediction is None:
        return "no prediction received"
    if sim.plant is None or not sim.plant.at_rest:
        return "the simulated robot did not come to rest"
    latest = predictor.outputs.last_prediction.scenario_id
    return f"the simulated stop was not compared with the predictor's latest prediction ({latest})"


def summarize(sim: Any, predictor: Any) -> dict:
    """Plain-data summary of the stop: prediction vs. simulation."""
    from vtm_dynamics.nodes import prediction_io as io

    c = sim.comparison
    result = predictor.outputs.last_result
    msg = predictor.outputs.last_prediction
    events: list[dict] = []
    for e in result.events:  # simultaneous events of one kind (e.g. all brakes engaging) on one line
        if events and events[-1]["kind"] == e.kind and abs(events[-1]["time_s"] - e.time) < 1e-9:
            events[-1]["joints"] += list(e.joints)
            events[-1]["energy_loss_J"] += float(e.energy_loss)
            continue
        events.append({"time_s": float(e.time), "kind": e.kind, "joints": list(e.joints),
                       "energy_loss_J": float(e.energy_loss)})
    plant_events = [{"time_s": round(e.time, 6), "kind": e.kind, "joints": list(e.joints)} for e in sim.plant.events]
    stop_id = c.scenario_id.split("-rev")[0]  # this stop's predictions: its first and its revisions
    timings = [t for t in predictor.outputs.timings if t.scenario == stop_id or t.scenario.startswith(stop_id + "-rev")]
    first, last = (timings[0], timings[-1]) if timings else (None, None)
    fired = getattr(sim, "estop_wall", math.nan)
    return {
        "robot": sim.robot.name,
        "stop_category": int(msg.stop_category),
        "scenario_id": c.scenario_id,
        "tcp_frame": msg.tcp_frame,
        "predicted": {
            "stop_time_s": io.stop_time(result), "tcp_path_m": c.predicted_tcp_path,
            "tcp_straight_m": c.predicted_tcp_straight, "rest_positions_rad": c.predicted_rest.tolist(),
            "stopping_angles_rad": [float(x) for x in result.stopping_angles],
            "brake_energy_J": float(result.brake_energy), "impulse_energy_J": float(result.impulse_energy),
            "holding_torques_Nm": [float(x) for x in result.holding_torques],
        },
        "simulated": {
            "stop_time_s": c.simulated_stop_time, "tcp_path_m": c.simulated_tcp_path,
            "tcp_straight_m": c.simulated_tcp_straight, "rest_positions_rad": c.simulated_rest.tolist(),
            "integration_step_s": sim.plant.dt,
        },
        "max_rest_angle_error_rad": c.max_angle_error,
        "max_rest_position_error_m": getattr(c, "max_position_error", 0.0),
        "within_tolerance": c.within_tolerance,
        "tolerances": {"angle_rad": sim.p["angle_tolerance"], "position_m": sim.p["position_tolerance"],
                       "time_s": sim.p["time_tolerance"]},
        "joint_names": list(c.joint_names),
        # a prismatic joint's (a linear track's) entries of the lists above are in m and N, not rad and N m
        "joint_units": {k: [j.units[n] for j in predictor.robot.joints]
                        for n, k in enumerate(("position", "velocity", "effort"))},
        "predicted_events": events,
        "simulated_events": plant_events,
        # monotonic clock of the process, from the predictor's handling of the trigger: its first prediction of the
        # stop, and the last revision (the one compared), both timed from that same trigger; and from the simulated
        # robot's publication of the E-stop (the DDS hop to the predictor included)
        "trigger_to_prediction_latency_s": first.since_trigger if first else None,
        "trigger_to_last_revision_latency_s": last.since_trigger if last else None,
        "estop_to_prediction_latency_s": first.published_wall - fired if first and math.isfinite(fired) else None,
        "revisions": len(timings),
        "last_revision": last.scenario if last else None,
    }


def format_summary(s: dict) -> str:
    p, m = s["predicted"], s["simulated"]
    lines = [
        "",
        f"E-stop prediction vs. simulation — robot {s['robot']}, stop category {s['stop_category']}, "
        f"TCP frame {s['tcp_frame']}",
        "",
        f"  {'':28s}{'predicted':>12s}{'simulated':>12s}{'difference':>12s}",
        f"  {'stop time [s]':28s}{p['stop_time_s']:12.4f}{m['stop_time_s']:12.4f}"
        f"{p['stop_time_s'] - m['stop_time_s']:12.2e}",
        f"  {'TCP path length [m]':28s}{p['tcp_path_m']:12.4f}{m['tcp_path_m']:12.4f}"
        f"{p['tcp_path_m'] - m['tcp_path_m']:12.2e}",
        f"  {'TCP straight distance [m]':28s}{p['tcp_straight_m']:12.4f}{m['tcp_straight_m']:12.4f}"
        f"{p['tcp_straight_m'] - m['tcp_straight_m']:12.2e}",
        "",
    ]
    units = s.get("joint_units", {}).get("position", ["rad"] * len(s["joint_names"]))
    linear = "m" in units  # a prismatic joint: units move from the header into every row (as vtm-predict's table)
    if linear:
        lines += [f"  {'joint':24s}{'stop':>18s}{'rest pred':>16s}{'rest sim':>16s}{'hold':>12s}  units",
                  f"  {'':24s}{'(predicted)':>18s}{'':>16s}{'':>16s}{'(predicted)':>12s}  (stop; rest; hold)"]
    else:
        lines += [f"  {'joint':24s}{'stop angle [deg]':>18s}{'rest pred [rad]':>16s}{'rest sim [rad]':>16s}"
                  f"{'hold [N m]':>12s}",
                  f"  {'':24s}{'(predicted)':>18s}{'':>16s}{'':>16s}{'(predicted)':>12s}"]
    for n, a, rp, rs, h, u in zip(s["joint_names"], p["stopping_angles_rad"], p["rest_positions_rad"],
                                  m["rest_positions_rad"], p["holding_torques_Nm"], units):
        stop = 1e3 * a if u == "m" else np.degrees(a)  # a track's travel in mm, an angle in degrees
        row = f"  {n:24s}{stop:18.3f}{rp:16.5f}{rs:16.5f}{h:12.2f}"
        lines.append(row + ("" if not linear else "  mm; m; N" if u == "m" else "  deg; rad; N m"))
    error = f"max |rest angle error| {s['max_rest_angle_error_rad']:.2e} rad"
    tolerance = f"tolerance {s['tolerances']['angle_rad']:g} rad"
    if linear:  # prismatic joints are checked apart, in m, with their own tolerance
        error += f", max |rest position error| {s['max_rest_position_error_m']:.2e} m"
        tolerance += f" and {s['tolerances']['position_m']:g} m"
    lines += [
        "",
        f"  {error} ({tolerance}, stop time {s['tolerances']['time_s']:g} s): "
        + ("within tolerance" if s["within_tolerance"] else "OUTSIDE TOLERANCE"),
        "  (the simulation integrates the predictor's robot model and brake parameters from the same start state:",
        "   it checks how the stop is integrated, not whether the model or the brake values match a real robot)",
        f"  energy dissipated (predicted): brakes {p['brake_energy_J']:.2f} J, locks {p['impulse_energy_J']:.2f} J",
    ]
    if s["trigger_to_prediction_latency_s"] is not None:
        line = (f"  trigger -> published prediction: {1e3 * s['trigger_to_prediction_latency_s']:.1f} ms after the "
                f"predictor received the trigger")
        if s.get("estop_to_prediction_latency_s") is not None:
            line += f" ({1e3 * s['estop_to_prediction_latency_s']:.1f} ms after the simulated robot fired the E-stop)"
        lines.append(line)
        if s.get("revisions", 1) > 1:
            lines.append(f"  the prediction compared is the last of {s['revisions']} for this stop "
                         f"({s['last_revision']}), published {1e3 * s['trigger_to_last_revision_latency_s']:.1f} ms "
                         f"after the trigger")
    lines += ["", "  predicted events:"]
    for e in s["predicted_events"]:
        extra = f"  (kinetic energy lost {e['energy_loss_J']:.3f} J)" if e["energy_loss_J"] else ""
        lines.append(f"    t = {e['time_s']:8.4f} s  {e['kind']:8s} {', '.join(e['joints'])}{extra}")
    lines.append("")
    return "\n".join(lines)


@quiet_when_output_closed
def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as exc:  # the parser printed its one line (or the help)
        return int(exc.code or 0)
    lines, status = prepare_environment()
    for line in lines:
        print(line, file=sys.stdout if status == 0 else sys.stderr, flush=True)
    if status:
        return status
    pages: list[bytes] = []
    status = run(args, pages)
    if status == 0 and args.serve and pages:
        from vtm_dynamics.views.serve import serve_until_interrupted

        return serve_until_interrupted(pages[0], args.port)
    return status


if __name__ == "__main__":
    raise SystemExit(main())

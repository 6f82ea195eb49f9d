"""``vtm-stopping-map``: worst case and distribution of the TCP stopping distance and time over sampled states.

Examples::

    vtm-stopping-map ur5 --states 2000 --out map_ur5                 # local cluster on every core
    vtm-stopping-map ur5 --states 100000 --box 0.2 -0.5 0 0.8 0.5 0.6 --payload 0 --payload 5 --out cell
    vtm-stopping-map ur5 --states 1000000 --scheduler tcp://10.0.0.5:8786 --out big   # an existing cluster
    vtm-stopping-map --urdf arm.urdf --brakes arm_brakes.yaml --tcp-frame tool0 --states 500 --out arm

Run the same command again to resume an interrupted run (finished chunks are skipped). Writes
``OUT/stopping_map.parquet`` (one row per state with its inputs), ``OUT/stopping_map.csv`` (the same rows, headed
by ``# key: value`` lines saying what produced them; readable without pandas), ``OUT/summary.json`` (what was mapped:
payloads, speed range, brake factors, category; the worst states with their q and v; the software) and, with
``--plots``, heat maps and the worst states. Bad input prints one line ``vtm-stopping-map: error: <field>: <reason>`` (status 2);
chunks that failed are listed with their input (status 1) and the rest is kept for the next run; Ctrl-C stops the
cluster and says how many chunks are kept (status 130).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

import numpy as np

from vtm_dynamics.cli import provenance
from vtm_dynamics.cli.arguments import Parser, add_torque_limits_option, parse_or_exit_status, quiet_when_output_closed
from vtm_dynamics.cli.stopping_robots import add_robot_arguments, load_robot
from vtm_dynamics.core.estop import StopInputError
from vtm_dynamics.core.estop.inputs import torque_limits_text
from vtm_dynamics.core.estop.defaults import (
    CATEGORY, CATEGORY1_DECELERATION, ENVELOPE_DELAY_FACTOR, ENVELOPE_TORQUE_FACTOR,
)
from vtm_dynamics.scaleout.settings import CONNECT_TIMEOUT
from vtm_dynamics.core.excerpt import first_line

if TYPE_CHECKING:  # the core and the distributed engine are imported when a map runs, not for --help
    from vtm_dynamics.core.stopping.workspace_map import MapSpec
    from vtm_dynamics.scaleout.map_runner import MapRun

PROG = "vtm-stopping-map"
EXIT_INTERRUPTED = 130  # the shell's status for a command ended by Ctrl-C (128 + SIGINT)


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog=PROG, description="Workspace stopping map: TCP stopping distance and time over sampled states, "
                "on a local or an existing Dask cluster.")
    add_robot_arguments(ap, tcp_help="frame whose stopping distance is mapped (default tool0 for UR)")
    ap.add_argument("--out", required=True, help="run directory (created; resumed if it holds the same run)")
    ap.add_argument("--states", type=int, default=1000, help="number of states")
    ap.add_argument("--chunk-size", type=int, default=250, help="states per task")
    ap.add_argument("--seed", type=int, default=0, help="seed of the state sampling (the same seed, the same states)")
    ap.add_argument("--box", type=float, nargs=6, metavar=("XMIN", "YMIN", "ZMIN", "XMAX", "YMAX", "ZMAX"),
                    help="Cartesian cell box [m] (world frame) the TCP must start in")
    ap.add_argument("--grid", type=int, nargs="+", metavar="N", help="grid of configurations: points per joint "
                    "(1: the range's middle); replaces --states with the product")
    ap.add_argument("--q-low", type=float, nargs="+", help="lower joint bounds [rad] (default: joint limits)")
    ap.add_argument("--q-high", type=float, nargs="+", help="upper joint bounds [rad]")
    ap.add_argument("--speed-fraction", type=float, nargs=2, default=(0.1, 1.0), metavar=("MIN", "MAX"),
                    help="speed of the most loaded joint as a fraction of its maximum")
    ap.add_argument("--max-speeds", type=float, nargs="+", help="100 %% joint speeds [rad/s] (default: the "
                    "robot's stated maximum, within the URDF limits)")
    ap.add_argument("--payload", type=float, action="append", help="payload level [kg] (repeatable; default 0)")
    ap.add_argument("--torque-factor", type=float, nargs=2, default=ENVELOPE_TORQUE_FACTOR, metavar=("MIN", "MAX"),
                    help="range of the brake-torque factor sampled per state")
    ap.add_argument("--delay-factor", type=float, nargs=2, default=ENVELOPE_DELAY_FACTOR, metavar=("MIN", "MAX"),
                    help="range of the engage-delay factor sampled per state")
    ap.add_argument("--category", type=int, choices=(0, 1), default=CATEGORY, help="IEC 60204-1 stop category")
    ap.add_argument("--decel", type=float, default=CATEGORY1_DECELERATION, help="category 1: joint deceleration of the controlled ramp "
                    "[rad/s^2] (an assumption: give your controller's)")
    add_torque_limits_option(ap)
    ap.add_argument("--scheduler", help="tcp://HOST:PORT (or tls://, credentials from the Dask configuration) of an "
                    "existing Dask scheduler (default: a local cluster on loopback that no other client can join)")
    ap.add_argument("--connect-timeout", type=float, default=CONNECT_TIMEOUT,
                    help=f"[s] to reach --scheduler and hear it answer (default {CONNECT_TIMEOUT:g})")
    ap.add_argument("--workers", type=int, help="local cluster worker processes, 1 to twice the cores of this machine "
                    "(default: every core)")
    ap.add_argument("--threads", action="store_true", help="local workers as threads of this process")
    ap.add_argument("--overwrite", action="store_true", help="discard a different run found in --out (only the "
                    "files this tool writes there; a symbolic link or foreign file under its names stops the run)")
    ap.add_argument("--plots", action="store_true", help="also write heat maps and the worst states (PNG)")
    from vtm_dynamics.cli.view_output import add_view_arguments

    add_view_arguments(ap, "the map (TCP start positions by stopping distance, cell box, worst states replayed)")
    return ap


def catalogue_max_speeds(loaded) -> tuple[float, ...] | None:
    """The maker's maximum joint speeds [rad/s] of a catalogue robot, each at most the URDF's velocity limit where
    it gives one; None for a robot given by its files."""
    d = loaded.defaults
    if d is None or d.max_speeds is None:
        return None
    limit = loaded.robot.model.velocityLimit
    return tuple(min(float(s), float(limit[k])) if limit[k] > 0 else float(s) for k, s in enumerate(d.max_speeds))


def spec_from_args(args: argparse.Namespace, loaded) -> MapSpec:
    from vtm_dynamics.core.estop import StopInputError
    from vtm_dynamics.core.estop.inputs import torque_limits_from_text
    from vtm_dynamics.core.stopping.workspace_map import MapSpec

    d = loaded.defaults
    tcp = args.tcp_frame or (d.tcp_frame if d else None)
    if tcp is None:
        raise StopInputError("tcp_frame: --tcp-frame is required with --urdf")
    max_speeds = args.max_speeds if args.max_speeds is not None else catalogue_max_speeds(loaded)
    box = None if args.box is None else (tuple(args.box[:3]), tuple(args.box[3:]))
    grid = None if args.grid is None else tuple(args.grid)
    n_states = args.states
    if grid is not None:
        n_states = math.prod(grid) if grid and all(g >= 1 for g in grid) else 1  # the grid check names it
    return MapSpec(
        n_states=n_states, grid=grid, tcp_frame=tcp, payload_frame=d.payload_frame_or(tcp) if d else tcp,
        chunk_size=args.chunk_size, seed=args.seed,
        q_low=None if args.q_low is None else tuple(args.q_low), q_high=None if args.q_high is None else tuple(args.q_high),
        cell_box=box, speed_fraction=tuple(args.speed_fraction),
        max_speeds=None if max_speeds is None else tuple(float(x) for x in max_speeds),
        payloads=tuple(args.payload or (0.0,)), torque_factor=tuple(args.torque_factor),
        delay_factor=tuple(args.delay_factor), category=args.category, category1_deceleration=args.decel,
        category1_torque_limits=torque_limits_from_text(args.torque_limits),
    )


_finite = provenance.finite_or_none  # inf and nan are JSON null


def _state_row(columns: dict, state: int, joint_names: tuple[str, ...]) -> dict:
    """One state of the map with its inputs and results (q [rad], v [rad/s], levels, factors, TCP start); a state
    that did not stop has no stopping distance (None) and its distance at the horizon [m] instead; one whose stop
    went past a joint limit (``within_limits`` false) has no stopping distance either, its predicted distance
    (without end stops) under ``tcp_distance_past_limit_m``."""
    k = int(np.flatnonzero(np.asarray(columns["state"]) == state)[0])
    value = {name: columns[name][k] for name in columns}
    row = {
        "state": int(state), "q_rad": [float(value[f"q_{n}"]) for n in joint_names],
        "v_rad_s": [float(value[f"v_{n}"]) for n in joint_names], "speed_fraction": float(value["speed_fraction"]),
        "payload_kg": float(value["payload_kg"]), "torque_factor": float(value["torque_factor"]),
        "delay_factor": float(value["delay_factor"]),
        "tcp_start_m": [float(value["tcp_x_m"]), float(value["tcp_y_m"]), float(value["tcp_z_m"])],
        "stop_time_s": _finite(float(value["stop_time_s"])), "stopped": bool(value["stopped"]),
        "within_limits": bool(value["within_limits"]),
    }
    distance = _finite(float(value["tcp_straight_distance_m"]))
    if row["stopped"] and not row["within_limits"]:  # the end stop, not the brake, would end this motion
        row["tcp_straight_distance_m"] = row["stop_time_s"] = None
        row["tcp_distance_past_limit_m"] = distance
    elif row["stopped"]:
        row["tcp_straight_distance_m"] = distance
    else:  # still moving at the horizon: the stopping distance is not known, only exceeded
        row["tcp_straight_distance_m"] = None
        row["tcp_distance_at_horizon_m"] = distance
    return row


def summary_dict(run: MapRun, spec: MapSpec | None = None, loaded=None, columns: dict | None = None,
                 dynamics: str | None = None) -> dict:
    """The summary.json of a finished run: what was mapped (robot, model and brake hashes, payloads, speed range,
    factors, category), the worst states with their q and v, the percentiles, the software, and ``dynamics``: which
    M and h the stops used (:func:`~vtm_dynamics.core.stopping.workspace_map.dynamics_used`)."""
    s = run.summary
    out = {
        "inputs_hash": run.inputs_hash, "rows": s.count, "stopped": s.stopped, "past_limits": s.past_limits,
        "worst_distance": {"state": s.worst_distance_state, "tcp_straight_distance_m": _finite(s.worst_distance)},
        "worst_time": {"state": s.worst_time_state, "stop_time_s": _finite(s.worst_time)},
        "distance_percentiles_m": dict(zip(("p50", "p90", "p99", "max"), map(_finite, s.distance_percentiles))),
        "time_percentiles_s": dict(zip(("p50", "p90", "p99", "max"), map(_finite, s.time_percentiles))),
    }
    if loaded is not None and spec is not None:
        out["mapped"] = {
            "robot": loaded.name, "model_sha256": provenance.text_sha256(loaded.text),
            "brakes_file": os.path.abspath(loaded.brake_source),
            "brakes_sha256": provenance.file_sha256(loaded.brake_source), "tcp_frame": spec.tcp_frame,
            "payloads_kg": list(spec.payloads), "payload_frame": spec.payload_frame, "speed_fraction": list(spec.speed_fraction),
            "max_speeds_rad_s": None if spec.max_speeds is None else list(spec.max_speeds),
            "torque_factor": list(spec.torque_factor), "delay_factor": list(spec.delay_factor),
            "category": spec.category,
            "category1_deceleration_rad_s2": spec.category1_deceleration if spec.category == 1 else None,
            "category1_torque_limits": (list(spec.category1_torque_limits)
                                        if isinstance(spec.category1_torque_limits, tuple)
                                        else spec.category1_torque_limits) if spec.category == 1 else None,
            "cell_box_m": None if spec.cell_box is None else [list(spec.cell_box[0]), list(spec.cell_box[1])],
            "seed": spec.seed, "states": spec.n_states,
        }
    if columns is not None and loaded is not None:
        names = loaded.robot.joint_names
        out["worst_distance"] = _state_row(columns, s.worst_distance_state, names)
        out["worst_time"] = _state_row(columns, s.worst_time_state, names)
        out["joint_names"] = list(names)
        out["joint_units"] = [j.units[0] for j in loaded.robot.joints]  # position unit: m for a prismatic joint
    if dynamics is not None:
        out["dynamics"] = dynamics
    out["software"] = provenance.software()
    return out


def summary_lines(summary: dict) -> list[str]:
    """What the tool prints after a run: what was mapped, the worst states with q and v, the percentiles."""
    m = summary.get("mapped", {})
    lines = []
    if m:
        lines.append(f"mapped: {m['robot']} (URDF sha256 {m['model_sha256'][:16]}), brakes {m['brakes_file']} "
                     f"(sha256 {m['brakes_sha256'][:16]}), TCP {m['tcp_frame']}")
        lines.append(f"        payload {', '.join(f'{x:g}' for x in m['payloads_kg'])} kg"
                     + (f" at {m['payload_frame']}" if m.get("payload_frame") else "") + "; speed "
                     f"{m['speed_fraction'][0]:g}-{m['speed_fraction'][1]:g} x the maximum of the most loaded joint; "
                     f"brake torque x {m['torque_factor'][0]:g}-{m['torque_factor'][1]:g}, delay x "
                     f"{m['delay_factor'][0]:g}-{m['delay_factor'][1]:g}; category {m['category']}"
                     + (f" (ramp {m['category1_deceleration_rad_s2']:g} rad/s^2, assumed; drive torque limits "
                        f"{torque_limits_text(m.get('category1_torque_limits'))})" if m["category"] == 1
                        else ""))
    if m and (m["torque_factor"][0] < m["torque_factor"][1] or m["delay_factor"][0] < m["delay_factor"][1]):
        low, long = m["torque_factor"][0], m["delay_factor"][1]
        lines.append(f"note: the brake factors were sampled uniformly, one pair per state: the worst cases and "
                     f"percentiles below are over those draws, not at the band's weakest corner (torque x {low:g}, "
                     f"delay x {long:g}); map that corner with --torque-factor {low:g} {low:g} --delay-factor "
                     f"{long:g} {long:g}")
    for key, what in (("worst_distance", "worst TCP stopping distance"), ("worst_time", "worst stop time")):
        w = summary[key]
        found = w["tcp_straight_distance_m"] if key == "worst_distance" else w["stop_time_s"]
        value = "not stopped" if found is None else f"{found:.4f} {'m' if key == 'worst_distance' else 's'}"
        if found is None and w.get("within_limits") is False and w.get("stopped"):
            value = "past a joint limit (no end stops in the model)"
        elif found is None and "stopped" not in w and summary.get("past_limits"):
            value = "not known (not stopped or past a joint limit)"
        moved = w.get("tcp_distance_at_horizon_m")
        extra = "" if moved is None else f", still moving {moved:.4f} m from its start when the horizon ended"
        lines.append(f"{what} {value} (state {w['state']}{extra})")
        if "q_rad" in w:
            # the q_rad / v_rad_s entries of a prismatic joint are in m and m/s: said so where there is one
            linear = [n for n, u in zip(summary.get("joint_names", ()), summary.get("joint_units", ())) if u == "m"]
            also = f"; {', '.join(linear)} in m" if linear else ""
            lines.append(f"    q [rad{also}] = [{', '.join(f'{x:.4f}' for x in w['q_rad'])}]")
            lines.append(f"    v [rad/s{also}/s] = [{', '.join(f'{x:.4f}' for x in w['v_rad_s'])}]")
            lines.append(f"    payload {w['payload_kg']:g} kg, speed fraction {w['speed_fraction']:.3f}, brake torque x "
                         f"{w['torque_factor']:.3f}, delay x {w['delay_factor']:.3f}, stop time "
                         + (f"{w['stop_time_s']:.4f} s" if w["stop_time_s"] is not None else
                            "(past a joint limit)" if w.get("stopped") else "(not stopped)")
                         + (f", TCP distance {w['tcp_straight_distance_m']:.4f} m"
                            if w["tcp_straight_distance_m"] is not None else ""))
    lines.append(f"{summary['stopped']}/{summary['rows']} stopped")
    if summary.get("past_limits"):
        lines.append(f"{summary['past_limits']}/{summary['rows']} went past a joint limit (no end stops in the model): "
                     "their distance and time are not stopping figures and count like states that did not stop")
    d, t = summary["distance_percentiles_m"], summary["time_percentiles_s"]
    unknown = "not stopped" if not summary.get("past_limits") else "unknown"
    lines.append("distance p50/p90/p99/max [m]: "  # None: the rank reaches a state that did not stop (inf)
                 + " / ".join(f"{d[k]:.4f}" if d[k] is not None else unknown for k in d))
    lines.append("time     p50/p90/p99/max [s]: "  # None: the rank reaches a state that did not stop (inf)
                 + " / ".join(f"{t[k]:.4f}" if t[k] is not None else unknown for k in t))
    if summary.get("dynamics"):
        lines.append(f"dynamics (M and h): {summary['dynamics']}")
    sw = summary["software"]
    lines.append(f"software {sw['name']} {sw['version']}" + (f" (git {sw['git_commit']})" if sw["git_commit"] else ""))
    return lines


#: rows formatted at a time when the map's CSV is written (the file is written as it is made, never held whole); with
#: blocks of 10 000 UR5 rows writing the CSV peaked at 21 MB of Python objects, with blocks of 1 000 at 5 MB
CSV_BLOCK_ROWS = 1_000


def write_map_csv(path: str, columns: dict | Callable[[], Iterable[dict]], summary: dict) -> str:
    """The map's rows as CSV (one row per state, the Parquet file's columns), headed by ``# key: value`` lines: the
    inputs hash, what was mapped and the software. ``columns``: the rows in memory, or passes over them a block at
    a time (:func:`vtm_dynamics.scaleout.result_file.result_passes`: the map is then never held whole). Written
    through a temporary file and a rename, in blocks of at most :data:`CSV_BLOCK_ROWS` rows (a 10^6-state map's
    CSV is about 400 MB of text)."""
    import csv
    import json

    from vtm_dynamics.cli.stop_report import write_atomic
    from vtm_dynamics.core.stopping.map_summary import passes_of

    passes = passes_of(columns) if isinstance(columns, dict) else columns
    head = [("vtm-stopping-map inputs_hash", summary["inputs_hash"])]
    head += [(f"vtm-stopping-map {k}", json.dumps(v)) for k, v in summary.get("mapped", {}).items()]
    head.append(("vtm-stopping-map software", json.dumps(summary["software"])))

    def cell(a: np.ndarray, k: int):
        return repr(float(a[k])) if a.dtype.kind == "f" else (int(a[k]) if a.dtype.kind in "iub" else a[k])

    def write(fh) -> None:
        fh.write("\n".join(provenance.comment_lines(head)) + "\n")
        writer = csv.writer(fh, lineterminator="\n")
        names = None
        for block in passes():
            if names is None:
                names = list(block)
                writer.writerow(names)
            arrays = [np.asarray(block[n]) for n in names]
            rows = len(arrays[0]) if arrays else 0
            for start in range(0, rows, CSV_BLOCK_ROWS):
                writer.writerows([[cell(a, k) for a in arrays] for k in range(start, min(start + CSV_BLOCK_ROWS, rows))])

    return write_atomic(path, write)


def _chunks_kept(out: str) -> int:
    """How many chunk files a run left in ``out`` (a rerun checks each before it counts)."""
    from vtm_dynamics.scaleout.chunk_store import CHUNK_NAME

    try:
        return sum(1 for name in os.listdir(os.path.join(out, "chunks")) if CHUNK_NAME.match(name))
    except OSError:
        return 0


@quiet_when_output_closed
def main(argv: Sequence[str] | None = None) -> int:
    args = parse_or_exit_status(build_parser(), argv)
    if isinstance(args, int):  # argparse printed its one line or the help
        return args
    from vtm_dynamics.scaleout.map_runner import MapJob, Progress, run_map
    from vtm_dynamics.scaleout.result_file import read_rows, result_passes
    from vtm_dynamics.core.stopping.workspace_map import prepared_dynamics

    try:
        loaded = load_robot(None if args.urdf else args.robot, args.urdf, args.brakes)
        spec = spec_from_args(args, loaded)
        job = MapJob(loaded.text, loaded.brake_config, spec)
        if not (0 < args.connect_timeout <= 600):
            raise StopInputError(f"connect_timeout: must be in (0, 600] s, got {args.connect_timeout:g}")
        dynamics = prepared_dynamics(loaded.robot, spec)  # made once here, not by each local worker
        run = run_map(job, args.out, scheduler=args.scheduler, workers=args.workers, threads=args.threads,
                      overwrite=args.overwrite, progress=Progress(sys.stderr, spec.n_states),
                      connect_timeout=args.connect_timeout)
    except (ValueError, OSError) as err:
        msg = first_line(err)
        sys.stderr.write(f"{PROG}: error: {msg}\n")
        return 2
    except KeyboardInterrupt:  # Ctrl-C: the cluster is closed on the way out; say what a rerun finds
        sys.stderr.write(f"\n{PROG}: interrupted: {_chunks_kept(args.out)} of {spec.n_chunks} chunks kept in "
                         f"{args.out}; run the same command again to resume\n")
        return EXIT_INTERRUPTED
    print(f"{loaded.name}: {spec.n_states} states in {spec.n_chunks} chunks; {run.computed} computed now, "
          f"{run.skipped} already done, {run.workers} workers, {run.seconds:.1f} s")
    if run.failures:
        for f in run.failures:
            print(f"chunk {f['chunk']} failed: state {f['state']}: {f['reason']} (q={f['q']}, v={f['v']})")
        print(f"{len(run.failures)} chunk(s) failed; the others are kept in {args.out}/chunks (see failures.json)")
        return 1
    # the map is read a block at a time from here on: the client's memory does not grow with the map's rows
    worst_rows = read_rows(run.path, (run.summary.worst_distance_state, run.summary.worst_time_state))
    summary = summary_dict(run, spec, loaded, worst_rows, dynamics)
    from vtm_dynamics.cli.stop_report import write_json

    write_json(os.path.join(args.out, "summary.json"), summary)
    print("\n".join(summary_lines(summary)))
    print(f"wrote {run.path}")
    print(f"wrote {write_map_csv(os.path.join(args.out, 'stopping_map.csv'), result_passes(run.path), summary)}")
    print(f"wrote {os.path.join(args.out, 'summary.json')}")
    if args.plots:
        from vtm_dynamics.cli.stopping_charts import HEATMAP_COLUMNS, map_heatmaps

        for path in map_heatmaps(result_passes(run.path, HEATMAP_COLUMNS), args.out, summary=summary):
            print(f"wrote {path}")
    from vtm_dynamics.cli import view_output

    if view_output.wants_view(args):
        try:
            view_output.show_map(args, loaded, spec, lambda names: result_passes(run.path, names))
        except (ValueError, OSError, RuntimeError) as err:
            sys.stderr.write(f"{PROG}: error: {str(err).strip().splitlines()[0]}\n")
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``vtm-stopping-map``: worst case and distribution of the TCP stopping distance and time over sampled states.

Examples::

    vtm-stopping-map ur5 --states 2000 --out map_ur5                 # local cluster on every core
    vtm-stopping-map ur5 --states 100000 --box 0.2 -0.5 0 0.8 0.5 0.6 --payload 0 --payload 5 --out cell
    vtm-stopping-map ur5 --states 1000000 --scheduler tcp://10.0.0.5:8786 --out big   # an existing cluster
    vtm-stopping-map --urdf arm.urdf --brakes arm_brakes.yaml --tcp-frame tool0 --states 500 --out arm

Run the same command again to resume an interrupted run (finished chunks are skipped). Writes
``OUT/stopping_map.parquet`` (one row per state with its inputs), ``OUT/summary.json`` and, with ``--plots``, heat
maps and the worst states. Bad input prints one line ``vtm-stopping-map: error: <field>: <reason>`` (status 2);
chunks that failed are listed with their input (status 1) and the rest is kept for the next run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Sequence

import numpy as np

from vtm_dynamics.cli.stopping_robots import add_robot_arguments, load_robot
from vtm_dynamics.core.estop import StopInputError
from vtm_dynamics.core.estop.defaults import (
    CATEGORY, CATEGORY1_DECELERATION, ENVELOPE_DELAY_FACTOR, ENVELOPE_TORQUE_FACTOR,
)
from vtm_dynamics.core.stopping.workspace_map import MapSpec
from vtm_dynamics.scaleout.chunk_store import read_result
from vtm_dynamics.scaleout.map_runner import CONNECT_TIMEOUT, MapJob, MapRun, Progress, run_map

PROG = "vtm-stopping-map"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=PROG, description="Workspace stopping map: TCP stopping distance and time "
                                 "over sampled states, on a local or an existing Dask cluster.")
    add_robot_arguments(ap, tcp_help="frame whose stopping distance is mapped (default tool0 for UR)")
    ap.add_argument("--out", required=True, help="run directory (created; resumed if it holds the same run)")
    ap.add_argument("--states", type=int, default=1000, help="number of states")
    ap.add_argument("--chunk-size", type=int, default=250, help="states per task")
    ap.add_argument("--seed", type=int, default=0)
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
    ap.add_argument("--torque-factor", type=float, nargs=2, default=ENVELOPE_TORQUE_FACTOR, metavar=("MIN", "MAX"))
    ap.add_argument("--delay-factor", type=float, nargs=2, default=ENVELOPE_DELAY_FACTOR, metavar=("MIN", "MAX"))
    ap.add_argument("--category", type=int, choices=(0, 1), default=CATEGORY)
    ap.add_argument("--decel", type=float, default=CATEGORY1_DECELERATION, help="category 1: joint deceleration [rad/s^2]")
    ap.add_argument("--scheduler", help="tcp://HOST:PORT (or tls://, credentials from the Dask configuration) of an "
                    "existing Dask scheduler (default: a local cluster on loopback that no other client can join)")
    ap.add_argument("--connect-timeout", type=float, default=CONNECT_TIMEOUT,
                    help=f"[s] to reach --scheduler and hear it answer (default {CONNECT_TIMEOUT:g})")
    ap.add_argument("--workers", type=int, help="local cluster worker processes (default: every core)")
    ap.add_argument("--threads", action="store_true", help="local workers as threads of this process")
    ap.add_argument("--overwrite", action="store_true", help="discard a different run found in --out (only the "
                    "files this tool writes there; a symbolic link or foreign file under its names stops the run)")
    ap.add_argument("--plots", action="store_true", help="also write heat maps and the worst states (PNG)")
    from vtm_dynamics.cli.view_output import add_view_arguments

    add_view_arguments(ap, "the map (TCP start positions by stopping distance, cell box, worst states replayed)")
    return ap


def spec_from_args(args: argparse.Namespace, loaded) -> MapSpec:
    d = loaded.defaults
    tcp = args.tcp_frame or (d.tcp_frame if d else None)
    if tcp is None:
        raise StopInputError("tcp_frame: --tcp-frame is required with --urdf")
    max_speeds = args.max_speeds
    if max_speeds is None and d is not None:
        limit = loaded.robot.model.velocityLimit
        max_speeds = [min(s, float(limit[k])) if limit[k] > 0 else s for k, s in enumerate(d.max_speeds)]
    box = None if args.box is None else (tuple(args.box[:3]), tuple(args.box[3:]))
    grid = None if args.grid is None else tuple(args.grid)
    n_states = args.states
    if grid is not None:
        n_states = math.prod(grid) if grid and all(g >= 1 for g in grid) else 1  # the grid check names it
    return MapSpec(
        n_states=n_states, grid=grid, tcp_frame=tcp, payload_frame=tcp, chunk_size=args.chunk_size, seed=args.seed,
        q_low=None if args.q_low is None else tuple(args.q_low), q_high=None if args.q_high is None else tuple(args.q_high),
        cell_box=box, speed_fraction=tuple(args.speed_fraction),
        max_speeds=None if max_speeds is None else tuple(float(x) for x in max_speeds),
        payloads=tuple(args.payload or (0.0,)), torque_factor=tuple(args.torque_factor),
        delay_factor=tuple(args.delay_factor), category=args.category, category1_deceleration=args.decel,
    )


def summary_dict(run: MapRun) -> dict:
    s = run.summary

    def f(x: float) -> float | None:
        return x if math.isfinite(x) else None

    return {
        "inputs_hash": run.inputs_hash, "rows": s.count, "stopped": s.stopped,
        "worst_distance": {"state": s.worst_distance_state, "tcp_straight_distance_m": f(s.worst_distance)},
        "worst_time": {"state": s.worst_time_state, "stop_time_s": f(s.worst_time)},
        "distance_percentiles_m": dict(zip(("p50", "p90", "p99", "max"), map(f, s.distance_percentiles))),
        "time_percentiles_s": dict(zip(("p50", "p90", "p99", "max"), map(f, s.time_percentiles))),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = build_parser()
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        loaded = load_robot(None if args.urdf else args.robot, args.urdf, args.brakes)
        spec = spec_from_args(args, loaded)
        job = MapJob(loaded.text, loaded.brake_config, spec)
        if not (0 < args.connect_timeout <= 600):
            raise StopInputError(f"connect_timeout: must be in (0, 600] s, got {args.connect_timeout:g}")
        run = run_map(job, args.out, scheduler=args.scheduler, workers=args.workers, threads=args.threads,
                      overwrite=args.overwrite, progress=Progress(sys.stderr, spec.n_states),
                      connect_timeout=args.connect_timeout)
    except (ValueError, OSError) as err:
        msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        sys.stderr.write(f"{PROG}: error: {msg}\n")
        return 2
    print(f"{loaded.name}: {spec.n_states} states in {spec.n_chunks} chunks; {run.computed} computed now, "
          f"{run.skipped} already done, {run.workers} workers, {run.seconds:.1f} s")
    if run.failures:
        for f in run.failures:
            print(f"chunk {f['chunk']} failed: state {f['state']}: {f['reason']} (q={f['q']}, v={f['v']})")
        print(f"{len(run.failures)} chunk(s) failed; the others are kept in {args.out}/chunks (see failures.json)")
        return 1
    summary = summary_dict(run)
    with open(os.path.join(args.out, "summary.json"), "w", encoding="utf-8") as fh:
        json.dump(summary, fh, indent=1)
    s = run.summary
    print(f"worst TCP stopping distance {s.worst_distance:.4f} m (state {s.worst_distance_state}), worst stop time "
          f"{s.worst_time:.4f} s (state {s.worst_time_state}); {s.stopped}/{s.count} stopped")
    print("distance p50/p90/p99/max [m]: " + " / ".join(f"{x:.4f}" for x in s.distance_percentiles))
    print("time     p50/p90/p99/max [s]: " + " / ".join(f"{x:.4f}" for x in s.time_percentiles))
    print(f"wrote {run.path}")
    if args.plots:
        from vtm_dynamics.cli.stopping_charts import map_heatmaps

        for path in map_heatmaps(read_result(run.path), args.out):
            print(f"wrote {path}")
    from vtm_dynamics.cli import view_output

    if view_output.wants_view(args):
        try:
            view_output.show_map(args, loaded, spec, read_result(run.path))
        except (ValueError, OSError, RuntimeError) as err:
            sys.stderr.write(f"{PROG}: error: {str(err).strip().splitlines()[0]}\n")
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

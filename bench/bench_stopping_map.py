"""Workspace stopping map throughput: predictions per second on one core and on the local Dask cluster using every
core, the parallel efficiency, the scheduling overhead per chunk, and from those the projected time of a
10^6-state UR5 map on 1, 16 and 256 cores.

Run: ``python bench/bench_stopping_map.py [--states N] [--chunk-size C]``. All figures are measured in the same
run on this machine (the projection assumes the measured per-core rate and efficiency carry over, and one chunk's
overhead per chunk and worker).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from vtm_dynamics.cli.stopping_map import catalogue_max_speeds  # noqa: E402
from vtm_dynamics.cli.stopping_robots import load_robot  # noqa: E402
from vtm_dynamics.core.estop.brakes import brakes_from_config  # noqa: E402
from vtm_dynamics.core.estop.warm_up import compile_kernels, warm_up  # noqa: E402
from vtm_dynamics.core.stopping.workspace_map import MapSpec, evaluate_chunk  # noqa: E402
from vtm_dynamics.scaleout.map_runner import MapJob, run_map  # noqa: E402


def _noop(x: int) -> int:
    return x


def scheduling_overhead(workers: int, tasks: int = 400) -> float:
    """Seconds per task of a no-op task round trip on a local cluster (submit, run, gather)."""
    import logging

    from distributed import Client, LocalCluster, wait

    with LocalCluster(n_workers=workers, threads_per_worker=1, host="127.0.0.1", dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        client.gather(client.map(_noop, range(workers * 2), pure=False))  # warm
        start = time.perf_counter()
        futures = client.map(_noop, range(tasks), pure=False)
        wait(futures)
        return (time.perf_counter() - start) / tasks


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--states", type=int, default=2000, help="states of the cluster run")
    ap.add_argument("--serial-states", type=int, default=500, help="states of the one-core run")
    ap.add_argument("--chunk-size", type=int, default=250)
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    loaded = load_robot("ur5")
    max_speeds = catalogue_max_speeds(loaded)  # as vtm-stopping-map takes them

    def spec(n: int) -> MapSpec:
        return MapSpec(n_states=n, chunk_size=args.chunk_size, tcp_frame="tool0", payload_frame="tool0",
                       payloads=(0.0, 2.5, 5.0), max_speeds=max_speeds, seed=1)

    brakes = brakes_from_config(loaded.robot, loaded.brake_config)
    warm = warm_up(loaded.robot, brakes)  # the compiled engine loaded before the clocks start, here and on the workers
    print(f"compiled engine loaded in {warm:.2f} s (once per process; excluded from the rates below)")
    s1 = spec(args.serial_states)
    print(f"UR5 map: states with payload 0/2.5/5 kg, speed fraction 0.1-1, envelope factors sampled; {cores} cores")
    start = time.perf_counter()
    cpu0 = time.process_time()
    for k in range(s1.n_chunks):
        evaluate_chunk(loaded.robot, brakes, s1, k)
        sys.stderr.write(f"\rone core: chunk {k + 1}/{s1.n_chunks}")
    sys.stderr.write("\n")
    wall1 = time.perf_counter() - start
    cpu1 = time.process_time() - cpu0
    rate1 = args.serial_states / wall1
    print(f"one core (in process, no engine): {args.serial_states} states in {wall1:.2f} s wall ({cpu1:.2f} s CPU): "
          f"{rate1:.0f} predictions/s, {1e3 / rate1:.2f} ms each")

    overhead = scheduling_overhead(cores)
    print(f"scheduling overhead: {1e3 * overhead:.2f} ms per task (no-op round trip, {cores} worker processes)")

    out = tempfile.mkdtemp(prefix="stopping-map-bench-")
    marks: dict = {}

    def on_start(client) -> None:  # the cluster is up: start the clock here and read the workers' CPU clocks
        client.run(compile_kernels)
        marks["cpu0"] = client.run(time.process_time)
        marks["client"] = client
        marks["t0"] = time.perf_counter()

    def progress(done_states, new_states, done_chunks, n_chunks) -> None:
        bar(done_states, new_states, done_chunks, n_chunks)
        if done_chunks == n_chunks:
            marks["t1"] = time.perf_counter()
            marks["cpu1"] = marks["client"].run(time.process_time)

    try:
        from vtm_dynamics.scaleout.map_runner import Progress

        bar = Progress(sys.stderr, args.states)
        run = run_map(MapJob(loaded.text, loaded.brake_config, spec(args.states)), out, workers=cores,
                      on_start=on_start, progress=progress)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    wall_c = marks["t1"] - marks["t0"]
    cpu_c = sum(marks["cpu1"][w] - marks["cpu0"].get(w, 0.0) for w in marks["cpu1"])
    rate_c = args.states / wall_c
    eff = rate_c / (rate1 * cores)
    print(f"local cluster, {run.workers} worker processes: start-up {run.seconds - wall_c:.2f} s, then "
          f"{args.states} states in {wall_c:.2f} s wall ({cpu_c:.2f} s CPU on the workers): {rate_c:.0f} "
          f"predictions/s; speed-up {rate_c / rate1:.2f} on {cores} cores, parallel efficiency {eff:.0%} (wall); "
          f"CPU per prediction {1e3 * cpu_c / args.states:.2f} ms vs {1e3 * cpu1 / args.serial_states:.2f} ms "
          f"in process")
    eff_cpu = (cpu1 / args.serial_states) / (cpu_c / args.states)
    print(f"CPU efficiency of the engine (in-process CPU per prediction / worker CPU per prediction): {eff_cpu:.0%}")
    load = os.getloadavg()[0]
    print(f"load average during the run {load:.1f} on {cores} cores (other processes take cores: wall rates "
          "below CPU rates)")
    chunk_cost = args.chunk_size / rate1
    print(f"per chunk of {args.chunk_size}: {chunk_cost:.2f} s of work vs {1e3 * overhead:.2f} ms scheduling "
          f"({overhead / chunk_cost:.2%})")
    n = 1_000_000
    rate_cpu = args.serial_states / cpu1
    for label, rate, efficiency in (("wall rate and wall efficiency measured here", rate1, eff),
                                    ("CPU-time rate (a dedicated core) and CPU efficiency", rate_cpu, eff_cpu)):
        print(f"projected 10^6-state UR5 map from the {label} ({rate:.0f}/s per core, "
              f"{min(efficiency, 1.0):.0%} for > 1 core), plus scheduling:")
        for c in (1, 16, 256):
            e = 1.0 if c == 1 else min(efficiency, 1.0)
            seconds = n / (rate * c * e) + (n / args.chunk_size) * overhead / c
            print(f"  {c:>4} cores: {seconds / 3600:7.2f} h ({seconds:9.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

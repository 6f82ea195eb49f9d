"""The benchmarks still run against the code they measure: each one, on the smallest inputs it accepts, exits 0 and
prints the figures its docstring promises. Nothing here is timed (speed is read from the benchmarks themselves);
this only keeps a change of an API from breaking a benchmark unnoticed, as the robot catalogue's once broke
``bench_stopping_map.py`` until the next person who needed its figures ran it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from test.ros_helpers import REPO_ROOT, ros_subprocess_env

# benchmark -> (its smallest run, lines its output must contain)
SMALLEST = {
    "bench_stopping_map.py": (["--states", "8", "--serial-states", "4", "--chunk-size", "4"],
                              ["one core (in process", "local cluster,", "CPU efficiency of the engine",
                               "projected 10^6-state UR5 map"]),
    "bench_estop.py": (["--repeat", "1", "--states", "1", "--held-out", "1"],
                       ["== UR5, shipped brakes", "== Panda", "predict_stops, M and h from Pinocchio's calls:", "against the reference",
                        "held out (UR5", "held out (Panda"]),
    "bench_view.py": (["--repeat", "1", "--no-peer", "--tool-runs", "1", "--process-runs", "1", "--browser-runs", "1"],
                      ["ur5 ", "planar_3r ", "trajectory check (UR5", "whole tool runs",
                       "ur5: prediction + envelope", "(the first in the process), view", "in-proc/+env"]),
    "bench_brake_terms.py": (["--repeat", "1"], ["shipped defaults"]),
    "bench_switching.py": ([], []),
}


@pytest.mark.parametrize("bench", sorted(SMALLEST))
def test_the_benchmark_runs_on_its_smallest_inputs(bench, tmp_path):
    args, lines = SMALLEST[bench]
    env = ros_subprocess_env()
    env["MPLBACKEND"] = "Agg"
    env["VTM_VIEW_CACHE"] = str(tmp_path / "view-cache")
    out = subprocess.run([sys.executable, os.path.join(REPO_ROOT, "bench", bench), *args], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    for line in lines:
        assert line in out.stdout, (line, out.stdout[-3000:])

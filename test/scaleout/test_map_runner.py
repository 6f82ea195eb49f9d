"""Workspace stopping maps on the Dask runner: the same rows whatever the worker count, after losing a worker and
after an interrupted run resumed; a chunk with a bad state is reported with its input while the rest completes;
half-written files are never taken for results."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import numpy as np
import pyarrow.parquet as pq
import pytest

from test.ros_helpers import REPO_ROOT, python_executable, ros_subprocess_env
from vtm_dynamics.cli.stopping_robots import load_robot
from vtm_dynamics.core.stopping.workspace_map import MapSpec, evaluate_chunk
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.scaleout.map_runner import MapJob, run_map


@pytest.fixture(scope="module")
def ur5():
    return load_robot("ur5")


def small_job(ur5, n=24, chunk=6, **kw) -> MapJob:
    spec = MapSpec(n_states=n, chunk_size=chunk, tcp_frame="tool0", payload_frame="tool0", payloads=(0.0, 5.0),
                   seed=7, max_speeds=(3.1,) * 6, **kw)
    return MapJob(ur5.text, ur5.brake_config, spec)


def rows(path: str):
    return pq.read_table(path).replace_schema_metadata(None)


@pytest.fixture(scope="module")
def reference(ur5, tmp_path_factory):
    """The map computed chunk by chunk in this process, without the engine."""
    job = small_job(ur5)
    brakes = brakes_from_config(ur5.robot, ur5.brake_config)
    import pyarrow as pa

    tables = [pa.table(evaluate_chunk(ur5.robot, brakes, job.spec, k)) for k in range(job.spec.n_chunks)]
    return pa.concat_tables(tables)


def test_one_and_two_worker_processes_give_the_same_rows_as_the_serial_map(ur5, reference, tmp_path):
    one = run_map(small_job(ur5), str(tmp_path / "one"), workers=1)
    two = run_map(small_job(ur5), str(tmp_path / "two"), workers=2)
    assert one.workers == 1 and two.workers == 2
    assert rows(one.path).equals(reference) and rows(two.path).equals(reference)
    assert one.summary == two.summary and one.summary.count == 24
    stopped = reference.column("stopped").to_numpy()
    assert stopped.sum() >= 20  # (a heavy payload can make the stretched shoulder slide past the horizon)
    assert np.all(np.isinf(reference.column("stop_time_s").to_numpy()[~stopped]))  # never a finite time then
    assert reference.column("tcp_straight_distance_m").to_numpy().max() > 0.01  # real motions, not zeros


def run_killing_a_worker(job, out: str, workers: int, after_chunks: int):
    """``run_map`` on ``workers`` worker processes, one of which (the lowest PID) is killed (SIGKILL) once
    ``after_chunks`` chunks are done; returns (the run, the PIDs killed)."""
    pids: dict = {}
    killed: list[int] = []

    def on_start(client):
        pids.update(client.run(os.getpid))

    def progress(done_states, new_states, done_chunks, n_chunks):
        if not killed and done_chunks >= after_chunks:
            pid = sorted(pids.values())[0]  # a worker process this test's cluster started
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    return run_map(job, out, workers=workers, on_start=on_start, progress=progress), killed


def test_a_worker_killed_mid_run_is_replaced_and_the_rows_stay_the_same(ur5, tmp_path):
    job = small_job(ur5, n=48, chunk=4)
    serial = run_map(job, str(tmp_path / "serial"), workers=1, threads=True)
    run, killed = run_killing_a_worker(job, str(tmp_path / "killed"), workers=2, after_chunks=1)
    assert killed and run.failures == ()
    assert rows(run.path).equals(rows(serial.path))


def test_the_only_worker_killed_mid_run_is_restarted_and_the_run_completes_with_the_same_rows(ur5, tmp_path):
    # the job every chunk needs must survive the death of every worker that held it (a single worker, an OOM kill)
    job = small_job(ur5, n=24, chunk=4)
    serial = run_map(job, str(tmp_path / "serial"), workers=1, threads=True)
    run, killed = run_killing_a_worker(job, str(tmp_path / "killed"), workers=1, after_chunks=0)
    assert killed and run.failures == () and run.computed == 6
    assert rows(run.path).equals(rows(serial.path))


def test_an_interrupted_run_resumes_from_its_chunks_and_ignores_half_written_files(ur5, tmp_path):
    out = tmp_path / "run"
    args = [python_executable(), "-m", "vtm_dynamics.cli.stopping_map", "ur5", "--states", "400", "--chunk-size",
            "10", "--seed", "3", "--payload", "0", "--payload", "5", "--max-speeds", *["3.1"] * 6, "--threads",
            "--workers", "1", "--out", str(out)]
    proc = subprocess.Popen(args, cwd=REPO_ROOT, env=ros_subprocess_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    chunks = out / "chunks"
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if chunks.is_dir() and len([p for p in chunks.iterdir() if p.suffix == ".parquet"]) >= 2:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the run finished before the test could interrupt it"
        proc.kill()  # the process this test started: a crash, not a clean exit
    finally:
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()
    assert not (out / "stopping_map.parquet").exists()
    done = sorted(p.name for p in chunks.iterdir() if p.suffix == ".parquet")
    assert 2 <= len(done) < 40
    # a torn chunk file under a final name and a leftover temporary: neither may count as a result
    missing = next(k for k in range(40) if f"chunk-{k:06d}.parquet" not in done)
    (chunks / f"chunk-{missing:06d}.parquet").write_bytes(b"PAR1 half a file")
    (chunks / ".chunk-000039.parquet.x.part").write_bytes(b"PAR1")

    spec = MapSpec(n_states=400, chunk_size=10, tcp_frame="tool0", payload_frame="tool0", payloads=(0.0, 5.0),
                   seed=3, max_speeds=(3.1,) * 6)
    ur5_job = MapJob(ur5.text, ur5.brake_config, spec)
    resumed = run_map(ur5_job, str(out), workers=1, threads=True)
    fresh = run_map(ur5_job, str(tmp_path / "fresh"), workers=1, threads=True)
    assert resumed.skipped == len(done) and resumed.computed == 40 - len(done)
    assert rows(resumed.path).equals(rows(fresh.path))
    assert not [p for p in chunks.iterdir() if p.name.endswith(".part")]


def test_a_chunk_with_a_bad_state_is_reported_with_its_input_and_the_rest_completes(ur5, tmp_path):
    good_q, good_v = (0.3, -1.2, 1.5, -0.8, 0.5, 0.2), (1.0, -1.0, 1.0, 0.5, -0.5, 1.0)
    states = [(good_q, good_v)] * 12
    states[7] = ((7.0, -1.2, 1.5, -0.8, 0.5, 0.2), good_v)  # shoulder_pan beyond its +-2 pi limit
    job = small_job(ur5, n=12, chunk=4, states=tuple(states))
    run = run_map(job, str(tmp_path / "bad"), workers=1, threads=True)
    assert run.path is None and len(run.failures) == 1
    failure = run.failures[0]
    assert failure["chunk"] == 1 and failure["state"] == 7 and failure["q"][0] == 7.0
    assert "shoulder_pan_joint" in failure["reason"]
    assert sorted(os.listdir(tmp_path / "bad" / "chunks")) == ["chunk-000000.parquet", "chunk-000002.parquet"]
    assert not (tmp_path / "bad" / "stopping_map.parquet").exists()
    assert (tmp_path / "bad" / "failures.json").exists()


@pytest.mark.parametrize("argv, words", [
    (["ur9"], "robot: unknown robot 'ur9'"),
    (["ur5", "--box", "3", "3", "3", "4", "4", "4"], "cell_box: outside the reach"),
    (["ur5", "--max-speeds", "9", "9", "9", "9", "9", "9"], "max_speeds[shoulder_pan_joint]: 9 rad/s is above"),
    (["ur5", "--speed-fraction", "0.5", "1.5"], "speed_fraction: expected"),
    (["ur5", "--scheduler", "tcp:/127.0.0.1"], "scheduler: expected tcp://HOST:PORT"),
    (["ur5", "--scheduler", "tcp://127.0.0.1:99999"], "scheduler: expected tcp://HOST:PORT"),
    (["ur5", "--grid", "3", "0", "1", "1", "1", "1"], "grid: expected 6 point counts >= 1"),
])
def test_bad_input_is_one_line_naming_the_field_and_writes_no_result(argv, words, tmp_path, capsys):
    from vtm_dynamics.cli.stopping_map import main

    out = tmp_path / "out"
    assert main([*argv, "--states", "10", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("vtm-stopping-map: error: ") and words in err, err
    assert not (out / "stopping_map.parquet").exists()


def test_the_same_map_runs_on_an_existing_cluster_given_its_scheduler_address(ur5, reference, tmp_path):
    import logging

    from distributed import LocalCluster

    # an "existing" cluster: started here on loopback, its scheduler named by address like any remote one
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp://", host="127.0.0.1",
                      dashboard_address=None, silence_logs=logging.ERROR) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tcp://127.0.0.1:")
        run = run_map(small_job(ur5), str(tmp_path / "remote"), scheduler=address)
        assert run.workers == 1 and rows(run.path).equals(reference)
        assert cluster.scheduler.status.name == "running"  # the run left the cluster it did not start running


def test_a_cluster_without_workers_is_one_line_naming_the_scheduler(ur5, tmp_path, monkeypatch):
    import logging

    from distributed import LocalCluster

    from vtm_dynamics.core.stopping.workspace_map import MapInputError
    from vtm_dynamics.scaleout import map_runner

    monkeypatch.setattr(map_runner, "WORKER_WAIT", 1.0)
    with LocalCluster(n_workers=0, processes=False, protocol="tcp://", host="127.0.0.1", dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster:
        with pytest.raises(MapInputError, match=r"^scheduler: no worker joined tcp://127\.0\.0\.1:\d+ within 1 s$"):
            run_map(small_job(ur5), str(tmp_path / "empty"), scheduler=cluster.scheduler_address)
    assert not (tmp_path / "empty" / "stopping_map.parquet").exists()


@pytest.mark.parametrize("workers", [0, -1, 2 * (os.cpu_count() or 1) + 1])
def test_a_worker_count_outside_one_to_twice_the_cores_is_one_line_before_any_cluster_starts(ur5, workers, tmp_path):
    from vtm_dynamics.core.stopping.workspace_map import MapInputError

    limit = 2 * (os.cpu_count() or 1)
    with pytest.raises(MapInputError, match=rf"^workers: expected 1\.\.{limit} \(twice the cores of this machine\), "
                                            rf"got {workers}$"):
        run_map(small_job(ur5, n=2, chunk=2), str(tmp_path / "w"), workers=workers, threads=True)
    assert not (tmp_path / "w").exists()


def test_a_worker_count_with_an_existing_cluster_is_refused_rather_than_ignored(ur5, tmp_path):
    from vtm_dynamics.core.stopping.workspace_map import MapInputError

    with pytest.raises(MapInputError, match=r"^workers: sets the local cluster; an existing cluster "):
        run_map(small_job(ur5, n=2, chunk=2), str(tmp_path / "w"), workers=1, scheduler="tcp://127.0.0.1:9")
    assert not (tmp_path / "w").exists()


def test_worker_processes_leave_ctrl_c_to_the_client_that_closes_them(ur5, tmp_path):
    # Ctrl-C in a terminal reaches every process of the group; the workers must not each die with their own trace
    ignores: dict = {}

    def on_start(client):
        ignores.update(client.run(lambda: signal.getsignal(signal.SIGINT) is signal.SIG_IGN))

    before = signal.getsignal(signal.SIGINT)
    run_map(small_job(ur5, n=2, chunk=2), str(tmp_path / "m"), workers=1, on_start=on_start)
    assert list(ignores.values()) == [True]
    assert signal.getsignal(signal.SIGINT) is before  # this process still stops on Ctrl-C

"""vtm-stopping-map's record of a run: a summary that says what was mapped and which state was worst (with its q and
v), the rows as CSV for readers without pandas, and files with the usual permissions."""

from __future__ import annotations

import csv
import json
import os
import stat
from typing import Sequence

import numpy as np
import pytest

from vtm_dynamics.cli.stopping_map import main


@pytest.fixture(scope="module")
def small_map(tmp_path_factory):
    out = tmp_path_factory.mktemp("map") / "run"
    old = os.umask(0o022)
    try:
        assert main(["UR5", "--states", "12", "--chunk-size", "6", "--threads", "--workers", "1", "--payload", "0",
                     "--payload", "5", "--speed-fraction", "0.5", "1.0", "--out", str(out)]) == 0
    finally:
        os.umask(old)
    return out


def test_the_summary_states_what_was_mapped_and_the_worst_states_q_and_v(small_map, capsys):
    summary = json.loads((small_map / "summary.json").read_text())
    mapped = summary["mapped"]
    assert mapped["payloads_kg"] == [0.0, 5.0] and mapped["speed_fraction"] == [0.5, 1.0]
    assert mapped["payload_frame"] == "tool0"
    assert mapped["torque_factor"] == [0.9, 1.1] and mapped["category"] == 0 and len(mapped["brakes_sha256"]) == 64
    worst = summary["worst_distance"]
    assert len(worst["q_rad"]) == 6 and len(worst["v_rad_s"]) == 6 and worst["payload_kg"] in (0.0, 5.0)
    assert 0.5 <= worst["speed_fraction"] <= 1.0 and 0.9 <= worst["torque_factor"] <= 1.1
    assert summary["software"]["version"]


def test_the_rows_as_csv_match_the_parquet_file(small_map):
    from vtm_dynamics.scaleout.chunk_store import read_result

    lines = (small_map / "stopping_map.csv").read_text(encoding="utf-8").splitlines()
    head = [line for line in lines if line.startswith("#")]
    rows = list(csv.DictReader(line for line in lines if not line.startswith("#")))
    assert head[0].startswith("# vtm-stopping-map inputs_hash: ") and any("payloads_kg" in h for h in head)
    columns = read_result(str(small_map / "stopping_map.parquet"))
    assert len(rows) == 12 and list(rows[0]) == list(columns)
    np.testing.assert_array_equal([float(r["tcp_straight_distance_m"]) for r in rows],
                                  columns["tcp_straight_distance_m"])


def test_the_run_files_are_readable_like_any_other_output(small_map):
    """They were 0600 (mkstemp's mode kept through the rename) while every other output is 0644."""
    files = [small_map / "stopping_map.parquet", small_map / "summary.json", small_map / "manifest.json",
             small_map / "stopping_map.csv", *sorted((small_map / "chunks").iterdir())]
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o644, f


def test_a_percentile_that_reaches_a_state_that_did_not_stop_is_printed_and_written_as_not_stopped():
    from types import SimpleNamespace

    from vtm_dynamics.cli.stopping_map import summary_dict, summary_lines
    from vtm_dynamics.core.stopping.workspace_map import summarize

    t = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, np.inf])  # p90, p99 and the max reach the last
    s = summarize({"state": np.arange(10), "stop_time_s": t, "tcp_straight_distance_m": np.linspace(0.01, 0.1, 10),
                   "stopped": np.isfinite(t), "within_limits": np.ones(t.size, bool)})
    summary = summary_dict(SimpleNamespace(summary=s, inputs_hash="0" * 64))
    assert json.loads(json.dumps(summary))["time_percentiles_s"]["max"] is None
    assert summary["time_percentiles_s"]["p50"] == pytest.approx((t[4] + t[5]) / 2, rel=1e-12)  # rank 4.5 of 0..9
    line = next(x for x in summary_lines(summary) if x.startswith("time"))
    assert line.count("not stopped") == 3 and "-" not in line.split(":")[1]


def test_a_worst_distance_that_did_not_stop_is_printed_as_not_stopped_never_as_its_distance_at_the_horizon():
    from types import SimpleNamespace

    from vtm_dynamics.cli.stopping_map import summary_dict, summary_lines
    from vtm_dynamics.core.stopping.workspace_map import summarize

    t = np.array([0.1, 0.3, np.inf, 0.2])  # state 2 still moving at the horizon, 0.05 m from its start
    s = summarize({"state": np.arange(4), "stop_time_s": t, "tcp_straight_distance_m": np.array([0.02, 0.1, 0.05, 0.03]),
                   "stopped": np.isfinite(t), "within_limits": np.ones(t.size, bool)})
    summary = summary_dict(SimpleNamespace(summary=s, inputs_hash="0" * 64))
    assert json.loads(json.dumps(summary))["distance_percentiles_m"]["max"] is None
    lines = summary_lines(summary)
    worst = next(x for x in lines if x.startswith("worst TCP stopping distance"))
    assert "not stopped" in worst and "state 2" in worst and "0.1000" not in worst and "0.0500" not in worst
    line = next(x for x in lines if x.startswith("distance"))
    assert line.endswith("not stopped") and "-" not in line.split(":")[1]


def test_an_interrupted_map_ends_in_one_line_saying_what_is_kept_and_the_same_command_resumes(tmp_path, monkeypatch,
                                                                                              capsys):
    from vtm_dynamics.scaleout import map_runner

    class CtrlCAfterTheFirstChunk:  # as if Ctrl-C came while the second chunk was computed
        def __init__(self, stream, total):
            pass

        def __call__(self, done_states, new_states, done_chunks, n_chunks):
            raise KeyboardInterrupt

    argv = ["ur5", "--states", "6", "--chunk-size", "2", "--threads", "--workers", "1", "--out", str(tmp_path / "m")]
    monkeypatch.setattr(map_runner, "Progress", CtrlCAfterTheFirstChunk)
    try:
        code = main(argv)
    except KeyboardInterrupt:
        pytest.fail("the interrupt left main as a trace")
    err = capsys.readouterr().err.lstrip("\n")  # (a newline first ends the progress line)
    assert code == 130 and err.count("\n") == 1, err
    assert err == (f"vtm-stopping-map: interrupted: 1 of 3 chunks kept in {tmp_path / 'm'}; run the same command "
                   "again to resume\n")
    monkeypatch.undo()
    assert main(argv) == 0
    assert "2 computed now, 1 already done" in capsys.readouterr().out


@pytest.mark.parametrize("where", ["a_file", "a_file/below", ""])
def test_an_output_directory_that_cannot_be_made_is_one_line_naming_out(where, tmp_path, capsys):
    (tmp_path / "a_file").write_text("not a directory")
    out = str(tmp_path / where) if where else ""
    assert main(["ur5", "--states", "2", "--threads", "--workers", "1", "--out", out]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"vtm-stopping-map: error: out: cannot use {out!r} "), err
    assert (tmp_path / "a_file").read_text() == "not a directory"


def test_the_summary_says_the_brake_factors_were_sampled_not_taken_at_the_weakest_corner_of_their_band(small_map):
    # the worst row's factors lie inside the band: a weaker brake of the same band stops later, and the printed worst
    # case must not read as the band's worst
    summary = json.loads((small_map / "summary.json").read_text())
    from vtm_dynamics.cli.stopping_map import summary_lines

    text = "\n".join(summary_lines(summary))
    assert "sampled" in text and "--torque-factor 0.9 0.9 --delay-factor 1.5 1.5" in text
    pinned = {**summary, "mapped": {**summary["mapped"], "torque_factor": [0.9, 0.9], "delay_factor": [1.5, 1.5]}}
    assert "sampled" not in "\n".join(summary_lines(pinned))  # the corner itself: nothing was drawn


def test_the_csv_is_written_as_it_is_made_not_held_whole_in_memory(tmp_path, monkeypatch):
    # a 10^6-state map's CSV is about 400 MB of text; it was built whole in memory (and copied: 3.3 x the file here)
    # before the write. Written in blocks of 1,000 rows, the memory it takes is a block's, not the file's
    import tracemalloc

    from vtm_dynamics.cli import stopping_map
    from vtm_dynamics.cli.stopping_map import write_map_csv

    monkeypatch.setattr(stopping_map, "CSV_BLOCK_ROWS", 1000)

    rng = np.random.default_rng(3)
    n = 100_000
    columns = {"state": np.arange(n), "stop_time_s": rng.random(n), "tcp_distance_m": rng.random(n),
               "stopped": rng.random(n) > 0.1}
    summary = {"inputs_hash": "x" * 64, "mapped": {"robot": "ur5"}, "software": {"name": "vtm_dynamics"}}
    path = str(tmp_path / "map.csv")
    # what is imported or cached on the first call is not the CSV's memory (run alone, it took the peak to 1.24 MB)
    write_map_csv(str(tmp_path / "warm.csv"), {k: v[:2] for k, v in columns.items()}, summary)
    tracemalloc.start()
    try:
        write_map_csv(path, columns, summary)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    size = os.path.getsize(path)
    assert peak < 0.25 * size, (peak, size)
    with open(path, encoding="utf-8") as fh:
        rows = list(csv.reader(line for line in fh if not line.startswith("#")))
    assert rows[0] == list(columns) and len(rows) == n + 1
    assert [float(r[1]) for r in rows[1:]] == columns["stop_time_s"].tolist()  # every value exactly, in order
    assert [r[3] for r in rows[1:3]] == [str(int(columns["stopped"][0])), str(int(columns["stopped"][1]))]


def test_the_csv_of_a_map_read_in_blocks_is_the_csv_of_the_whole_map(tmp_path, monkeypatch):
    from vtm_dynamics.cli import stopping_map
    from vtm_dynamics.cli.stopping_map import write_map_csv

    monkeypatch.setattr(stopping_map, "CSV_BLOCK_ROWS", 7)  # blocks of the file across the CSV's own blocks
    rng = np.random.default_rng(9)
    n = 100
    columns = {"state": np.arange(n), "stop_time_s": np.where(rng.random(n) < 0.1, np.inf, rng.random(n)),
               "stopped": rng.random(n) > 0.1}
    summary = {"inputs_hash": "y" * 64, "software": {"name": "vtm_dynamics"}}
    write_map_csv(str(tmp_path / "whole.csv"), columns, summary)
    write_map_csv(str(tmp_path / "blocks.csv"),
                  lambda: ({k: v[i:i + 23] for k, v in columns.items()} for i in range(0, n, 23)), summary)
    assert (tmp_path / "blocks.csv").read_bytes() == (tmp_path / "whole.csv").read_bytes()
    lines = (tmp_path / "whole.csv").read_text().splitlines()
    assert lines[-1] == f"99,{float(columns['stop_time_s'][99])!r},{int(columns['stopped'][99])}" and len(lines) == 3 + n

# the client's work once every chunk is on disk (combined file, summary, CSV, heat maps), measured in a process of its
# own: the peak of Python's allocations (numpy's included) and of pyarrow's memory pool
_CLIENT = """
import contextlib, io, json, sys, tracemalloc
import pyarrow as pa
from vtm_dynamics.cli.stopping_map import main
tracemalloc.start()
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps([code, tracemalloc.get_traced_memory()[1], pa.default_memory_pool().max_memory()]))
"""


def _client_peak(tmp_path, n: int, real_chunks: list[dict], extra: Sequence[str] = ()) -> int:
    """Bytes at the peak of the client's assembly of an n-state UR5 map whose chunks are all on disk: the real
    chunks repeated under every chunk number (state and chunk columns renumbered; the store checks the run's
    inputs hash, the chunk number, the row count and the checksum, not where the values came from). ``extra``:
    more arguments of the command line (with ``{out}``: the run's output directory)."""
    import subprocess

    from test.ros_helpers import python_executable, ros_subprocess_env
    from vtm_dynamics.cli.stopping_map import build_parser, spec_from_args
    from vtm_dynamics.cli.stopping_robots import load_robot
    from vtm_dynamics.scaleout.chunk_store import ChunkStore, inputs_hash
    from vtm_dynamics.scaleout.map_runner import MapJob

    out = str(tmp_path / f"map{n}")
    argv = ["ur5", "--states", str(n), "--chunk-size", str(len(real_chunks[0]["state"])), "--out", out, "--plots",
            *(a.format(out=out) for a in extra)]
    loaded = load_robot("ur5")
    spec = spec_from_args(build_parser().parse_args(argv), loaded)
    job = MapJob(loaded.text, loaded.brake_config, spec)
    size = spec.chunk_size
    store = ChunkStore(out, inputs_hash(job.inputs()), spec.n_chunks, lambda k: size)
    try:
        store.open(job.inputs())
        for k in range(spec.n_chunks):
            columns = dict(real_chunks[k % len(real_chunks)])
            columns["state"] = np.arange(k * size, (k + 1) * size, dtype=np.int64)
            columns["chunk"] = np.full(size, k, dtype=np.int64)
            store.write_chunk(k, columns)
    finally:
        store.close()
    done = subprocess.run([python_executable(), "-c", _CLIENT, *argv], env=ros_subprocess_env(), capture_output=True,
                          text=True, timeout=600)
    code, python_peak, arrow_peak = json.loads(done.stdout.splitlines()[-1])
    assert code == 0, done.stderr
    assert os.path.getsize(os.path.join(out, "stopping_map.csv")) > n * 300  # every row was written
    return python_peak + arrow_peak


@pytest.fixture(scope="module")
def real_chunks(tmp_path_factory):
    """Four real 256-state chunks of a UR5 map, to be repeated into maps of any size (:func:`_client_peak`)."""
    from vtm_dynamics.cli.stopping_map import build_parser, spec_from_args
    from vtm_dynamics.cli.stopping_robots import load_robot
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.stopping.workspace_map import evaluate_chunk

    loaded = load_robot("ur5")
    argv = ["ur5", "--states", "1024", "--chunk-size", "256", "--out", str(tmp_path_factory.mktemp("real"))]
    spec = spec_from_args(build_parser().parse_args(argv), loaded)
    brakes = brakes_from_config(loaded.robot, loaded.brake_config)
    return [evaluate_chunk(loaded.robot, brakes, spec, k) for k in range(spec.n_chunks)]


def test_the_memory_the_client_needs_to_assemble_a_map_does_not_grow_with_its_rows(tmp_path, real_chunks):
    # the combined file, the summary, the CSV and the heat maps were made from the whole map in memory: the client's
    # peak grew by about 0.4 kB per state (a 10^7-state map ran out of memory at its very end). Each step now reads a
    # few chunks or row groups at a time: four times the rows, the same peak within a few bounded buffers
    n = 16_384  # a whole row group of the combined file
    small, large = _client_peak(tmp_path, n, real_chunks), _client_peak(tmp_path, 4 * n, real_chunks)
    row_bytes = sum(np.asarray(v).itemsize for v in real_chunks[0].values())  # 201 bytes: the UR5's 28 columns
    # whole in memory, the 3n more rows alone take 3n x row_bytes (9.9 MB; the old client's peak grew by 21 MB); the
    # bounded steps' buffers may differ by less than a sixth of that between the two sizes
    assert large - small < 0.5 * n * row_bytes, (small, large)


def test_the_memory_the_map_view_needs_does_not_grow_with_the_rows(tmp_path, real_chunks):
    # --view read the whole map to draw at most 20,000 of its states and replay its worst 3: the client's peak grew
    # with the rows. It now reads a block at a time (the draw decided from the row count and the seed first); the
    # page itself is bounded: 16,384 points drawn for the smaller map, 20,000 for the larger
    n = 16_384
    view = ["--view", "{out}/map.html"]
    small, large = _client_peak(tmp_path, n, real_chunks, view), _client_peak(tmp_path, 4 * n, real_chunks, view)
    row_bytes = sum(np.asarray(v).itemsize for v in real_chunks[0].values())
    assert (tmp_path / f"map{4 * n}" / "map.html").stat().st_size > 0
    assert large - small < 0.5 * n * row_bytes, (small, large)


def test_states_past_a_joint_limit_are_counted_in_the_summary_and_never_printed_as_a_stopping_distance():
    from types import SimpleNamespace

    from vtm_dynamics.cli.stopping_map import summary_dict, summary_lines
    from vtm_dynamics.core.stopping.workspace_map import summarize

    # state 1 stopped at 0.4 m, but only because the model has no end stop: a joint went past its limit
    columns = {"state": np.arange(4), "stop_time_s": np.array([0.1, 0.5, 0.2, 0.15]),
               "tcp_straight_distance_m": np.array([0.02, 0.4, 0.05, 0.03]), "stopped": np.ones(4, bool),
               "within_limits": np.array([True, False, True, True])}
    summary = summary_dict(SimpleNamespace(summary=summarize(columns), inputs_hash="0" * 64))
    assert summary["past_limits"] == 1 and summary["stopped"] == 4
    assert summary["worst_distance"]["state"] == 1 and summary["worst_distance"]["tcp_straight_distance_m"] is None
    lines = summary_lines(summary)
    assert "1/4 went past a joint limit (no end stops in the model)" in "\n".join(lines)
    assert "0.4000" not in "\n".join(lines) and "0.5000" not in "\n".join(lines)
    assert "worst TCP stopping distance not known (not stopped or past a joint limit) (state 1)" in lines


def test_the_payload_sits_at_the_robots_flange_whatever_frame_the_distance_is_measured_at(tmp_path):
    """With ``--tcp-frame wrist_3_link`` the map hung its payload on wrist_3_link, 8.2 cm short of the flange where
    ``vtm-predict``, the E-stop node and the stop-safe check hang it (the catalogue's payload frame, tool0)."""
    from vtm_dynamics.cli.stopping_map import build_parser, spec_from_args
    from vtm_dynamics.cli.stopping_robots import load_robot
    from vtm_dynamics.core.estop import predict_stop
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.estop.payload import with_payload
    from vtm_dynamics.core.stopping.workspace_map import evaluate_chunk

    loaded = load_robot("ur5")
    argv = ["ur5", "--states", "3", "--payload", "5", "--torque-factor", "1", "1", "--delay-factor", "1", "1",
            "--tcp-frame", "wrist_3_link", "--out", str(tmp_path)]
    spec = spec_from_args(build_parser().parse_args(argv), loaded)
    brakes = brakes_from_config(loaded.robot, loaded.brake_config)
    columns = evaluate_chunk(loaded.robot, brakes, spec, 0)
    names = loaded.robot.joint_names
    at_flange, at_wrist = with_payload(loaded.robot, 5.0, "tool0"), with_payload(loaded.robot, 5.0, "wrist_3_link")
    for k in range(len(columns["state"])):
        q = [columns[f"q_{n}"][k] for n in names]
        v = [columns[f"v_{n}"][k] for n in names]
        right = predict_stop(at_flange, brakes, q, v, tcp_frame="wrist_3_link").tcp_straight_distance
        wrong = predict_stop(at_wrist, brakes, q, v, tcp_frame="wrist_3_link").tcp_straight_distance
        assert abs(right - wrong) > 1e-6  # the two placements give distances this test can tell apart
        assert columns["tcp_straight_distance_m"][k] == pytest.approx(right, abs=1e-9)


def test_a_category_1_map_keeps_every_ramp_within_the_given_torque_limits_and_says_which(tmp_path, capsys):
    """Only the base is fast (the other joints' 100 % speed is 1e-7 rad/s): about the vertical base axis there is
    no gravity and the others' motion adds torques of order 1e-7, so a row's ramp within a base limit L lasts
    (M_00(q) + armature) |v_base| / L (M_00 from the row's q, the shipped brakes' base rotor inertia); the free
    ramp |v_base| / decel is 0.1 s at most. The base range keeps the ramps (up to 1.8 s) inside its limits. Before,
    vtm-stopping-map had no --torque-limits: every row's ramp was the free one."""
    from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf
    from vtm_dynamics.scaleout.chunk_store import read_result

    out = tmp_path / "m"
    assert main(["ur5", "--states", "6", "--threads", "--workers", "1", "--category", "1", "--decel", "20",
                 "--max-speeds", "2", "1e-7", "1e-7", "1e-7", "1e-7", "1e-7", "--q-low", "-1", "-3", "-3", "-3", "-3",
                 "-3", "--q-high", "1", "3", "3", "3", "3", "3", "--torque-limits", "5", "1e4", "1e4", "1e4", "1e4",
                 "1e4", "--out", str(out)]) == 0
    assert "drive torque limits 5 10000 10000 10000 10000 10000 N m" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mapped"]["category1_torque_limits"] == [5.0] + [1e4] * 5
    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    armature = 2.0  # shoulder_pan_joint in config/ur5_brakes.yaml
    columns = read_result(str(out / "stopping_map.parquet"))
    for k in range(6):
        q = np.array([columns[f"q_{n}"][k] for n in robot.joint_names])
        v_base = abs(columns["v_shoulder_pan_joint"][k])
        assert v_base > 0.2
        expected = (robot.mass_matrix(q)[0, 0] + armature) * v_base / 5.0
        assert expected > 2 * v_base / 20.0  # the limit lengthens every ramp
        assert columns["stop_time_s"][k] == pytest.approx(expected, rel=1e-5)


def test_the_summary_says_which_dynamics_the_stops_used():
    from types import SimpleNamespace

    from vtm_dynamics.cli.stopping_map import summary_dict, summary_lines
    from vtm_dynamics.core.stopping.workspace_map import summarize

    t = np.array([0.1, 0.2])
    s = summarize({"state": np.arange(2), "stop_time_s": t, "tcp_straight_distance_m": np.array([0.02, 0.1]),
                   "stopped": np.ones(2, bool), "within_limits": np.ones(2, bool)})
    why = "Pinocchio (VTM_GENERATED_DYNAMICS=off)"
    summary = summary_dict(SimpleNamespace(summary=s, inputs_hash="0" * 64), dynamics=why)
    assert json.loads(json.dumps(summary))["dynamics"] == why
    assert f"dynamics (M and h): {why}" in summary_lines(summary)

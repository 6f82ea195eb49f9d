"""`vtm-safety-distance`: the worked examples of docs/stopsafe.md come out of the tool (ISO 13855 and ISO/TS 15066,
every term), the workspace-map table runs, and bad input is one line with status 2."""

import json
import os
import re

import numpy as np
import pytest

from vtm_dynamics.cli.safety_distance import main

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs",
                   "stopsafe.md")


def _doc_number(pattern: str) -> float:
    with open(DOC, encoding="utf-8") as fh:
        return float(re.search(pattern, fh.read()).group(1))


def test_the_iso13855_worked_example_of_the_guide(tmp_path, capsys):
    out = tmp_path / "iso.json"
    assert main(["iso13855", "--state", "demo", "--device", "light_curtain", "--d", "30", "--detection-response",
                 "0.02", "--control-response", "0.015", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    terms = {t["symbol"]: t for t in data["terms"]}
    assert terms["ts"]["value"] == pytest.approx(_doc_number(r"ts  = ([0-9.]+) s"), abs=5e-5)
    assert data["S_mm"] == pytest.approx(_doc_number(r"S   = ([0-9.]+) mm"), abs=0.05)
    assert data["K_mm_s"] == 1600 and data["C_mm"] == 128 and "predicted: worst of 9 cases" in terms["ts"]["source"]
    assert "S = 534.6 mm" in printed and "6.5" in printed


def test_the_iso_ts_15066_worked_example_of_the_guide(tmp_path):
    out = tmp_path / "ssm.json"
    assert main(["ssm", "--state", "demo", "--person", "0.3", "0.6", "0.2", "--reaction-time", "0.1",
                 "--detection-capability", "30", "--zd", "0.05", "--zr", "0.01", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["T_s"] == pytest.approx(_doc_number(r"T_s = ([0-9.]+) s"), abs=5e-5)
    assert r["v_r"] == pytest.approx(_doc_number(r"v_r = ([0-9.]+) m/s"), abs=5e-5)
    assert r["S_s"] == pytest.approx(_doc_number(r"S_s = ([0-9.]+) m"), abs=5e-5)
    assert r["S_p"] == pytest.approx(_doc_number(r"\(([0-9.]+) m unrounded\)"), abs=5e-5)
    assert r["C"] == pytest.approx(0.128) and r["link"] == "wrist_3_link" and not r["safe"]


@pytest.fixture(scope="module")
def three_row_map():
    """The columns of a 3-state UR5 map (payloads 0 and 5 kg), as vtm-stopping-map writes them."""
    from vtm_dynamics.core.estop.brakes import brakes_from_config, load_brake_yaml
    from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf
    from vtm_dynamics.core.stopping.workspace_map import MapSpec, evaluate_chunk

    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    repo = os.path.dirname(DOC)[:-len("docs")]
    brakes = brakes_from_config(robot, load_brake_yaml(os.path.join(repo, "config", "ur5_brakes.yaml")))
    return evaluate_chunk(robot, brakes, MapSpec(n_states=3, tcp_frame="tool0", payload_frame="tool0", chunk_size=3,
                                                 payloads=(0.0, 5.0)), 0)


def _write_map(path, cols, spoiled=()):
    """Write ``cols`` as a Parquet map; the data of the ``spoiled`` columns is then zeroed in the file (its
    metadata kept): a reader that reads any of them fails."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({k: np.asarray(v) for k, v in cols.items()}), path)
    meta = pq.ParquetFile(path).metadata
    with open(path, "r+b") as fh:
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                chunk = meta.row_group(g).column(c)
                if chunk.path_in_schema in spoiled:
                    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
                    fh.seek(start)
                    fh.write(bytes(chunk.total_compressed_size))
    return path


def test_ssm_over_a_workspace_map(tmp_path, capsys, three_row_map):
    path = _write_map(tmp_path / "map.parquet", three_row_map)
    assert main(["ssm-map", str(path), "--person", "1.0", "0.5", "0.5", "--reaction-time", "0.1", "--csv",
                 str(tmp_path / "ssm.csv"), "--quiet"]) == 0
    assert "S_p over 3 map states" in capsys.readouterr().out
    assert len((tmp_path / "ssm.csv").read_text().splitlines()) == 4
    assert main(["ssm-map", str(path), "--person", "1", "0", "0", "--reaction-time", "0.1", "--max-rows", "2"]) == 2
    assert "map: 3 rows, more than --max-rows 2" in capsys.readouterr().err


def test_an_oversized_map_is_refused_from_its_row_count_before_any_column_is_read(tmp_path, capsys, three_row_map):
    # the whole map was read (every column of every row) before its row count was compared with --max-rows: a map
    # of 10^7 rows was loaded whole only to be refused. Here no column can be read at all
    path = _write_map(tmp_path / "map.parquet", three_row_map, spoiled=tuple(three_row_map))
    assert main(["ssm-map", str(path), "--person", "1", "0", "0", "--reaction-time", "0.1", "--max-rows", "2",
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err == "vtm-safety-distance: error: map: 3 rows, more than --max-rows 2\n"


def test_the_map_table_reads_only_the_columns_it_needs(tmp_path, capsys, three_row_map):
    # the table needs a row's state, q, v, payload and brake factors (16 columns for the UR5), not its results
    needed = {"state", "payload_kg", "torque_factor", "delay_factor"}
    needed |= {k for k in three_row_map if k.startswith(("q_", "v_"))}
    others = tuple(k for k in three_row_map if k not in needed)
    assert {"tcp_straight_distance_m", "stop_time_s", "tcp_x_m"} <= set(others)
    path = _write_map(tmp_path / "map.parquet", three_row_map, spoiled=others)
    with pytest.raises(OSError):  # the spoiled columns cannot be read
        import pyarrow.parquet as pq
        pq.read_table(path, columns=[others[0]])
    assert main(["ssm-map", str(path), "--person", "1.0", "0.5", "0.5", "--reaction-time", "0.1", "--quiet"]) == 0
    assert "S_p over 3 map states" in capsys.readouterr().out
    spoiled_needed = _write_map(tmp_path / "bad.parquet", three_row_map, spoiled=("torque_factor",))
    assert main(["ssm-map", str(spoiled_needed), "--person", "1", "0", "0", "--reaction-time", "0.1",
                 "--quiet"]) == 2
    assert capsys.readouterr().err.startswith("vtm-safety-distance: error: map: cannot read bad.parquet (")


@pytest.mark.parametrize("argv, words", [
    (["iso13855", "--device", "light_curtain", "--d", "80", "--detection-response", "0.02", "--control-response",
      "0.01", "--nominal"], "detection_capability: 80 mm is above 70 mm"),
    (["iso13855", "--device", "single_beam", "--detection-response", "-1", "--control-response", "0.01",
      "--nominal"], "detection_response: expected 0..100 s"),
    (["ssm", "--person", "1", "0", "0", "--reaction-time", "0.1", "--state", "parked", "--nominal"],
     "state: 'parked' is not a named state"),
    (["ssm", "--person", "1", "0", "0", "--reaction-time", "0.1", "--q", "0", "0", "0", "0", "0", "0", "--v",
      "0", "0", "0", "0", "0", "0", "--joint-names", "a", "b", "c", "d", "e", "f", "--nominal"],
     "unknown joint 'a'"),
    (["ssm", "--person", "1", "0", "0", "--reaction-time", "20", "--nominal"], "separation.reaction_time"),
])
def test_bad_input_is_one_line(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vtm-safety-distance: error:") and words in err and "\n" not in err


def _ssm_csv(path) -> dict[int, dict]:
    import csv

    with open(path, newline="", encoding="utf-8") as fh:
        return {int(r["state"]): r for r in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def category_one_map(tmp_path_factory):
    """A small map built by vtm-stopping-map with category-1 stops (its manifest records the category)."""
    from vtm_dynamics.cli.stopping_map import main as stopping_map

    out = tmp_path_factory.mktemp("map") / "run"
    old = os.umask(0o022)
    try:
        assert stopping_map(["UR5", "--states", "4", "--chunk-size", "4", "--threads", "--workers", "1",
                             "--payload", "5", "--speed-fraction", "0.6", "1.0", "--category", "1", "--decel", "4",
                             "--out", str(out)]) == 0
    finally:
        os.umask(old)
    return out / "stopping_map.parquet"


def test_ssm_map_with_both_categories_keeps_each_states_larger_S_p_and_names_its_category(category_one_map,
                                                                                          tmp_path, capsys):
    import shutil

    bare = tmp_path / "rows.parquet"  # the rows without their manifest: any category may be asked for
    shutil.copy(category_one_map, bare)
    person = ["1.0", "0.3", "0.5"]
    common = ["ssm-map", str(bare), "--person", *person, "--reaction-time", "0.1", "--decel", "4",
              "--quiet"]
    by = {}
    for c in ("0", "1", "both"):
        assert main(common + ["--category", c, "--csv", str(tmp_path / f"ssm_{c}.csv")]) == 0
        by[c] = _ssm_csv(tmp_path / f"ssm_{c}.csv")
    assert "category 1 in" in capsys.readouterr().out
    assert any(row["category"] == "1" for row in by["both"].values())  # the case the old code missed
    for state, row in by["both"].items():
        sp0, sp1 = float(by["0"][state]["S_p_m"]), float(by["1"][state]["S_p_m"])
        assert float(row["S_p_m"]) == pytest.approx(max(sp0, sp1), rel=1e-12)
        assert row["category"] == ("1" if sp1 > sp0 else "0")
        assert float(row["margin_m"]) == pytest.approx(min(float(by["0"][state]["margin_m"]),
                                                           float(by["1"][state]["margin_m"])), rel=1e-12)


def test_ssm_map_defaults_to_the_maps_recorded_category_and_refuses_another(category_one_map, tmp_path, capsys):
    common = ["ssm-map", str(category_one_map), "--person", "1.0", "0.3", "0.5", "--reaction-time", "0.1",
              "--quiet"]
    assert main(common + ["--csv", str(tmp_path / "default.csv")]) == 0
    assert main(common + ["--category", "1", "--decel", "4", "--csv", str(tmp_path / "one.csv")]) == 0
    capsys.readouterr()
    default, one = _ssm_csv(tmp_path / "default.csv"), _ssm_csv(tmp_path / "one.csv")
    assert {s: float(r["S_p_m"]) for s, r in default.items()} == {s: float(r["S_p_m"]) for s, r in one.items()}
    assert all(r["category"] == "1" for r in default.values())
    assert main(common + ["--category", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "map was built with category 1" in err and "\n" not in err


def test_iso13855_on_a_trajectory_stops_from_a_speed_peak_between_the_grid_instants(tmp_path):
    import yaml

    from vtm_dynamics.cli.safety_distance import build_parser
    from vtm_dynamics.cli.stopsafe_setup import load_setup
    from vtm_dynamics.core.stopsafe.stop_cases import predict_stops

    # one cubic Hermite segment at rest at both ends: the pan speed peaks, 1.5 x 1.29 / 1.05 rad/s, at t = T / 2 =
    # 0.525 s, halfway between two instants of the 20 Hz grid (0.50 s and 0.55 s)
    T, dq = 1.05, 1.29
    rest = [-1.2, 1.5, -0.8, 0.5, 0.2]
    names = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
             "wrist_3_joint"]
    path = tmp_path / "peak.yaml"
    path.write_text(yaml.safe_dump({"joint_names": names, "points": [
        {"positions": [p] + rest, "velocities": [0.0] * 6, "time_from_start": t} for t, p in ((0.0, 0.0), (T, dq))]}))
    argv = ["iso13855", "--trajectory", str(path), "--device", "multi_beam", "--beams", "3", "--detection-response",
            "0.02", "--control-response", "0.015", "--nominal", "--json", str(tmp_path / "iso.json")]
    assert main(argv) == 0
    ts = {t["symbol"]: t for t in json.loads((tmp_path / "iso.json").read_text())["terms"]}["ts"]["value"]
    # independent: the stop from the peak state, and the worst over the 20 Hz grid alone
    setup = load_setup(build_parser().parse_args(argv)).setup
    peak_q, peak_v = np.array([dq / 2] + rest), np.array([1.5 * dq / T, 0, 0, 0, 0, 0])
    at_peak = max(p.stop_time for p in predict_stops(setup, peak_q[None], peak_v[None])[0])
    grid = np.arange(0.0, T + 1e-9, 0.05)
    s = grid / T
    q = np.column_stack([dq * (3 * s**2 - 2 * s**3)] + [np.full_like(s, r) for r in rest])
    v = np.column_stack([dq * (6 * s - 6 * s**2) / T] + [np.zeros_like(s)] * 5)
    on_grid = max(p.stop_time for preds in predict_stops(setup, q, v) for p in preds)
    assert at_peak > on_grid  # the peak matters
    assert ts >= at_peak - 1e-9


def test_a_category_1_stopping_time_keeps_the_ramp_within_the_given_torque_limits(tmp_path, capsys):
    """Only the base turns, at 2 rad/s (vertical axis: its drive torque is (M_00 + armature) v / T, nothing else):
    the free ramp lasts v / decel = 0.1 s, the one within a base limit L (M_00 + armature) v / L, and T_s is the
    ramp (the brakes take over at standstill). Before, vtm-safety-distance had no --torque-limits."""
    from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf

    q = [0.4, -1.0, 1.2, -0.5, 0.8, 0.1]
    runs = {}
    for name, extra in (("free", []), ("held", ["--torque-limits", "20", "1e4", "1e4", "1e4", "1e4", "1e4"])):
        out = tmp_path / f"{name}.json"
        assert main(["ssm", "--q", *map(str, q), "--v", "2", "0", "0", "0", "0", "0", "--person", "1", "0", "0",
                     "--reaction-time", "0.1", "--nominal", "--category", "1", "--decel", "20", "--json", str(out),
                     *extra]) == 0
        runs[name] = json.loads(out.read_text())
    printed = capsys.readouterr().out
    assert "category 1: ramp 20 rad/s^2 (assumed, --decel), drive torque limits 20 10000" in printed
    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    armature = 2.0  # shoulder_pan_joint in config/ur5_brakes.yaml
    assert runs["free"]["T_s"] == pytest.approx(2.0 / 20.0, abs=1e-9)
    assert runs["held"]["T_s"] == pytest.approx((robot.mass_matrix(np.array(q))[0, 0] + armature) * 2.0 / 20.0,
                                                rel=1e-6)
    assert runs["held"]["robot"]["category1"].startswith("ramp 20 rad/s^2")


def test_ssm_map_takes_the_maps_torque_limits_says_so_and_refuses_others(tmp_path, capsys):
    """A map built with category-1 torque limits is evaluated with the same limits (its manifest records them), as
    its category; other limits are refused like another category. Before, ssm-map ignored them."""
    from vtm_dynamics.cli.stopping_map import main as stopping_map

    out = tmp_path / "run"
    assert stopping_map(["UR5", "--states", "2", "--threads", "--workers", "1", "--category", "1", "--decel", "20",
                         "--torque-limits", "urdf", "--out", str(out)]) == 0
    capsys.readouterr()
    common = ["ssm-map", str(out / "stopping_map.parquet"), "--person", "1.0", "0.3", "0.5", "--reaction-time", "0.1",
              "--quiet", "--nominal"]
    assert main(common + ["--csv", str(tmp_path / "default.csv")]) == 0
    assert "category 1: ramp 20 rad/s^2 (assumed, --decel), drive torque limits the URDF's effort limits" in \
        capsys.readouterr().out
    assert main(common + ["--torque-limits", "urdf", "--csv", str(tmp_path / "same.csv")]) == 0
    capsys.readouterr()
    assert _ssm_csv(tmp_path / "default.csv") == _ssm_csv(tmp_path / "same.csv")
    assert main(common + ["--torque-limits", "150", "150", "150", "28", "28", "28"]) == 2
    err = capsys.readouterr().err.strip()
    assert "torque_limits: the map was built with urdf" in err and "\n" not in err


def _elbow_to_limit():
    """The UR5 elbow 10 mrad below its upper limit at 3 rad/s (its stop rests 0.107 rad past the limit by the
    independent integration): the state, the limit and the robot."""
    from test.core.limit_case import elbow_towards_limit, reference_elbow_rest
    from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf

    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    q, v, limit = elbow_towards_limit(robot)
    assert reference_elbow_rest(robot, q, v) > limit + 0.1
    return q, v, limit, robot


def test_a_stop_past_a_joint_limit_gives_no_value_in_ssm_and_iso13855(tmp_path, capsys):
    """ssm printed S_p and "SAFE" for a person 3 m away; iso13855 took the stop time of a stop the end stop would
    end. Now: no value, not safe, and the case, the joint and how far."""
    q, v, limit, _ = _elbow_to_limit()
    state = ["--q", *map(str, q), "--v", *map(str, v)]
    out = tmp_path / "ssm.json"
    assert main(["ssm", *state, "--person", "3.0", "0.0", "0.5", "--reaction-time", "0.1", "--json", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("ISO/TS 15066 protective separation distance: NO VALUE, NOT SAFE: case (cat 0")
    assert "past a joint limit: elbow_joint reaches" in first and f"upper limit {limit:.4f} rad" in first
    r = json.loads(out.read_text())
    assert r["margin"] > 1.0 and not r["safe"] and not r["valid"]  # far from the person: only the limit counts
    assert r["limit_crossings"][0].startswith("elbow_joint reaches") and "past a joint limit" in r["invalid_reason"]
    assert main(["iso13855", *state, "--device", "light_curtain", "--d", "30", "--detection-response", "0.02",
                 "--control-response", "0.015"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vtm-safety-distance: error: stopping_time: a case (cat 0") and "\n" not in err
    assert "goes past a joint limit: elbow_joint reaches" in err


def test_ssm_map_counts_a_state_past_a_joint_limit_as_no_value_and_leaves_it_out_of_the_statistics(
        tmp_path, capsys, three_row_map):
    q, v, _, robot = _elbow_to_limit()
    cols = {k: np.array(x, copy=True) for k, x in three_row_map.items()}
    for i, n in enumerate(robot.joint_names):  # state 1 becomes the elbow running into its limit
        cols[f"q_{n}"][1], cols[f"v_{n}"][1] = q[i], v[i]
    cols["payload_kg"][1], cols["torque_factor"][1], cols["delay_factor"][1] = 0.0, 1.0, 1.0
    path = _write_map(tmp_path / "map.parquet", cols)
    csv_path = tmp_path / "ssm.csv"
    assert main(["ssm-map", str(path), "--person", "3.0", "0.0", "0.5", "--reaction-time", "0.1", "--csv",
                 str(csv_path), "--quiet"]) == 0
    out = capsys.readouterr().out
    state = int(cols["state"][1])
    assert f"1 states have no valid S_p (CSV column valid 0), e.g. state {state}: case (cat 0" in out
    assert "past a joint limit: elbow_joint reaches" in out
    rows = _ssm_csv(csv_path)
    assert rows[state]["valid"] == "0" and rows[state]["safe"] == "0"
    assert "past a joint limit" in rows[state]["invalid_reason"]
    largest = float(out.split("largest ")[1].split()[0])
    others = [float(r["S_p_m"]) for s, r in rows.items() if s != state]
    assert largest == pytest.approx(max(others), abs=5e-5)  # over the valid states only


UR5_JOINTS = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
              "wrist_3_joint")
MAP_HASH = "ab" * 32


def _rows_of_a_map(folder) -> str:
    """One UR5 row in the columns of a map, its schema carrying the inputs hash ``MAP_HASH`` (written here with
    pyarrow, not by the tool)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {"state": pa.array([0], pa.int64())}
    for j in UR5_JOINTS:
        columns[f"q_{j}"], columns[f"v_{j}"] = pa.array([0.1]), pa.array([0.2])
    for name, value in (("payload_kg", 0.0), ("torque_factor", 1.0), ("delay_factor", 1.0)):
        columns[name] = pa.array([value])
    path = os.path.join(str(folder), "stopping_map.parquet")
    pq.write_table(pa.table(columns).replace_schema_metadata({b"vtm_inputs_hash": MAP_HASH.encode()}), path)
    return path


def _manifest(category="1", decel="4.0", limits="null") -> str:
    return ('{"inputs_hash": "%s", "inputs": {"spec": {"category": %s, "category1_deceleration": %s, '
            '"category1_torque_limits": %s}}}' % (MAP_HASH, category, decel, limits))


def _ssm_map(path) -> list[str]:
    return ["ssm-map", str(path), "--person", "1.0", "0.3", "0.5", "--reaction-time", "0.1", "--quiet"]


@pytest.mark.parametrize("text, words", [
    ("[" * 100_000, "not a JSON object"),  # was RecursionError out of the JSON parser
    ("{", "not a JSON object"),  # was taken for no manifest: the map ran as category 0
    (_manifest(category="1e400"), "stop category"),  # was OverflowError (int of infinity)
    (_manifest(category="1.9"), "stop category"),  # was rounded down to category 1
    (_manifest(category="true"), "stop category"),  # was taken as category 1
    (_manifest(decel="-4"), "deceleration"),
    (_manifest(limits='"all"'), "torque limits"),  # neither 'urdf' nor numbers
    (_manifest(limits='[150, -1, 28]'), "torque limits"),
    (_manifest(limits='{"a": 1}'), "torque limits"),
])
def test_a_manifest_beside_the_map_that_cannot_be_trusted_is_one_line(tmp_path, capsys, text, words):
    path = _rows_of_a_map(tmp_path)
    (tmp_path / "manifest.json").write_text(text)
    assert main(_ssm_map(path)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vtm-safety-distance: error: map:") and words in err and "\n" not in err


def test_a_manifest_beside_the_map_over_its_byte_cap_is_refused_unread(tmp_path, capsys):
    from vtm_dynamics.scaleout.chunk_store import MAX_MANIFEST_BYTES

    path = _rows_of_a_map(tmp_path)
    with open(tmp_path / "manifest.json", "wb") as fh:  # sparse: no disk space used
        fh.truncate(MAX_MANIFEST_BYTES + 1)
    assert main(_ssm_map(path)) == 2  # was read whole, then taken for no manifest: the map ran as category 0
    err = capsys.readouterr().err.strip()
    assert f"more than {MAX_MANIFEST_BYTES}" in err and "\n" not in err


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_manifest_beside_the_map_that_is_no_regular_file_is_refused_without_reading(tmp_path, capsys, kind):
    path = _rows_of_a_map(tmp_path)
    if kind == "fifo":
        os.mkfifo(tmp_path / "manifest.json")  # was opened for reading: blocked for ever, waiting for a writer
    else:
        os.symlink("/dev/zero", tmp_path / "manifest.json")  # was read until memory ran out
    assert main(_ssm_map(path)) == 2
    err = capsys.readouterr().err.strip()
    assert "not a regular file" in err and "\n" not in err


def test_a_map_path_that_is_no_regular_file_is_refused_without_opening_it(tmp_path, capsys):
    os.mkfifo(tmp_path / "stopping_map.parquet")  # was opened by the Parquet reader: blocked for ever
    assert main(_ssm_map(tmp_path / "stopping_map.parquet")) == 2
    err = capsys.readouterr().err.strip()
    assert "not a regular file" in err and "\n" not in err


def test_a_map_whose_joint_column_holds_a_list_per_row_is_refused_naming_the_column(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = _rows_of_a_map(tmp_path)
    table = pq.read_table(path)
    many = pa.ListArray.from_arrays(pa.array([0, 100_000], pa.int32()), pa.array(np.zeros(100_000)))
    table = table.set_column(table.schema.get_field_index("q_elbow_joint"), "q_elbow_joint", many)
    pq.write_table(table, path, compression="zstd")  # a few kB on disk, 100,000 values in its one row
    assert main(_ssm_map(path)) == 2
    err = capsys.readouterr().err.strip()
    assert "column 'q_elbow_joint' holds" in err and "not one number per row" in err and "\n" not in err

"""What the view of a stopping map draws, gathered a block at a time: the same picture however the map is read (in
blocks of any size or whole), the worst states kept in it and replayed, the rest thinned by the seeded draw, and
the info panel's figures those of every row."""

from __future__ import annotations

import numpy as np
import pytest

from test.views.views_testdata import ur5_geometry
from vtm_dynamics.views.map_sample import columns_reader, sample_map

N = 600  # rows of the test map: 120 real UR5 states repeated five times, some made unusable


@pytest.fixture(scope="module")
def ur5_rows():
    from vtm_dynamics.cli.stopping_robots import load_robot
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.stopping.workspace_map import MapSpec, evaluate_chunk

    loaded = load_robot("ur5")
    brakes = brakes_from_config(loaded.robot, loaded.brake_config)
    spec = MapSpec(n_states=120, tcp_frame="tool0", payload_frame="tool0", chunk_size=120, seed=5,
                   payloads=(0.0, 5.0))
    real = evaluate_chunk(loaded.robot, brakes, spec, 0)
    cols = {k: np.concatenate([np.asarray(v)] * (N // 120)) for k, v in real.items()}
    cols["state"] = np.arange(N, dtype=np.int64)
    for name in ("tcp_x_m", "tcp_straight_distance_m"):
        cols[name] = cols[name].astype(float)
    cols["tcp_x_m"][[3, 250, 599]] = np.nan  # no start position: not drawn
    cols["tcp_straight_distance_m"][[7, 321]] = np.nan  # no distance: ranked last, not in the percentiles
    # two of these 120 UR5 states go past a joint limit; the tests of drawing and ranking by distance use rows
    # within the limits (the rows past a limit have their own test, on the real flags)
    cols["within_limits"] = np.ones(N, bool)
    return loaded.robot, brakes, spec, cols


def in_blocks(cols, size):
    """A reader of ``cols`` in blocks of ``size`` rows (as a file is read)."""
    def read(names):
        sub = cols if names is None else {k: cols[k] for k in names}
        return lambda: ({k: v[i:i + size] for k, v in sub.items()} for i in range(0, N, size))
    return read


def test_the_drawn_points_are_the_worst_and_a_seeded_draw_of_the_rest_however_the_map_is_read(ur5_rows):
    robot, brakes, spec, cols = ur5_rows
    d = cols["tcp_straight_distance_m"]
    start = np.column_stack([cols["tcp_x_m"], cols["tcp_y_m"], cols["tcp_z_m"]])
    # the definition, from the whole columns: the worst 3 (largest distance first, earlier row on a tie, rows
    # without a distance last), then of the other drawable rows the positions numpy's seeded draw picks
    ranked = sorted(range(N), key=lambda r: (0, -d[r], r) if np.isfinite(d[r]) else (1, 0.0, r))
    worst = ranked[:3]
    drawable = [r for r in range(N) if np.all(np.isfinite(start[r]))]
    must = [r for r in worst if r in drawable]
    rest = np.array([r for r in drawable if r not in must])
    drawn = sorted(must + list(np.random.default_rng(11).choice(rest, 50 - len(must), replace=False)))
    for read in (columns_reader(cols), in_blocks(cols, 1), in_blocks(cols, 37), in_blocks(cols, 256)):
        sample = sample_map(read, 3, max_points=50, seed=11)
        assert sample.rows.tolist() == drawn
        np.testing.assert_array_equal(sample.start, start[drawn])
        np.testing.assert_array_equal(sample.distance, d[drawn])
        assert list(sample.worst_rows) == worst
        np.testing.assert_array_equal(sample.worst["state"], cols["state"][worst])
        np.testing.assert_array_equal(sample.worst["q_shoulder_pan_joint"], cols["q_shoulder_pan_joint"][worst])
        assert sample.count == N and sample.top == np.nanmax(d)


def test_a_map_within_the_point_budget_is_drawn_whole_but_for_rows_without_a_start(ur5_rows):
    _, _, _, cols = ur5_rows
    sample = sample_map(in_blocks(cols, 64), 3, max_points=N)
    assert sample.rows.tolist() == [r for r in range(N) if r not in (3, 250, 599)]


def test_the_info_panel_gives_the_figures_of_every_row(ur5_rows):
    _, _, _, cols = ur5_rows
    d, t = cols["tcp_straight_distance_m"], cols["stop_time_s"]
    info = sample_map(in_blocks(cols, 37), 3, max_points=50).info
    k = int(np.nanargmax(d))
    # the summary's percentiles: over every row, a row without a distance (or not stopped) counting as unknown (inf)
    p = np.percentile(np.where(np.isfinite(d) & cols["stopped"], d, np.inf), (50, 90, 99))
    assert info[0] == f"{N} states, {int(np.sum(cols['stopped']))} stopped within the horizon"
    assert info[1] == (f"worst TCP distance {d[k]:.4f} m (state {k}); p50/p90/p99: {p[0]:.4f} / {p[1]:.4f} / "
                       f"{p[2]:.4f} m")
    assert str(int(np.argmax(t))) in info[2] and f"{np.max(t):.4f} s" in info[2]


def test_the_scene_of_a_map_read_in_blocks_is_the_scene_of_the_map_read_whole(ur5_rows):
    from vtm_dynamics.views.map_view import map_scene, replay_worst

    robot, brakes, spec, cols = ur5_rows
    scenes = []
    for read in (columns_reader(cols), in_blocks(cols, 41)):
        sample = sample_map(read, 2, max_points=40, seed=2)
        scenes.append(map_scene(robot, sample, worst=replay_worst(robot, brakes, spec, sample),
                                geometry=ur5_geometry()))
    whole, blocks = scenes
    np.testing.assert_array_equal(blocks.clouds[0].points, whole.clouds[0].points)
    np.testing.assert_array_equal(blocks.clouds[0].colors, whole.clouds[0].colors)
    assert len(blocks.clouds[0].points) == 40
    assert blocks.labels == whole.labels and blocks.info == whole.info and blocks.title == whole.title
    assert [line.name for line in blocks.lines] == [line.name for line in whole.lines]
    np.testing.assert_array_equal(blocks.robots[0].times, whole.robots[0].times)


def test_a_state_that_did_not_stop_is_shown_as_not_stopped_never_as_a_known_distance(ur5_rows):
    # a state not at rest within the horizon keeps the distance it had moved by then: a lower bound, not its
    # stopping distance. The summary counts it as not stopped; the view called the largest such value the "worst
    # TCP distance", put it in the percentiles, ranked the worst states by it and labelled it "#1: 0.9 m"
    from vtm_dynamics.core.stopping.workspace_map import summarize
    from vtm_dynamics.views.map_view import map_scene, replay_worst

    robot, brakes, spec, whole = ur5_rows
    cols = {k: np.array(v, copy=True) for k, v in whole.items()}
    d = cols["tcp_straight_distance_m"]
    ok = np.isfinite(d) & np.isfinite(cols["tcp_x_m"])
    moved = np.flatnonzero(ok)[[10, 400]]  # two states cut off by the horizon, far beyond every real distance
    cols["stopped"] = np.asarray(cols["stopped"], dtype=bool)
    cols["stopped"][moved] = False
    d[moved] = 10.0 * np.nanmax(d) + np.array([1.0, 2.0])
    stopped = cols["stopped"] & np.isfinite(d)
    known = int(np.flatnonzero(stopped)[np.argmax(d[stopped])])
    sample = sample_map(in_blocks(cols, 37), 3, max_points=50, seed=4)
    assert list(sample.worst_rows[:2]) == sorted(moved.tolist())  # not stopped first, in file order
    assert sample.worst_rows[2] == known
    assert sample.top == d[known]  # the colour scale is the known distances'
    summary = summarize(cols)
    assert any(line.startswith(f"worst TCP distance {d[known]:.4f} m (state {known})") for line in sample.info)
    assert any("2 states did not stop within the horizon" in line for line in sample.info)
    pct = [line for line in sample.info if "p50/p90/p99" in line][0]
    expected = ["not stopped" if np.isinf(x) else f"{x:.4f}" for x in summary.distance_percentiles[:3]]
    assert pct.endswith(" / ".join(expected) + (" m" if expected[-1] != "not stopped" else ""))
    assert all(f"{x:.4f}" not in " ".join(sample.info) for x in d[moved])
    drawn_moved = np.isin(sample.rows, moved)
    assert drawn_moved.sum() == 2 and not sample.stopped[drawn_moved].any()
    scene = map_scene(robot, sample, worst=replay_worst(robot, brakes, spec, sample), geometry=ur5_geometry())
    clouds = {c.name: c for c in scene.clouds}
    assert len(clouds["not_stopped"].points) == 2 and len(clouds["states"].points) == 48
    assert [lb.text for lb in scene.labels][:2] == ["#1: not stopped", "#2: not stopped"]
    assert scene.labels[2].text == f"#3: {d[known]:.3f} m"


def test_states_past_a_joint_limit_are_counted_drawn_apart_and_never_labelled_with_a_distance(ur5_rows):
    from vtm_dynamics.core.stopping.workspace_map import evaluate_chunk
    from vtm_dynamics.views.map_view import map_scene, replay_worst

    robot, brakes, spec, whole = ur5_rows
    real = evaluate_chunk(robot, brakes, spec, 0)  # the map's own flags: two of these 120 states cross a limit
    cols = {k: np.array(v, copy=True) for k, v in whole.items()}
    cols["within_limits"] = np.concatenate([np.asarray(real["within_limits"], dtype=bool)] * (N // 120))
    past = np.flatnonzero(~cols["within_limits"])
    # independent of the map: each such state's own prediction reaches beyond a URDF position limit
    lo, hi = robot.model.lowerPositionLimit, robot.model.upperPositionLimit
    for r in past[:2]:
        p = replay_row_of(robot, brakes, spec, cols, r)
        assert np.any((p.q.max(axis=0) > hi + 1e-6) | (p.q.min(axis=0) < lo - 1e-6))
    sample = sample_map(in_blocks(cols, 37), 2, max_points=N, seed=4)
    assert any(line.startswith(f"{past.size} states went past a joint limit") for line in sample.info)
    # they came to rest: the panel called them "not stopped (0 states)" in its worst stop time and percentiles
    (longest,) = [line for line in sample.info if line.startswith("worst stop time")]
    assert longest.startswith(f"worst stop time: not known (0 not stopped, {past.size} past a joint limit)")
    assert "not stopped" not in next(line for line in sample.info if "p50/p90/p99" in line)
    drawn_past = np.isin(sample.rows, past)
    assert drawn_past.any() and not sample.stopped[drawn_past].any()
    assert set(sample.worst_rows) <= set(past.tolist())  # ranked first: their distance is not known
    scene = map_scene(robot, sample, worst=replay_worst(robot, brakes, spec, sample), geometry=ur5_geometry())
    assert [lb.text for lb in scene.labels] == ["#1: past a joint limit", "#2: past a joint limit"]
    # their own cloud and legend entry, not the one of the states that did not stop (they were drawn in it)
    clouds = {c.name: c for c in scene.clouds}
    np.testing.assert_array_equal(clouds["past_limit"].points, sample.start[drawn_past])
    assert "not_stopped" not in clouds  # every one of these states came to rest
    assert any("past a joint limit" in e.text and e.toggles == ("past_limit",) for e in scene.legend)


def replay_row_of(robot, brakes, spec, cols, row):
    from vtm_dynamics.views.map_view import replay_row

    return replay_row(robot, brakes, spec, {k: np.asarray(v)[[row]] for k, v in cols.items()}, 0)

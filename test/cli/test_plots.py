"""Every plot type the suite writes, rendered from small inputs and checked as the person who prints it would:
nothing drawn outside the canvas (matplotlib's tight bounding box within the figure's), no legend over the data,
axis labels with units on every axis that shows values, and the foot line saying what produced the figure."""

from __future__ import annotations

import math
import os
from types import SimpleNamespace

import numpy as np
import pytest

from test.ros_helpers import REPO_ROOT
from vtm_dynamics.cli import plots

URDF = os.path.join(REPO_ROOT, "urdf")


def layout_problems(fig) -> list[str]:
    """What a reader of the printed figure would trip over (empty list: none)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)  # the saved figure was closed: draw it again as it was saved
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    problems = []
    tight = fig.get_tightbbox(renderer)
    w, h = fig.get_size_inches()
    eps = 1.5 / fig.dpi
    if tight.x0 < -eps or tight.y0 < -eps or tight.x1 > w + eps or tight.y1 > h + eps:
        problems.append(f"text or artists outside the canvas: tight bbox {tight.bounds} vs {w:.2f} x {h:.2f} in")
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            inside = ax.get_window_extent(renderer)
            for line in ax.get_lines():
                xy = np.asarray(line.get_xydata(), dtype=float)
                if xy.size == 0 or not line.get_visible() or line.get_transform() != ax.transData:
                    continue
                pts = ax.transData.transform(xy[np.all(np.isfinite(xy), axis=1)])
                shown = pts[(pts[:, 0] >= inside.x0) & (pts[:, 0] <= inside.x1) & (pts[:, 1] >= inside.y0)
                            & (pts[:, 1] <= inside.y1)]
                over = (shown[:, 0] > box.x0) & (shown[:, 0] < box.x1) & (shown[:, 1] > box.y0) & (shown[:, 1] < box.y1)
                if over.any():
                    problems.append(f"legend over the data of '{line.get_label()}' in '{ax.get_title()}'")
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison or not (ax.get_lines() or ax.collections or ax.patches or ax.images):
            continue
        for axis, label in ((ax.xaxis, ax.get_xlabel()), (ax.yaxis, ax.get_ylabel())):
            ticks = [t.get_text() for t in axis.get_ticklabels() if t.get_visible() and t.get_text()]
            numeric = ticks and all(t.replace("\u2212", "-").replace(".", "").replace("-", "").isdigit() for t in ticks)
            if numeric and not ("[" in label and "]" in label):
                problems.append(f"axis '{label}' of '{ax.get_title()}' shows values without a unit in brackets")
    if not any(t.get_text().startswith(("Source:", "Note:")) or "\nSource: " in t.get_text() for t in fig.texts):
        problems.append("no foot line saying what produced the figure")
    return problems


@pytest.fixture
def figures(monkeypatch):
    """The figures the plotting functions save, kept for inspection (the files are written as usual)."""
    seen = []
    original = plots.save_figure_at

    def keep(plt, fig, path, source=None, notes=(), dpi=110):
        out = original(plt, fig, path, source, notes, dpi)
        seen.append((os.path.basename(path), fig))
        return out

    monkeypatch.setattr(plots, "save_figure_at", keep)
    return seen


def check(figures, expected: set[str]) -> None:
    names = {name for name, _ in figures}
    assert expected <= names, names
    for name, fig in figures:
        assert layout_problems(fig) == [], name


@pytest.fixture(scope="module")
def planar_stop():
    from vtm_dynamics.core.estop import LockEvent, predict_stop
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.robot.model import RobotModel

    robot = RobotModel.from_urdf_file(os.path.join(URDF, "planar_3r.urdf"))
    brakes = brakes_from_config(robot, os.path.join(REPO_ROOT, "config", "planar_3r_brakes.yaml"))
    q, v = np.full(3, math.pi / 6), np.array([1.0, -0.5, 0.8])
    p = predict_stop(robot, brakes, q, v, tcp_frame="link3", lock_events=[LockEvent(0.02, ["joint3"])])
    return robot, brakes, p


def test_prediction_report_plots(planar_stop, figures, tmp_path):
    robot, brakes, p = planar_stop
    plots.prediction_report_plots(str(tmp_path), robot, p, source="test", armature=brakes.armature)
    check(figures, {"angles.png", "rates.png", "momenta.png", "energy.png"})
    energy = dict(figures)["energy.png"]
    assert "to " in energy.texts[-1].get_text() and "integration check" in energy.texts[-1].get_text()
    # every axis's unit ends its label: a robot without a prismatic joint had "[rad]m", "[rad/s]m/s" and "[N m s]N s"
    labels = {name: fig.axes[0].get_ylabel() for name, fig in figures}
    assert labels["angles.png"] == "angle travelled since the E-stop [rad]"
    assert labels["rates.png"] == "joint rate [rad/s]" and labels["momenta.png"] == "generalized momentum M v [N m s]"


def test_prediction_vs_simulation_plots(planar_stop, figures, tmp_path):
    from vtm_dynamics.core.estop.braked_plant import BrakedPlant

    robot, brakes, p = planar_stop
    plant = BrakedPlant(robot, brakes, dt=1e-3)
    plant.start(p.q[0], p.v[0])
    plant.advance(float(p.t[-1]))
    plots.prediction_vs_simulation_plots(str(tmp_path), robot, p, plant)
    check(figures, {"joint_angles_rates.png", "tcp_path.png"})


def test_reaction_plots(figures, tmp_path):
    from vtm_dynamics.cli.reactions import main

    assert main([os.path.join(URDF, "parallelogram_4bar.urdf"), "--ignore-drives", "--dt", "2e-3", "--duration",
                 "0.02", "--q", "0.3", "-0.3", "0.3", "--v", "1", "-1", "1", "--formulation", "kkt",
                 "--formulation", "taylor", "--plots", str(tmp_path)]) == 0
    check(figures, {"reactions.png", "energy.png", "constraint_gap.png"})


def test_solvability_motion_plot_drops_the_pair_with_no_unique_component(figures, tmp_path):
    from vtm_dynamics.cli.solvability import main

    out = tmp_path / "motion.png"
    assert main([os.path.join(URDF, "mobile_robot_knife_edges.urdf"), "--planar", "--drive", "H:0.01", "--dt",
                 "5", "--duration", "10", "--pairs", "B,W3,W5", "--plot", str(out)]) == 0
    check(figures, {"motion.png"})
    fig = figures[0][1]
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 2  # B and W5; W3 is named in the note
    assert "W3 (Fy)" in " ".join(t.get_text() for t in fig.texts)


def _points():
    """A small synthetic matrix (one joint, 3 x 3 x 3 levels) in the shape vtm-stopping-data produces."""
    from vtm_dynamics.core.stopping.iso10218 import StoppingPoint

    out = []
    for ext in (0.33, 0.66, 1.0):
        for pay in (0.33, 0.66, 1.0):
            for spd in (0.33, 0.66, 1.0):
                a = 0.3 * spd * (0.5 + ext) * (0.8 + 0.2 * pay)
                t = 0.25 * spd * (0.6 + ext)
                out.append(StoppingPoint(0, "shoulder_lift_joint", spd, ext, pay, 3.14 * spd, 5 * pay, -1.0,
                                         (0.0,) * 6, 0.84 * ext, ext, a, t, 0.9 * a, 1.2 * a, 0.9 * t, 1.1 * t, True,
                                         0.8 * ext * a, 0.8 * ext * 1.2 * a))
    return out


def test_vendor_charts(figures, tmp_path):
    from vtm_dynamics.cli.stopping_charts import save_vendor_charts

    published = {"shoulder_lift_joint": SimpleNamespace(angle=0.70, time=0.530)}
    save_vendor_charts(str(tmp_path), _points(), "ur5", published, source="test")
    check(figures, {"ur5_cat0_shoulder_lift_joint.png"})



def test_vendor_charts_draw_points_past_a_joint_limit_apart_and_off_the_curves(figures, tmp_path):
    """A point whose stop goes past a joint limit (no end stops in the model) is not a stop the robot can make: it
    was drawn on its curve like any other. Now a cross outlined in magenta at its values, off the line, in the
    legend and explained in the notes."""
    import dataclasses

    from vtm_dynamics.cli.stopping_charts import save_vendor_charts

    crossing = ("shoulder_lift_joint reaches 3.3000 rad, past its upper limit 3.1416 rad",)
    points = [dataclasses.replace(p, limit_crossings=crossing) if p.speed_fraction == 1.0
              and p.extension_fraction == 1.0 else p for p in _points()]
    past = [p for p in points if p.limit_crossings]
    save_vendor_charts(str(tmp_path), points, "ur5", source="test")
    check(figures, {"ur5_cat0_shoulder_lift_joint.png"})
    fig = dict(figures)["ur5_cat0_shoulder_lift_joint.png"]
    for k, (value, scale, vary) in enumerate((("angle", 1.0, "extension_fraction"), ("angle", 1.0, "payload_fraction"),
                                               ("time", 1e3, "extension_fraction"), ("time", 1e3, "payload_fraction"))):
        ax = fig.axes[k]
        held = "payload_fraction" if vary == "extension_fraction" else "extension_fraction"
        want = sorted((100 * p.speed_fraction, scale * getattr(p, value)) for p in past if getattr(p, held) == 1.0)
        crosses = sorted((float(x), float(y)) for line in ax.get_lines() if line.get_marker() == "X"
                         for x, y in zip(line.get_xdata(), line.get_ydata()))
        assert len(crosses) == len(want) > 0 and np.allclose(crosses, want, rtol=1e-12, atol=0), k
        on_curves = [(float(x), float(y)) for line in ax.get_lines() if line.get_marker() == "o"
                     for x, y in zip(line.get_xdata(), line.get_ydata())]
        assert not any(np.allclose(xy, w, rtol=1e-12, atol=0) for xy in on_curves for w in want), k
    assert any("past a joint limit" in t for t in fig.axes[0].get_legend_handles_labels()[1])
    assert "past its position limit" in " ".join(t.get_text() for t in fig.texts)

def test_map_plots(figures, tmp_path):
    from vtm_dynamics.cli.stopping_charts import map_heatmaps

    rng = np.random.default_rng(3)
    n = 60
    cols = {"state": np.arange(n), "tcp_x_m": rng.uniform(-0.8, 0.8, n), "tcp_y_m": rng.uniform(-0.8, 0.8, n),
            "tcp_z_m": rng.uniform(-0.3, 0.9, n), "tcp_straight_distance_m": rng.uniform(0.0, 0.4, n),
            "stop_time_s": rng.uniform(0.05, 0.5, n), "payload_kg": rng.choice([0.0, 5.0], n),
            "speed_fraction": rng.uniform(0.1, 1.0, n), "torque_factor": rng.uniform(0.9, 1.1, n),
            "delay_factor": rng.uniform(1.0, 1.5, n)}
    map_heatmaps(cols, str(tmp_path), bins=8, top=5)
    check(figures, {"map_top_xy.png", "map_side_xz.png", "map_worst_states.png"})
    top = dict(figures)["map_top_xy.png"]
    text = " ".join(t.get_text() for t in top.texts)
    assert "white cells: no sampled state starts there" in text
    assert any("robot base" in t.get_text() for t in top.axes[0].get_legend().get_texts())


def test_map_plots_mark_the_states_that_did_not_stop_whose_colour_is_only_a_distance_so_far(figures, tmp_path):
    from vtm_dynamics.cli.stopping_charts import map_heatmaps

    rng = np.random.default_rng(4)
    n = 40
    late = np.zeros(n, bool)
    late[[3, 17, 29]] = True  # still moving at the horizon: their distance is how far they had got
    cols = {"state": np.arange(n), "tcp_x_m": rng.uniform(-0.8, 0.8, n), "tcp_y_m": rng.uniform(-0.8, 0.8, n),
            "tcp_z_m": rng.uniform(-0.3, 0.9, n), "tcp_straight_distance_m": rng.uniform(0.0, 0.4, n),
            "stop_time_s": np.where(late, np.inf, rng.uniform(0.05, 0.5, n)), "stopped": ~late,
            "payload_kg": rng.choice([0.0, 5.0], n), "speed_fraction": rng.uniform(0.1, 1.0, n),
            "torque_factor": rng.uniform(0.9, 1.1, n), "delay_factor": rng.uniform(1.0, 1.5, n)}
    map_heatmaps(cols, str(tmp_path), bins=8, top=5)
    check(figures, {"map_top_xy.png", "map_side_xz.png", "map_worst_states.png"})
    for name, (a, b) in (("map_top_xy.png", ("tcp_x_m", "tcp_y_m")), ("map_side_xz.png", ("tcp_x_m", "tcp_z_m"))):
        ax = dict(figures)[name].axes[0]
        marked = [line for line in ax.get_lines() if "did not stop" in line.get_label()]
        assert len(marked) == 1, name
        assert sorted(zip(marked[0].get_xdata(), marked[0].get_ydata())) == sorted(zip(cols[a][late], cols[b][late]))
        assert any("did not stop" in t.get_text() for t in ax.get_legend().get_texts())



def test_map_plots_mark_states_past_a_joint_limit_apart_from_those_that_did_not_stop_and_from_stops(figures,
                                                                                                     tmp_path):
    """A state whose stop goes past a joint limit (column within_limits false; no end stops in the model) came to
    rest, but not as the robot would: the heat maps drew it with the states that did not stop, and the worst states
    as an ordinary stop ("stop 0.453 s"). Now its own marker and label on the maps and a labelled, hatched bar."""
    from vtm_dynamics.cli.stopping_charts import map_heatmaps

    rng = np.random.default_rng(4)
    n = 40
    late, past = np.zeros(n, bool), np.zeros(n, bool)
    late[[3, 17]], past[[5, 29]] = True, True
    distance = rng.uniform(0.0, 0.4, n)
    distance[past] = (0.45, 0.5)  # the two largest: both among the worst states
    cols = {"state": np.arange(n), "tcp_x_m": rng.uniform(-0.8, 0.8, n), "tcp_y_m": rng.uniform(-0.8, 0.8, n),
            "tcp_z_m": rng.uniform(-0.3, 0.9, n), "tcp_straight_distance_m": distance,
            "stop_time_s": np.where(late, np.inf, rng.uniform(0.05, 0.5, n)), "stopped": ~late,
            "within_limits": ~past, "payload_kg": rng.choice([0.0, 5.0], n),
            "speed_fraction": rng.uniform(0.1, 1.0, n), "torque_factor": rng.uniform(0.9, 1.1, n),
            "delay_factor": rng.uniform(1.0, 1.5, n)}
    map_heatmaps(cols, str(tmp_path), bins=8, top=5)
    check(figures, {"map_top_xy.png", "map_side_xz.png", "map_worst_states.png"})
    for name, (a, b) in (("map_top_xy.png", ("tcp_x_m", "tcp_y_m")), ("map_side_xz.png", ("tcp_x_m", "tcp_z_m"))):
        ax = dict(figures)[name].axes[0]
        for words, rows in (("past a joint limit", past), ("did not stop", late)):
            (marked,) = [line for line in ax.get_lines() if line.get_label().startswith(words)]
            assert sorted(zip(marked.get_xdata(), marked.get_ydata())) == sorted(zip(cols[a][rows], cols[b][rows]))
        assert "past its position limit" in " ".join(t.get_text() for t in dict(figures)[name].texts)
    worst = _drawn(dict(figures)["map_worst_states.png"])
    labels = dict(zip(worst["texts"][-5:], worst["texts"][:5]))  # "state k" -> the text at its bar
    assert worst["texts"][-5:][:2] == ["state 29", "state 5"]
    for state in ("state 29", "state 5"):
        assert labels[state].strip().startswith("PAST A JOINT LIMIT") and " s," not in labels[state]
    assert not any("PAST A JOINT LIMIT" in labels[s] for s in labels if s not in ("state 29", "state 5"))


def _drawn(fig) -> dict:
    """What a map figure shows: the cells' colours (values), the marked points, the bars and their labels."""
    ax = fig.axes[0]
    meshes = [c.get_array() for c in ax.collections if hasattr(c, "get_array") and c.get_array() is not None]
    return {"cells": [np.ma.filled(np.ma.asarray(m, dtype=float), np.nan).tolist() for m in meshes],
            "points": [(line.get_label(), np.asarray(line.get_xydata()).tolist()) for line in ax.get_lines()],
            "bars": [(p.get_width(), p.get_y()) for p in ax.patches if hasattr(p, "get_y")],
            "texts": [t.get_text() for t in ax.texts] + [t.get_text() for t in ax.get_yticklabels()],
            "title": ax.get_title()}


def test_map_plots_read_a_block_at_a_time_show_what_the_whole_map_shows(figures, tmp_path):
    # a large map's file is read in blocks (two passes: the ranges, then the cells); the figures are those of all
    # rows at once, and each cell's colour is the largest distance of the states starting in it
    from vtm_dynamics.cli.stopping_charts import map_heatmaps

    rng = np.random.default_rng(8)
    n = 500
    late = rng.random(n) < 0.02
    cols = {"state": np.arange(n), "tcp_x_m": rng.uniform(-0.8, 0.8, n), "tcp_y_m": rng.uniform(-0.8, 0.8, n),
            "tcp_z_m": rng.uniform(-0.3, 0.9, n), "tcp_straight_distance_m": rng.uniform(0.0, 0.4, n),
            "stop_time_s": np.where(late, np.inf, rng.uniform(0.05, 0.5, n)), "stopped": ~late,
            "payload_kg": rng.choice([0.0, 5.0], n), "speed_fraction": rng.uniform(0.1, 1.0, n),
            "torque_factor": rng.uniform(0.9, 1.1, n), "delay_factor": rng.uniform(1.0, 1.5, n)}
    map_heatmaps(cols, str(tmp_path / "whole"), bins=8, top=5)
    whole = {name: _drawn(fig) for name, fig in figures}
    figures.clear()
    blocks = lambda: ({k: v[i:i + 37] for k, v in cols.items()} for i in range(0, n, 37))
    map_heatmaps(blocks, str(tmp_path / "blocks"), bins=8, top=5)
    assert {name: _drawn(fig) for name, fig in figures} == whole
    check(figures, {"map_top_xy.png", "map_side_xz.png", "map_worst_states.png"})
    cells = np.array(whole["map_top_xy.png"]["cells"][0])
    assert np.nanmax(cells) == cols["tcp_straight_distance_m"].max()  # the worst state's cell shows its distance
    worst = np.argsort(-cols["tcp_straight_distance_m"])[:5]
    assert whole["map_worst_states.png"]["texts"][-5:] == [f"state {k}" for k in worst]

def test_recorded_stop_overlay(figures, tmp_path):
    from vtm_dynamics.cli.stop_report import overlay_plots

    t = np.linspace(0, 0.2, 21)
    robot = SimpleNamespace(joint_names=("j1", "j2"), joints=(SimpleNamespace(units=("rad", "rad/s", "N m")),) * 2)
    stop = SimpleNamespace(t=t, q=np.column_stack([0.1 * t, -0.2 * t]), q0=np.zeros(2))
    comp = SimpleNamespace(label="bag/stop 1", predicted_t=t, predicted_q=np.column_stack([0.1 * t, -0.19 * t]))
    overlay_plots(str(tmp_path), robot, [stop], [comp])
    check(figures, {"stop_01_bag_stop_1.png"})


@pytest.fixture(scope="module")
def invalid_stops():
    """(robot, brakes, {name: prediction}) of two UR5 stops that are not the robot's: the elbow 10 mrad below its
    upper limit at 3 rad/s (it rests about 0.1 rad past the limit; test/core/limit_case.py) and the demo stop cut
    off by a 0.03 s horizon (it takes about 0.07 s)."""
    from test.core.limit_case import UR5_BRAKES, elbow_towards_limit
    from vtm_dynamics.core.estop import StopSettings, predict_stop
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.robot.catalogue import ROBOTS
    from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf

    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    brakes = brakes_from_config(robot, UR5_BRAKES)
    q, v, limit = elbow_towards_limit(robot)
    past = predict_stop(robot, brakes, q, v, tcp_frame="tool0")
    assert past.stopped and past.q_final[robot.joint_names.index("elbow_joint")] > limit + 0.1
    demo = ROBOTS["ur5"].state("demo")
    cut = predict_stop(robot, brakes, np.asarray(demo.q), np.asarray(demo.v), tcp_frame="tool0",
                       settings=StopSettings(t_max=0.03))
    assert not cut.stopped
    return robot, brakes, {"past a joint limit": past, "not at rest within the horizon": cut}


@pytest.mark.parametrize("case", ["past a joint limit", "not at rest within the horizon"])
def test_every_report_plot_of_a_stop_that_is_not_valid_says_so_in_its_title_and_foot(invalid_stops, figures,
                                                                                   tmp_path, case):
    robot, brakes, stops = invalid_stops
    p = stops[case]
    plots.prediction_report_plots(str(tmp_path), robot, p, source="test", armature=brakes.armature)
    check(figures, {"angles.png", "rates.png", "momenta.png", "energy.png"})
    for name, fig in figures:
        title = " ".join(fig.axes[0].get_title().split())
        assert title.startswith(f"NOT VALID: {case}"), (name, title)
        foot = " ".join(fig.texts[-1].get_text().split())
        assert (("elbow_joint reaches" in foot) if case == "past a joint limit" else
                ("still moving" in foot)), (name, foot)


def test_the_comparison_plots_of_a_stop_past_a_joint_limit_say_so(invalid_stops, figures, tmp_path):
    from vtm_dynamics.core.estop.braked_plant import BrakedPlant

    robot, brakes, stops = invalid_stops
    p = stops["past a joint limit"]
    plant = BrakedPlant(robot, brakes, dt=1e-3)
    plant.start(p.q[0], p.v[0])
    plant.advance(float(p.t[-1]))
    plots.prediction_vs_simulation_plots(str(tmp_path), robot, p, plant)
    check(figures, {"joint_angles_rates.png", "tcp_path.png"})
    shown = dict(figures)
    assert shown["joint_angles_rates.png"].axes[0].get_title().startswith("NOT VALID: past a joint limit")
    assert shown["tcp_path.png"].get_suptitle().startswith("NOT VALID: past a joint limit")


def test_the_report_plots_of_a_valid_stop_carry_no_mark(planar_stop, figures, tmp_path):
    robot, brakes, p = planar_stop
    plots.prediction_report_plots(str(tmp_path), robot, p, source="test", armature=brakes.armature)
    assert p.valid and not any("NOT VALID" in fig.axes[0].get_title() for _, fig in figures)

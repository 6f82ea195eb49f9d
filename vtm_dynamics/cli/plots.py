"""Plots of a predicted stop, shared by ``vtm-predict`` and ``vtm-estop-demo``: the report plots of one prediction
(joint angles, joint rates, generalized momenta M v, energy balance, events marked) and the comparison of a
prediction with the fixed-step reference simulation (angles, rates, TCP path). PNG files; matplotlib with the Agg
backend (no display needed). Units on the axes: s, rad or deg, rad/s, N m s, J, m.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from vtm_dynamics.core.estop import StopPrediction, dense_series, energy_series, generalized_momenta
from vtm_dynamics.core.estop.braked_plant import BrakedPlant
from vtm_dynamics.core.robot.model import RobotModel

EVENT_LEGEND = "dashed: brakes engage, dotted: stick/slip/release, red: abrupt lock"


def pyplot() -> Any:
    """matplotlib.pyplot on the non-interactive Agg backend (imported on first use: plotting is optional)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _mark_events(axes: Sequence[Any], events: Sequence[Any]) -> None:
    """Vertical lines at the events: grey dashed for brake engagement / power off, red for abrupt locks, dotted
    dark for stick, slip and release."""
    for e in events:
        for ax in axes:
            ax.axvline(e.time, color="0.6" if e.kind == "engage" else ("r" if e.kind == "lock" else "0.3"),
                       lw=0.8, ls="--" if e.kind in ("engage", "power_off") else ":")


def save_figure(plt: Any, fig: Any, out_dir: str, name: str, dpi: int = 110) -> str:
    """Lay out ``fig``, write it as ``out_dir/name`` and close it; returns the path."""
    path = os.path.join(out_dir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def prediction_report_plots(out_dir: str, robot: RobotModel, p: StopPrediction) -> list[str]:
    """angles.png, rates.png, momenta.png, energy.png of one prediction (cubic Hermite between the integration
    samples for smooth curves); returns the files written."""
    plt = pyplot()
    os.makedirs(out_dir, exist_ok=True)
    T, V = energy_series(robot, p)
    td, qd, vd = dense_series(p)
    vector = robot.nq == robot.nv
    mom = np.array([robot.mass_matrix(q) @ v for q, v in zip(qd, vd)]) if vector else generalized_momenta(robot, p)
    tm = td if vector else p.t
    ang = qd if vector else np.array([robot.difference(p.q[0], q) for q in p.q])
    ta = td if vector else p.t
    panels = [
        ("angles.png", "joint angle [rad]", ta, ang, robot.joint_names),
        ("rates.png", "joint rate [rad/s]", td, vd, robot.joint_names),
        ("momenta.png", "generalized momentum (M v) [N m s]", tm, mom, robot.joint_names),
        ("energy.png", "energy [J]", p.t, np.column_stack([T, V, T + V, p.brake_work, -p.impulse_loss]),
         ("kinetic", "potential", "total", "brake work", "- jump losses")),
    ]
    files = []
    for fname, ylabel, tt, data, labels in panels:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for k, lab in enumerate(labels):
            ax.plot(tt, data[:, k], label=lab)
        _mark_events([ax], p.events)
        ax.set_xlabel(f"time [s]  ({EVENT_LEGEND})")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{robot.name}: category-{p.category} stop")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        files.append(save_figure(plt, fig, out_dir, fname))
    return files


def prediction_vs_simulation_plots(out_dir: str, robot: RobotModel, p: StopPrediction,
                                   plant: BrakedPlant) -> list[str]:
    """joint_angles_rates.png (prediction solid, reference simulation dashed, events dotted) and tcp_path.png
    (top and side view of the TCP path, predicted and simulated); returns the files written."""
    plt = pyplot()
    os.makedirs(out_dir, exist_ok=True)
    names = list(robot.joint_names)
    qp = np.array([robot.difference(p.q[0], q) for q in p.q])
    ts, qs, vs = np.asarray(plant.record.t), np.asarray(plant.record.q), np.asarray(plant.record.v)
    files = []
    fig, axes = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, n in enumerate(names):
        c = colors[i % len(colors)]
        axes[0].plot(p.t, np.degrees(qp[:, i]), color=c, label=n)
        axes[0].plot(ts, np.degrees(qs[:, i] - qs[0, i]), color=c, ls="--", lw=0.9)
        axes[1].plot(p.t, p.v[:, i], color=c)
        axes[1].plot(ts, vs[:, i], color=c, ls="--", lw=0.9)
    _mark_events(axes, p.events)
    axes[0].set_ylabel("angle since E-stop [deg]")
    axes[1].set_ylabel("joint rate [rad/s]")
    axes[1].set_xlabel(f"time after the E-stop [s]  ({EVENT_LEGEND})")
    axes[0].set_title(f"{robot.name}: predicted stop (solid) vs. fixed-step simulation (dashed)")
    axes[0].legend(fontsize=7, ncol=3)
    files.append(save_figure(plt, fig, out_dir, "joint_angles_rates.png", dpi=120))

    if p.tcp_positions is not None:
        tcp_sim = np.array([robot.frame_placement(q, p.tcp_frame).translation for q in qs])
        fig, ax = plt.subplots(1, 2, figsize=(10, 4.5))
        for k, (a, b, la, lb) in enumerate(((0, 1, "x [m]", "y [m]"), (0, 2, "x [m]", "z [m]"))):
            ax[k].plot(p.tcp_positions[:, a], p.tcp_positions[:, b], label="predicted")
            ax[k].plot(tcp_sim[:, a], tcp_sim[:, b], ls="--", label="simulated")
            ax[k].plot(*p.tcp_positions[0, [a, b]], "go", label="E-stop")
            ax[k].plot(*p.tcp_positions[-1, [a, b]], "rs", label="rest")
            ax[k].set_xlabel(la)
            ax[k].set_ylabel(lb)
            ax[k].axis("equal")
        ax[0].legend(fontsize=8)
        fig.suptitle(f"{p.tcp_frame} path during the stop: {p.tcp_path_length * 1e3:.1f} mm "
                     f"(straight {p.tcp_straight_distance * 1e3:.1f} mm)")
        files.append(save_figure(plt, fig, out_dir, "tcp_path.png", dpi=120))
    return files

"""Plots of a trajectory check: clearance and stopping distance along the trajectory (clearance.png) and the worst
stopping path in the scene as a top and a side view (worst_stop.png). PNG, matplotlib's Agg backend. Units on the
axes: s, m. E-stop instants whose stop goes past a joint limit are drawn apart (open magenta triangles): they are
unsafe whatever their clearance, and their stopping distance is not one the robot can make.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from vtm_dynamics.cli.plots import pyplot, save_figure
from vtm_dynamics.core.stopsafe.results import TrajectoryCheck
from vtm_dynamics.core.stopsafe.scene import Obstacle, Scene
from vtm_dynamics.core.stopsafe.viewer_data import worst_stop_paths


def clearance_plot(out_dir: str, result: TrajectoryCheck) -> str:
    plt = pyplot()
    t = result.times
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    c = result.column("clearance")
    cert = result.column("certified_clearance")
    ax1.plot(t, c, "-", color="C0", lw=1.2, label="clearance to the scene (smallest over the cases)")
    ax1.fill_between(t, cert, c, color="C0", alpha=0.2, label="resolution + sampling bound")
    sc = result.column("self_clearance")
    if np.isfinite(sc).any():
        ax1.plot(t, sc, "-", color="C2", lw=1.0, label="clearance between the robot's parts")
    ax1.axhline(result.margin, color="r", ls="--", lw=1.0, label=f"margin {result.margin:g} m")
    past = np.array([bool(s.limit_crossings) for s in result.samples], dtype=bool)
    bad = np.array([not s.safe for s in result.samples], dtype=bool) & ~past
    if bad.any():
        ax1.plot(t[bad], cert[bad], "rx", ms=5, label="unsafe E-stop instants")
    if past.any():  # unsafe whatever their clearance: the model has no end stops
        ax1.plot(t[past], cert[past], "v", color="m", ms=7, mfc="none", mew=1.4,
                 label=f"unsafe: a stop goes past a joint limit ({int(past.sum())})")
    ax1.set_ylabel("clearance during the stop [m]")
    finite = np.concatenate([x[np.isfinite(x)] for x in (c, cert, sc)])
    if finite.size:
        lo, hi = min(float(finite.min()), result.margin), float(np.percentile(finite, 98))
        ax1.set_ylim(lo - 0.1 * (hi - lo + 1e-3), hi + 0.1 * (hi - lo + 1e-3))
    ax1.legend(fontsize=8, loc="best")
    ax1.grid(alpha=0.3)
    n = len(result.cases)
    ax1.set_title(f"Stop-safe check: {len(t)} E-stop instants x {n} case{'s' if n != 1 else ''}", fontsize=10)
    td = result.column("tcp_distance")
    ax2.plot(t, td, "-", color="C1", lw=1.2, label="TCP stopping distance [m]")
    if past.any():  # a distance without end stops, not the robot's: marked like the instants above
        ax2.plot(t[past], td[past], "v", color="m", ms=7, mfc="none", mew=1.4,
                 label="past a joint limit: not a stop the robot can make")
        ax2.legend(fontsize=8, loc="best")
    ax2.set_ylabel("TCP stopping distance [m]", color="C1")
    ax3 = ax2.twinx()
    ax3.plot(t, result.column("stop_time"), "-", color="C4", lw=1.0, label="stop time [s]")
    ax3.set_ylabel("stop time [s]", color="C4")
    ax2.set_xlabel("E-stop instant on the trajectory [s]")
    ax2.grid(alpha=0.3)
    return save_figure(plt, fig, out_dir, "clearance.png")


def _outline(ob: Obstacle, axes: tuple[int, int]) -> np.ndarray:
    """Projected outline points of an obstacle (convex hull of its projected surface samples)."""
    from scipy.spatial import ConvexHull

    R, p = ob.rotation, ob.position
    if ob.kind == "box":
        h = 0.5 * np.array(ob.dimensions)
        local = np.array([[sx * h[0], sy * h[1], sz * h[2]] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
    elif ob.kind == "sphere":
        r = ob.dimensions[0]
        a = np.linspace(0, 2 * np.pi, 48)
        local = np.concatenate([np.column_stack((r * np.cos(a), r * np.sin(a), np.zeros_like(a))),
                                np.column_stack((r * np.cos(a), np.zeros_like(a), r * np.sin(a))),
                                np.column_stack((np.zeros_like(a), r * np.cos(a), r * np.sin(a)))])
    elif ob.kind in ("cylinder", "cone"):
        height, r = ob.dimensions
        a = np.linspace(0, 2 * np.pi, 48)
        ring = np.column_stack((r * np.cos(a), r * np.sin(a)))
        local = np.concatenate([np.column_stack((ring, np.full(len(a), z))) for z in (-height / 2, height / 2)])
    else:
        local = ob.vertices
    pts = (local @ R.T + p)[:, axes]
    try:
        return pts[ConvexHull(pts).vertices]
    except Exception:  # noqa: BLE001 - a flat projection: its points
        return pts


def worst_stop_plot(out_dir: str, geometry: Any, scene: Scene, result: TrajectoryCheck, tcp_frame: str | None) -> str:
    plt = pyplot()
    data = worst_stop_paths(geometry, result.worst, tcp_frame)
    fig, axs = plt.subplots(1, 2, figsize=(11, 5.2))
    for ax, axes, labels in ((axs[0], (0, 1), ("x [m]", "y [m]")), (axs[1], (0, 2), ("x [m]", "z [m]"))):
        for ob in scene.obstacles:
            poly = _outline(ob, axes)
            ax.fill(poly[:, 0], poly[:, 1], color="0.75", alpha=0.6, lw=0.8, ec="0.4")
            ax.annotate(ob.name, poly.mean(axis=0), fontsize=7, ha="center", color="0.25")
        if scene.floor_height is not None and axes[1] == 2:
            ax.axhline(scene.floor_height, color="0.4", lw=2.0)
            ax.annotate("floor", (0.02, scene.floor_height), xycoords=("axes fraction", "data"), fontsize=7,
                        va="bottom", color="0.3")
        for k, case in enumerate(data["cases"]):
            closest = k == data["case"]
            start = np.array(case["skeleton_start"])[:, axes]
            end = np.array(case["skeleton_end"])[:, axes]
            if k == 0:
                ax.plot(start[:, 0], start[:, 1], "o-", color="C0", lw=2.0, ms=3, label="arm at the E-stop")
            if closest:
                ax.plot(end[:, 0], end[:, 1], "o-", color="C3", lw=2.0, ms=3, label="arm at rest (closest case)")
            if "tcp_path" in case:
                tp = np.array(case["tcp_path"])[:, axes]
                ax.plot(tp[:, 0], tp[:, 1], "-", color="C1" if closest else "0.6", lw=1.4 if closest else 0.6,
                        label="TCP path (closest case)" if closest else None)
        if data["witness_path"] is not None:
            wp = np.array(data["witness_path"])[:, axes]
            ax.plot(wp[:, 0], wp[:, 1], "-", color="C4", lw=1.4, label=f"path of the closest point of {data['pair'][0]}")
        pts = np.array(data["closest_points"])
        if np.all(np.isfinite(pts)):
            ax.plot(pts[:, axes[0]], pts[:, axes[1]], "k.-", lw=1.0, ms=6, label="closest points")
        ax.set_xlabel(labels[0])
        ax.set_ylabel(labels[1])
        ax.set_aspect("equal", adjustable="datalim")
        ax.grid(alpha=0.3)
    axs[0].set_title("top view", fontsize=10)
    axs[1].set_title("side view", fontsize=10)
    w = result.worst
    fig.suptitle(f"Worst stop: E-stop at t = {w.sample.time:.3f} s, {w.pair[0]} - {w.pair[1]} "
                 f"clearance {w.sample.clearance if w.kind == 'scene' else w.sample.self_clearance:.4f} m, "
                 f"case {result.cases[w.case]}", fontsize=9)
    axs[1].legend(fontsize=7, loc="best")
    return save_figure(plt, fig, out_dir, "worst_stop.png")


def check_plots(out_dir: str, loaded: Any, scene: Scene, result: TrajectoryCheck) -> list[str]:
    """clearance.png and (when there is a worst stop) worst_stop.png in ``out_dir``; the files written."""
    files = [clearance_plot(out_dir, result)]
    if result.worst is not None:
        files.append(worst_stop_plot(out_dir, loaded.geometry, scene, result, loaded.tcp_frame))
    return [os.path.abspath(f) for f in files]

"""Charts of stopping data (vendor-manual style) and of workspace stopping maps (matplotlib, Agg backend).

Vendor style: per stop category and tested joint, stopping distance [rad] and stopping time [s] against speed
[% of maximum], one curve per extension (at 100 % payload) and one per payload (at 100 % extension), the envelope
band shaded. Maps: heat maps of the worst TCP stopping distance per cell of the TCP's start position (top view
x-y and side view x-z), and the worst states.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from vtm_dynamics.cli.plots import pyplot
from vtm_dynamics.core.stopping.iso10218 import StoppingPoint


def _curves(points: Sequence[StoppingPoint], category: int, joint: str, vary: str) -> list[tuple[float, list[StoppingPoint]]]:
    """Groups of points (sorted by speed) of one category and joint, varying ``extension`` or ``payload``."""
    fixed = "payload_fraction" if vary == "extension" else "extension_fraction"
    key = "extension_fraction" if vary == "extension" else "payload_fraction"
    sel = [p for p in points if p.category == category and p.joint == joint and getattr(p, fixed) == 1.0]
    levels = sorted({getattr(p, key) for p in sel})
    return [(lv, sorted((p for p in sel if getattr(p, key) == lv), key=lambda p: p.speed_fraction)) for lv in levels]


def vendor_chart(points: Sequence[StoppingPoint], category: int, joint: str, title: str = "") -> Any:
    """One figure: 2 x 2 axes (distance / time against speed; by extension / by payload) with envelope bands."""
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
    for col, vary in enumerate(("extension", "payload")):
        for lv, pts in _curves(points, category, joint, vary):
            x = [100 * p.speed_fraction for p in pts]
            label = f"{vary} {lv:.0%}"
            actual = pts[0].extension_actual
            if vary == "extension" and abs(actual - lv) > 0.005:
                label += f" (reached {actual:.0%})"
            for row, (val, lo, hi) in enumerate((("angle", "angle_min", "angle_max"), ("time", "time_min", "time_max"))):
                ax = axes[row][col]
                line, = ax.plot(x, [getattr(p, val) for p in pts], marker="o", label=label)
                ax.fill_between(x, [getattr(p, lo) for p in pts], [getattr(p, hi) for p in pts],
                                color=line.get_color(), alpha=0.15)
        axes[0][col].set_title(f"by {vary} (other at 100 %)")
        axes[0][col].set_ylabel("stopping distance [rad]")
        axes[1][col].set_ylabel("stopping time [s]")
        axes[1][col].set_xlabel("speed [% of maximum]")
        for row in range(2):
            axes[row][col].grid(True, alpha=0.3)
            axes[row][col].legend(fontsize=8)
    fig.suptitle(title or f"stop category {category}, {joint} (band: envelope of brake torque and delay)")
    fig.tight_layout()
    return fig


def save_vendor_charts(out_dir: str, points: Sequence[StoppingPoint], robot_name: str) -> list[str]:
    """PNG per category and joint: ``<robot>_cat<c>_<joint>.png``; returns the paths."""
    plt = pyplot()
    os.makedirs(out_dir, exist_ok=True)
    files = []
    for cat in sorted({p.category for p in points}):
        for joint in dict.fromkeys(p.joint for p in points):
            fig = vendor_chart(points, cat, joint, f"{robot_name}: stop category {cat}, {joint}")
            path = os.path.join(out_dir, f"{robot_name}_cat{cat}_{joint}.png")
            fig.savefig(path, dpi=100)
            plt.close(fig)
            files.append(path)
    return files


def map_heatmaps(columns: dict[str, np.ndarray], out_dir: str, bins: int = 20, top: int = 15) -> list[str]:
    """``map_top_xy.png``, ``map_side_xz.png`` (worst TCP stopping distance per cell) and ``map_worst_states.png``."""
    plt = pyplot()
    os.makedirs(out_dir, exist_ok=True)
    dist = np.asarray(columns["tcp_straight_distance_m"], dtype=float)
    files = []
    for name, (a, b) in (("map_top_xy.png", ("tcp_x_m", "tcp_y_m")), ("map_side_xz.png", ("tcp_x_m", "tcp_z_m"))):
        x, y = np.asarray(columns[a], float), np.asarray(columns[b], float)
        ok = np.isfinite(x) & np.isfinite(y) & np.isfinite(dist)
        fig, ax = plt.subplots(figsize=(6.5, 5.5))
        if ok.any():
            xe = np.linspace(x[ok].min(), x[ok].max() + 1e-9, bins + 1)
            ye = np.linspace(y[ok].min(), y[ok].max() + 1e-9, bins + 1)
            grid = np.full((bins, bins), np.nan)
            ix = np.clip(np.searchsorted(xe, x[ok], side="right") - 1, 0, bins - 1)
            iy = np.clip(np.searchsorted(ye, y[ok], side="right") - 1, 0, bins - 1)
            for i, j, d in zip(ix, iy, dist[ok]):
                grid[j, i] = d if np.isnan(grid[j, i]) else max(grid[j, i], d)
            mesh = ax.pcolormesh(xe, ye, grid, cmap="viridis", shading="flat")
            fig.colorbar(mesh, ax=ax, label="worst TCP stopping distance in cell [m]")
        ax.set_xlabel(f"TCP {a[4]} at the stop [m]")
        ax.set_ylabel(f"TCP {b[4]} at the stop [m]")
        ax.set_title(f"worst stopping distance, {'top' if b == 'tcp_y_m' else 'side'} view ({ok.sum()} states)")
        ax.set_aspect("equal", adjustable="box")
        fig.tight_layout()
        path = os.path.join(out_dir, name)
        fig.savefig(path, dpi=100)
        plt.close(fig)
        files.append(path)
    order = np.argsort(-np.where(np.isfinite(dist), dist, -np.inf))[:top]
    fig, ax = plt.subplots(figsize=(8, 5))
    labels = [f"#{int(columns['state'][k])} s={columns['speed_fraction'][k]:.2f} m={columns['payload_kg'][k]:.1f}kg"
              for k in order]
    ax.barh(range(len(order))[::-1], dist[order])
    ax.set_yticks(range(len(order))[::-1], labels, fontsize=7)
    ax.set_xlabel("TCP stopping distance [m]")
    ax.set_title(f"the {len(order)} worst states (state, speed fraction, payload)")
    fig.tight_layout()
    path = os.path.join(out_dir, "map_worst_states.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    files.append(path)
    return files

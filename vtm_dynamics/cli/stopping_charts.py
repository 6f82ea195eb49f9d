"""Charts of stopping data (vendor-manual style) and of workspace stopping maps (matplotlib, Agg backend).

Vendor style: per stop category and tested joint, stopping angle [rad] and stopping time [ms] against speed
[% of maximum, and rad/s], one curve per extension (at 100 % payload) and one per payload (at 100 % extension),
each level with its absolute value, the envelope band shaded. Maps: heat maps of the worst TCP stopping distance per
cell of the TCP's start position (top view x-y and side view x-z), and the worst states.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from vtm_dynamics.cli.plots import pyplot
from vtm_dynamics.core.estop.defaults import ENVELOPE_DELAY_FACTOR, ENVELOPE_TORQUE_FACTOR, HORIZON

if TYPE_CHECKING:
    from vtm_dynamics.core.stopping.iso10218 import StoppingPoint

BAND_NOTE = (f"shaded: the envelope band (brake torque x {ENVELOPE_TORQUE_FACTOR[0]:g}-{ENVELOPE_TORQUE_FACTOR[1]:g}, "
             f"engage delay x {ENVELOPE_DELAY_FACTOR[0]:g}-{ENVELOPE_DELAY_FACTOR[1]:g}); its upper edge is the value "
             "for safety calculations.")
NOT_STOPPED_NOTE = (f"triangles: the arm had not come to rest within the {HORIZON:g} s horizon (nominal or a band "
                    "corner): the time is unbounded (drawn above the dashed line, off scale) and the angle is the one "
                    "reached by then, a lower bound; a longer horizon or stronger brakes are needed for a value.")
NOT_STOPPED_LABEL = f"not at rest within {HORIZON:g} s"
PAST_LIMIT_NOTE = ("crosses (X, outlined in magenta): the stop (nominal or a band corner) carries a joint past its "
                   "position limit; the model has no end stops, so the angle and time drawn are not a stop the robot "
                   "can make (an end stop would end it) and no value for safety calculations; the line and band "
                   "leave them out.")
PAST_LIMIT_LABEL = "past a joint limit: not a stop"
PAST_LIMIT_EDGE = "m"  # the outline that sets these points apart from the curves' own markers


def _past_limit(p: StoppingPoint) -> bool:
    """A point that came to rest, but past a joint limit (a point still moving at the horizon is marked as such)."""
    return bool(p.stopped and p.limit_crossings)


def _curves(points: Sequence[StoppingPoint], category: int, joint: str, vary: str) -> list[tuple[float, list[StoppingPoint]]]:
    """Groups of points (sorted by speed) of one category and joint, varying ``extension`` or ``payload``."""
    fixed = "payload_fraction" if vary == "extension" else "extension_fraction"
    key = "extension_fraction" if vary == "extension" else "payload_fraction"
    sel = [p for p in points if p.category == category and p.joint == joint and getattr(p, fixed) == 1.0]
    levels = sorted({getattr(p, key) for p in sel})
    return [(lv, sorted((p for p in sel if getattr(p, key) == lv), key=lambda p: p.speed_fraction)) for lv in levels]


def vendor_chart(points: Sequence[StoppingPoint], category: int, joint: str, title: str = "", fig: Any = None,
                 published: Any = None, notes: list[str] | None = None) -> Any:
    """2 x 2 axes (stopping angle / time against speed; by extension at 100 % payload / by payload at 100 %
    extension), each level with its absolute value (m, kg), the envelope band shaded (its upper edge is the value
    for safety calculations), the speed also in rad/s on the top axis, the ``published`` figure (an object with
    ``angle`` [rad] and ``time`` [s]) marked at 100 %. Points where the arm did not come to rest within the
    horizon (nominal or a band corner) are triangles: on the time axes at the top edge (unbounded), on the angle
    axes at the band's upper edge (reached by the horizon, a lower bound); the line and band stop short of them.
    Points whose stop goes past a joint limit are drawn apart as crosses outlined in magenta at their values, left
    out of the line and band (no end stops in the model: not a stop the robot can make). Drawn into ``fig`` (a report page) or a new figure; curves that lie on top of each other are named in
    ``notes`` (and on the page)."""
    from vtm_dynamics.cli.plots import overlap_note

    plt = pyplot()
    hidden: list[str] = []
    curves: dict[tuple[int, int], list] = {}
    own = fig is None
    if own:
        fig = plt.figure(figsize=(11.0, 8.0), layout="constrained")
        gs = fig.add_gridspec(2, 2)
    else:
        late = any(not p.stopped or _past_limit(p) for p in points if p.category == category and p.joint == joint)
        gs = fig.add_gridspec(2, 2, left=0.07, right=0.97, top=0.80, bottom=0.23 if late else 0.17, hspace=0.12,
                              wspace=0.16)  # room for a second legend row and the note on the not stopped
    axes = [[fig.add_subplot(gs[r, c]) for c in range(2)] for r in range(2)]
    for col in range(2):
        axes[1][col].sharex(axes[0][col])
    full_speed = None
    tops: dict[tuple[int, int], list[float]] = {}  # finite values per panel: an unbounded band edge is off scale
    flagged: set[int] = set()  # columns with points that did not come to rest
    crossed: set[int] = set()  # columns with points past a joint limit
    for col, vary in enumerate(("extension", "payload")):
        for n_curve, (lv, pts) in enumerate(_curves(points, category, joint, vary)):
            x = [100 * p.speed_fraction for p in pts]
            full_speed = pts[0].speed / pts[0].speed_fraction
            if vary == "extension":
                label = f"{lv:.0%} ({pts[0].reach:.2f} m)"
                if abs(pts[0].extension_actual - lv) > 0.005:
                    label = f"{lv:.0%}, reached {pts[0].extension_actual:.0%} ({pts[0].reach:.2f} m)"
            else:
                label = f"{lv:.0%} ({pts[0].payload:.2f} kg)"
            late = [k for k, p in enumerate(pts) if not p.stopped]
            past = np.array([_past_limit(p) for p in pts], dtype=bool)
            for row, (val, lo, hi, scale) in enumerate((("angle", "angle_min", "angle_max", 1.0),
                                                        ("time", "time_min", "time_max", 1e3))):
                ax = axes[row][col]
                y = np.array([scale * getattr(p, val) for p in pts])
                upper = np.array([scale * getattr(p, hi) for p in pts])
                finite = np.isfinite(y) & ~past
                line, = ax.plot(np.array(x)[finite], y[finite], marker="o", label=label)
                curves.setdefault((row, col), []).append((f"{vary} {label.split(' ')[0]}", np.array(x, float), y))
                ax.fill_between(x, np.where(past, np.nan, [scale * getattr(p, lo) for p in pts]),
                                np.where(past, np.nan, np.where(np.isfinite(upper), upper, 1e12)),
                                color=line.get_color(), alpha=0.15)
                tops.setdefault((row, col), []).extend(v for v in (*y, *upper[~past]) if np.isfinite(v))
                if past.any():  # the values of a motion without end stops: drawn apart, never on the curve
                    ax.plot(np.array(x)[past], y[past], marker="X", ms=10, ls="none", color=line.get_color(),
                            markeredgecolor=PAST_LIMIT_EDGE, mew=1.5, zorder=6)
                    crossed.add(col)
                if late:  # the time off scale at the top edge; the angle reached by the horizon, a lower bound
                    edge = 0.965 - 0.05 * n_curve  # one row of triangles per curve: none hides another
                    where = (ax.get_xaxis_transform(), [edge] * len(late)) if row == 1 else \
                        (ax.transData, [upper[k] for k in late])
                    ax.plot([x[k] for k in late], where[1], transform=where[0], marker="^", ms=10, ls="none",
                            color=line.get_color(), markeredgecolor="k", clip_on=False, zorder=5)
                    flagged.add(col)
        if published is not None:
            axes[0][col].plot([100], [published.angle], marker="*", ms=12, color="k", ls="none",
                              label="published (100 %, 100 %)")
            axes[1][col].plot([100], [1e3 * published.time], marker="*", ms=12, color="k", ls="none")
        _column_labels(axes[0][col], axes[1][col], vary, col in flagged, col in crossed)
        if full_speed:
            top = axes[0][col].secondary_xaxis("top", functions=(lambda pct, v=full_speed: pct * v / 100,
                                                                  lambda w, v=full_speed: 100 * w / v))
            top.set_xlabel("speed [rad/s]", fontsize=8)
            top.tick_params(labelsize=7)
    for (row, col), values in tops.items():
        if col in flagged:  # the scale of the finite values (and the published figure); the unbounded off it
            if published is not None:
                values = values + [(published.angle, 1e3 * published.time)[row]]
            top = max(values, default=0.0)
            axes[row][col].set_ylim(0.0, (1.12 if row == 0 else 1.35) * top if top > 0 else 1.0)
            if row == 1:  # the scale ends at the dashed line: the triangles above it are unbounded times
                ax = axes[row][col]
                ax.plot([0.0, 1.0], [0.83, 0.83], transform=ax.transAxes, ls="--", lw=0.9, color="k")
    for (row, col), drawn in curves.items():
        what = ("angle", "time")[row]
        hidden += [f"{what}: {n}" for n in overlap_note(axes[row][col], drawn)]
    if notes is not None:
        notes.extend(hidden)
    heading = title or f"stop category {category}, {joint}"
    if own:
        fig.suptitle(heading, fontsize=10)
    else:
        fig.text(0.04, 0.885, heading, fontsize=10, va="top")
        fig.text(0.04, 0.045, "Note: " + BAND_NOTE + (" " + NOT_STOPPED_NOTE[0].upper() + NOT_STOPPED_NOTE[1:]
                                                        if flagged else "")
                 + (" " + PAST_LIMIT_NOTE[0].upper() + PAST_LIMIT_NOTE[1:] if crossed else "")
                 + ("" if not hidden else " Curves on top of each other: " + "; ".join(hidden) + "."),
                 fontsize=7.5, wrap=True)
    return fig


def _column_labels(angle_ax: Any, time_ax: Any, vary: str, late: bool, past: bool) -> None:
    """Titles, axis labels, grid and the legend (under the time axes) of one column of :func:`vendor_chart`, with
    the entries of the points that did not come to rest (``late``) and of those past a joint limit (``past``)."""
    if late:
        angle_ax.plot([], [], marker="^", ms=10, ls="none", color="w", markeredgecolor="k", label=NOT_STOPPED_LABEL)
    if past:
        angle_ax.plot([], [], marker="X", ms=10, ls="none", color="w", markeredgecolor=PAST_LIMIT_EDGE, mew=1.5,
                      label=PAST_LIMIT_LABEL)
    angle_ax.set_title(f"by {vary} ({'payload' if vary == 'extension' else 'extension'} at 100 %)", fontsize=9)
    angle_ax.set_ylabel("stopping angle of the joint [rad]")
    time_ax.set_ylabel("stopping time [ms]")
    time_ax.set_xlabel("speed of the tested joint [% of maximum]")
    for ax in (angle_ax, time_ax):
        ax.grid(True, alpha=0.3)
    angle_ax.tick_params(labelbottom=False)
    time_ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False,
                   ncol=3 if late or past else 4, title=vary + " level" + (" (reach)" if vary == "extension" else
                                                                           " (mass)"),
                   title_fontsize=7.5, handles=angle_ax.get_legend_handles_labels()[0])


def save_vendor_charts(out_dir: str, points: Sequence[StoppingPoint], robot_name: str, published: dict | None = None,
                       source: str | None = None, charted: dict[int, Sequence[str]] | None = None) -> list[str]:
    """PNG per category and joint (``charted``: the joints per category; default every one):
    ``<robot>_cat<c>_<joint>.png``; returns the paths."""
    from vtm_dynamics.cli.plots import save_figure_at

    plt = pyplot()
    os.makedirs(out_dir, exist_ok=True)
    files = []
    if charted is None:
        charted = {c: tuple(dict.fromkeys(p.joint for p in points if p.category == c))
                   for c in sorted({p.category for p in points})}
    for cat, joints in charted.items():
        for joint in joints:
            pub = (published or {}).get(joint) if cat == 0 else None
            hidden: list[str] = []
            fig = vendor_chart(points, cat, joint, f"{robot_name}: stop category {cat}, {joint} (simulated)",
                               published=pub, notes=hidden)
            path = os.path.join(out_dir, f"{robot_name}_cat{cat}_{joint}.png")
            late = any(not p.stopped for p in points if p.category == cat and p.joint == joint)
            past = any(_past_limit(p) for p in points if p.category == cat and p.joint == joint)
            files.append(save_figure_at(plt, fig, path, source, [BAND_NOTE] + [NOT_STOPPED_NOTE] * late
                                        + [PAST_LIMIT_NOTE] * past
                                        + [f"on top of each other: {h}" for h in hidden], dpi=100))
    return files


def _map_source(summary: dict | None) -> str | None:
    if not summary or "mapped" not in summary:
        return None
    m, sw = summary["mapped"], summary["software"]
    return (f"{m['robot']} (URDF {m['model_sha256'][:10]}), brakes {os.path.basename(m['brakes_file'])} "
            f"({m['brakes_sha256'][:10]}), payload {', '.join(f'{x:g}' for x in m['payloads_kg'])} kg, speed "
            f"{m['speed_fraction'][0]:g}-{m['speed_fraction'][1]:g}, torque x {m['torque_factor'][0]:g}-"
            f"{m['torque_factor'][1]:g}, delay x {m['delay_factor'][0]:g}-{m['delay_factor'][1]:g}, category "
            f"{m['category']}, inputs {summary['inputs_hash'][:10]}; {sw['name']} {sw['version']}"
            + (f" {sw['git_commit']}" if sw["git_commit"] else ""))


#: the columns the map's charts read (a map's file is read a block at a time, these columns only)
HEATMAP_COLUMNS = ("state", "tcp_x_m", "tcp_y_m", "tcp_z_m", "tcp_straight_distance_m", "stop_time_s", "stopped",
                   "within_limits", "payload_kg", "speed_fraction", "torque_factor", "delay_factor")
_VIEWS = (("map_top_xy.png", ("tcp_x_m", "tcp_y_m")), ("map_side_xz.png", ("tcp_x_m", "tcp_z_m")))
_WORST_COLUMNS = ("state", "tcp_straight_distance_m", "stop_time_s", "payload_kg", "speed_fraction", "torque_factor",
                  "delay_factor")


def _at_rest(block: dict) -> np.ndarray:
    """Whether each state came to rest within the horizon (a map without the ``stopped`` column: a finite time)."""
    return np.asarray(block["stopped"], dtype=bool) if "stopped" in block else \
        np.isfinite(np.asarray(block["stop_time_s"], dtype=float))


def _past_limits(block: dict) -> np.ndarray:
    """Whether each state came to rest past a joint limit (``within_limits`` false; none in a map without it)."""
    if "within_limits" not in block:
        return np.zeros(len(block["stop_time_s"]), dtype=bool)
    return _at_rest(block) & ~np.asarray(block["within_limits"], dtype=bool)


def _view_rows(block: dict, a: str, b: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """x, y, distance and the rows drawn (start and distance finite) of one view of a block."""
    x, y = np.asarray(block[a], float), np.asarray(block[b], float)
    dist = np.asarray(block["tcp_straight_distance_m"], dtype=float)
    return x, y, dist, np.isfinite(x) & np.isfinite(y) & np.isfinite(dist)


def _map_extents(passes: Any, top: int) -> tuple[dict, dict, dict, dict]:
    """One pass: per view the start positions' range, reach and count, the states that did not stop and those that
    came to rest past a joint limit (their starts), and the ``top`` rows of the largest distance (the first of equal
    ones) with whether they stopped (``at_rest``) and went past a limit (``past_limit``)."""
    extent: dict[str, list] = {}
    late: dict[str, tuple[list, list]] = {name: ([], []) for name, _ in _VIEWS}
    crossed: dict[str, tuple[list, list]] = {name: ([], []) for name, _ in _VIEWS}
    worst: dict[str, np.ndarray] | None = None
    keep = _WORST_COLUMNS + ("at_rest", "past_limit")
    for block in passes():
        stopped, past = _at_rest(block), _past_limits(block)
        for name, (a, b) in _VIEWS:
            x, y, _, ok = _view_rows(block, a, b)
            if not ok.any():
                continue
            reach = float(np.max(np.hypot(x[ok], y[ok]) if b == "tcp_y_m" else np.abs(x[ok])))
            e = [x[ok].min(), x[ok].max(), y[ok].min(), y[ok].max(), reach, int(ok.sum())]
            old = extent.get(name)
            extent[name] = e if old is None else [min(old[0], e[0]), max(old[1], e[1]), min(old[2], e[2]),
                                                  max(old[3], e[3]), max(old[4], e[4]), old[5] + e[5]]
            late[name][0].append(x[ok & ~stopped])
            late[name][1].append(y[ok & ~stopped])
            crossed[name][0].append(x[ok & past])
            crossed[name][1].append(y[ok & past])
        rows = {c: np.asarray(block[c]) for c in _WORST_COLUMNS}
        rows.update(at_rest=stopped, past_limit=past)
        if worst is not None:
            rows = {c: np.concatenate([worst[c], rows[c]]) for c in keep}
        d = np.asarray(rows["tcp_straight_distance_m"], dtype=float)
        order = np.argsort(-np.where(np.isfinite(d), d, -np.inf), kind="stable")[:top]
        worst = {c: rows[c][order] for c in keep}

    def joined(starts: dict) -> dict:
        return {name: (np.concatenate(xs) if xs else np.empty(0), np.concatenate(ys) if ys else np.empty(0))
                for name, (xs, ys) in starts.items()}

    return extent, joined(late), joined(crossed), worst or {c: np.empty(0) for c in keep}


def map_heatmaps(columns: dict[str, np.ndarray] | Any, out_dir: str, bins: int = 20, top: int = 15,
                 summary: dict | None = None) -> list[str]:
    """``map_top_xy.png``, ``map_side_xz.png`` (worst TCP stopping distance per cell of the TCP's start position,
    the robot base and the largest start distance from the base axis drawn, blank cells explained) and
    ``map_worst_states.png`` (the worst states with their stop time, payload, speed and brake factors). States that
    did not stop within the horizon (red x) and states whose stop goes past a joint limit (magenta crosses: no end
    stops in the model, not a stop the robot can make) are marked apart on the heat maps; on the worst states their
    bars are hatched and labelled.

    ``columns``: the map's rows in memory, or passes over them a block at a time
    (:func:`vtm_dynamics.scaleout.result_file.result_passes` of :data:`HEATMAP_COLUMNS`): two passes, holding the
    cells, the ``top`` worst rows and the start of each state that did not stop (16 bytes each), never the map."""
    from matplotlib.patches import Circle

    from vtm_dynamics.cli.plots import new_figure, save_figure_at
    from vtm_dynamics.core.stopping.map_summary import passes_of

    passes = passes_of(columns) if isinstance(columns, dict) else columns
    plt = pyplot()
    os.makedirs(out_dir, exist_ok=True)
    extent, late_xy, past_xy, worst = _map_extents(passes, top)
    edges, grids = {}, {}
    for name, e in extent.items():
        lo_x, hi_x = min(e[0], -0.05 * e[4]), max(e[1], 0.05 * e[4])
        lo_y, hi_y = min(e[2], -0.05 * e[4]), max(e[3], 0.05 * e[4])
        edges[name] = (np.linspace(lo_x, hi_x + 1e-9, bins + 1), np.linspace(lo_y, hi_y + 1e-9, bins + 1))
        grids[name] = np.full((bins, bins), np.nan)
    for block in passes() if extent else ():  # second pass: the largest distance of each cell
        for name, (a, b) in _VIEWS:
            if name not in extent:
                continue
            x, y, dist, ok = _view_rows(block, a, b)
            xe, ye = edges[name]
            ix = np.clip(np.searchsorted(xe, x[ok], side="right") - 1, 0, bins - 1)
            iy = np.clip(np.searchsorted(ye, y[ok], side="right") - 1, 0, bins - 1)
            np.fmax.at(grids[name], (iy, ix), dist[ok])  # fmax: an empty (nan) cell takes the distance
    robot = summary["mapped"]["robot"] if summary and "mapped" in summary else "robot"
    source = _map_source(summary)
    files = []
    for name, (a, b) in _VIEWS:
        top_view = b == "tcp_y_m"
        late_x, late_y = late_xy[name]
        past_x, past_y = past_xy[name]
        fig, ax = new_figure(plt, 7.5, 7.0)
        if name in extent:
            reach = extent[name][4]
            xe, ye = edges[name]
            mesh = ax.pcolormesh(xe, ye, grids[name], cmap="viridis", shading="flat")
            fig.colorbar(mesh, ax=ax, shrink=0.8, label="worst TCP stopping distance in the cell [m]")
            if late_x.size:
                ax.plot(late_x, late_y, marker="x", color="red", ms=7, mew=1.5, ls="none",
                        label=f"did not stop within the horizon ({late_x.size}): distance unknown")
            if past_x.size:
                ax.plot(past_x, past_y, marker="X", color="none", markeredgecolor=PAST_LIMIT_EDGE, ms=8, mew=1.5,
                        ls="none", label=f"past a joint limit ({past_x.size}): not a stop, distance unknown")
            ax.plot([0.0], [0.0], marker="P", color="k", ms=10, ls="none", label="robot base (world origin)")
            if top_view:
                ax.add_patch(Circle((0.0, 0.0), reach, fill=False, ls="--", color="0.3"))
                ax.plot([], [], ls="--", color="0.3", label=f"largest start distance from the base axis, "
                        f"{reach:.2f} m")
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize=7.5, frameon=False)
        ax.set_xlabel(f"TCP {a[4]} at the E-stop, world frame [m]")
        ax.set_ylabel(f"TCP {b[4]} at the E-stop, world frame [m]")
        ax.set_title(f"{robot}: worst TCP stopping distance, {'top' if top_view else 'side'} view "
                     f"({extent[name][5] if name in extent else 0} states)", fontsize=10)
        ax.set_aspect("equal", adjustable="box")
        notes = ["white cells: no sampled state starts there (not a zero distance); each coloured cell shows the "
                 f"largest distance of the states starting in it ({bins} x {bins} cells)."]
        if late_x.size:
            notes.append("red x: a state still moving when the prediction's horizon ended; its stopping distance is not "
                         "known, and the colour of its cell may be the distance it reached by the horizon.")
        if past_x.size:
            notes.append("magenta X: a state whose stop carries a joint past its position limit (no end stops in the "
                         "model: an end stop, not the brake, would end it); its stopping distance is not known, and the "
                         "colour of its cell may be the distance of that motion without end stops.")
        files.append(save_figure_at(plt, fig, os.path.join(out_dir, name), source, notes, dpi=100))
    dist, time = np.asarray(worst["tcp_straight_distance_m"], float), np.asarray(worst["stop_time_s"], float)
    fig, ax = new_figure(plt, 10.0, 1.2 + 0.36 * max(dist.size, 1))
    pos = np.arange(dist.size)[::-1]
    late, past = ~np.asarray(worst["at_rest"], dtype=bool), np.asarray(worst["past_limit"], dtype=bool)
    plain = ~late & ~past
    ax.barh(pos[plain], dist[plain], color="tab:blue")
    if late.any():  # the distance reached by the horizon: not a stopping distance
        ax.barh(pos[late], dist[late], color="white", edgecolor="red", hatch="xx", label="did not stop within the "
                "horizon: the distance reached by then")
    if past.any():  # the distance of a motion without end stops: not a stop the robot can make
        ax.barh(pos[past], dist[past], color="white", edgecolor=PAST_LIMIT_EDGE, hatch="//",
                label="past a joint limit: the distance without end stops, not a stop")
    for p_, k in zip(pos, range(dist.size)):
        t = "NOT STOPPED" if late[k] else "PAST A JOINT LIMIT" if past[k] else \
            f"stop {time[k]:.3f} s" if np.isfinite(time[k]) else "not stopped"
        ax.text(dist[k], p_, f"  {t}, {worst['payload_kg'][k]:.1f} kg, speed x{worst['speed_fraction'][k]:.2f},"
                f" torque x{worst['torque_factor'][k]:.2f}, delay x{worst['delay_factor'][k]:.2f}",
                va="center", fontsize=7)
    if late.any() or past.any():
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35 if dist.size < 8 else -0.12), fontsize=7.5,
                  frameon=False, ncol=2)
    ax.set_yticks(pos, [f"state {int(worst['state'][k])}" for k in range(dist.size)], fontsize=7)
    ax.set_xlabel("TCP straight stopping distance [m]")
    ax.set_xlim(0.0, 1.9 * float(np.nanmax(dist)) if dist.size else 1.0)
    ax.set_title(f"{robot}: the {dist.size} states with the largest TCP stopping distance", fontsize=10)
    files.append(save_figure_at(plt, fig, os.path.join(out_dir, "map_worst_states.png"), source,
                             ["speed x: speed of the most loaded joint as a fraction of its maximum; torque x, delay x:"
                              " the brake-torque and engage-delay factors of the state; the q and v of each state "
                              "are in stopping_map.csv (column 'state')."], dpi=100))
    return files

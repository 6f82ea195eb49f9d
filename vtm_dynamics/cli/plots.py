"""Plots of a predicted stop, shared by ``vtm-predict`` and ``vtm-estop-demo``, and the figure conventions every
plot of the suite follows.

Report plots of one prediction: the angle each joint travels after the E-stop, joint rates, generalized momenta
M v, the energy balance since the E-stop; the comparison of a prediction with the fixed-step reference simulation
(angles travelled and rates, TCP path). A prediction that is not the robot's stop (``StopPrediction.valid``
false: past a joint limit, or not at rest within the horizon) has "NOT VALID: ..." heading every title and the
reason in the foot notes. PNG files, matplotlib with the Agg backend (no display needed).

Conventions (the person who prints the figure must not have to guess): every axis names its quantity and unit;
legends sit outside the axes, never over data; one line style means one thing per figure (event markers have
their own styles, listed in the legend); curves that lie on top of each other are named in a note under the
figure; every figure carries a foot line saying what produced it (robot, model and brake hashes, software), when
the caller gives one. Units: s, rad, rad/s, N m s, J, m.
"""

from __future__ import annotations

import os
import textwrap
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

if TYPE_CHECKING:  # the core is imported when a plot is drawn, not when a tool builds its parser
    from vtm_dynamics.core.estop import StopPrediction
    from vtm_dynamics.core.estop.braked_plant import BrakedPlant
    from vtm_dynamics.core.robot.model import RobotModel

# event markers: one style per kind of event, none of them dashed (dashed is kept for "simulated" curves)
EVENT_STYLES = {
    "engage": ("brakes engage / power off", dict(color="0.45", ls="-.", lw=0.9)),
    "switch": ("stick, slip or release", dict(color="0.2", ls=":", lw=0.9)),
    "lock": ("abrupt lock", dict(color="r", ls="-", lw=0.9)),
}
FOOT_FONTSIZE = 6.5


def pyplot() -> Any:
    """matplotlib.pyplot on the non-interactive Agg backend (imported on first use: plotting is optional)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _event_kind(kind: str) -> str:
    return "engage" if kind in ("engage", "power_off") else ("lock" if kind == "lock" else "switch")


def _mark_events(axes: Sequence[Any], events: Sequence[Any]) -> list[Any]:
    """Vertical lines at the events (styles in :data:`EVENT_STYLES`); returns legend handles of the kinds drawn."""
    from matplotlib.lines import Line2D

    seen: dict[str, Any] = {}
    for e in events:
        kind = _event_kind(e.kind)
        label, style = EVENT_STYLES[kind]
        for ax in axes:
            ax.axvline(e.time, **style)
        seen.setdefault(kind, Line2D([], [], label=label, **style))
    return [seen[k] for k in EVENT_STYLES if k in seen]


def legend_outside(ax: Any, handles: Sequence[Any] | None = None, title: str | None = None, fontsize: float = 7.5,
                   ncol: int = 1) -> Any:
    """The legend to the right of ``ax``, outside the data area."""
    kwargs = dict(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=fontsize, ncol=ncol,
                  title=title, title_fontsize=fontsize, frameon=False)
    return ax.legend(handles=handles, **kwargs) if handles is not None else ax.legend(**kwargs)


def overlap_note(ax: Any, curves: Sequence[tuple[str, np.ndarray, np.ndarray]], rel: float = 0.01) -> list[str]:
    """Names of curves drawn on ``ax`` that lie on top of an earlier one (within ``rel`` of the axis range at
    every sample): 'kkt under taylor-heun'. ``curves``: (label, x, y) in drawing order."""
    lo, hi = ax.get_ylim()
    tol = rel * (hi - lo)
    out = []
    for j, (lab_j, xj, yj) in enumerate(curves):
        for lab_i, xi, yi in curves[:j]:
            if len(xi) == len(xj) and np.allclose(xi, xj) and np.all(np.isfinite(yi) == np.isfinite(yj)):
                both = np.isfinite(yi) & np.isfinite(yj)
                if both.any() and np.max(np.abs(yi[both] - yj[both])) <= tol:
                    out.append(f"{lab_i} lies under {lab_j}")
                    break
    return out


def new_figure(plt: Any, width: float, height: float, nrows: int = 1, ncols: int = 1, **kwargs) -> tuple[Any, Any]:
    """A figure with constrained layout (legends outside the axes and titles are laid out, never clipped)."""
    return plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained", **kwargs)


def save_figure_at(plt: Any, fig: Any, path: str, source: str | None = None, notes: Sequence[str] = (),
                   dpi: int = 110) -> str:
    """Write ``fig`` to ``path``: ``notes`` (e.g. hidden curves, empty cells) and the ``source`` foot line in a
    strip under the axes, wrapped to the figure's width (no ``source``: the software's version and commit);
    closes the figure."""
    if source is None:
        from vtm_dynamics.cli.provenance import software_line

        source = software_line()
    lines = [f"Note: {n}" for n in notes] + [f"Source: {source}"]
    width_in, height_in = fig.get_size_inches()
    chars = max(40, int(width_in * 72 / (FOOT_FONTSIZE * 0.56)))
    wrapped = [w for line in lines for w in textwrap.wrap(line, chars)]
    strip = (len(wrapped) * FOOT_FONTSIZE * 1.35 + 6) / 72 / height_in  # fraction of the height
    engine = fig.get_layout_engine()
    if engine is not None and hasattr(engine, "set"):
        engine.set(rect=(0.0, strip, 1.0, 1.0 - strip))
    elif engine is None:  # a figure made without a layout engine: lay it out above the strip once
        fig.tight_layout(rect=(0.0, strip, 1.0, 1.0))
    fig.text(0.01, 0.004, "\n".join(wrapped), fontsize=FOOT_FONTSIZE, color="0.3", va="bottom", ha="left",
             linespacing=1.25)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def save_figure(plt: Any, fig: Any, out_dir: str, name: str, dpi: int = 110, source: str | None = None,
                notes: Sequence[str] = ()) -> str:
    """:func:`save_figure_at` ``out_dir/name``; returns the path."""
    return save_figure_at(plt, fig, os.path.join(out_dir, name), source, notes, dpi)


def marked_title(p: StopPrediction, title: str) -> str:
    """``title`` headed by the prediction's NOT VALID mark (``StopPrediction.invalid_label``) when it is not the
    robot's stop: the curves of a stop past a joint limit or cut off by the horizon look like any other."""
    mark = p.invalid_label()
    return f"{mark} — {title}" if mark else title


def invalid_notes(p: StopPrediction) -> list[str]:
    """The foot note of a prediction that is not valid: why (``StopPrediction.invalid_text``); [] when valid."""
    return [p.invalid_text()] if not p.valid else []


def prediction_report_plots(out_dir: str, robot: RobotModel, p: StopPrediction, source: str | None = None,
                            armature: np.ndarray | None = None) -> list[str]:
    """angles.png (angle travelled since the E-stop), rates.png, momenta.png, energy.png (balance since the E-stop)
    of one prediction (cubic Hermite between the integration samples for smooth curves); returns the files.
    ``armature`` [kg m^2]: the brakes' reflected rotor inertias, whose kinetic energy belongs to the balance."""
    from vtm_dynamics.core.estop import dense_series, energy_series, generalized_momenta
    from vtm_dynamics.core.estop.series import travelled as travel_since_start

    plt = pyplot()
    os.makedirs(out_dir, exist_ok=True)
    T, V = energy_series(robot, p, armature)
    td, qd, vd = dense_series(p)
    vector = robot.nq == robot.nv
    mom = np.array([robot.mass_matrix(q) @ v for q, v in zip(qd, vd)]) if vector else generalized_momenta(robot, p)
    tm = td if vector else p.t
    # a continuous joint's travel summed along the samples (its end points alone give it modulo 2 pi)
    travelled = travel_since_start(robot, qd if vector else p.q)
    ta = td if vector else p.t
    linear = any(j.prismatic for j in robot.joints)
    # a prismatic joint's curves are in m, m/s, N s: its legend entry says so, and so does the axis
    names = [j.name + (" [m; m/s; N s]" if j.prismatic else "") for j in robot.joints]
    also = " (prismatic joints: {})" if linear else ""  # "" formats to "": no unit is added
    what = f"{robot.name}: category-{p.category} stop, E-stop at t = 0"
    panels = [
        ("angles.png", ("travelled" if linear else "angle travelled") + " since the E-stop [rad]" + also.format("m"),
         ta, travelled, names, f"{what}: angle {'(prismatic joints: distance) ' if linear else ''}each joint "
         "travels (stopping angles in the table)"),
        ("rates.png", "joint rate [rad/s]" + also.format("m/s"), td, vd, names, f"{what}: joint rates"),
        ("momenta.png", "generalized momentum M v [N m s]" + also.format("N s"), tm, mom, names,
         f"{what}: generalized momenta (continuous across an abrupt lock for the free joints)"),
        ("energy.png", "energy change since the E-stop [J]", p.t,
         np.column_stack([T - T[0], V - V[0], (T + V) - (T[0] + V[0]), p.brake_work, -p.impulse_loss]),
         ("kinetic T - T(0)", "potential V - V(0)", "total E - E(0)", "brake work (negative: dissipated)",
          "impulsive-lock losses, negated"),
         f"{what}: energy balance, E - E(0) = brake work - lock losses"),
    ]
    files = []
    for fname, ylabel, tt, data, labels, title in panels:
        title = marked_title(p, title)
        fig, ax = new_figure(plt, 9.0, 4.8)
        curves = []
        for k, lab in enumerate(labels):
            ax.plot(tt, data[:, k], label=lab)
            curves.append((lab, np.asarray(tt), np.asarray(data[:, k])))
        events = _mark_events([ax], p.events)
        ax.set_xlabel("time after the E-stop [s]")
        ax.set_ylabel(ylabel)
        ax.set_title("\n".join(textwrap.wrap(title, 90)), fontsize=10)
        ax.grid(alpha=0.3)
        handles, _ = ax.get_legend_handles_labels()
        legend_outside(ax, handles + events)
        notes = invalid_notes(p) + overlap_note(ax, curves)
        if fname == "energy.png":
            gap = float(np.max(np.abs((T + V) - (T[0] + V[0]) - p.brake_work + p.impulse_loss)))
            scale = max(float(np.max(np.abs(p.brake_work))), 1e-9)
            notes = notes + ([f"the total's change equals the brake work minus the lock losses to {gap:.2g} J (the "
                              "integration check); kinetic energy includes the rotors' (armature)."]
                             if gap <= 0.01 * scale else
                             [f"the total's change differs from the brake work minus the lock losses by up to "
                              f"{gap:.3g} J: the rotors' (armature) kinetic energy is not included in this plot."])
        files.append(save_figure(plt, fig, out_dir, fname, source=source, notes=notes))
    return files


def prediction_vs_simulation_plots(out_dir: str, robot: RobotModel, p: StopPrediction, plant: BrakedPlant,
                                   source: str | None = None) -> list[str]:
    """joint_angles_rates.png (prediction solid, reference simulation dashed, events in their own styles) and
    tcp_path.png (top and side view of the TCP path, predicted and simulated); returns the files written."""
    from matplotlib.lines import Line2D

    plt = pyplot()
    os.makedirs(out_dir, exist_ok=True)
    names = list(robot.joint_names)
    qp = np.array([robot.difference(p.q[0], q) for q in p.q])
    ts, qs, vs = np.asarray(plant.record.t), np.asarray(plant.record.q), np.asarray(plant.record.v)
    qsim = np.array([robot.difference(qs[0], q) for q in qs]) if robot.nq != robot.nv else qs - qs[0]
    files = []
    fig, axes = new_figure(plt, 10.0, 7.5, 2, 1, sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    handles = []
    for i, n in enumerate(names):
        c = colors[i % len(colors)]
        axes[0].plot(p.t, np.degrees(qp[:, i]), color=c)
        axes[0].plot(ts, np.degrees(qsim[:, i]), color=c, ls="--", lw=0.9)
        axes[1].plot(p.t, p.v[:, i], color=c)
        axes[1].plot(ts, vs[:, i], color=c, ls="--", lw=0.9)
        handles.append(Line2D([], [], color=c, label=n))
    events = _mark_events(axes, p.events)
    axes[0].set_ylabel("angle travelled since the E-stop [deg]")
    axes[1].set_ylabel("joint rate [rad/s]")
    axes[1].set_xlabel("time after the E-stop [s]")
    axes[0].set_title("\n".join(textwrap.wrap(marked_title(p, f"{robot.name}: predicted stop (solid) and the "
                                                           "fixed-step reference simulation (dashed)"), 100)),
                      fontsize=10)
    styles = [Line2D([], [], color="k", label="predicted"), Line2D([], [], color="k", ls="--", lw=0.9,
                                                                    label="simulated (reference)")]
    legend_outside(axes[0], handles + styles + events)
    for ax in axes:
        ax.grid(alpha=0.3)
    files.append(save_figure(plt, fig, out_dir, "joint_angles_rates.png", dpi=120, source=source,
                       notes=invalid_notes(p) + ["where a dashed curve is not visible it lies under its solid one "
                                                 "(prediction and simulation agree to the line width)."]))

    if p.tcp_positions is not None:
        tcp_sim = np.array([robot.frame_placement(q, p.tcp_frame).translation for q in qs])
        fig, ax = new_figure(plt, 10.0, 5.0, 1, 2)
        for k, (a, b, la, lb, view) in enumerate(((0, 1, "x [m]", "y [m]", "top view"),
                                                   (0, 2, "x [m]", "z [m]", "side view"))):
            ax[k].plot(p.tcp_positions[:, a], p.tcp_positions[:, b], label="predicted")
            ax[k].plot(tcp_sim[:, a], tcp_sim[:, b], ls="--", label="simulated (reference)")
            ax[k].plot(*p.tcp_positions[0, [a, b]], "go", label="at the E-stop")
            ax[k].plot(*p.tcp_positions[-1, [a, b]], "rs", label="at rest" if p.stopped else "at the horizon")
            ax[k].set_xlabel(f"TCP {la[0]} in the world frame {la[2:]}")
            ax[k].set_ylabel(f"TCP {lb[0]} in the world frame {lb[2:]}")
            ax[k].set_title(view, fontsize=9)
            ax[k].set_aspect("equal", adjustable="datalim")
            ax[k].ticklabel_format(useOffset=False)
            ax[k].tick_params(axis="x", labelrotation=30)
            ax[k].grid(alpha=0.3)
        legend_outside(ax[1])
        fig.suptitle("\n".join(textwrap.wrap(marked_title(
            p, f"{p.tcp_frame} path during the stop: {p.tcp_path_length * 1e3:.1f} mm along the path, "
               f"{p.tcp_straight_distance * 1e3:.1f} mm start to {'rest' if p.stopped else 'the horizon'}"), 100)),
            fontsize=10)
        files.append(save_figure(plt, fig, out_dir, "tcp_path.png", dpi=120, source=source, notes=invalid_notes(p)))
    return files

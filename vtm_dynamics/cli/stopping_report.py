"""The PDF report of ``vtm-stopping-data``: pages a safety engineer can file.

Every page carries, above the content, the plain statement that the figures are simulated (not measured) and
fitted to three published values per robot, and under it the document control: robot and URDF hash, brake file and
its hash, software version and commit, the date, page i of n. The pages: title and summary (the 100 % points
against the published figures, the value for safety calculations, flags where the nominal value is below the
published one), brakes (every term of the brake model) and assumptions with the absolute levels (rad/s, m, kg),
the test poses, the vendor-style charts, category 1 (modelled from a stated deceleration or left out, with the
reason), and the numeric table of every point. A4 landscape, matplotlib's PDF backend.
"""

from __future__ import annotations

import math
import os
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

A4_LANDSCAPE = (11.69, 8.27)  # [in]
SIMULATED = ("SIMULATED DATA, NOT MEASURED: every figure is a prediction of the vtm_dynamics multibody model "
             "whose brakes were fitted to three published values per robot (stopping angle and time of J0, J1, J2 "
             "at 100 % speed, extension and payload, category 0). Verify on the robot before relying on them.")
ROWS_PER_TABLE_PAGE = 52


@dataclass(frozen=True)
class DocumentControl:
    """What identifies the document: robot, URDF hash, brake file and hash, software, date, command line."""

    robot: str
    model_sha256: str
    brake_file: str
    brake_sha256: str
    software: str
    date: str
    command: str

    def footer(self, page: int, pages: int) -> str:
        return (f"{self.robot} | URDF sha256 {self.model_sha256[:16]} | brakes {os.path.basename(self.brake_file)} "
                f"sha256 {self.brake_sha256[:16]} | {self.software} | {self.date} | page {page} of {pages}")


def _page(plt: Any, control: DocumentControl, title: str, page: int, pages: int) -> Any:
    """A4 landscape figure with the statement on top, the title, and the document control at the foot."""
    fig = plt.figure(figsize=A4_LANDSCAPE)
    fig.text(0.5, 0.985, "\n".join(textwrap.wrap(SIMULATED, 165)), ha="center", va="top", fontsize=7.5,
             color="darkred", weight="bold", linespacing=1.3)
    fig.text(0.04, 0.925, title, fontsize=13, weight="bold", va="top")
    fig.text(0.5, 0.012, control.footer(page, pages), ha="center", va="bottom", fontsize=6.5, color="0.3")
    return fig


def _text(fig: Any, lines: Sequence[str], top: float = 0.885, size: float = 7.4) -> None:
    fig.text(0.04, top, "\n".join(lines), fontsize=size, family="monospace", va="top")


def _fmt_ms(x: float) -> str:
    return f"{1e3 * x:.0f}" if math.isfinite(x) else "inf"


def points_table(points: Sequence[Any]) -> list[str]:
    """One line per point: levels with their absolute values, nominal and band of angle, time and TCP distance,
    and the value for safety calculations (the band's upper edge). Two header lines (quantity, unit)."""
    cols = (("cat", 3), ("joint", 20), ("speed", 17), ("extension", 15), ("payload", 14), ("angle", 8),
            ("band", 13), ("time", 7), ("band", 10), ("TCP", 7), ("band max", 9), ("safety: angle/time/TCP", 26))
    units = ("", "", "% / rad/s", "% / m", "% / kg", "rad", "rad", "ms", "ms", "mm", "mm", "rad / ms / mm")
    def line(cells) -> str:  # the joint name left-aligned, the numbers right-aligned
        return "".join(f"{c:<{w}} " if k == 1 else f"{c:>{w}} " for k, (c, (_, w)) in enumerate(zip(cells, cols)))

    head, unit = line([name for name, _ in cols]), line(units)
    out = [head, unit, "-" * len(head)]
    for p in points:
        ext = f"{p.extension_fraction:.0%} {p.reach:.3f}" + ("*" if abs(p.extension_actual - p.extension_fraction)
                                                             > 0.005 else " ")
        cells = (str(p.category), p.joint, f"{p.speed_fraction:.0%} {p.speed:.3f}", ext,
                 f"{p.payload_fraction:.0%} {p.payload:.2f}", f"{p.angle:.3f}", f"{p.angle_min:.3f}-{p.angle_max:.3f}",
                 _fmt_ms(p.time), f"{_fmt_ms(p.time_min)}-{_fmt_ms(p.time_max)}", f"{1e3 * p.tcp_distance:.0f}",
                 f"{1e3 * p.tcp_distance_max:.0f}",
                 "NOT VALID: past a limit #" if getattr(p, "limit_crossings", ()) else
                 f"{p.angle_max:.3f} / {_fmt_ms(p.time_max)} / {1e3 * p.tcp_distance_max:.0f}"
                 + ("" if p.stopped else " !"))
        out.append(line(cells))
    if any(not p.stopped for p in points):
        out += ["", "! NOT AT REST within the horizon (nominal or a band corner): the time is unbounded (inf), the "
                "angle and TCP distance are those reached by then, lower bounds, not values for safety calculations."]
    crossed = [p for p in points if getattr(p, "limit_crossings", ())]
    if crossed:
        out += ["", f"# PAST A JOINT LIMIT ({len(crossed)} points; nominal or a band corner): the model has no end "
                "stops, so the angle, time and TCP distance of these rows are not a stop the robot can make and give "
                "no value for safety calculations.", f"  e.g. {crossed[0].joint} at {crossed[0].speed_fraction:.0%} "
                f"speed: " + "; ".join(crossed[0].limit_crossings)]
    return out


def safety_table(rows: Sequence[dict]) -> list[str]:
    """The published comparison with the value for safety calculations and a flag where the nominal is below."""
    if not rows:
        return ["No published figures for this robot: no comparison."]
    head = (f"{'joint':<21}{'published':>18}{'nominal (model)':>19}{'error':>17}{'band (envelope)':>26}"
            f"{'value for safety calc.':>24}  flag")
    out = [head, "-" * (len(head) + 30)]
    for r in rows:
        flags = [] if r.get("stopped", True) else ["NOT AT REST within the horizon: time unbounded, angle a lower "
                                                   "bound"]
        if r.get("limit_crossings"):
            flags.append("NOT VALID: past a joint limit (" + "; ".join(r["limit_crossings"]) + ")")
        if r["nominal_below_published"]["angle"]:
            flags.append(f"angle below published ({100 * r['angle_error_rad'] / r['published_angle_rad']:+.1f} %)")
        if r["nominal_below_published"]["time"]:
            flags.append(f"time below published ({100 * r['time_error_s'] / r['published_time_s']:+.1f} %)")
        out.append(
            f"{r['joint']:<21}{r['published_angle_rad']:>8.3f} rad {_fmt_ms(r['published_time_s']):>4} ms"
            f"{r['predicted_angle_rad']:>9.3f} rad {_fmt_ms(r['predicted_time_s']):>4} ms"
            f"{r['angle_error_rad']:>+8.3f} rad {1e3 * r['time_error_s']:>+4.0f} ms"
            f"{r['band_angle_rad'][0]:>8.3f}-{r['band_angle_rad'][1]:.3f} rad "
            f"{_fmt_ms(r['band_time_s'][0])}-{_fmt_ms(r['band_time_s'][1])} ms"
            f"{r['safety_angle_rad']:>10.3f} rad {_fmt_ms(r['safety_time_s']):>4} ms  "
            + ("; ".join(flags) if flags else "-"))
    out += ["", "Value for safety calculations: the upper edge of the envelope band (brake torque x 0.9-1.1, engage "
            "delay x 1.0-1.5),", "never the nominal value. Flag: the nominal prediction is below the published "
            "figure by more than its stated precision (0.005 rad, 0.5 ms);", "use the published figure or the band's "
            "upper edge, whichever is larger."]
    return out


def pose_figure(robot: Any, spec: Any, points: Sequence[Any], fig: Any) -> None:
    """Side and top views of every test pose (per tested joint, its extension levels), drawn through the joint
    origins to the payload frame, the base at the origin; the tested joint's axis marked."""
    names = [j for j in robot.joint_names]
    frames = names + [spec.payload_frame]
    poses: dict[tuple[str, float], tuple[tuple[float, ...], float]] = {}
    for p in points:
        poses.setdefault((p.joint, p.extension_fraction), (p.q_test, p.reach))
    joints = list(dict.fromkeys(p.joint for p in points))
    gs = fig.add_gridspec(2, len(joints), left=0.06, right=0.98, top=0.84, bottom=0.15, hspace=0.62, wspace=0.25)
    for col, joint in enumerate(joints):
        levels = sorted(lv for (j, lv) in poses if j == joint)
        for row, (a, b, view) in enumerate(((0, 2, "side view (x-z)"), (0, 1, "top view (x-y)"))):
            ax = fig.add_subplot(gs[row, col])
            for lv in levels:
                q, reach = poses[(joint, lv)]
                xyz = np.array([robot.frame_placement(np.asarray(q), f).translation for f in frames])
                xyz = np.vstack([np.zeros(3), xyz])
                line, = ax.plot(xyz[:, a], xyz[:, b], marker="o", ms=3, label=f"{lv:.0%}: {reach:.3f} m")
                k = 1 + names.index(joint)
                ax.plot(xyz[k, a], xyz[k, b], marker="s", ms=7, mfc="none", color=line.get_color())
            ax.plot([0], [0], marker="P", color="k", ms=8)
            ax.set_aspect("equal", adjustable="datalim")
            ax.grid(alpha=0.3)
            ax.set_xlabel(f"{'xyz'[a]} [m]")
            ax.set_ylabel(f"{'xyz'[b]} [m]")
            ax.set_title(f"{joint} test, {view}", fontsize=9)
            if row == 0:
                ax.legend(fontsize=7, title="extension (reach)", title_fontsize=7, loc="upper center",
                          bbox_to_anchor=(0.5, -0.2), ncol=len(levels), frameon=False)
    fig.text(0.06, 0.05, "Cross: the robot base (world origin); circles: joint origins from the base to "
             f"{spec.payload_frame}; square: the tested joint. Reach: distance of {spec.payload_frame} from the "
             f"axis of {spec.extension_joint or spec.joints[0]}.", fontsize=7.5)


def write_pdf(path: str, control: DocumentControl, summary_lines: list[str], brake_lines: list[str],
              assumption_lines: list[str], chart_pages: Sequence[tuple[str, Callable[[Any], None]]],
              table_lines: list[str], pose: Callable[[Any], None], category1_note: list[str] | None) -> int:
    """Write the report; returns the number of pages."""
    from matplotlib.backends.backend_pdf import PdfPages

    from vtm_dynamics.cli.plots import pyplot

    plt = pyplot()
    builders: list[tuple[str, Callable[[Any], None]]] = []
    for start in range(0, len(summary_lines), 56):
        builders.append(("Summary and document control", lambda fig, s=start: _text(fig, summary_lines[s:s + 56])))
    conditions = brake_lines + [""] + assumption_lines
    for start in range(0, len(conditions), 60):
        builders.append(("Brakes, test conditions and assumptions",
                         lambda fig, c=conditions[start:start + 60]: _text(fig, c, size=6.9)))
    builders.append(("Test poses", pose))
    builders += list(chart_pages)
    if category1_note:
        builders.append(("Stop category 1", lambda fig: _text(fig, category1_note, size=8.5)))
    head, body = table_lines[:3], table_lines[3:]
    for start in range(0, len(body), ROWS_PER_TABLE_PAGE):
        rows = head + body[start:start + ROWS_PER_TABLE_PAGE]
        if start + ROWS_PER_TABLE_PAGE >= len(body):
            rows = rows + ["", "Levels: fraction of the maximum and its absolute value (speed of the tested joint, reach "
                           "of the payload frame, payload); * the extension reached is",
                           "above the level (folding cannot get closer). Bands: every corner of brake torque x 0.9-1.1 "
                           "and engage delay x 1.0-1.5. TCP: straight-line distance of",
                           "the payload frame from the stop command to rest. Safety: the band's upper edge of angle, "
                           "time and TCP distance."]
        builders.append(("Every point (numeric)", lambda fig, r=rows: _text(fig, r, size=6.8)))
    with PdfPages(path) as pdf:
        for n, (title, build) in enumerate(builders, start=1):
            fig = _page(plt, control, title, n, len(builders))
            build(fig)
            pdf.savefig(fig)
            plt.close(fig)
        info = pdf.infodict()
        info["Title"] = f"Stopping data {control.robot} (simulated)"
        info["Subject"] = f"{control.software}; brakes sha256 {control.brake_sha256}"
    return len(builders)

"""Reports of recorded stops shared by ``vtm-calibrate`` and ``vtm-predict --bag``: the predicted-vs-recorded table,
the parameter table, overlay plots, the brake YAML and the atomic file writes (a temporary file in the same folder,
renamed at the end: a failed run leaves no partial YAML or report). Units: rad, s, m, N m, N m s/rad.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from typing import Any, Sequence

import numpy as np

from vtm_dynamics.core.estop.brakes import BRAKE_FIELDS
from vtm_dynamics.core.estop.identification import Identification, StopComparison
from vtm_dynamics.core.robot.model import RobotModel

UNITS = {"engage_delay": "s", "sliding_torque": "N m", "holding_torque": "N m", "viscous": "N m s/rad",
         "breakaway_torque": "N m", "stribeck_velocity": "rad/s", "rise_time": "s", "armature": "kg m^2"}


def write_atomic(path: str, text: str) -> str:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".partial", dir=folder)
    mask = os.umask(0o022)
    os.umask(mask)
    os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes it 0600: the YAML and report are read like any other output
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _fmt(x: float, spec: str = ".4f") -> str:
    return format(x, spec) if x is not None and math.isfinite(x) else "n/a"


def comparison_table(robot: RobotModel, comparisons: Sequence[StopComparison]) -> str:
    """Per stop: the joint that moved most, its recorded and predicted stopping angle, the stop times, the TCP
    distances and the RMS angle residual, with the relative errors."""
    lines = [f"{'stop':<26}{'joint':<20}{'angle rec/pred [rad]':>24}{'err':>7}{'time rec/pred [s]':>22}{'err':>7}"
             f"{'TCP rec/pred [m]':>20}{'rms [rad]':>11}"]
    for c in comparisons:
        i = int(np.argmax(np.abs(c.recorded_angles)))
        ea = (c.predicted_angles[i] - c.recorded_angles[i]) / c.recorded_angles[i] if c.recorded_angles[i] else math.nan
        et = (c.predicted_time - c.recorded_time) / c.recorded_time if c.recorded_time else math.nan
        lines.append(
            f"{c.label[-26:]:<26}{robot.joint_names[i]:<20}"
            f"{_fmt(c.recorded_angles[i]):>11} / {_fmt(c.predicted_angles[i]):<10}{_fmt(100 * ea, '+.1f'):>6}%"
            f"{_fmt(c.recorded_time):>10} / {_fmt(c.predicted_time):<9}{_fmt(100 * et, '+.1f'):>6}%"
            f"{_fmt(c.recorded_tcp):>9} / {_fmt(c.predicted_tcp):<8}{_fmt(c.rms_residual, '.2e'):>11}"
        )
    return "\n".join(lines)


def parameter_table(ident: Identification) -> str:
    """The estimates with 1-sigma, then the parameters the stops cannot identify and the test motion for each."""
    lines = [f"{'joint':<22}{'parameter':<18}{'value':>12}{'1-sigma':>11}  unit"]
    for e in ident.estimates:
        if e.identifiable:
            lines.append(f"{e.joint:<22}{e.field:<18}{e.value:>12.5g}{e.sigma:>11.2g}  {UNITS.get(e.field, '')}")
    missing = ident.not_identifiable
    if missing:
        lines.append("")
        lines.append(f"not identifiable from these stops ({len(missing)}; kept at the prior value in the YAML):")
        for e in missing:
            lines.append(f"  {e.joint}.{e.field}: {e.reason}; to identify it record {e.test_motion}")
    return "\n".join(lines)


def brake_yaml(ident: Identification, sources: Sequence[str]) -> str:
    """The fitted brakes as a brake YAML (joint-side values) that ``brakes_from_config`` loads; every parameter
    the stops could not identify carries a comment saying it is the prior value."""
    unknown = {(e.joint, e.field) for e in ident.not_identifiable}
    priors = {(e.joint, e.field): e.prior for e in ident.estimates}
    shown = {(e.joint, e.field) for e in ident.estimates if e.lower_bound is not None}
    out = [f"# brakes identified by vtm-calibrate from {len(sources)} recording(s): {', '.join(sources)}",
           f"# robot {ident.robot}; residual RMS {ident.residual_rms:.3g} rad over {ident.n_residuals} samples",
           "# joint-side values; units: s, N m, N m s/rad", "brakes:", "  joints:"]
    for b in ident.brakes:
        out.append(f"    {b.joint}:")
        floor = b.breakaway_torque if getattr(b, "breakaway_torque", None) is not None else None
        raised = floor is not None and b.holding_torque < floor
        if raised:  # a capacity below the friction met when slipping from rest is not a brake: lift it, say so
            b = dataclasses.replace(b, holding_torque=floor)
        for f in BRAKE_FIELDS:
            if f in ("gear_ratio", "side", "joint") or not hasattr(b, f):
                continue
            value = getattr(b, f)
            if value is None or (f == "pawl_holding_torque" and b.pawl_delay is None):
                continue
            text = ".inf" if isinstance(value, float) and math.isinf(value) else repr(float(value))
            note = "  # not identified: prior value" if (b.joint, f) in unknown else ""
            if (f == "holding_torque" and raised) or ((b.joint, f) in unknown and priors.get((b.joint, f)) != value
                                                      and value is not None):
                note = ("  # not identified: raised to its lower bound (breakaway >= sliding, holding >= "
                        "breakaway)")
            if (b.joint, f) in shown and not (f == "holding_torque" and raised):
                note = "  # lower bound shown by the stops (a joint at rest held the others' reaction)"
            out.append(f"      {f}: {text}{note}")
    return "\n".join(out) + "\n"


def identification_dict(ident: Identification, robot: RobotModel, comparisons: Sequence[StopComparison]) -> dict:
    """JSON-ready report (SI units in the keys; None where a value is unknown)."""
    def f(x: Any) -> Any:
        return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x

    return {
        "robot": ident.robot, "residual_rms_rad": ident.residual_rms, "n_residuals": ident.n_residuals,
        "n_predictions": ident.n_predictions, "seconds": ident.seconds, "solver": ident.message,
        "parameters": [{"joint": e.joint, "field": e.field, "value": f(e.value), "sigma": f(e.sigma),
                        "identifiable": e.identifiable, "prior": e.prior, "reason": e.reason,
                        "test_motion": e.test_motion} for e in ident.estimates],
        "stops": [{"label": c.label, "recorded_angles_rad": c.recorded_angles.tolist(),
                   "predicted_angles_rad": c.predicted_angles.tolist(), "recorded_time_s": f(c.recorded_time),
                   "predicted_time_s": f(c.predicted_time), "recorded_tcp_m": f(c.recorded_tcp),
                   "predicted_tcp_m": f(c.predicted_tcp), "rms_residual_rad": c.rms_residual}
                  for c in comparisons],
        "joint_names": list(robot.joint_names),
    }


def write_json(path: str, data: dict) -> str:
    return write_atomic(path, json.dumps(data, indent=1))


def overlay_plots(out_dir: str, robot: RobotModel, stops: Sequence[Any], comparisons: Sequence[StopComparison],
                  max_plots: int = 50, source: str | None = None) -> list[str]:
    """One PNG per stop (at most ``max_plots``): recorded angles (dots) and the prediction (lines) of every joint,
    relative to the trigger."""
    from matplotlib.lines import Line2D

    from vtm_dynamics.cli.plots import pyplot, save_figure, legend_outside, new_figure

    plt = pyplot()
    os.makedirs(out_dir, exist_ok=True)
    files = []
    for n, (s, c) in enumerate(zip(stops, comparisons)):
        if n >= max_plots:
            break
        fig, ax = new_figure(plt, 9.5, 4.8)
        handles = []
        for i, name in enumerate(robot.joint_names):
            line, = ax.plot(c.predicted_t, c.predicted_q[:, i] - s.q0[i], lw=1.2)
            ax.plot(s.t, s.q[:, i] - s.q0[i], ".", ms=2, color=line.get_color())
            handles.append(Line2D([], [], color=line.get_color(), label=name))
        handles += [Line2D([], [], color="k", lw=1.2, label="predicted"),
                    Line2D([], [], color="k", marker=".", ls="none", label="recorded")]
        ax.set_xlabel("time after the trigger [s]")
        ax.set_ylabel("angle from the trigger pose [rad]")
        ax.set_title(f"{c.label}: recorded (dots) vs predicted (lines)", fontsize=10)
        ax.grid(alpha=0.3)
        legend_outside(ax, handles)
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in c.label)
        files.append(save_figure(plt, fig, out_dir, f"stop_{n + 1:02d}_{safe[:60]}.png", source=source))
    return files

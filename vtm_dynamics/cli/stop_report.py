"""Reports of recorded stops shared by ``vtm-calibrate`` and ``vtm-predict --bag``: the predicted-vs-recorded table,
the identification's tables (parameters with intervals, capacities, starts, direct measurement, stick/slip record,
cross-validation), overlay plots, the brake YAML and the atomic file writes (a temporary file in the same folder,
renamed at the end: a failed run leaves no partial YAML or report). Units: rad, s, m, N m, N m s/rad; a prismatic
joint's positions in m (its row and the JSON's ``joint_units`` say so).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from typing import Any, Callable, Sequence, TextIO

from vtm_dynamics.core.estop.brakes import BRAKE_FIELDS, JointBrake, friction_order_problem
from vtm_dynamics.core.estop.identifiability import UNSEEN_RELATIVE
from vtm_dynamics.core.estop.identification import Identification, StopComparison
from vtm_dynamics.core.robot.model import RobotModel

UNITS = {"engage_delay": "s", "sliding_torque": "N m", "holding_torque": "N m", "viscous": "N m s/rad",
         "breakaway_torque": "N m", "stribeck_velocity": "rad/s", "rise_time": "s", "armature": "kg m^2"}
WRITTEN_FIELDS = ("engage_delay", "sliding_torque", "viscous", "holding_torque", "breakaway_torque",
                  "stribeck_velocity", "rise_time", "armature", "pawl_delay", "pawl_holding_torque")


class ReportError(ValueError):
    """A brake file that would break the friction-order rule is not written (one line naming the joint)."""


def write_atomic(path: str, text: str | Callable[[TextIO], None]) -> str:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename; ``text`` may be a
    function that writes to the open file (a long file written as it is made)."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".partial", dir=folder)
    mask = os.umask(0o022)
    os.umask(mask)
    os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes it 0600: the YAML and report are read like any other output
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            if callable(text):
                text(fh)
            else:
                fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _fmt(x: float | None, spec: str = ".4f") -> str:
    return format(x, spec) if x is not None and math.isfinite(x) else "n/a"


def position_units(robot: RobotModel) -> list[str]:
    """The unit of each joint's position in model order: "m" for a prismatic joint, else "rad"."""
    return [j.units[0] for j in robot.joints]


def residual_unit(robot: RobotModel) -> str:
    """The unit of an RMS residual over all joints: "rad", "m", or "rad, m" when it mixes both."""
    return ", ".join(u for u in ("rad", "m") if u in position_units(robot))


def comparison_table(robot: RobotModel, comparisons: Sequence[StopComparison]) -> str:
    """Per stop: the joint that moved most, its recorded and predicted stopping angle (travel for a prismatic
    joint) with its unit, the stop times, the TCP distances and the RMS residual, with the relative errors. The
    joint that moved most is chosen per unit (:meth:`StopComparison.main_joints`): a robot with joints in rad and
    in m gets a second row per stop, for the joint in m that travelled most (before, metres were compared with
    radians, and a track's 0.05 m hid behind an arm joint's 0.2 rad). A stop the engine could not predict is
    followed by a line with the engine's reason."""
    units = position_units(robot)
    lines = [f"{'stop':<26}{'joint':<20}{'stopping rec/pred':>24}{'unit':>5}{'err':>7}{'time rec/pred [s]':>22}"
             f"{'err':>7}{'TCP rec/pred [m]':>20}{'err':>7}{f'rms [{residual_unit(robot)}]':>14}"]
    for c in comparisons:
        for n, i in enumerate(c.main_joints(units)):
            row = (f"{(c.label[-26:] if n == 0 else ''):<26}{robot.joint_names[i]:<20}"
                   f"{_fmt(c.recorded_angles[i]):>11} / {_fmt(c.predicted_angles[i]):<10}{units[i]:>5}"
                   f"{_fmt(100 * c.relative('angle', i), '+.1f'):>6}%")
            if n == 0:
                row += (f"{_fmt(c.recorded_time):>10} / {_fmt(c.predicted_time):<9}"
                        f"{_fmt(100 * c.relative('time'), '+.1f'):>6}%"
                        f"{_fmt(c.recorded_tcp):>9} / {_fmt(c.predicted_tcp):<8}"
                        f"{_fmt(100 * c.relative('tcp'), '+.1f'):>6}%{_fmt(c.rms_residual, '.2e'):>14}")
            lines.append(row)
        if c.failure:
            lines.append(f"{'':<26}not predicted: {c.failure}")
    return "\n".join(lines)


def parameter_table(ident: Identification) -> str:
    """The fitted values with 1-sigma and interval, the direct measurement beside them, then the parameters the
    stops cannot identify and the test motion for each."""
    pct = f"{100 * ident.confidence:g} %"
    lines = [f"{'joint':<22}{'parameter':<18}{'value':>12}{'1-sigma':>10}{pct + ' interval':>26}{'direct':>12}  unit"]
    for e in ident.estimates:
        if e.identifiable and e.field != "holding_torque":
            lines.append(f"{e.joint:<22}{e.field:<18}{e.value:>12.5g}{e.sigma:>10.2g}"
                         f"{'[' + format(e.lower, '.5g') + ', ' + format(e.upper, '.5g') + ']':>26}"
                         f"{_fmt(e.direct, '.5g'):>12}  {UNITS.get(e.field, '')}")
    missing = [e for e in ident.not_identifiable if e.field != "holding_torque"]
    if missing:
        lines.append("")
        lines.append(f"not identifiable from these stops ({len(missing)}; the value in the YAML is the direct "
                     "measurement or the prior, marked):")
        for e in missing:
            shown = f" (fit {e.value:.4g} +- {e.sigma:.2g})" if e.value is not None and e.sigma is not None else ""
            lines.append(f"  {e.joint}.{e.field}{shown}: {e.reason}; to identify it record {e.test_motion}")
    return "\n".join(lines)


def capacity_table(ident: Identification) -> str:
    """Each holding capacity as the stick/slip decisions bound it."""
    if not ident.capacities:
        return ""
    lines = ["holding capacities (from the stick/slip decisions of the stops):"]
    for c in ident.capacities:
        lines.append(f"  {c.joint:<22}{c.describe()}")
    return "\n".join(lines)


def starts_line(ident: Identification) -> str:
    """How many starts of the global fit reached the best optimum, and where the others ended."""
    if not ident.starts:
        return "global fit: nothing to fit"

    def rms(cost: float) -> float:
        return math.sqrt(2.0 * cost / max(ident.n_residuals, 1))

    best = min(s.cost for s in ident.starts)
    parts = [f"{s.label}: " + ("reached it" if s.agrees else f"ended at residual RMS {rms(s.cost):.3g} rad")
             for s in ident.starts]
    return (f"global fit: {ident.agreeing} of {len(ident.starts)} starts reached the best optimum (residual RMS "
            f"{rms(best):.3g} rad); " + "; ".join(parts))


def direct_table(ident: Identification, robot: RobotModel) -> str:
    """The direct measurement: per joint the engage delay, sliding torque and viscous coefficient with 1-sigma,
    the per-stop engage instants, and the stick/slip record per stop."""
    d = ident.direct
    if d is None:
        return ""
    lines = ["direct measurement (momentum balance of each joint over its decelerating segments):",
             f"  {'joint':<22}{'engage delay [ms]':>20}{'sliding [N m]':>18}{'viscous [N m s/rad]':>22}  "
             "engage instants per stop [ms]"]
    for s in d.slides:
        inst = " ".join(_fmt(1e3 * x, ".1f") if math.isfinite(x) else "-" for x in s.instants)
        lines.append(f"  {s.joint:<22}{_fmt(1e3 * s.engage_delay, '.2f'):>11} +- {_fmt(1e3 * s.delay_sigma, '.2f'):<5}"
                     f"{_fmt(s.sliding_torque, '.2f'):>10} +- {_fmt(s.sliding_sigma, '.2f'):<5}"
                     f"{_fmt(s.viscous, '.2f'):>13} +- {_fmt(s.viscous_sigma, '.2f'):<5}  {inst}")
    lines.append("  stick/slip record (rest episodes after the brake engaged; time window of arrival -> departure [ms]):")
    for r in d.records:
        items = []
        for e in r.episodes:
            name = robot.joint_names[e.joint]
            if e.kind == "held":
                items.append(f"{name} held from {1e3 * e.arrival_lo:.0f}-{1e3 * e.arrival_hi:.0f}")
            elif e.kind == "reversed":
                items.append(f"{name} reversed at {1e3 * e.arrival_lo:.0f}-{1e3 * e.arrival_hi:.0f}")
            else:
                items.append(f"{name} held from {1e3 * e.arrival_lo:.0f}-{1e3 * e.arrival_hi:.0f}, slipped at "
                             f"{1e3 * e.departure_lo:.0f}-{1e3 * e.departure_hi:.0f}")
        lines.append(f"    {r.label}: " + ("; ".join(items) if items else "-"))
    return "\n".join(lines)


def _header_value(b: JointBrake, field: str) -> Any:
    value = getattr(b, field)
    if field in ("breakaway_torque", "stribeck_velocity") and not b.stribeck:
        return None
    if field in ("rise_time", "armature") and not value:
        return None
    if field == "pawl_holding_torque" and b.pawl_delay is None:
        return None
    return value


def brake_yaml(ident: Identification, sources: Sequence[str], *, conservative: bool = False,
               payload: str = "") -> str:
    """The nominal (or ``conservative``) brakes as a brake YAML that ``brakes_from_config`` loads, with the
    residual RMS of exactly these brakes over the fitted stops in its header, each fitted value's interval and
    each capacity's bracket as comments, and every value the stops could not identify marked. Refuses (one
    line) brakes that break holding >= breakaway >= sliding >= 0."""
    brakes = ident.conservative_brakes if conservative else ident.brakes
    for b in brakes:
        problem = friction_order_problem(b.sliding_torque, b.breakaway_torque if b.stribeck else None,
                                         b.holding_torque)
        if problem:
            raise ReportError(f"brakes.joints.{b.joint}.{problem}")
    estimates = {(e.joint, e.field): e for e in ident.estimates}
    caps = {c.joint: c for c in ident.capacities}
    pct = f"{100 * ident.confidence:g} %"
    rms = ident.conservative_residual_rms if conservative else ident.residual_rms
    kind = (f"CONSERVATIVE: every fitted value at the end of its {pct} interval that lengthens the stop (a friction "
            "term the stops do not identify at its lower bound), every capacity at the smallest value the stops "
            "allow" if conservative else "nominal fit")
    out = [f"# brakes identified by vtm-calibrate from {len(sources)} recording(s): {', '.join(sources)}",
           f"# robot {ident.robot}{'; ' + payload if payload else ''}; {kind}",
           f"# residual RMS of exactly these brakes over the fitted stops: {rms:.4g} rad ({ident.n_residuals} "
           f"samples; recording noise {ident.noise:.3g} rad)",
           f"# global fit: {ident.agreeing} of {len(ident.starts)} starts reached the best optimum",
           "# joint-side values; units: s, N m, N m s/rad", "brakes:", "  joints:"]
    for b in brakes:
        out.append(f"    {b.joint}:")
        for f in WRITTEN_FIELDS:
            value = _header_value(b, f)
            if value is None:
                continue
            text = ".inf" if isinstance(value, float) and math.isinf(value) else repr(float(value))
            note = _note(b, f, estimates.get((b.joint, f)), caps.get(b.joint), pct, conservative)
            out.append(f"      {f}: {text}{note}")
    return "\n".join(out) + "\n"


def _note(b: JointBrake, field: str, e, cap, pct: str, conservative: bool = False) -> str:
    if field == "holding_torque" and cap is not None:
        if cap.tested:
            below = (f"; written at the static friction of this file, {b.holding_torque:.5g} (the lower end is the"
                     " nominal static friction)" if b.holding_torque < cap.lower * (1.0 - 1e-9) else "")
            return f"  # between {cap.lower:.5g} and {cap.upper:.5g} by the stick/slip decisions of the stops{below}"
        if cap.loaded:
            return f"  # at least {cap.lower:.5g} (held in the stops; upper side not tested)"
        if cap.undecided:
            return (f"  # not bounded by the stops (a slip fits {', '.join(cap.undecided)} as well as a hold once "
                    "the other values are fitted again): written at the static friction (the smallest it can be)")
        return "  # not tested by the stops: written at the static friction (the smallest it can be)"
    if e is None:
        return ""
    if e.identifiable and math.isfinite(e.lower):
        return f"  # {pct} interval [{e.lower:.5g}, {e.upper:.5g}]"
    why = e.reason.split(":")[0].split(" (")[0]
    source = ("fitted value" if e.value is not None else
              "direct measurement" if math.isfinite(e.direct) else "prior value")
    if not conservative:
        return f"  # not identified ({why}): {source}"
    if e.value is not None and math.isfinite(e.lower):
        return f"  # not identified ({why}): the end of its {pct} interval [{e.lower:.5g}, {e.upper:.5g}] that " \
               "lengthens the stop"
    if not math.isfinite(e.conservative):
        return f"  # not identified ({why}): {source}, NOT conservative (no upper bound known; accepted)"
    return (f"  # not identified ({why}): the lower end of its {pct} interval with the {source} {_nominal(e):.5g} "
            f"taken as {100 * UNSEEN_RELATIVE:g} % uncertain (the end that lengthens the stop)")


def _nominal(e) -> float:
    return e.value if e.value is not None else e.direct if math.isfinite(e.direct) else e.prior


def identification_dict(ident: Identification, robot: RobotModel, comparisons: Sequence[StopComparison]) -> dict:
    """JSON-ready report (SI units in the keys; None where a value is unknown)."""
    def f(x: Any) -> Any:
        return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x

    def stops(items: Sequence[StopComparison]) -> list[dict]:
        return [{"label": c.label, "recorded_angles_rad": c.recorded_angles.tolist(),
                 "predicted_angles_rad": [f(float(x)) for x in c.predicted_angles],
                 "recorded_time_s": f(c.recorded_time), "predicted_time_s": f(c.predicted_time),
                 "recorded_tcp_m": f(c.recorded_tcp), "predicted_tcp_m": f(c.predicted_tcp),
                 "rms_residual_rad": f(c.rms_residual), "failure": c.failure or None} for c in items]

    written = {b.joint: float(b.holding_torque) for b in ident.conservative_brakes}
    return {
        "robot": ident.robot, "residual_rms_rad": ident.residual_rms,
        "conservative_residual_rms_rad": ident.conservative_residual_rms, "noise_rad": ident.noise,
        "state_free_residual_rms_rad": ident.state_free_residual_rms,
        "n_residuals": ident.n_residuals, "n_predictions": ident.n_predictions, "seconds": ident.seconds,
        "solver": ident.message, "confidence": ident.confidence,
        "starts": [{"label": s.label, "cost": s.cost, "reached_best": s.agrees, "message": s.message}
                   for s in ident.starts],
        "parameters": [{"joint": e.joint, "field": e.field, "value": f(e.value), "sigma": f(e.sigma),
                        "lower": f(e.lower), "upper": f(e.upper), "conservative": f(e.conservative),
                        "direct": f(e.direct), "direct_sigma": f(e.direct_sigma), "identifiable": e.identifiable,
                        "prior": f(e.prior), "reason": e.reason, "test_motion": e.test_motion}
                       for e in ident.estimates],
        "capacities": [{"joint": c.joint, "lower_nm": c.lower, "upper_nm": f(c.upper), "floor_nm": c.floor,
                        "nominal_nm": c.nominal, "conservative_nm": written[c.joint], "tested": c.tested,
                        "held_in": list(c.held), "slipped_in": list(c.slipped),
                        "undecided_in": list(c.undecided)} for c in ident.capacities],
        "stops": stops(comparisons),
        "cross_validation": stops(ident.cross_validation),
        "conservative_cross_validation": stops(ident.conservative_cross_validation),
        "joint_names": list(robot.joint_names), "joint_units": position_units(robot),
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
            color = f"C{i % 10}"
            if c.predicted_t.size:  # empty when the brakes could not predict this stop
                ax.plot(c.predicted_t, c.predicted_q[:, i] - s.q0[i], lw=1.2, color=color)
            ax.plot(s.t, s.q[:, i] - s.q0[i], ".", ms=2, color=color)
            handles.append(Line2D([], [], color=color, label=name))
        handles += [Line2D([], [], color="k", lw=1.2, label="predicted"),
                    Line2D([], [], color="k", marker=".", ls="none", label="recorded")]
        ax.set_xlabel("time after the trigger [s]")
        linear = [n for n, u in zip(robot.joint_names, position_units(robot)) if u == "m"]
        ax.set_ylabel("angle from the trigger pose [rad]" if not linear else
                      f"from the trigger pose [rad; m: {', '.join(linear)[:40]}]")
        ax.set_title(f"{c.label}: recorded (dots) vs predicted (lines)", fontsize=10)
        ax.grid(alpha=0.3)
        legend_outside(ax, handles)
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in c.label)
        files.append(save_figure(plt, fig, out_dir, f"stop_{n + 1:02d}_{safe[:60]}.png", source=source))
    return files


def brake_fields() -> tuple[str, ...]:
    """The brake fields a user may name in ``--fields`` (numeric, fittable)."""
    return tuple(f for f in BRAKE_FIELDS if f not in ("side", "gear_ratio", "pawl_delay", "pawl_holding_torque"))

"""The 100 % category-0 points of ``vtm-stopping-data`` against the figures the maker published (the figures the
default brakes were fitted to), with the value for safety calculations: the table on the report's first page and
in the JSON. Units: rad, s, m.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from vtm_dynamics.core.stopping.iso10218 import StoppingPoint

PUBLISHED_SOURCE = "Universal Robots CB3 user manual, Appendix A (stop category 0, 100 % extension/speed/payload)"
PUBLISHED_PRECISION = (0.005, 0.0005)  # [rad, s]: half the last digit of the published angles and times


def published_figures(name: str) -> tuple:
    """The published category-0 figures the default brakes of ``name`` were fitted to (one home: the robot
    catalogue, ``core.robot.catalogue``); empty for a robot without them."""
    from vtm_dynamics.core.robot.catalogue import ROBOTS

    robot = ROBOTS.get(name)
    return robot.published_stops if robot is not None else ()


def published_table(name: str, points: Sequence[StoppingPoint]) -> list[dict]:
    """The 100 % category-0 points against the published figures, with the value for safety calculations (the
    band's upper edge) and whether the nominal is below the published figure. The figures are for the maker's rated
    payload: a run whose 100 % payload is another one (``--max-payload``) has no point to compare."""
    from vtm_dynamics.core.robot.catalogue import ROBOTS

    rated = ROBOTS[name].rated_payload if name in ROBOTS else None
    rows = []
    for fig in published_figures(name):
        match = [p for p in points if p.category == 0 and p.joint == fig.joint and p.speed_fraction == 1.0
                 and p.extension_fraction == 1.0 and p.payload_fraction == 1.0
                 and rated is not None and abs(p.payload - rated) <= 1e-9 * max(1.0, rated)]
        if not match:
            continue
        p = match[0]
        rows.append({"joint": fig.joint, "published_angle_rad": fig.angle, "published_time_s": fig.time,
                     "predicted_angle_rad": p.angle, "predicted_time_s": p.time,
                     "angle_error_rad": p.angle - fig.angle, "time_error_s": p.time - fig.time,
                     "band_angle_rad": [p.angle_min, p.angle_max], "band_time_s": [p.time_min, p.time_max],
                     "safety_angle_rad": p.angle_max, "safety_time_s": p.time_max,
                     "safety_tcp_distance_m": p.tcp_distance_max, "stopped": p.stopped,
                     "limit_crossings": list(p.limit_crossings),
                     # below beyond the published figure's own precision (angles to 0.01 rad, times to 1 ms)
                     "nominal_below_published": {"angle": p.angle < fig.angle - PUBLISHED_PRECISION[0],
                                                 "time": p.time < fig.time - PUBLISHED_PRECISION[1]}})
    return rows


def table_lines(rows: list[dict]) -> list[str]:
    from vtm_dynamics.cli.stopping_report import safety_table

    if not rows:
        return ["No published figures for this robot at this run's conditions (they are for the rated payload)."]
    return [f"100 % points (category 0) against {PUBLISHED_SOURCE}:"] + ["  " + line for line in safety_table(rows)]

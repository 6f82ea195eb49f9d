"""The parameters of the stop-safe parts of ``estop_predictor``: the ``check_trajectory`` service's caps and deadline
(``trajectory_check``), the live protective separation distance (``live_separation``) and where the collision
meshes are (``stopsafe_kit``). All read-only after start-up (``parameter_policy``): they are caps, deadlines and
terms of a safety distance. The ISO/TS 15066 defaults are the core's (:class:`SeparationParameters`: v_h = 1.6 m/s,
T_r = 0.1 s, C = Z_d = Z_r = 0); the check's sampling tolerance is the core's (:class:`SamplingSpec`).
"""

from __future__ import annotations

import os
from typing import Any

from vtm_dynamics.core.stopsafe.sampling import SamplingSpec
from vtm_dynamics.core.stopsafe.scene import MAX_EXTENT, MAX_OBSTACLES
from vtm_dynamics.core.stopsafe.separation import SeparationParameters
from vtm_dynamics.core.stopsafe.trajectory import MAX_POINTS
from vtm_dynamics.nodes import params as P

_SEP = SeparationParameters()
_SAMPLING = SamplingSpec()


def directories(value: Any) -> str | None:
    """A list of existing directories (may be empty)."""
    reason = P.strings(value)
    if reason is None and not all(os.path.isdir(os.path.expanduser(d)) for d in value):
        return "every entry must be an existing directory"
    return reason


def point_or_empty(value: Any) -> str | None:
    """Empty, or three finite coordinates within the scene's extent [m]."""
    reason = P.numbers(3)(value)
    if reason is None and any(abs(v) > MAX_EXTENT for v in value):
        return f"coordinates must lie within {MAX_EXTENT:g} m"
    return reason


def _term(name: str, default: float, text: str, hi: float = 10.0) -> P.ParameterSpec:
    return P.ParameterSpec(name, float(default), text, P.in_range(0.0, hi), constraint=f"0 .. {hi:g}")


STOPSAFE_PARAMETERS = (
    P.ParameterSpec("collision_package_dirs", (), "Directories that hold the URDF's collision mesh packages "
                    "(package://pkg/... resolves to <dir>/pkg/...); meshes are read only inside them. Empty: "
                    "example-robot-data for ur5/ur3, the package's urdf/ for planar_3r, else the directory of "
                    "urdf_path.", directories, constraint="existing directories"),
    P.ParameterSpec("check_deadline", 30.0, "Wall-time bound [s] of one check_trajectory request (speed-scaling "
                    "search included); past it the request is answered success=false naming it.",
                    P.all_of(P.positive, P.in_range(0.0, 600.0)), constraint="0 < deadline <= 600 s"),
    P.ParameterSpec("check_max_points", 10_000, "Most points of a check_trajectory request's trajectory.",
                    P.in_range(2, MAX_POINTS), constraint=f"2 .. {MAX_POINTS}"),
    P.ParameterSpec("check_max_obstacles", 200, "Most obstacles of a check_trajectory request.",
                    P.in_range(0, MAX_OBSTACLES), constraint=f"0 .. {MAX_OBSTACLES}"),
    P.ParameterSpec("check_max_dimension", 20.0, "Largest dimension [m] of an obstacle primitive in a "
                    "check_trajectory request.", P.all_of(P.positive, P.in_range(0.0, MAX_EXTENT)),
                    constraint=f"0 < dimension <= {MAX_EXTENT:g} m"),
    P.ParameterSpec("check_max_stops", 50_000, "Most stops one check_trajectory request may predict (E-stop "
                    "instants x cases, over every check of the speed-scaling search).", P.in_range(1, 10_000_000),
                    constraint="1 .. 10000000"),
    P.ParameterSpec("check_tolerance", _SAMPLING.tolerance, "Bound [m] between E-stop instants when a request's "
                    "sample_period is 0 (instants are refined until it is met).", P.in_range(1e-5, 1.0),
                    constraint="1e-5 .. 1 m"),
    P.ParameterSpec("separation_distance", False, "In continuous mode, also publish "
                    "'protective_separation_distance' (vtm_msgs/SeparationDistance): ISO/TS 15066 S_p with the "
                    "predicted stopping time and the closest point's predicted stopping distance."),
    P.ParameterSpec("separation_person_point", (), "Fixed position [m] of the person (root frame, 3 values). "
                    "Empty: the newest geometry_msgs/PointStamped on 'person_position'.", point_or_empty,
                    constraint="3 values [m] or none"),
    P.ParameterSpec("separation_person_max_age", 0.2, "Largest age [s] of the person position from "
                    "'person_position'; older: the message is success=false naming it.",
                    P.all_of(P.positive, P.in_range(0.0, 10.0)), constraint="0 < age <= 10 s"),
    _term("separation_human_speed", _SEP.human_speed, "ISO/TS 15066 v_h [m/s]: the person's approach speed."),
    _term("separation_reaction_time", _SEP.reaction_time, "ISO/TS 15066 T_r [s]: sensing and processing time "
          "until the stop is commanded."),
    _term("separation_intrusion", _SEP.intrusion, "ISO/TS 15066 C [m]: intrusion distance of the person "
          "detection (e.g. ISO 13855's 8 (d - 14) mm)."),
    _term("separation_human_uncertainty", _SEP.human_uncertainty, "ISO/TS 15066 Z_d [m]: position uncertainty of "
          "the person."),
    _term("separation_robot_uncertainty", _SEP.robot_uncertainty, "ISO/TS 15066 Z_r [m]: position uncertainty of "
          "the robot."),
    P.ParameterSpec("separation_cases", _SEP.cases, "Stop cases behind S_s and T_s: 'corner' (the envelope's worst "
                    "corner: weakest brakes, longest delays, heaviest payload; one prediction) or 'all' (every "
                    "envelope case).", P.one_of(("corner", "all")), constraint="corner or all"),
)


def separation_parameters(p: dict) -> SeparationParameters:
    """The core's ISO/TS 15066 terms from the node's parameters."""
    return SeparationParameters(human_speed=p["separation_human_speed"], reaction_time=p["separation_reaction_time"],
                                intrusion=p["separation_intrusion"],
                                human_uncertainty=p["separation_human_uncertainty"],
                                robot_uncertainty=p["separation_robot_uncertainty"], cases=p["separation_cases"])

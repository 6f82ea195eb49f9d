"""The solvability analysis as it runs inside the bounded worker process (no ROS, no message types).

Kept apart from the node so that the worker child imports only the core (Pinocchio, numpy, scipy), and so that the
request-specific checks that need the model (the number of ``positions``) name the message field.
"""

from __future__ import annotations

from typing import Sequence

from vtm_dynamics.core.reactions.absolute_coordinates import load_absolute_model
from vtm_dynamics.core.reactions.solvability import SolvabilityReport, analyze_solvability

#: Modules the worker child imports before its memory limit is set.
PRELOAD = ("vtm_dynamics.core.reactions.solvability", "vtm_dynamics.nodes.solvability_task")


def analyze_text(urdf_text: str, planar: bool, positions: Sequence[float] | None,
                 rank_rtol: float, max_links: int) -> SolvabilityReport:
    """Solvability report of URDF XML text (never a path: the caller has checked that it is XML text) at
    ``positions`` (Pinocchio joint coordinates [rad or m]; empty or None: neutral, loops assembled).

    ``max_links`` is the node's cap on ``<link>`` elements (the ground included); the work it allows is bounded by
    the worker's deadline and memory limit, so it replaces the core's default body cap.
    Raises ValueError with one line naming ``positions`` when their number does not match the model.
    """
    q = None if positions is None or len(positions) == 0 else [float(x) for x in positions]
    if q is not None:  # the model's coordinate count; only then is the model loaded a second time
        model = load_absolute_model(urdf_text, planar=planar)
        if len(q) != model.pin_model.nq:
            raise ValueError(f"positions: {len(q)} values given, the model {model.name!r} has "
                             f"{model.pin_model.nq} joint coordinates")
    return analyze_solvability(urdf_text, planar=planar, q=q, rank_rtol=rank_rtol, max_bodies=max(0, max_links - 1))

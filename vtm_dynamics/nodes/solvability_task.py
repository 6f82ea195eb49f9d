"""The solvability analysis as it runs inside the bounded worker process (no ROS, no message types).

Kept apart from the node so that the worker child imports only the core (Pinocchio, numpy, scipy), and so that the
request-specific checks that need the model (the number of ``positions``) name the message field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from vtm_dynamics.core.reactions.absolute_coordinates import assemble_loops, load_absolute_model
from vtm_dynamics.core.reactions.pair_frames import PairPlacement, configuration_from_positions, pair_placements
from vtm_dynamics.core.reactions.solvability import (
    SolvabilityReport,
    analyze_model,
    analyze_solvability,
    load_for_analysis,
)

#: Modules the worker child imports before its memory limit is set.
PRELOAD = ("vtm_dynamics.core.reactions.solvability", "vtm_dynamics.nodes.solvability_task")


def analyze_text(urdf_text: str, planar: bool, positions: Sequence[float] | None,
                 rank_rtol: float, max_links: int, method: str = "auto") -> SolvabilityReport:
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
    return analyze_solvability(urdf_text, planar=planar, q=q, rank_rtol=rank_rtol, max_bodies=max(0, max_links - 1),
                               method=method)


@dataclass(frozen=True)
class StateAnalysis:
    """A solvability report at a configuration and where its pairs are (for the RViz markers)."""

    report: SolvabilityReport
    placements: tuple[PairPlacement, ...]
    frame: str  # the model's root link: the frame the placements are expressed in


def analyze_state(urdf_text: str, planar: bool, names: Sequence[str], values: Sequence[float], rank_rtol: float,
                  max_links: int, method: str = "auto") -> StateAnalysis:
    """Solvability report at the configuration given by joint positions by name (a joint state; joints not named,
    and unknown names, keep the neutral value), loops assembled, with the pairs placed for drawing."""
    model = load_for_analysis(urdf_text, planar, max(0, max_links - 1))
    q = configuration_from_positions(model, dict(zip(names, (float(x) for x in values))))
    q = assemble_loops(model, q)
    report = analyze_model(model, q, rank_rtol=rank_rtol, method=method)
    return StateAnalysis(report, pair_placements(model, q, report), model.root_link)

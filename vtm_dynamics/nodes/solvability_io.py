"""Conversion of core solvability reports (Wojtyra & Frączek 2013) into vtm_msgs, diagnostic_msgs and RViz
markers. No physics: pair positions and directions come from the core (``pair_frames``)."""

from __future__ import annotations

import re

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus
from visualization_msgs.msg import Marker, MarkerArray

from vtm_dynamics.core.reactions.solvability import SolvabilityReport
from vtm_dynamics.nodes import diagnostics
from vtm_dynamics.nodes.markers import arrow_marker, color_rgba, new_marker, point
from vtm_msgs.msg import SolvabilityEntry
from vtm_msgs.msg import SolvabilityReport as SolvabilityReportMsg

STATUS_NAME = "vtm_dynamics: reaction solvability"
_KINDS = {
    "joint": SolvabilityEntry.JOINT,
    "loop_closure": SolvabilityEntry.LOOP_CLOSURE,
    "knife_edge": SolvabilityEntry.KNIFE_EDGE,
    "driving_constraint": SolvabilityEntry.DRIVING_CONSTRAINT,
}


def report_message(report: SolvabilityReport) -> SolvabilityReportMsg:
    """The ``vtm_msgs/SolvabilityReport`` of a core report (header left for the caller to stamp)."""
    msg = SolvabilityReportMsg()
    msg.model_name = report.model
    msg.planar = report.planar
    msg.coordinates = report.n_coordinates
    msg.constraints = report.m_holonomic + report.h_nonholonomic
    msg.rank = report.rank
    msg.redundancy = report.redundancy
    msg.tolerance = float(report.rank_tolerance)
    msg.relative_tolerance = float(report.rank_rtol)
    for pair in report.pairs:
        entry = SolvabilityEntry()
        entry.name = pair.name
        entry.kind = _KINDS[pair.kind]
        entry.type = pair.type
        entry.rows = len(pair.rows)
        entry.solvable = bool(pair.solvable)
        entry.residual = float(pair.qr_residual)
        entry.solvable_direction_count = len(pair.determined_directions)
        entry.solvable_directions = [float(x) for d in pair.determined_directions for x in d]
        msg.pairs.append(entry)
    msg.releasable = [f"{pair}/{row}" for pair, row in report.release_set]
    msg.success = True
    msg.message = (
        f"{len(report.unsolvable)} of {len(report.pairs)} pairs have reactions a rigid-body model cannot determine"
        if report.unsolvable else f"all {len(report.pairs)} pairs have unique reactions"
    )
    return msg


def failure_message(model_name: str, reason: str) -> SolvabilityReportMsg:
    """A report that says the analysis could not be done, and why."""
    return SolvabilityReportMsg(model_name=model_name, success=False, message=reason)


def diagnostic_status(report: SolvabilityReport, hardware_id: str) -> DiagnosticStatus:
    """One /diagnostics status: OK when every reaction is unique, WARN naming the pairs that are not."""
    unsolvable = report.unsolvable
    if unsolvable:
        level = diagnostics.WARN
        text = f"reactions not unique (redundancy {report.redundancy}): {', '.join(unsolvable)}"
    else:
        level, text = diagnostics.OK, f"all reactions unique (redundancy {report.redundancy})"
    values = {
        "rank": report.rank, "redundancy": report.redundancy, "coordinates": report.n_coordinates,
        "constraints": report.m_holonomic + report.h_nonholonomic, "relative_tolerance": report.rank_rtol,
        "unsolvable_pairs": ", ".join(unsolvable), "releasable": ", ".join(f"{p}/{r}" for p, r in report.release_set),
    }
    return diagnostics.status(STATUS_NAME, level, text, {k: str(v) for k, v in values.items()},
                              hardware_id=hardware_id)


def error_status(hardware_id: str, reason: str) -> DiagnosticStatus:
    return diagnostics.status(STATUS_NAME, diagnostics.ERROR, reason, hardware_id=hardware_id)


# ------------------------------------------------------------------------------------------ checks before any parse
def description_problem(text: str, field: str, max_bytes: int, max_links: int) -> str | None:
    """Why ``text`` (a message field holding a URDF) is refused before any parse, or None when it may be analysed.

    Linear time, no model built, nothing opened: the text must be URDF XML (first non-blank character ``<``; a
    message is data and never names a file), at most ``max_bytes`` bytes of UTF-8 and declare at most ``max_links``
    ``<link`` elements (a bounded count that stops at the cap). The reason is one line naming ``field`` and never
    quotes the text.
    """
    if len(text) > max_bytes or len(text.encode("utf-8", errors="replace")) > max_bytes:
        return f"{field}: larger than max_description_bytes ({max_bytes} bytes)"
    first = _XML_START.match(text)
    if first is None:
        return f"{field}: not URDF XML text (a message carries the URDF itself, never a file name)"
    links = 0
    for _ in _LINK_TAG.finditer(text):
        links += 1
        if links > max_links:
            return f"{field}: more than max_links ({max_links}) <link> elements"
    return None


def positions_problem(positions, max_positions: int) -> str | None:
    """Why ``AnalyzeSolvability.positions`` is refused (count above ``max_positions``, a non-finite entry), or
    None. Linear time; the count against the model is checked with the model."""
    count = len(positions)
    if count > max_positions:
        return f"positions: {count} values exceed max_positions ({max_positions})"
    if count:
        values = np.asarray(positions, dtype=float)
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            return f"positions: entry {int(bad[0])} is not a finite number"
    return None


_XML_START = re.compile(r"\s*<")
_LINK_TAG = re.compile(r"<link[\s/>]")


# ---------------------------------------------------------------------------------------------------- RViz markers
MARKER_NAMESPACES = ("solvability_pairs", "solvability_labels", "solvability_unique_forces",
                     "solvability_unique_moments")
SOLVABLE_COLOR = (0.1, 0.8, 0.2)  # green: the reaction is unique
PARTLY_COLOR = (1.0, 0.6, 0.0)  # orange: not unique as a whole, some directions are
UNSOLVABLE_COLOR = (0.9, 0.1, 0.1)  # red: no unique direction


def solvability_markers(placements, frame_id: str, stamp, arrow_length: float, sphere: float) -> MarkerArray:
    """Markers of a solvability analysis at a configuration (placements from the core, world = ``frame_id``).

    One DELETEALL first (pairs of an earlier model never linger), then per pair: a SPHERE at its origin coloured by
    verdict (green solvable, orange unsolvable with unique directions, red unsolvable with none), its name as TEXT,
    and for the pairs that are not solvable one ARROW of ``arrow_length`` [m] per unique force direction (and, in
    another namespace, per unique moment direction): what a designer can still trust in that joint.
    """
    out = MarkerArray()
    clear = Marker()
    clear.header.frame_id = frame_id
    clear.header.stamp = stamp
    clear.action = Marker.DELETEALL
    out.markers.append(clear)
    for i, pl in enumerate(placements):
        origin = np.asarray(pl.origin, dtype=float)
        rgb = SOLVABLE_COLOR if pl.solvable else (PARTLY_COLOR if pl.unique_forces or pl.unique_moments
                                                  else UNSOLVABLE_COLOR)
        ball = new_marker(frame_id, stamp, "solvability_pairs", i, Marker.SPHERE)
        ball.pose.position = point(origin)
        ball.scale.x = ball.scale.y = ball.scale.z = float(sphere)
        ball.color = color_rgba(*rgb, 0.9)
        text = new_marker(frame_id, stamp, "solvability_labels", i, Marker.TEXT_VIEW_FACING)
        text.pose.position = point(origin + np.array([0.0, 0.0, 1.5 * sphere]))
        text.scale.z = float(sphere)
        text.color = color_rgba(*rgb)
        text.text = pl.name if pl.solvable else f"{pl.name} (not unique)"
        out.markers += [ball, text]
        if pl.solvable:
            continue
        for ns, dirs in (("solvability_unique_forces", pl.unique_forces),
                         ("solvability_unique_moments", pl.unique_moments)):
            for k, d in enumerate(dirs):
                out.markers.append(arrow_marker(frame_id, stamp, ns, i * 8 + k, origin,
                                          arrow_length * np.asarray(d, dtype=float), 0.15 * sphere,
                                          color_rgba(*rgb), arrow_length))
    return out

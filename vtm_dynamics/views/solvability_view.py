"""The view of a reaction solvability report: the mechanism at the analysed configuration with each kinematic pair
marked by its verdict (Wojtyra & Frączek 2013, Sect. 3.3): green where the pair's reaction is unique, orange where
only some directions of it are (arrows along those directions), red where none is.

Pair origins and the world directions of their unique reaction components come from the core
(``core/reactions/pair_frames``), the same placements the solvability_reporter node draws in RViz. Units: m.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.reactions.pair_frames import PairPlacement
from vtm_dynamics.core.reactions.solvability import SolvabilityReport
from vtm_dynamics.views import palette
from vtm_dynamics.views.robot_geometry import RobotGeometry, geometry_scale, link_poses
from vtm_dynamics.views.scene import Cylinder, Label, LegendEntry, RobotLayer, Scene, Sphere, check_scene, clip_text


def _verdict_color(pl: PairPlacement) -> tuple[float, float, float]:
    if pl.solvable:
        return palette.SOLVABLE
    return palette.PARTLY_SOLVABLE if pl.unique_forces or pl.unique_moments else palette.UNSOLVABLE


def _arrow(name: str, origin: np.ndarray, direction: np.ndarray, length: float, radius: float,
           color) -> list[Cylinder]:
    """A shaft and a head (a thinner short cylinder stands in for a cone) along ``direction``."""
    d = np.asarray(direction, dtype=float)
    d = d / np.linalg.norm(d)
    helper = np.array([1.0, 0.0, 0.0]) if abs(d[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, d)
    x /= np.linalg.norm(x)
    R = np.column_stack([x, np.cross(d, x), d])
    out = []
    for part, (center, r, length_) in (("shaft", (0.4 * length, radius, 0.8 * length)),
                                       ("head", (0.9 * length, 2.2 * radius, 0.2 * length))):
        T = np.eye(4)
        T[:3, :3] = R
        T[:3, 3] = origin + center * d
        out.append(Cylinder(f"{name}_{part}", r, length_, T, color))
    return out


def solvability_scene(model: pin.Model, geometry: RobotGeometry, q: np.ndarray, report: SolvabilityReport,
                      placements: Sequence[PairPlacement], *, title: str | None = None) -> Scene:
    """The scene of ``report`` at configuration ``q`` (module docstring); ``placements`` from
    :func:`core.reactions.pair_frames.pair_placements` at that configuration."""
    poses = link_poses(model, geometry, np.asarray(q, dtype=float)[None, :])
    scale = geometry_scale(np.concatenate([poses[0, :, :3], [p.origin for p in placements]]) if placements
                           else poses)
    shapes, labels = [], []
    arrow = 0.25 * scale
    for i, pl in enumerate(placements):
        color = _verdict_color(pl)
        origin = np.asarray(pl.origin, dtype=float)
        shapes.append(Sphere(f"pair_{i}", 0.045 * scale, tuple(origin), color, 0.9))
        labels.append(Label(pl.name if pl.solvable else f"{pl.name} (not unique)", tuple(origin), color))
        if not pl.solvable:
            for k, d in enumerate(pl.unique_forces):
                shapes += _arrow(f"pair_{i}_force_{k}", origin, np.asarray(d), arrow, 0.008 * scale, color)
            for k, d in enumerate(pl.unique_moments):
                shapes += _arrow(f"pair_{i}_moment_{k}", origin, np.asarray(d), 0.7 * arrow, 0.006 * scale,
                                 palette.WORST)
    unsolvable = report.unsolvable
    info = [f"{report.model}: {report.n_bodies} bodies, rank {report.rank}, degree of redundancy p = "
            f"{report.redundancy}",
            (f"{len(unsolvable)} of {len(report.pairs)} pairs have reactions a rigid-body model cannot determine: "
             + ", ".join(unsolvable)) if unsolvable else f"all {len(report.pairs)} pairs have unique reactions"]
    if report.release_set:
        info.append("releasing " + ", ".join(f"{p}.{r}" for p, r in report.release_set) + " would remove the "
                    "redundancy")
    info.append("analysed at " + ("the neutral configuration" if report.q is None else "the given configuration")
                + ("" if report.planar else " (spatial model)"))
    legend = [LegendEntry(palette.ROBOT, "mechanism", ("robot",)),
              LegendEntry(palette.SOLVABLE, "pair: reaction unique"),
              LegendEntry(palette.PARTLY_SOLVABLE, "pair: only the arrowed force directions are unique"),
              LegendEntry(palette.WORST, "arrow: a unique moment direction"),
              LegendEntry(palette.UNSOLVABLE, "pair: no unique reaction component")]
    layer = RobotLayer("robot", "mechanism", palette.ROBOT, 0.85, np.zeros(1), poses)
    return check_scene(Scene(
        title=clip_text(title or f"{report.model}: reaction solvability"), geometry=geometry, robots=(layer,),
        shapes=tuple(shapes), labels=tuple(labels), info=tuple(clip_text(x) for x in info), legend=tuple(legend),
        notes=geometry.notes))

"""Where the kinematic pairs of an absolute-coordinate model are, and a configuration from named joint positions.

Used to draw solvability verdicts (Wojtyra & Frączek 2013) on the robot: each pair's frame (origin [m] and
rotation, world axes) at a configuration, and its determined reaction directions mapped to world axes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.reactions.absolute_coordinates import AbsoluteModel, body_poses, pair_frame
from vtm_dynamics.core.reactions.solvability_report import SolvabilityReport


@dataclass(frozen=True)
class PairPlacement:
    """One pair at a configuration: origin [m] (world), verdict, and its unique reaction directions in world axes.

    ``unique_forces``/``unique_moments``: unit vectors of the force and moment parts of the pair's determined
    directions (empty parts omitted); for a solvable pair these span every direction it constrains.
    """

    name: str
    solvable: bool
    origin: tuple[float, float, float]
    unique_forces: tuple[tuple[float, float, float], ...]
    unique_moments: tuple[tuple[float, float, float], ...]


def configuration_from_positions(model: AbsoluteModel, positions: Mapping[str, float]) -> np.ndarray:
    """Pinocchio q from joint positions by name [rad or m]; joints not named keep their neutral value.

    One-coordinate joints (revolute, prismatic) take the value; continuous joints (cos, sin) take the angle.
    Joints with several coordinates (planar, floating bases) stay neutral: a joint state does not carry them.
    """
    pm = model.pin_model
    q = pin.neutral(pm)
    for jid in range(1, pm.njoints):
        name = pm.names[jid]
        if name not in positions:
            continue
        joint = pm.joints[jid]
        value = float(positions[name])
        if joint.nq == 1:
            q[joint.idx_q] = value
        elif joint.nq == 2 and joint.nv == 1:
            q[joint.idx_q:joint.idx_q + 2] = (np.cos(value), np.sin(value))
    return q


def pair_placements(model: AbsoluteModel, q, report: SolvabilityReport) -> tuple[PairPlacement, ...]:
    """Every analysed pair of ``report`` placed at ``q`` (the configuration the report was made at)."""
    poses = body_poses(model, q)
    specs = {p.name: p for p in model.pairs}
    out = []
    for pair in report.pairs:
        R, p = pair_frame(specs[pair.name], poses)
        forces, moments = [], []
        for d in pair.determined_directions:
            d = np.asarray(d, dtype=float)
            for part, sink in ((d[:3], forces), (d[3:], moments)):
                norm = float(np.linalg.norm(part))
                if norm > 1e-9:
                    sink.append(tuple(float(x) for x in R @ part / norm))
        out.append(PairPlacement(pair.name, pair.solvable, (float(p[0]), float(p[1]), float(p[2])),
                                 tuple(forces), tuple(moments)))
    return tuple(out)

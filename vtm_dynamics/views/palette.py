"""Colours of every view (web page and RViz markers), one home so a colour means the same thing everywhere.

RGB in 0..1. The animated robot is a saturated blue that no ghost, path or background uses: the browser test
finds the robot by it.
"""

from __future__ import annotations

import numpy as np

ROBOT = (0.22, 0.52, 0.95)  # the robot moving along the predicted stop
START = (0.15, 0.70, 0.25)  # ghost of the pose at the E-stop
REST = (0.85, 0.15, 0.15)  # ghost of the predicted rest pose
WORST = (0.62, 0.20, 0.80)  # the envelope's worst-case rest pose
SIMULATED = (0.45, 0.45, 0.45)  # a reference simulation of the same stop
TCP_PATH = (1.0, 0.55, 0.0)  # the TCP path (as the RViz stop markers)
CELL_BOX = (0.20, 0.55, 0.95)
OBSTACLE = (0.70, 0.71, 0.75)
CLOSEST = (0.95, 0.05, 0.45)  # the closest approach between a robot and its scene
OBSTACLE_TEXT = (0.25, 0.27, 0.32)  # an obstacle's name beside it
FLOOR = (0.78, 0.74, 0.66)
OTHER_CASE = (0.55, 0.55, 0.62)  # paths of the envelope's other cases
SAFE = (0.15, 0.68, 0.30)  # checked E-stop instants whose stops all end clear
UNSAFE = (0.85, 0.10, 0.10)  # ... and those with a stop that does not
NOT_STOPPED = (0.10, 0.10, 0.10)  # map states not at rest within the horizon (no stopping distance to colour by)
PAST_LIMIT = (0.90, 0.0, 0.90)  # map states whose stop goes past a joint limit (no end stops: not a stop)
GHOST_OPACITY = 0.3

EVENT_COLORS = {  # events of a predicted stop (core/estop/results.py StopEvent.kind)
    "engage": (0.10, 0.45, 0.95),
    "slip": (1.00, 0.70, 0.00),
    "stick": (0.85, 0.10, 0.10),
    "release": (0.10, 0.70, 0.20),
    "lock": (0.15, 0.15, 0.15),
    "power_off": (0.50, 0.50, 0.50),
}
OTHER_EVENT = (0.40, 0.40, 0.40)

# reaction solvability verdicts (Wojtyra & Fraczek 2013): unique, partly unique, not unique
SOLVABLE = (0.10, 0.80, 0.20)
PARTLY_SOLVABLE = (1.00, 0.60, 0.00)
UNSOLVABLE = (0.90, 0.10, 0.10)


def event_color(kind: str) -> tuple[float, float, float]:
    return EVENT_COLORS.get(kind, OTHER_EVENT)


_RAMP = ((0.0, (0.19, 0.23, 0.60)), (0.35, (0.10, 0.60, 0.65)), (0.65, (0.55, 0.80, 0.25)),
         (0.85, (1.00, 0.75, 0.10)), (1.0, (0.85, 0.10, 0.10)))


def ramp(fractions):
    """Sequential colour scale (small: blue-green, large: yellow-red) for values in 0..1 (clipped; NaN counts as
    0): an (n, 3) array of RGB for an array of n values, for point clouds coloured by a result."""
    f = np.nan_to_num(np.clip(np.asarray(fractions, dtype=float), 0.0, 1.0), nan=0.0)
    xs = [a for a, _ in _RAMP]
    return np.stack([np.interp(f, xs, [c[k] for _, c in _RAMP]) for k in range(3)], axis=-1)

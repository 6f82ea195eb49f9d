"""ISO/TS 15066 speed and separation monitoring: the protective separation distance from predicted stops.

ISO/TS 15066:2016, 5.5.4 (speed and separation monitoring) gives the protective separation distance

    S_p = S_h + S_r + S_s + C + Z_d + Z_r                                              (ISO/TS 15066, formula (1))

with S_h = v_h (T_r + T_s) the person's approach while the robot reacts and stops (v_h: 1.6 m/s, the walking
speed of ISO 13855, unless measured), S_r = v_r T_r the robot's approach during its reaction time T_r (v_r its
speed towards the person, taken constant, not below 0), S_s the robot's stopping distance towards the person, C
the intrusion distance of the person detection (e.g. ISO 13855's 8 (d - 14) mm), Z_d and Z_r the position
uncertainties of the person and the robot. Here T_s and S_s are PREDICTED (Müller 2026, eqs. (3) and (22) with
brakes, :mod:`vtm_dynamics.core.estop`), not taken from a data sheet: T_s is the longest stop of the cases asked
for (the envelope's worst corner by default, every case on request). The formula is applied to every part of the
robot's collision geometry (any link, not only the tool), each with its own nearest material point: v_r that
point's speed towards the person, S_s its largest displacement along the direction to the person during the
predicted stops, d its distance to the person. The part with the smallest margin d - S_p limits (the closest part
need not: a slightly farther one moving fast towards the person can have the larger S_p), and its terms are the
result's.

A stop case that does not come to rest within the horizon, or whose stop carries a joint past its position limit
(:mod:`vtm_dynamics.core.estop.limit_crossings`: the braked dynamics have no end stops, an end stop would end that
motion), gives no valid S_s or T_s: the result is then not ``valid`` and not ``safe``, whatever its margin, and
:meth:`SeparationDistance.invalid_reason` says why (the case, the joint and how far).

:class:`SeparationMonitor` evaluates it from a joint state by name and a person's position, in one call, at a
continuous rate; :func:`separation_table` evaluates it over the rows of a workspace map
(:mod:`vtm_dynamics.core.stopping.workspace_map`). Units: m, s, m/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.estop import StopInputError, state_from_joint_names
from vtm_dynamics.core.estop.limit_crossings import crossings_text
from vtm_dynamics.core.stopsafe.robot_geometry import RobotGeometry
from vtm_dynamics.core.stopsafe.stop_cases import CheckCancelled, StopCase, StopSetup, predict_stops

MAX_TABLE_ROWS = 1_000_000
MAX_EXTENT = 1000.0  # [m]


@dataclass(frozen=True)
class SeparationParameters:
    """``human_speed`` v_h [m/s], ``reaction_time`` T_r [s] (sensing and processing until the stop is commanded),
    ``intrusion`` C [m], ``human_uncertainty`` Z_d [m], ``robot_uncertainty`` Z_r [m], and ``cases``: ``corner``
    (the envelope's worst corner per category, for continuous use) or ``all``."""

    human_speed: float = 1.6
    reaction_time: float = 0.1
    intrusion: float = 0.0
    human_uncertainty: float = 0.0
    robot_uncertainty: float = 0.0
    cases: str = "corner"

    def check(self) -> None:
        for name, hi in (("human_speed", 10.0), ("reaction_time", 10.0), ("intrusion", 10.0),
                         ("human_uncertainty", 10.0), ("robot_uncertainty", 10.0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value)
                                                                                     and 0 <= value <= hi):
                raise StopInputError(f"separation.{name}: expected 0..{hi:g}, got {value!r}")
        if self.cases not in ("corner", "all"):
            raise StopInputError(f"separation.cases: expected corner or all, got {self.cases!r}")


@dataclass(frozen=True)
class SeparationDistance:
    """Every term of S_p [m] (module docstring) for one state and one person position: ``S_p``, ``S_h``, ``S_r``,
    ``S_s``, ``C``, ``Z_d``, ``Z_r``, the times ``T_r``, ``T_s`` [s] and speeds ``v_h``, ``v_r`` [m/s] of the
    LIMITING part (the smallest margin over the parts, module docstring): its ``link`` and nearest point
    ``closest_point`` (3), the ``person`` (3) and unit ``direction`` from the point to the person; that point's
    ``separation`` [m] from the person, ``margin`` = separation - S_p and ``safe`` (margin >= 0 and :attr:`valid`);
    ``case`` (label of the case that gave S_s) and ``stopped``. ``closest_link`` and
    ``closest_separation`` [m]: the part nearest to the person (the limiting one or not); ``parts``: every part's
    :class:`PartSeparation`. ``limit_crossings``: the joints the first case to go past a position limit carries
    past it (one line each with how far; () when none does) and ``limit_case`` that case's label."""

    S_p: float
    S_h: float
    S_r: float
    S_s: float
    C: float
    Z_d: float
    Z_r: float
    T_r: float
    T_s: float
    v_h: float
    v_r: float
    link: str
    closest_point: np.ndarray
    person: np.ndarray
    direction: np.ndarray
    separation: float
    margin: float
    safe: bool
    case: str
    stopped: bool
    closest_link: str = ""
    closest_separation: float = math.nan
    parts: tuple["PartSeparation", ...] = ()
    limit_crossings: tuple[str, ...] = ()
    limit_case: str = ""

    @property
    def valid(self) -> bool:
        """Every case came to rest within the horizon and within the joints' position limits: only then are T_s,
        S_s and S_p values for the robot (module docstring)."""
        return self.stopped and not self.limit_crossings

    def invalid_reason(self) -> str:
        """'' when :attr:`valid`, else why there is no value: a case past a joint limit (the case, the joint and how
        far; :func:`~vtm_dynamics.core.estop.limit_crossings.crossings_text`) or a case not at rest within the
        horizon."""
        if self.limit_crossings:
            return f"case ({self.limit_case}): {crossings_text(self.limit_crossings)}"
        return "" if self.stopped else "a stop case is not at rest within the horizon"


@dataclass(frozen=True)
class PartSeparation:
    """ISO/TS 15066 formula (1) for one collision part of the robot: its ``link``, the ``separation`` [m] from its
    nearest material ``point`` (3, world frame) to the person, that point's speed ``v_r`` [m/s] and stopping travel
    ``S_s`` [m] towards the person (unit ``direction``, 3), ``S_p`` [m], ``margin`` = separation - S_p [m] and the
    ``case`` that gave S_s."""

    link: str
    separation: float
    v_r: float
    S_s: float
    S_p: float
    margin: float
    point: np.ndarray
    direction: np.ndarray
    case: str


class SeparationMonitor:
    """One-call protective separation distance (module docstring) for a robot; one instance per thread."""

    def __init__(self, setup: StopSetup, geometry: RobotGeometry,
                 parameters: SeparationParameters = SeparationParameters()) -> None:
        import coal

        parameters.check()
        if setup.robot.joint_names != geometry.robot.joint_names:
            raise StopInputError("geometry: built for another model than the stop predictions (joint names differ)")
        self.setup, self.geometry, self.parameters = setup, geometry, parameters
        self._model = geometry.robot.model
        self._data = self._model.createData()
        self._point = coal.Sphere(1e-9)
        self._req, self._res = coal.DistanceRequest(), coal.DistanceResult()

    def cases(self) -> tuple[StopCase, ...]:
        return self.setup.cases if self.parameters.cases == "all" else self.setup.worst_corner

    def __call__(self, names: Sequence[str], positions: Sequence[float], velocities: Sequence[float] | None,
                 person: Sequence[float], *, cancel: Callable[[], bool] | None = None) -> SeparationDistance:
        """S_p for the joint state (JointState-like: ``names``, ``positions`` [rad], ``velocities`` [rad/s], any
        order) and the person's position [m] (world frame)."""
        q, v = state_from_joint_names(self.setup.robot, names, positions, velocities)
        return self.evaluate(q, v, person, cancel=cancel)

    def evaluate(self, q: np.ndarray, v: np.ndarray, person: Sequence[float], *,
                 cases: Sequence[StopCase] | None = None,
                 cancel: Callable[[], bool] | None = None) -> SeparationDistance:
        """S_p for a state in model order (``q``, ``v``); ``cases`` overrides the parameters' choice."""
        import coal

        p = np.asarray(person, dtype=float)
        if p.shape != (3,) or not np.all(np.isfinite(p)) or np.any(np.abs(p) > MAX_EXTENT):
            raise StopInputError(f"person: expected 3 finite coordinates within {MAX_EXTENT:g} m")
        cases = tuple(cases) if cases is not None else self.cases()
        g = self.geometry
        pin.forwardKinematics(self._model, self._data, q, v)
        Rs = np.array([M.rotation for M in self._data.oMi])[None]
        ps = np.array([M.translation for M in self._data.oMi])[None]
        Rp, tp = g.part_placements(Rs, ps)
        target = coal.Transform3s(np.eye(3), p)
        preds = predict_stops(self.setup, q[None], v[None], cases=cases, cancel=cancel)[0]
        poses = [g.joint_poses(pred.q) for pred in preds]
        stopped = all(pred.stopped for pred in preds)
        crossed = next(((case, pred) for case, pred in zip(cases, preds) if pred.limit_crossings), None)
        T_s = max(pred.stop_time if pred.stopped else float(pred.t[-1]) for pred in preds)
        P = self.parameters
        S_h = P.human_speed * (P.reaction_time + T_s)
        rest = P.intrusion + P.human_uncertainty + P.robot_uncertainty
        parts = []
        for k in range(len(g.parts)):  # every part's nearest point, with its own v_r and S_s (module docstring)
            self._res.clear()
            d = coal.distance(g.parts[k].shape, coal.Transform3s(Rp[0, k], tp[0, k]), self._point, target,
                              self._req, self._res)
            point = np.array(self._res.getNearestPoint1())
            joint = g.parts[k].joint
            R0, p0 = Rs[0, joint], ps[0, joint]
            local = R0.T @ (point - p0)
            gap = p - point
            direction = gap / np.linalg.norm(gap) if np.linalg.norm(gap) > 1e-12 else np.zeros(3)
            # the point's velocity towards the person (classical linear velocity of the material point)
            vel_joint = pin.getVelocity(self._model, self._data, joint, pin.ReferenceFrame.LOCAL)
            v_point = R0 @ (np.array(vel_joint.linear) + np.cross(np.array(vel_joint.angular), local))
            v_r = max(0.0, float(v_point @ direction))
            S_s, worst_case, T_case = 0.0, cases[0], 0.0
            for case, pred, (Rj, pj) in zip(cases, preds, poses):
                travel = pj[:, joint] + Rj[:, joint] @ local - point
                reach = (float(np.max(travel @ direction)) if np.any(direction)
                         else float(np.max(np.linalg.norm(travel, axis=1))))
                t = pred.stop_time if pred.stopped else float(pred.t[-1])
                if reach > S_s or (reach == S_s and t > T_case):
                    S_s, worst_case = max(reach, 0.0), case
                T_case = max(T_case, t)
            separation = max(float(d), 0.0)
            S_p = S_h + v_r * P.reaction_time + S_s + rest
            parts.append(PartSeparation(g.parts[k].link, separation, v_r, S_s, S_p, separation - S_p, point,
                                        direction, worst_case.label()))
        closest = min(parts, key=lambda x: x.separation)
        lim = min(parts, key=lambda x: x.margin)
        return SeparationDistance(
            S_p=lim.S_p, S_h=S_h, S_r=lim.v_r * P.reaction_time, S_s=lim.S_s, C=P.intrusion, Z_d=P.human_uncertainty,
            Z_r=P.robot_uncertainty, T_r=P.reaction_time, T_s=T_s, v_h=P.human_speed, v_r=lim.v_r, link=lim.link,
            closest_point=lim.point, person=p, direction=lim.direction, separation=lim.separation,
            margin=lim.margin, safe=bool(lim.margin >= 0 and stopped and crossed is None), case=lim.case,
            stopped=bool(stopped), closest_link=closest.link, closest_separation=closest.separation,
            parts=tuple(parts), limit_crossings=tuple(crossed[1].limit_crossings) if crossed else (),
            limit_case=crossed[0].label() if crossed else "")


@dataclass(frozen=True)
class SeparationRow:
    """One workspace-map row: its ``state`` number and the :class:`SeparationDistance` for the row's own case, in
    the stop ``category`` that limits it (the one with the larger S_p when several are evaluated)."""

    state: int
    result: SeparationDistance
    category: int = 0


def table_columns(joint_names: Sequence[str]) -> tuple[str, ...]:
    """The map columns :func:`separation_table` reads, for a robot with these joints (a reader of a map file
    need read no other)."""
    return (("state",) + tuple(f"q_{j}" for j in joint_names) + tuple(f"v_{j}" for j in joint_names)
            + ("payload_kg", "torque_factor", "delay_factor"))


def separation_table(monitor: SeparationMonitor, columns: Mapping[str, np.ndarray], person: Sequence[float], *,
                     category: int | Sequence[int] = 0, max_rows: int = 100_000,
                     cancel: Callable[[], bool] | None = None,
                     progress: Callable[[int, int], None] | None = None) -> list[SeparationRow]:
    """S_p for every row of a workspace map (the columns of
    :func:`vtm_dynamics.core.stopping.workspace_map.evaluate_chunk`: ``state``, ``q_<joint>``, ``v_<joint>``,
    ``payload_kg``, ``torque_factor``, ``delay_factor``: :func:`table_columns`), each with the row's own brake and payload case; at most
    ``max_rows`` rows (one-line error beyond). ``category``: the stop category (IEC 60204-1) of the rows' cases, or
    several (e.g. ``(0, 1)``): each is evaluated on its own and the row keeps the one with the larger S_p (the
    smaller margin; a case that does not stop or goes past a joint limit first), whichever category that is."""
    categories = (category,) if isinstance(category, (int, np.integer)) else tuple(category)
    if not categories or any(c not in (0, 1) for c in categories):
        raise StopInputError(f"category: 0, 1 or both, got {category!r}")
    robot = monitor.setup.robot
    try:
        n = len(columns["state"])
        q = np.column_stack([np.asarray(columns[f"q_{j}"], dtype=float) for j in robot.joint_names])
        v = np.column_stack([np.asarray(columns[f"v_{j}"], dtype=float) for j in robot.joint_names])
        factors = [(float(tf), float(df), float(m)) for tf, df, m in
                   zip(columns["torque_factor"], columns["delay_factor"], columns["payload_kg"])]
    except KeyError as err:
        raise StopInputError(f"map: column {err.args[0]!r} is missing (a map of {robot.name!r} is needed)") from None
    if not 1 <= n <= min(max_rows, MAX_TABLE_ROWS):
        raise StopInputError(f"map: {n} rows, expected 1..{min(max_rows, MAX_TABLE_ROWS)}")
    if any(m > 0 for _, _, m in factors) and monitor.setup.payload_frame is None:
        raise StopInputError("map: rows carry a payload but no payload frame is set")
    out = []
    states = np.asarray(columns["state"])
    for k in range(n):
        if cancel is not None and cancel():
            raise CheckCancelled("cancelled: the caller asked to stop")
        worst: SeparationRow | None = None
        for c in categories:
            r = monitor.evaluate(q[k], v[k], person, cases=[StopCase(int(c), *factors[k])], cancel=cancel)
            if worst is None or (not r.valid, r.S_p) > (not worst.result.valid, worst.result.S_p):
                worst = SeparationRow(int(states[k]), r, int(c))
        out.append(worst)
        if progress is not None:
            progress(k + 1, n)
    return out

"""Message <-> numpy conversions for the nodes: joint states by joint NAME, trajectories, durations.

A ``sensor_msgs/JointState`` carries joints by name in any order, possibly a subset (several publishers may share
``/joint_states``). :class:`JointStateTracker` merges such messages into the model's coordinate vectors and rejects
malformed ones (NaN, mismatched array lengths) with a one-line reason; names the model does not know are reported
and ignored. No physics here: positions map to Pinocchio configurations through the joint index maps of
``vtm_dynamics.core.robot.model.RobotModel`` (one angle per revolute/prismatic joint; a continuous joint's angle goes to
its (cos, sin) pair).

Units: positions [rad, m], velocities [rad/s, m/s], efforts [N m, N], stamps [s].
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from builtin_interfaces.msg import Duration, Time
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from vtm_dynamics.core.excerpt import excerpt, excerpt_list
from vtm_dynamics.core.robot.joint_velocity import joint_velocity
from vtm_dynamics.core.robot.model import RobotModel

# Positions no joint state can plausibly report: a full joint range beyond either limit (limited joints), or
# more than this many rad / m from zero (continuous and unlimited joints; a wheel counting turns reaches 1e6 rad
# in about 2 days at 1 rev/s). Such a state is rejected, so it never feeds a later velocity estimate.
MAX_ABS_POSITION = 1e9

# Joint names accepted in one JointState. Real robots report 6-50 joints; a mobile manipulator with two hands
# about 60. 256 leaves room and bounds the work one message can cause.
DEFAULT_MAX_JOINTS = 256

# [rad/s, m/s] a joint whose last velocity is at most this is at rest: its value does not age a state while its
# publisher is not silent (JointStateTracker). 1e-3 rad/s for 50 ms is 5e-5 rad; encoder noise at standstill is
# of that order, a gripper closing moves 100 times faster.
REST_SPEED = 1e-3


class JointStateError(ValueError):
    """A JointState message cannot be used; the message says which field is wrong."""


class UnsupportedJointError(ValueError):
    """The model has a joint that a JointState cannot describe (floating, planar, spherical)."""


# ---------------------------------------------------------------------------------------------- time
def stamp_to_seconds(stamp: Time) -> float:
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)


def seconds_to_stamp(t: float) -> Time:
    sec = math.floor(t)
    nanosec = int(round((t - sec) * 1e9))
    if nanosec >= 1_000_000_000:
        sec, nanosec = sec + 1, nanosec - 1_000_000_000
    return Time(sec=int(sec), nanosec=nanosec)


def exact_stamp(header_stamp: Time | None, seconds: float) -> Time:
    """A state's stamp as a message: its exact ``header_stamp`` when known, else ``seconds`` [s] (float seconds
    resolve only about 0.24 us at today's epoch, so a stamp made from them may differ from the original by ~0.1 us)."""
    return copy.copy(header_stamp) if header_stamp is not None else seconds_to_stamp(seconds)


def seconds_to_duration(t: float) -> Duration:
    s = seconds_to_stamp(max(0.0, float(t)))
    return Duration(sec=s.sec, nanosec=s.nanosec)


def duration_to_seconds(d: Duration) -> float:
    return float(d.sec) + 1e-9 * float(d.nanosec)


# ---------------------------------------------------------------------------------------------- joint maps
def check_joint_state_compatible(robot: RobotModel) -> None:
    """Raise :class:`UnsupportedJointError` if a movable joint has more than one velocity coordinate."""
    for j in robot.joints:
        if j.nv != 1 or j.nq not in (1, 2):
            raise UnsupportedJointError(
                f"joint {j.name!r} ({j.kind}) has nq={j.nq}, nv={j.nv}: sensor_msgs/JointState describes only "
                "one-coordinate joints"
            )


def configuration_from_positions(robot: RobotModel, positions: Sequence[float]) -> np.ndarray:
    """Pinocchio configuration q from one position per movable joint (velocity order) [rad, m]."""
    q = robot.neutral()
    for j, x in zip(robot.joints, positions):
        if j.nq == 1:
            q[j.idx_q] = x
        else:  # continuous joint stored as (cos, sin)
            q[j.idx_q] = math.cos(x)
            q[j.idx_q + 1] = math.sin(x)
    return q


def positions_from_configuration(robot: RobotModel, q: Sequence[float]) -> np.ndarray:
    """One position per movable joint (velocity order) from a configuration q [rad, m]."""
    out = np.empty(robot.nv)
    for j in robot.joints:
        if j.nq == 1:
            out[j.idx_v] = q[j.idx_q]
        else:
            out[j.idx_v] = math.atan2(q[j.idx_q + 1], q[j.idx_q])
    return out


@dataclass(frozen=True)
class ParsedJointState:
    """The usable content of one JointState: per known joint name, position/velocity/effort (None if absent).
    ``superseded``: known joints whose values in the message are older than those a :class:`JointStateTracker`
    already holds and were not merged (set by ``JointStateTracker.update``; empty from :func:`parse_joint_state`)."""

    stamp: float
    positions: dict[str, float]
    velocities: dict[str, float] | None
    efforts: dict[str, float] | None
    unknown_names: tuple[str, ...]
    superseded: tuple[str, ...] = ()

    @property
    def merged(self) -> tuple[str, ...]:
        """The known joints whose values were taken."""
        skip = set(self.superseded)
        return tuple(n for n in self.positions if n not in skip)


def parse_joint_state(msg: JointState, known_names: Sequence[str], *,
                      max_joints: int = DEFAULT_MAX_JOINTS) -> ParsedJointState:
    """Check a JointState and keep the joints in ``known_names``; raise :class:`JointStateError` on bad content.

    Rules (sensor_msgs/JointState convention): at most ``max_joints`` names (checked first); ``position`` must be
    as long as ``name``; ``velocity`` and ``effort`` are either empty (not reported) or as long as ``name``; names
    must be unique; every value of a known joint must be finite. Entries of unknown names are ignored and listed in
    ``unknown_names``. All checks are linear in the message size.
    """
    n = len(msg.name)
    if n > max_joints:
        raise JointStateError(f"name: {n} names (max_joints {max_joints})")
    names = list(msg.name)
    if n == 0:
        raise JointStateError("name: empty joint state")
    if len(set(names)) != n:
        dup = sorted(x for x, k in Counter(names).items() if k > 1)
        raise JointStateError(f"name: duplicate joint names [{excerpt_list([repr(d) for d in dup])}]")
    if len(msg.position) != n:
        raise JointStateError(f"position: {len(msg.position)} values for {n} names")
    for field in ("velocity", "effort"):
        k = len(getattr(msg, field))
        if k not in (0, n):
            raise JointStateError(f"{field}: {k} values for {n} names (must be 0 or {n})")
    known = known_names if isinstance(known_names, (set, frozenset)) else set(known_names)
    positions: dict[str, float] = {}
    velocities: dict[str, float] | None = {} if len(msg.velocity) else None
    efforts: dict[str, float] | None = {} if len(msg.effort) else None
    unknown = []
    for i, name in enumerate(names):
        if name not in known:
            unknown.append(name)
            continue
        p = float(msg.position[i])
        if not math.isfinite(p):
            raise JointStateError(f"position: non-finite value {p} for joint {excerpt(name)}")
        positions[name] = p
        if velocities is not None:
            v = float(msg.velocity[i])
            if not math.isfinite(v):
                raise JointStateError(f"velocity: non-finite value {v} for joint {excerpt(name)}")
            velocities[name] = v
        if efforts is not None:
            e = float(msg.effort[i])
            efforts[name] = e if math.isfinite(e) else float("nan")  # efforts are optional input
    return ParsedJointState(stamp_to_seconds(msg.header.stamp), positions, velocities, efforts, tuple(unknown))


@dataclass(frozen=True)
class JointStateSnapshot:
    """The robot state assembled from joint state messages, in the model's velocity order.

    ``q`` configuration (size nq), ``v`` velocities [rad/s], ``positions`` one coordinate per joint [rad, m],
    ``stamp`` [s] of its oldest joint value (joints reported by different publishers may be of different ages; the
    state is no newer than its stalest joint) and ``header_stamp`` that instant exactly (the message's stamp; float
    seconds lose nanoseconds), ``latest`` [s] the newest instant among its joint values (NaN: not known, take
    ``stamp``), ``estimated_velocity`` names of joints whose velocity was
    estimated by a backward difference because the messages carried none, ``unavailable_velocity`` names of joints
    whose velocity is neither measured nor estimable (the last message carried no velocity and its stamp was zero, not
    newer than the previous one or too far after it, or there was only one message): their entry in ``v`` is a
    placeholder.
    ``velocity_source`` sums it up: "unavailable" if any joint's velocity is unavailable, else "estimated" if any is
    estimated, else "measured". A prediction must not start from a state whose velocities are unavailable.
    """

    stamp: float
    positions: np.ndarray
    q: np.ndarray
    v: np.ndarray
    estimated_velocity: tuple[str, ...]
    unavailable_velocity: tuple[str, ...] = ()
    header_stamp: Time | None = None
    latest: float = math.nan

    @property
    def velocity_source(self) -> str:
        if self.unavailable_velocity:
            return "unavailable"
        return "estimated" if self.estimated_velocity else "measured"

    @property
    def velocities_available(self) -> bool:
        return not self.unavailable_velocity


def plausible_position_bands(robot: RobotModel) -> dict[str, tuple[float, float]]:
    """Per joint name, the positions [rad or m] a joint state may report: the joint limits widened by the joint's
    range on either side, or +-``MAX_ABS_POSITION`` for a joint without finite limits."""
    lo_all, hi_all = robot.model.lowerPositionLimit, robot.model.upperPositionLimit
    bands = {}
    for j in robot.joints:
        lo, hi = (float(lo_all[j.idx_q]), float(hi_all[j.idx_q])) if j.nq == 1 else (math.nan, math.nan)
        if math.isfinite(lo) and math.isfinite(hi) and hi > lo:
            bands[j.name] = (lo - (hi - lo), hi + (hi - lo))
        else:
            bands[j.name] = (-MAX_ABS_POSITION, MAX_ABS_POSITION)
    return bands


class JointStateTracker:
    """Merges JointState messages (possibly subsets, any order) into the latest state of a model's joints.

    Positions outside :func:`plausible_position_bands` reject the message (nothing of it is merged).
    Newest value per joint: a joint's value in a message is merged only if it holds at or after the instant of the
    value already held for that joint; an older one is skipped (``ParsedJointState.superseded``; an unstamped message
    without ``at`` has no instant to compare and is always merged, as before). Several publishers
    share ``joint_states`` in a real cell (an arm driver at 500 Hz, a ``joint_state_publisher`` republishing every
    joint at 10 Hz with older stamps): the older republication must not replace the driver's newer values, nor be
    the other end of a velocity difference.
    Velocities: per joint by :func:`vtm_dynamics.core.robot.joint_velocity.joint_velocity`: taken from the message
    when it has them ("measured"); otherwise a backward difference of positions over the stamps when the stamp is
    non-zero, newer than the joint's previous one and at most ``max_velocity_gap`` [s] after it ("estimated"; taken on
    the circle for continuous joints); otherwise "unavailable" (the snapshot says so; the old value is not passed off
    as an estimate). Each joint keeps the instant its value holds (the message stamp, or ``update``'s ``at``).
    Age of a snapshot (its ``stamp``): the oldest instant among the joints that move (speed above ``REST_SPEED``, or
    velocity unavailable), since a moving joint's old value is wrong now; a joint at rest in its last value (a
    gripper held open, published at 50 Hz beside a 500 Hz arm) does not make the state older, unless its value is
    more than ``rest_hold`` [s] older than that (a silent publisher: it may have started to move since). With no
    joint moving, the newest instant. ``rest_hold`` = 0 stamps every state with its oldest joint value. The
    snapshot's ``latest`` is its newest joint value's instant: a state merged from publishers of different rates
    holds values from ``stamp`` up to ``latest``.
    """

    def __init__(self, robot: RobotModel, *, max_joints: int = DEFAULT_MAX_JOINTS,
                 max_velocity_gap: float = math.inf, rest_hold: float = 0.0) -> None:
        check_joint_state_compatible(robot)
        self.robot = robot
        self.names = robot.joint_names
        self.max_joints = max_joints
        self.max_velocity_gap = float(max_velocity_gap)
        self.rest_hold = float(rest_hold)
        self._continuous = frozenset(j.name for j in robot.joints if j.nq == 2)
        self._known = frozenset(self.names)
        self._band = plausible_position_bands(robot)
        self._pos: dict[str, float] = {}
        self._vel: dict[str, float] = {}
        self._stamp: dict[str, float] = {}
        self._held: dict[str, float] = {}  # [s] the instant each joint's value holds (its age in a snapshot)
        self._exact: dict[str, Time] = {}  # that instant as a stamp message (exact to the nanosecond)
        self._source: dict[str, str] = {}
        self.newest_stamp = -math.inf
        self.newest_held = -math.inf  # [s] the newest instant any joint's value holds

    def update(self, msg: JointState, at: float | None = None) -> ParsedJointState:
        """Merge one message; raises :class:`JointStateError` (then nothing is merged). ``at`` [s]: the instant its
        values hold, when not its header stamp (an unstamped message: its receipt instant); velocity estimates use
        the header stamps only."""
        parsed = parse_joint_state(msg, self._known, max_joints=self.max_joints)
        for name, p in parsed.positions.items():
            lo, hi = self._band[name]
            if not lo <= p <= hi:
                raise JointStateError(f"position: {p:.6g} for joint {excerpt(name)} is outside the plausible range "
                                      f"[{lo:.6g}, {hi:.6g}] (a joint range beyond its limits)")
        t = parsed.stamp
        held = t if at is None else float(at)
        superseded = () if held <= 0.0 else tuple(n for n in parsed.positions
                                                  if n in self._held and held < self._held[n])
        exact = copy.copy(msg.header.stamp) if at is None else seconds_to_stamp(held)
        skip = frozenset(superseded)
        for name, p in parsed.positions.items():
            if name in skip:
                continue
            previous = (self._pos[name], self._stamp[name]) if name in self._pos else None
            velocity = joint_velocity(p, t, None if parsed.velocities is None else parsed.velocities[name], previous,
                                      max_gap=self.max_velocity_gap, continuous=name in self._continuous)
            self._vel[name], self._source[name] = velocity.value, velocity.source
            self._pos[name] = p
            self._stamp[name] = t
            self._held[name], self._exact[name] = held, exact
        if len(superseded) < len(parsed.positions):
            self.newest_stamp = max(self.newest_stamp, t)
            self.newest_held = max(self.newest_held, held)
        return dataclasses.replace(parsed, superseded=superseded) if superseded else parsed

    @property
    def missing(self) -> tuple[str, ...]:
        """Model joints never reported so far."""
        return tuple(n for n in self.names if n not in self._pos)

    def snapshot(self) -> JointStateSnapshot:
        """The current state; raises :class:`JointStateError` while some joint has never been reported."""
        missing = self.missing
        if missing:
            raise JointStateError(f"joint_states: no position received yet for {list(missing)}")
        positions = np.array([self._pos[n] for n in self.names])
        v = np.array([self._vel[n] for n in self.names])
        oldest = self._age_joint()
        return JointStateSnapshot(
            stamp=self._held[oldest], header_stamp=copy.copy(self._exact[oldest]), positions=positions,
            q=configuration_from_positions(self.robot, positions), v=v,
            estimated_velocity=tuple(n for n in self.names if self._source[n] == "estimated"),
            unavailable_velocity=tuple(n for n in self.names if self._source[n] == "unavailable"),
            latest=max(self._held[n] for n in self.names),
        )

    def _age_joint(self) -> str:
        """The joint whose value's instant is the snapshot's stamp (the class docstring's rule)."""
        held = self._held
        moving = [n for n in self.names if self._source[n] == "unavailable" or abs(self._vel[n]) > REST_SPEED]
        if not moving:
            newest = max(self.names, key=held.__getitem__)
            stale = [n for n in self.names if held[n] < held[newest] - self.rest_hold]
            return min(stale, key=held.__getitem__) if stale else newest
        base = min(moving, key=held.__getitem__)
        return min(self.names, key=lambda n: held[n] if n in moving or held[n] < held[base] - self.rest_hold
                   else math.inf)


def joint_state_message(
    names: Sequence[str], positions: Sequence[float], velocities: Sequence[float] | None = None,
    efforts: Sequence[float] | None = None, stamp: Time | None = None, frame_id: str = "",
) -> JointState:
    msg = JointState()
    if stamp is not None:
        msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.name = list(names)
    msg.position = [float(x) for x in positions]
    msg.velocity = [] if velocities is None else [float(x) for x in velocities]
    msg.effort = [] if efforts is None else [float(x) for x in efforts]
    return msg


# ---------------------------------------------------------------------------------------------- trajectories
def subsample_indices(n: int, max_points: int) -> np.ndarray:
    """Indices of at most ``max_points`` samples out of ``n``, evenly spread, always keeping first and last."""
    if n <= 0:
        return np.zeros(0, dtype=int)
    if n <= max_points:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, max(2, max_points))).astype(int))


def joint_trajectory_message(
    names: Sequence[str], t: np.ndarray, positions: np.ndarray, velocities: np.ndarray | None = None,
    accelerations: np.ndarray | None = None, stamp: Time | None = None, frame_id: str = "", max_points: int = 200,
) -> JointTrajectory:
    """A JointTrajectory from sampled time series (rows = samples), subsampled to ``max_points`` points.

    ``t`` [s] is the time from the E-stop instant (``header.stamp``); positions [rad, m], velocities [rad/s],
    accelerations [rad/s^2], one column per entry of ``names``.
    """
    msg = JointTrajectory()
    if stamp is not None:
        msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.joint_names = list(names)
    t = np.asarray(t, dtype=float)
    for i in subsample_indices(len(t), max_points):
        pt = JointTrajectoryPoint()
        pt.positions = [float(x) for x in positions[i]]
        if velocities is not None:
            pt.velocities = [float(x) for x in velocities[i]]
        if accelerations is not None:
            pt.accelerations = [float(x) for x in accelerations[i]]
        pt.time_from_start = seconds_to_duration(float(t[i]))
        msg.points.append(pt)
    return msg

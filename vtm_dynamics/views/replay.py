"""The replay of a predicted stop for a ghost robot in RViz, without ROS: which joint positions to publish when.

A second ``robot_state_publisher`` (``frame_prefix: replay/``) draws whatever joint positions it receives; fed
with :meth:`ReplaySchedule.positions_at` at a steady rate it replays the predicted stopping motion at true time
(``speed`` 1; slower if asked), rests ``hold`` seconds at the predicted rest pose and starts again. The frames are
the prediction's own samples (Müller 2026, eq. (3) between events, eq. (22) at abrupt locks; ``core/estop``),
thinned evenly to ``max_points`` with the events kept, and linearly interpolated in between; the TCP path, the
TCP at each event and, when an envelope gave one, the worst-case rest pose come along for the markers.
``nodes/ghost_replay.py`` publishes it. Sizes are capped by ``max_points``. Units: s, rad (m for prismatic
joints), m.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vtm_dynamics.core.estop.results import StopPrediction
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.views.stop_view import merged_events, thinned

DEFAULT_MAX_POINTS = 500


@dataclass(frozen=True)
class ReplayFrames:
    """What one replay shows: ``times`` (F,) [s] since the E-stop and one ``positions`` row (F, n) per time, one
    position per joint of ``joint_names`` (as a JointState carries them); the TCP ``tcp_path`` (P, 3) [m] (None
    without a TCP frame), ``events`` (kind, TCP position) at each event, the worst-case rest pose
    (``worst_positions``, ``worst_points``: joint origins and TCP [m]) or None; ``not_valid``: the mark of a
    prediction that is not the robot's stop (past a joint limit, not at rest within the horizon), "" otherwise."""

    joint_names: tuple[str, ...]
    times: np.ndarray
    positions: np.ndarray
    tcp_path: np.ndarray | None
    events: tuple[tuple[str, tuple[float, float, float]], ...]
    worst_positions: np.ndarray | None
    worst_points: np.ndarray | None
    not_valid: str = ""  # the prediction's NOT VALID mark (StopPrediction.invalid_label); "" for a valid stop

    @property
    def duration(self) -> float:
        return float(self.times[-1] - self.times[0])


def joint_origins(robot: RobotModel, q: np.ndarray, tcp_frame: str | None = None) -> np.ndarray:
    """(n[+1], 3) world positions [m] of every movable joint's origin at ``q`` (and the TCP frame last)."""
    import pinocchio as pin

    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, np.asarray(q, dtype=float))
    points = [np.array(data.oMi[j.joint_id].translation) for j in robot.joints]
    if tcp_frame:
        points.append(np.array(data.oMf[robot.frame_id(tcp_frame)].translation))
    return np.array(points)


def replay_frames(robot: RobotModel, prediction: StopPrediction, *, worst_q: np.ndarray | None = None,
                  max_points: int = DEFAULT_MAX_POINTS) -> ReplayFrames:
    """The frames of ``prediction`` (module docstring); ``worst_q``: the envelope's worst-case rest
    configuration, if one was evaluated for this prediction's start state."""
    p = prediction
    t = np.asarray(p.t, dtype=float)
    events = merged_events(p)
    keep = thinned(t, [e[0] for e in events], max(2, int(max_points)), values=p.q)
    neutral = robot.neutral()
    # positions continuous along the stop: each frame the previous one plus the step to it (a continuous joint
    # crossing +-pi would otherwise jump by 2 pi between frames, and the replay's interpolation swing it round)
    qs = np.asarray(p.q)[keep]
    steps = [robot.difference(neutral, qs[0])] + [robot.difference(a, b) for a, b in zip(qs[:-1], qs[1:])]
    positions = np.cumsum(np.array(steps), axis=0)
    tcp = None if p.tcp_positions is None else np.asarray(p.tcp_positions, dtype=float)
    marks = []
    if tcp is not None:
        for time, kind, _ in events:
            marks.append((kind, tuple(float(np.interp(time, t, tcp[:, i])) for i in range(3))))
        tcp = tcp[keep]
    worst_positions = worst_points = None
    if worst_q is not None:
        worst_positions = robot.difference(neutral, worst_q)
        worst_points = joint_origins(robot, worst_q, p.tcp_frame)
    return ReplayFrames(tuple(robot.joint_names), t[keep], positions, tcp, tuple(marks), worst_positions,
                        worst_points, p.invalid_label())


@dataclass(frozen=True)
class ReplaySchedule:
    """``frames`` played at ``speed`` (1 = true time), resting ``hold`` [s] at rest; ``loop``: start again."""

    frames: ReplayFrames
    speed: float = 1.0
    hold: float = 1.0
    loop: bool = True

    @property
    def period(self) -> float:
        """Wall-clock seconds of one pass: the motion at ``speed`` and the rest."""
        return self.frames.duration / self.speed + self.hold

    def replay_time(self, elapsed: float) -> float:
        """The stop's time [s] (since the E-stop) shown ``elapsed`` wall-clock seconds after the replay began."""
        e = max(float(elapsed), 0.0)
        if self.loop and self.period > 0:
            e = math.fmod(e, self.period)
        return float(self.frames.times[0] + min(e * self.speed, self.frames.duration))

    def positions_at(self, elapsed: float) -> np.ndarray:
        """Joint positions (n,) at ``elapsed`` wall-clock seconds, linearly interpolated between frames."""
        t = self.replay_time(elapsed)
        f = self.frames
        return np.array([np.interp(t, f.times, f.positions[:, i]) for i in range(f.positions.shape[1])])

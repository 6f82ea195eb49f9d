"""Simulated recordings with known truth: category-0 stops of the independent fixed-step plant
(:mod:`vtm_dynamics.core.estop.braked_plant`, not the predictor's engine) seen through a measurement model
representative of an industrial arm, written as a rosbag2 file like a real robot's recording.

Measurement model (:class:`Sensor`, defaults): joint states at 500 Hz; each sample is taken up to +-0.2 ms away
from its stamp (uniform timestamp jitter: the stamp says t_k, the arm was measured at t_k + u); positions quantised
to a 19-bit absolute encoder on the joint side (quantum 2 pi / 2^19 = 1.2e-5 rad) plus white noise of 1e-4 rad;
velocities with white noise of 2e-3 rad/s. The trigger is a ``std_msgs/Bool`` on ``/estop``: false at 10 Hz while
running, true at the trigger instant and while stopping, false again after the rest hold.

Each stop: the arm moves at constant joint velocity v0 through q0 (the state at the trigger), the trigger fires,
the plant brakes it to rest, the recording continues ``rest_record`` [s]; stops follow each other ``gap`` [s] apart
(the arm is moved to the next start pose off the record). The plant's trajectories (:func:`plant_stops`) are kept
apart from the measurement (:func:`sample_stops`), so that one simulation can be seen through many noise seeds
(coverage studies); a sample taken between two kept plant states is interpolated (cubic Hermite on q and v, states
kept every 0.1 ms: an error of about 1e-7 rad). Units: s, rad, rad/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from vtm_dynamics.core.estop.braked_plant import BrakedPlant
from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.recordings.bag_files import write_bag


@dataclass(frozen=True)
class Sensor:
    """Measurement model: ``rate`` [Hz], ``jitter`` [s] (half-width), ``quantum`` [rad], ``noise`` [rad],
    ``velocity_noise`` [rad/s], ``drop_rate`` (fraction of joint states lost on the way, as a busy driver or
    network drops messages)."""

    rate: float = 500.0
    jitter: float = 2e-4
    quantum: float = 2.0 * math.pi / 2**19
    noise: float = 1e-4
    velocity_noise: float = 2e-3
    drop_rate: float = 0.0


@dataclass(frozen=True)
class StopStart:
    """The state at a trigger: ``q0`` [rad], ``v0`` [rad/s] (model order)."""

    q0: np.ndarray
    v0: np.ndarray


@dataclass(frozen=True)
class PlantStop:
    """One stop as the plant integrated it, without measurement: its ``start``, the states ``t`` [s after the
    trigger], ``q`` [rad], ``v`` [rad/s] every ``record_step`` and at rest, the instant the arm came to rest
    ``rest_time`` [s] (nan: not within ``max_stop``) and the plant's events (stick, slip, ...)."""

    start: StopStart
    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    rest_time: float
    events: tuple

    def state(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """(q, v) at ``t`` [s after the trigger]: the constant-velocity approach before the trigger, cubic
        Hermite interpolation of the recorded states after it, the rest state after the last one."""
        if t <= 0.0:
            return self.start.q0 + self.start.v0 * t, np.asarray(self.start.v0, float).copy()
        k = int(np.searchsorted(self.t, t, side="right")) - 1
        if k >= self.t.size - 1:
            return self.q[-1].copy(), self.v[-1].copy()
        h = self.t[k + 1] - self.t[k]
        s = (t - self.t[k]) / h
        q0, q1, v0, v1 = self.q[k], self.q[k + 1], self.v[k], self.v[k + 1]
        q = ((2 * s**3 - 3 * s**2 + 1) * q0 + (s**3 - 2 * s**2 + s) * h * v0 + (-2 * s**3 + 3 * s**2) * q1
             + (s**3 - s**2) * h * v1)
        return q, v0 + s * (v1 - v0)


def plant_stops(robot: RobotModel, brakes: BrakeSet, starts: Sequence[StopStart], *, plant_dt: float = 1e-4,
                record_step: float = 1e-4, rest_record: float = 0.4, max_stop: float = 4.0) -> list[PlantStop]:
    """Every start braked to rest by the independent fixed-step plant (step ``plant_dt`` [s]), its states kept
    every ``record_step`` [s] (rounded to whole steps) until ``rest_record`` [s] after rest or ``max_stop``."""
    every = max(1, int(round(record_step / plant_dt)))
    out = []
    for start in starts:
        plant = BrakedPlant(robot, brakes, dt=plant_dt, record_every=every)
        plant.start(np.asarray(start.q0, float), np.asarray(start.v0, float))
        plant.advance(max_stop)
        rec = plant.record
        t, q, v = np.array(rec.t), np.array(rec.q), np.array(rec.v)
        rest = plant.rest_time if plant.rest_time is not None else math.nan
        end = (rest if math.isfinite(rest) else max_stop) + rest_record
        t, q, v = np.append(t, end), np.vstack([q, plant.q]), np.vstack([v, plant.v])
        out.append(PlantStop(start, t, q, v, rest, tuple(plant.events)))
    return out


def sample_stops(stops: Sequence[PlantStop], names: Sequence[str], *, sensor: Sensor = Sensor(), seed: int = 0,
                 lead: float = 0.1, gap: float = 0.5, t0: float = 1000.0) -> dict:
    """The plant's stops seen through ``sensor``, one after the other: {"joint": [(stamp, measured-at, q, v)],
    "trigger": [(t, bool)], "trigger_times": [...], "names": joint names}; times [s]. The arm moves at constant
    joint velocity for ``lead`` [s] before each trigger (which falls anywhere between two samples), is recorded
    until the plant stop's end, and is moved to the next start ``gap`` [s] later, off the record."""
    rng = np.random.default_rng(seed)
    h = 1.0 / sensor.rate
    joint, trigger, times = [], [], []
    t = t0
    for stop in stops:
        te = t + lead + rng.uniform(0, h)
        tk = math.ceil(t / h) * h
        while tk < t:
            tk += h
        trigger.extend((x, False) for x in np.arange(t, te, 0.1))
        trigger.append((te, True))
        times.append(te)
        end = te + float(stop.t[-1])
        while True:
            measured = tk + rng.uniform(-sensor.jitter, sensor.jitter)
            q, v = stop.state(measured - te)
            qm = np.round((q + rng.normal(0, sensor.noise, q.size)) / sensor.quantum) * sensor.quantum
            vm = v + rng.normal(0, sensor.velocity_noise, v.size)
            if not (sensor.drop_rate > 0 and rng.uniform() < sensor.drop_rate):
                joint.append((tk, measured, qm, vm))
            if tk >= end:
                break
            tk += h
        trigger.extend((x, True) for x in np.arange(te + 0.1, tk, 0.1))
        trigger.append((tk + 1e-3, False))
        t = tk + gap
    return {"joint": joint, "trigger": trigger, "trigger_times": times, "names": tuple(names)}


def simulate_stops(robot: RobotModel, brakes: BrakeSet, starts: Sequence[StopStart], *, sensor: Sensor = Sensor(),
                   seed: int = 0, lead: float = 0.1, rest_record: float = 0.4, gap: float = 0.5,
                   t0: float = 1000.0, plant_dt: float = 1e-4, max_stop: float = 4.0) -> dict:
    """:func:`plant_stops` seen through ``sensor`` (:func:`sample_stops`)."""
    stops = plant_stops(robot, brakes, starts, plant_dt=plant_dt, rest_record=rest_record, max_stop=max_stop)
    return sample_stops(stops, robot.joint_names, sensor=sensor, seed=seed, lead=lead, gap=gap, t0=t0)


def write_simulated_bag(path: str, samples: dict, storage: str = "mcap", joint_topic: str = "/joint_states",
                        trigger_topic: str = "/estop", drop_after: float | None = None) -> str:
    """Write :func:`simulate_stops` samples as a rosbag2 bag (JointState with header stamps, Bool trigger); the
    bag's receive times are the stamps plus 0.5 ms. ``drop_after`` [s] ends the recording early (a cut-off
    stop)."""
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_KILTED)
    JointState, Bool = ts.types["sensor_msgs/msg/JointState"], ts.types["std_msgs/msg/Bool"]
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    names = list(samples["names"])
    events = []
    for stamp, _, q, v in samples["joint"]:
        sec = int(stamp)
        msg = JointState(header=Header(stamp=Time(sec=sec, nanosec=int(round((stamp - sec) * 1e9))), frame_id=""),
                         name=names, position=np.asarray(q, float), velocity=np.asarray(v, float),
                         effort=np.zeros(0))
        events.append((stamp + 5e-4, joint_topic, msg))
    for t, value in samples["trigger"]:
        events.append((t, trigger_topic, Bool(data=bool(value))))
    events.sort(key=lambda e: e[0])
    if drop_after is not None:
        events = [e for e in events if e[0] <= drop_after]
    return write_bag(path, storage, {joint_topic: "sensor_msgs/msg/JointState", trigger_topic: "std_msgs/msg/Bool"},
                     ((topic, int(round(t * 1e9)), msg) for t, topic, msg in events), typestore=ts)

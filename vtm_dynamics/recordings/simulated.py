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
(the arm is moved to the next start pose off the record). Units: s, rad, rad/s.
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
    ``velocity_noise`` [rad/s]."""

    rate: float = 500.0
    jitter: float = 2e-4
    quantum: float = 2.0 * math.pi / 2**19
    noise: float = 1e-4
    velocity_noise: float = 2e-3


@dataclass(frozen=True)
class StopStart:
    """The state at a trigger: ``q0`` [rad], ``v0`` [rad/s] (model order)."""

    q0: np.ndarray
    v0: np.ndarray


def simulate_stops(robot: RobotModel, brakes: BrakeSet, starts: Sequence[StopStart], *, sensor: Sensor = Sensor(),
                   seed: int = 0, lead: float = 0.1, rest_record: float = 0.4, gap: float = 0.5,
                   t0: float = 1000.0, plant_dt: float = 1e-4, max_stop: float = 4.0) -> dict:
    """Joint-state and trigger samples of the stops: {"joint": [(stamp, measured-at, q, v)], "trigger":
    [(t, bool)], "trigger_times": [...], "names": joint names}; times [s]."""
    rng = np.random.default_rng(seed)
    h = 1.0 / sensor.rate
    joint, trigger, times = [], [], []
    t = t0
    for start in starts:
        te = t + lead + rng.uniform(0, h)  # the trigger falls anywhere between two samples
        plant = BrakedPlant(robot, brakes, dt=plant_dt, record_every=1_000_000)
        plant.start(np.asarray(start.q0, float), np.asarray(start.v0, float))
        k0 = math.ceil(t / h)
        tk = k0 * h
        while tk < t:
            tk += h
        trigger.extend((x, False) for x in np.arange(t, te, 0.1))
        trigger.append((te, True))
        times.append(te)
        end = None
        while True:
            measured = tk + rng.uniform(-sensor.jitter, sensor.jitter)
            if measured <= te:
                q = start.q0 + start.v0 * (measured - te)
                v = np.asarray(start.v0, float)
            else:
                plant.advance(measured - te)
                q, v = plant.q.copy(), plant.v.copy()
                if plant.at_rest and end is None:
                    end = measured + rest_record
                if measured - te > max_stop and end is None:
                    end = measured
            qm = np.round((q + rng.normal(0, sensor.noise, q.size)) / sensor.quantum) * sensor.quantum
            vm = v + rng.normal(0, sensor.velocity_noise, v.size)
            joint.append((tk, measured, qm, vm))
            if end is not None and tk >= end:
                break
            tk += h
        trigger.extend((x, True) for x in np.arange(te + 0.1, tk, 0.1))
        trigger.append((tk + 1e-3, False))
        t = tk + gap
    return {"joint": joint, "trigger": trigger, "trigger_times": times, "names": robot.joint_names}


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

"""``robot_sim`` node: a plant standing in for a real or Gazebo robot, with a safety controller that fires an E-stop.

Timeline (simulated time t, ``time_scale`` times wall time since the motion started; stamps are start stamp + t;
the motion starts once ``brake_events`` has ``wait_for_subscribers`` subscribers, at most ``startup_timeout``
after start-up, because DDS discovery of a new process can take seconds):

1. ``0 <= t < estop_time``: the demo motion (a sinusoid per joint, played back exactly, see ``core.estop.braked_plant.DemoMotion``)
   is published on ``joint_states`` at ``publish_rate`` Hz (>= 250 Hz by default 500 Hz, wall-clock timer).
2. at ``t = estop_time``: the state AT that instant is published, then the safety controller publishes a
   ``brake_events`` ENGAGE for all joints (stamp = the E-stop instant) and ``estop`` = true.
3. the category-0 stop is integrated by ``core.estop.braked_plant.BrakedPlant`` (fixed step ``sim_step``, its own stick/slip rule,
   the core brake model): an independent check of the predictor's event-located integration.
4. at rest: ``lock_events`` LOCK (source ``standstill``) for all joints, the actual rest pose on
   ``rest_joint_states`` (transient local), and the comparison with the received ``stop_prediction`` (the newest
   one whose ``scenario_id`` starts with ``estop``) on ``/diagnostics`` (diagnostic_msgs/DiagnosticArray; level
   OK within ``angle_tolerance`` [rad], ``position_tolerance`` [m] for prismatic joints and ``time_tolerance``,
   WARN otherwise) and as a log line.
5. with ``cycle_period`` > 0 the brakes are released (``brake_events`` RELEASE, ``estop`` = false) that long after
   the E-stop and the cycle restarts (repeated stops for benches).

With ``publish_robot_description`` the URDF text is published on ``robot_description`` (transient local), as
robot_state_publisher would; disable it when a robot_state_publisher runs.
"""

from __future__ import annotations


import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from vtm_msgs.msg import BrakeEvent, LockEvent, StopPrediction

from vtm_dynamics.core.robot.model import ModelError
from vtm_dynamics.nodes import diagnostics, graph
from vtm_dynamics.nodes import params as P
from vtm_dynamics.nodes import prediction_io as io
from vtm_dynamics.nodes.conversions import (
    duration_to_seconds,
    joint_state_message,
    seconds_to_stamp,
    stamp_to_seconds,
)
from vtm_dynamics.nodes.model_source import ROBOT_NAMES, default_tcp_frame, load_urdf_text, model_from_urdf_text
from vtm_dynamics.core.estop.braked_plant import BrakedPlant, PlantError, demo_motion
from vtm_dynamics.nodes.node_main import run_node

NODE_NAME = "robot_sim"


def _float_list(n_max: int = 64):
    def check(value: Any) -> str | None:
        if not isinstance(value, (list, tuple)) or len(value) > n_max:
            return f"must be a list of at most {n_max} numbers"
        if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in value):
            return "must contain finite numbers only"
        return None

    return check


PARAMETERS = (
    P.ParameterSpec("robot", "ur5", "Robot shipped with the package (ur5 | ur3 | planar_3r); ignored if urdf_path is set.",
                    P.one_of(ROBOT_NAMES), read_only=True, constraint=" or ".join(ROBOT_NAMES)),
    P.ParameterSpec("urdf_path", "", "URDF file of the simulated robot; overrides 'robot'.",
                    P.existing_file_or_empty, read_only=True, constraint="an existing file or empty"),
    P.ParameterSpec("brake_config", "", "Brake YAML file (vtm_dynamics.core.estop.brakes format). Empty: "
                    "config/<robot>_brakes.yaml of the package.", P.existing_file_or_empty, read_only=True,
                    constraint="an existing file or empty"),
    P.ParameterSpec("publish_robot_description", True, "Publish the URDF on robot_description (transient local); "
                    "disable when a robot_state_publisher does.", read_only=True),
    P.ParameterSpec("publish_rate", 500.0, "joint_states rate [Hz] (wall clock).", P.in_range(250.0, 5000.0),
                    read_only=True, constraint="250 .. 5000 Hz"),
    P.ParameterSpec("time_scale", 1.0, "Simulated seconds per wall-clock second.", P.in_range(0.01, 10.0),
                    read_only=True, constraint="0.01 .. 10"),
    P.ParameterSpec("sim_step", 2e-4, "Fixed integration step of the braked plant [s].", P.in_range(1e-6, 1e-2),
                    read_only=True, constraint="1e-6 .. 1e-2 s"),
    P.ParameterSpec("estop_enabled", True, "Fire the E-stop at estop_time.", read_only=True),
    P.ParameterSpec("estop_time", 2.0, "Simulated time of the E-stop after the start of a cycle [s].",
                    P.in_range(0.0, 3600.0), read_only=True,
                    constraint="0 .. 3600 s"),
    P.ParameterSpec("cycle_period", 0.0, "Simulated time from an E-stop to the brake release and the restart of "
                    "the motion [s]; 0: one stop only.", P.in_range(0.0, 3600.0), read_only=True,
                    constraint="0 (off) or > the stop duration"),
    P.ParameterSpec("stop_horizon", 10.0, "Give up the stop simulation after this time [s] (unbraked joints).",
                    P.in_range(0.01, 600.0), read_only=True, constraint="0.01 .. 600 s"),
    P.ParameterSpec("motion_home", [0.0, -1.2, 1.4, -1.0, -1.57, 0.0], "Centre of the demo motion, one value per "
                    "joint [rad] (one value: the same for all).", _float_list(), read_only=True),
    P.ParameterSpec("motion_amplitude", [0.8, 0.5, 0.6, 0.5, 0.5, 0.8], "Amplitude of the demo motion per joint "
                    "[rad] (one value: the same for all).", _float_list(), read_only=True),
    P.ParameterSpec("motion_phase", [0.0], "Phase of the demo motion per joint [rad]; one value: the same for all.",
                    _float_list(), read_only=True),
    P.ParameterSpec("motion_frequency", 0.25, "Frequency of the demo motion [Hz].", P.in_range(0.0, 10.0),
                    read_only=True, constraint="0 .. 10 Hz"),
    P.ParameterSpec("tcp_frame", "", "Frame whose stopping distance the comparison reports. Empty: the robot's "
                    "tool frame.", read_only=True),
    P.ParameterSpec("angle_tolerance", 0.005, "Comparison: largest acceptable |predicted - simulated| rest angle "
                    "[rad] for diagnostic level OK.", P.positive, constraint="> 0 rad"),
    P.ParameterSpec("position_tolerance", 0.001, "Comparison: largest acceptable |predicted - simulated| rest "
                    "position of a prismatic joint [m] for diagnostic level OK (angle_tolerance is in rad and holds "
                    "for the other joints).", P.positive, read_only=True, constraint="> 0 m"),
    P.ParameterSpec("time_tolerance", 0.005, "Comparison: largest acceptable |predicted - simulated| stop time [s].",
                    P.positive, constraint="> 0 s"),
    P.ParameterSpec("wait_for_subscribers", 1, "The motion (and the E-stop clock) starts once brake_events has "
                    "this many subscribers (the predictor, plus any monitor), or after startup_timeout; 0: at "
                    "once. Until then the start pose is published.", P.in_range(0, 100), read_only=True,
                    constraint="0 .. 100"),
    P.ParameterSpec("startup_timeout", 10.0, "Longest wait for wait_for_subscribers [s] (wall clock); then the "
                    "motion starts anyway with a warning.", P.in_range(0.0, 3600.0), read_only=True,
                    constraint="0 .. 3600 s"),
    P.ParameterSpec("lock_on_rest", True, "At rest, publish lock_events LOCK (source 'standstill') for all joints, as a "
                    "safety controller's standstill monitoring would."),
)


def rest_errors(predicted: np.ndarray, simulated: np.ndarray, prismatic: np.ndarray) -> tuple[float, float]:
    """(largest |predicted - simulated| rest angle [rad] of the revolute and continuous joints, largest rest position
    error [m] of the ``prismatic`` ones (bool, one per joint; each kind has its own tolerance)); 0 for no joint."""
    error = np.abs(np.asarray(predicted, float) - np.asarray(simulated, float))
    prismatic = np.asarray(prismatic, dtype=bool)
    return (float(np.max(error[~prismatic], initial=0.0)), float(np.max(error[prismatic], initial=0.0)))


@dataclass(frozen=True)
class StopComparison:
    """Prediction vs. simulated stop: rest angles [rad] (positions [m] of prismatic joints), stop times [s], TCP
    distances [m]; ``max_angle_error`` [rad] over the revolute and continuous joints, ``max_position_error`` [m]
    over the prismatic ones (0 without)."""

    scenario_id: str
    joint_names: tuple[str, ...]
    predicted_rest: np.ndarray
    simulated_rest: np.ndarray
    max_angle_error: float
    predicted_stop_time: float
    simulated_stop_time: float
    predicted_tcp_path: float
    simulated_tcp_path: float
    predicted_tcp_straight: float
    simulated_tcp_straight: float
    within_tolerance: bool
    max_position_error: float = 0.0


class RobotSim(Node):
    """See the module docstring."""

    def __init__(self, **node_kwargs: Any) -> None:
        super().__init__(NODE_NAME, **node_kwargs)
        self.p = P.declare_validated(self, PARAMETERS)
        self.robot_name = self.p["robot"]
        self.urdf_text = load_urdf_text(self.p["robot"], self.p["urdf_path"])
        self.robot = model_from_urdf_text(self.urdf_text)
        self.brakes = io.load_brakes(self.robot, self.p["brake_config"], self.robot_name)
        nv = self.robot.nv
        home, amplitude, phase = (list(self.p[k]) * nv if len(self.p[k]) == 1 else list(self.p[k])
                                  for k in ("motion_home", "motion_amplitude", "motion_phase"))
        try:
            self.motion = demo_motion(nv, home, amplitude, self.p["motion_frequency"], phase)
        except PlantError as err:
            raise P.ParameterError(str(err)) from None
        tcp = self.p["tcp_frame"]
        if tcp and not self.robot.model.existFrame(tcp):
            raise P.ParameterError(f"tcp_frame: {tcp!r} is not a frame of {self.robot.name!r}")
        self.tcp = tcp or default_tcp_frame(self.robot, self.robot_name)
        self.names = list(self.robot.joint_names)

        latched = graph.LATCHED
        events_qos = graph.events_qos(50)
        self.pub_js = self.create_publisher(JointState, "joint_states", 20)
        self.pub_brake = self.create_publisher(BrakeEvent, "brake_events", events_qos)
        self.pub_lock = self.create_publisher(LockEvent, "lock_events", events_qos)
        self.pub_estop = self.create_publisher(Bool, "estop", events_qos)
        self.pub_rest = self.create_publisher(JointState, "rest_joint_states", latched)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        if self.p["publish_robot_description"]:
            self.pub_desc = self.create_publisher(String, "robot_description", latched)
            self.pub_desc.publish(String(data=self.urdf_text))
        self.log = graph.LogLimiter(self.get_logger())
        self.create_subscription(StopPrediction, "stop_prediction",
                                 graph.guarded(self.log, "stop_prediction")(self._on_prediction), 10)

        self.created = time.monotonic()
        self.running = False  # becomes True when the subscribers are there (wait_for_subscribers)
        self.wall0 = time.monotonic()
        self.stamp0 = stamp_to_seconds(self.get_clock().now().to_msg())
        self.cycle_start = 0.0  # simulated time at which the current cycle's motion started
        self.phase = "motion"
        self.plant: BrakedPlant | None = None
        self.estop_instant = math.nan  # simulated time of the E-stop
        self.estop_wall = math.nan  # monotonic time [s] at which the E-stop was published (latency reference)
        self.estop_count = 0
        self.q_estop = None
        self.prediction: StopPrediction | None = None
        self.comparison: StopComparison | None = None
        self.comparisons: list[StopComparison] = []
        self.completed_plants: list[BrakedPlant] = []
        self.published = 0
        self.timer = self.create_timer(1.0 / self.p["publish_rate"], graph.guarded(self.log, "plant")(self._on_timer))
        self.diag_timer = self.create_timer(1.0, graph.guarded(self.log, "/diagnostics")(self._publish_diagnostics))
        self.get_logger().info(
            f"robot_sim ready: {self.robot.name}, joint_states at {self.p['publish_rate']:g} Hz, time scale "
            f"{self.p['time_scale']:g}, E-stop at t = {self.p['estop_time']:g} s"
            + ("" if self.p["estop_enabled"] else " (disabled)")
        )

    # ------------------------------------------------------------------ time
    def sim_time(self) -> float:
        return (time.monotonic() - self.wall0) * self.p["time_scale"]

    def stamp(self, t: float):
        return seconds_to_stamp(self.stamp0 + t)

    # ------------------------------------------------------------------ main loop
    def _start_when_subscribed(self) -> bool:
        """Start the motion clock once enough subscribers listen (discovery can take seconds); True when running."""
        if self.running:
            return True
        count = self.pub_brake.get_subscription_count()
        waited = time.monotonic() - self.created
        if count >= self.p["wait_for_subscribers"] or waited >= self.p["startup_timeout"]:
            if count < self.p["wait_for_subscribers"]:
                self.get_logger().warning(f"starting after {waited:.1f} s with {count} brake_events subscriber(s) "
                                          f"(wait_for_subscribers {self.p['wait_for_subscribers']})")
            self.running = True
            self.wall0 = time.monotonic()
            self.stamp0 = stamp_to_seconds(self.get_clock().now().to_msg())
            self.get_logger().info(f"motion started ({count} brake_events subscriber(s) after {waited:.1f} s)")
            return True
        pos, vel, _ = self.motion.state(0.0)
        self.pub_js.publish(joint_state_message(self.names, pos, np.zeros(self.robot.nv),
                                                stamp=self.get_clock().now().to_msg()))
        return False

    def _on_timer(self) -> None:
        if not self._start_when_subscribed():
            return
        t = self.sim_time()
        if self.phase == "motion":
            t_fire = self.cycle_start + self.p["estop_time"]
            if self.p["estop_enabled"] and t >= t_fire:
                self._fire_estop(t_fire)
            else:
                pos, vel, _ = self.motion.state(t - self.cycle_start)
                self._publish_state(t, pos, vel)
                return
        if self.phase == "stopping":
            self._advance_plant(t - self.estop_instant)
            self._publish_state(self.estop_instant + self.plant.t, self.plant.q, self.plant.v)
            if self.plant.at_rest:
                self._at_rest()
            elif self.plant.t >= self.p["stop_horizon"]:
                self.get_logger().error(f"no rest within stop_horizon {self.p['stop_horizon']} s (unbraked joints?)")
                self.phase = "rest"
            return
        if self.phase == "rest":
            self._publish_state(t, self.plant.q, np.zeros(self.robot.nv))
            if self.p["cycle_period"] > 0 and t >= self.estop_instant + self.p["cycle_period"]:
                self._release(t)

    def _advance_plant(self, target: float) -> None:
        """Catch the plant up to ``target`` [s after the E-stop] one fixed step at a time, offering the GIL to the
        other threads of the process between steps (``time.sleep(0)``): a predictor composed into the same process
        (the demo) then runs while the plant catches up, instead of waiting for a timer callback that integrates
        many 0.2 ms steps in one go."""
        plant = self.plant
        while not plant.at_rest and plant.t + 0.5 * plant.dt <= target:
            plant.advance(plant.t + plant.dt)
            time.sleep(0)

    def _publish_state(self, t: float, positions: np.ndarray, velocities: np.ndarray) -> None:
        self.pub_js.publish(joint_state_message(self.names, positions, velocities, stamp=self.stamp(t)))
        self.published += 1

    def _fire_estop(self, t_fire: float) -> None:
        pos, vel, _ = self.motion.state(t_fire - self.cycle_start)
        self.estop_count += 1
        self.estop_instant = t_fire
        self.q_estop = pos.copy()
        stamp = self.stamp(t_fire)
        self._publish_state(t_fire, pos, vel)  # the state AT the E-stop instant
        brake = BrakeEvent()
        brake.header.stamp = stamp
        brake.joint_names = self.names
        brake.action = BrakeEvent.ENGAGE
        self.estop_wall = time.monotonic()
        self.pub_brake.publish(brake)
        self.pub_estop.publish(Bool(data=True))
        self.plant = BrakedPlant(self.robot, self.brakes, dt=self.p["sim_step"], record_every=2)
        self.plant.start(pos, vel)
        self.phase = "stopping"
        self.comparison = None
        self.get_logger().info(f"E-stop {self.estop_count} fired at t = {t_fire:.3f} s (category 0): brakes engaged")

    def _at_rest(self) -> None:
        self.phase = "rest"
        self.completed_plants.append(self.plant)
        stamp = self.stamp(self.estop_instant + self.plant.rest_time)
        if self.p["lock_on_rest"]:
            lock = LockEvent()
            lock.header.stamp = stamp
            lock.joint_names = self.names
            lock.action = LockEvent.LOCK
            lock.source = "standstill"
            self.pub_lock.publish(lock)
        rest = joint_state_message(self.names, self.plant.q, np.zeros(self.robot.nv), stamp=stamp)
        self.pub_rest.publish(rest)
        self.get_logger().info(
            f"simulated rest after {self.plant.rest_time:.4f} s; rest pose {np.round(self.plant.q, 4).tolist()}"
        )
        self._compare()

    def _release(self, t: float) -> None:
        brake = BrakeEvent()
        brake.header.stamp = self.stamp(t)
        brake.joint_names = self.names
        brake.action = BrakeEvent.RELEASE
        self.pub_brake.publish(brake)
        self.pub_estop.publish(Bool(data=False))
        # the next cycle restarts the demo motion from its beginning (the controller re-homes the arm)
        self.cycle_start = t
        self.phase = "motion"

    # ------------------------------------------------------------------ comparison
    def _on_prediction(self, msg: StopPrediction) -> None:
        if not msg.scenario_id.startswith("estop"):
            return
        self.prediction = msg
        if self.phase == "rest" and self.plant is not None and self.plant.at_rest:
            self._compare()

    def _compare(self) -> None:
        msg = self.prediction
        if msg is None or not msg.trajectory.points or self.plant is None or not self.plant.at_rest:
            return
        if abs(stamp_to_seconds(msg.header.stamp) - stamp_to_seconds(self.stamp(self.estop_instant))) > 1e-3:
            return  # a prediction of another stop
        if not msg.success:
            self.get_logger().warning(f"prediction {msg.scenario_id} failed: {msg.message}")
            return
        index = {n: i for i, n in enumerate(msg.trajectory.joint_names)}
        last = msg.trajectory.points[-1].positions
        try:
            predicted = np.array([last[index[n]] for n in self.names])
        except KeyError as err:
            self.get_logger().warning(f"prediction {msg.scenario_id} lacks joint {err}")
            return
        simulated = np.array(self.plant.q)
        tcp = self.plant.tcp_travel(self.tcp)
        angle_error, position_error = rest_errors(predicted, simulated, [j.prismatic for j in self.robot.joints])
        c = StopComparison(
            scenario_id=msg.scenario_id, joint_names=tuple(self.names), predicted_rest=predicted,
            simulated_rest=simulated, max_angle_error=angle_error, max_position_error=position_error,
            predicted_stop_time=duration_to_seconds(msg.stop_time), simulated_stop_time=float(self.plant.rest_time),
            predicted_tcp_path=float(msg.tcp_path_length), simulated_tcp_path=tcp[0],
            predicted_tcp_straight=float(msg.tcp_straight_distance), simulated_tcp_straight=tcp[1],
            within_tolerance=False,
        )
        ok = (c.max_angle_error <= self.p["angle_tolerance"] and c.max_position_error <= self.p["position_tolerance"]
              and abs(c.predicted_stop_time - c.simulated_stop_time) <= self.p["time_tolerance"])
        c = StopComparison(**{**c.__dict__, "within_tolerance": ok})
        if self.comparison is not None and self.comparison.scenario_id == c.scenario_id:
            return
        self.comparison = c
        self.comparisons.append(c)
        self._publish_diagnostics()
        line = (
            f"prediction check {c.scenario_id}: max |rest angle error| {c.max_angle_error:.2e} rad, "
            + (f"max |rest position error| {c.max_position_error:.2e} m, " if any(j.prismatic for j in self.robot.joints)
               else "") + f"stop time "
            f"predicted {c.predicted_stop_time:.4f} s vs simulated {c.simulated_stop_time:.4f} s, TCP path "
            f"{c.predicted_tcp_path:.4f} vs {c.simulated_tcp_path:.4f} m -> {'OK' if ok else 'OUTSIDE TOLERANCE'}"
        )
        if ok:
            self.get_logger().info(line)
        else:
            self.get_logger().warning(line)

    def _publish_diagnostics(self) -> None:
        c = self.comparison
        pairs: dict[str, str] = {}
        if c is None:
            level = diagnostics.OK
            message = {"motion": "moving, no E-stop yet", "stopping": "E-stop: braking",
                       "rest": "at rest, waiting for a prediction"}[self.phase]
        else:
            level = diagnostics.OK if c.within_tolerance else diagnostics.WARN
            message = "prediction matches the simulated stop" if c.within_tolerance else "prediction outside tolerance"
            pairs = {
                "scenario_id": c.scenario_id,
                "max_rest_angle_error_rad": f"{c.max_angle_error:.6g}",
                "predicted_stop_time_s": f"{c.predicted_stop_time:.6g}",
                "simulated_stop_time_s": f"{c.simulated_stop_time:.6g}",
                "predicted_tcp_path_m": f"{c.predicted_tcp_path:.6g}",
                "simulated_tcp_path_m": f"{c.simulated_tcp_path:.6g}",
                "predicted_tcp_straight_m": f"{c.predicted_tcp_straight:.6g}",
                "simulated_tcp_straight_m": f"{c.simulated_tcp_straight:.6g}",
                "max_rest_position_error_m": f"{c.max_position_error:.6g}",
                "angle_tolerance_rad": f"{self.p['angle_tolerance']:g}",
                "position_tolerance_m": f"{self.p['position_tolerance']:g}",
                "time_tolerance_s": f"{self.p['time_tolerance']:g}",
            }
            for n, a, b in zip(c.joint_names, c.predicted_rest, c.simulated_rest):
                pairs[f"{n}_rest_predicted_rad"] = f"{a:.6g}"
                pairs[f"{n}_rest_simulated_rad"] = f"{b:.6g}"
        self.pub_diag.publish(diagnostics.diagnostic_array(self.get_clock().now().to_msg(), diagnostics.status(
            f"{self.get_name()}: stop prediction check", level, message, pairs, hardware_id=self.robot.name)))

def main(args: list[str] | None = None) -> int:
    return run_node("robot_sim", RobotSim, (P.ParameterError, ModelError, ValueError), args)


if __name__ == "__main__":
    raise SystemExit(main())

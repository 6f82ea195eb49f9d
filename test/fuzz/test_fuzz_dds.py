"""Fuzzing estop_predictor over real DDS (loopback, the test run's private domain): a harness node publishes
generated messages on every input topic while the predictor spins in a background executor thread, as it does
in ``ros2 run``. Part of the default run (marker ``dds_fuzz``), bounded: ``examples(120)`` batches of at most 8
messages and at most ``BUDGET_S`` seconds of generation, then the liveness checks.

The huge descriptions that crash or stall a process are sent to a predictor in a child process.

Properties: the executor thread never dies of an exception a message caused; no fuzz file content reaches the
log; afterwards the node answers a valid ``PredictStop`` from the request's state and predicts a genuine E-stop
from the live state with ``success=true`` and the configured UR5's physics.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import rclpy
from hypothesis import given, settings
from hypothesis import strategies as st
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from vtm_msgs.msg import BrakeEvent, LockEvent, StopPrediction
from vtm_msgs.srv import PredictStop

from test.fuzz import strategies as S
from test.fuzz.harness import LogCapture, init_ros
from test.fuzz.scale import examples
from test.nodes.node_harness import LATCHED, TEST_BRAKES, UR5_Q, UR5_V, first_positions
from test.ros_helpers import spin_until

pytestmark = pytest.mark.dds_fuzz

BUDGET_S = 45.0  # [s] wall-clock budget of the generated batches (later examples publish nothing)
WAIT_S = 10.0  # [s] generous bound for a reply or a prediction over loopback DDS
EVENTS = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)


class Spinner:
    """An executor spinning in a background thread; remembers an exception that ended it."""

    def __init__(self, *nodes) -> None:
        self.executor = SingleThreadedExecutor()
        for n in nodes:
            self.executor.add_node(n)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="fuzz-executor", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.executor.spin()
        except BaseException as err:  # noqa: BLE001 - reported by the test
            self.error = err

    def alive(self) -> bool:
        return self.thread.is_alive() and self.error is None

    def stop(self) -> None:
        self.executor.shutdown(timeout_sec=5.0)
        self.thread.join(timeout=10.0)


class Rig:
    def __init__(self) -> None:
        from vtm_dynamics.nodes.estop_predictor import EstopPredictor

        init_ros()
        self.capture = LogCapture().install()
        S.fuzz_files()
        # max_start_state_age 0.15 s as in test/nodes/node_harness.py: a state fed and a trigger sent at once can
        # be more than the default 0.05 s apart on a loaded test machine
        params = {"robot": "ur5", "brake_config": TEST_BRAKES, "ghost_rate": 0.0, "max_start_state_age": 0.15}
        self.predictor = EstopPredictor(parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
        self.h = rclpy.create_node("fuzz_dds_harness")
        self.pubs = {
            "joint_states": self.h.create_publisher(JointState, "joint_states", 20),
            "estop": self.h.create_publisher(Bool, "estop", EVENTS),
            "brake_events": self.h.create_publisher(BrakeEvent, "brake_events", EVENTS),
            "lock_events": self.h.create_publisher(LockEvent, "lock_events", EVENTS),
            "robot_description": self.h.create_publisher(String, "robot_description", LATCHED),
        }
        self.predictions: list[StopPrediction] = []
        self.h.create_subscription(StopPrediction, "stop_prediction", self.predictions.append, 1000)
        self.client = self.h.create_client(PredictStop, "predict_stop")
        self.predictor_spin = Spinner(self.predictor)
        self.harness_spin = Spinner(self.h)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and not (
                all(p.get_subscription_count() > 0 for p in self.pubs.values()) and self.client.service_is_ready()):
            time.sleep(0.05)
        assert all(p.get_subscription_count() > 0 for p in self.pubs.values()), "predictor not discovered"
        self.started = time.monotonic()

    def now(self):
        return self.h.get_clock().now().to_msg()

    def close(self) -> None:
        self.capture.uninstall()
        self.predictor_spin.stop()
        self.harness_spin.stop()
        self.predictor.destroy_node()
        self.h.destroy_node()
        rclpy.try_shutdown()  # later modules call rclpy.init() themselves


@pytest.fixture(scope="module")
def rig():
    r = Rig()
    yield r
    r.close()


def wait_for(cond, timeout: float = WAIT_S) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


MESSAGES = st.one_of(
    S.joint_states().map(lambda c: ("joint_states", c)),
    S.bools().map(lambda c: ("estop", c)),
    S.brake_events().map(lambda c: ("brake_events", c)),
    S.lock_events().map(lambda c: ("lock_events", c)),
    S.urdf_texts(base_urdf=S.ur5_urdf()).map(lambda c: ("robot_description", c)),
)


@settings(max_examples=examples(120))
@given(st.lists(MESSAGES, min_size=1, max_size=8))
def test_generated_traffic_on_every_input_topic(rig, batch):
    if time.monotonic() - rig.started > BUDGET_S:
        return  # bounded in time: the remaining examples publish nothing
    for topic, case in batch:
        rig.pubs[topic].publish(case.msg)
    time.sleep(0.005)
    assert rig.predictor_spin.alive(), \
        f"the predictor's executor died: {rig.predictor_spin.error!r} after {[(t, c.note) for t, c in batch]}"


def test_node_is_alive_and_correct_after_the_generated_traffic(rig):
    """After the traffic: PredictStop is answered from the request's state, a genuine E-stop from the live state."""
    assert rig.predictor_spin.alive(), f"the predictor's executor died: {rig.predictor_spin.error!r}"
    # the service
    req = PredictStop.Request(state=S.valid_joint_state(S.UR5_JOINTS, UR5_Q, UR5_V, rig.now()), stop_category=0)
    future = rig.client.call_async(req)
    assert wait_for(future.done), "predict_stop not answered after the fuzz traffic"
    res = future.result()
    assert res.success, f"predict_stop failed after the fuzz traffic: {res.message[:300]}"
    assert np.allclose(first_positions(res.prediction.trajectory, list(S.UR5_JOINTS)), UR5_Q, atol=1e-9)
    assert res.prediction.model_name == "ur5", f"model after the fuzz traffic: {res.prediction.model_name!r}"
    # a genuine E-stop: live states at 100 Hz, the line re-armed, then the rising edge
    stop_states = threading.Event()

    def stream() -> None:
        while not stop_states.is_set():
            rig.pubs["joint_states"].publish(S.valid_joint_state(S.UR5_JOINTS, UR5_Q, UR5_V, rig.now()))
            time.sleep(0.01)

    streamer = threading.Thread(target=stream, daemon=True)
    streamer.start()
    try:
        rig.pubs["brake_events"].publish(BrakeEvent(joint_names=list(S.UR5_JOINTS), action=BrakeEvent.RELEASE))
        rig.pubs["estop"].publish(Bool(data=False))
        time.sleep(1.2)  # token buckets refill, a few states arrive
        n = len(rig.predictions)
        rig.pubs["estop"].publish(Bool(data=True))
        assert wait_for(lambda: any(p.scenario_id.startswith("estop-") for p in rig.predictions[n:])), \
            "a genuine E-stop after the fuzz traffic was not predicted (trigger lost)"
        pred = next(p for p in rig.predictions[n:] if p.scenario_id.startswith("estop-"))
        assert pred.success, f"genuine E-stop after the fuzz traffic: success=false ({pred.message})"
        assert pred.model_name == "ur5", f"genuine E-stop predicted with model {pred.model_name!r}"
        assert np.allclose(first_positions(pred.trajectory, list(S.UR5_JOINTS)), UR5_Q, atol=1e-9), \
            "genuine E-stop did not start from the live state"
    finally:
        stop_states.set()
        streamer.join(timeout=5.0)
        rig.pubs["estop"].publish(Bool(data=False))
    assert rig.predictor_spin.alive(), f"the predictor's executor died: {rig.predictor_spin.error!r}"
    assert S.SECRET not in rig.capture.all_text(), "a fuzz file's content reached the log"


# ------------------------------------------------------------------------------------------------ child process
def bare_links(n: int) -> str:
    """The issue's shape: ``n`` links and no joints (0.6 MB for 30,000 links)."""
    return '<robot name="many">' + "".join(f'<link name="l{k}"/>' for k in range(n)) + "</robot>"


HUGE_DESCRIPTIONS = [
    pytest.param(bare_links(30_000), id="30000-bare-links"),
    pytest.param(S.chain_urdf(10_000), id="10000-link-chain"),  # SIGSEGV in the URDF parser on main
]


@pytest.mark.parametrize("text", HUGE_DESCRIPTIONS)
def test_huge_description_neither_kills_nor_deafens_the_predictor_process(tmp_path, text):
    """The predictor in its own process (as ``ros2 run`` starts it) gets a huge ``robot_description``; it must
    stay alive and still predict a genuine E-stop (these inputs crash or stall a process, so not in process)."""
    import subprocess

    from test.ros_helpers import REPO_ROOT, python_executable, ros_subprocess_env, stop_process

    log = open(tmp_path / "predictor.log", "w")
    proc = subprocess.Popen(
        [python_executable(), "-m", "vtm_dynamics.nodes.estop_predictor", "--ros-args", "-p", "robot:=ur5",
         "-p", f"brake_config:={TEST_BRAKES}", "-p", "ghost_rate:=0.0", "-p", "max_start_state_age:=0.15"],
        cwd=REPO_ROOT, env=ros_subprocess_env(), stdout=log, stderr=subprocess.STDOUT)
    init_ros()
    node = rclpy.create_node("fuzz_huge_description")
    pub_js = node.create_publisher(JointState, "joint_states", 20)
    pub_estop = node.create_publisher(Bool, "estop", EVENTS)
    pub_desc = node.create_publisher(String, "robot_description", LATCHED)
    predictions: list[StopPrediction] = []
    node.create_subscription(StopPrediction, "stop_prediction", predictions.append, 100)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        assert spin_until(executor, lambda: pub_estop.get_subscription_count() > 0
                          and pub_desc.get_subscription_count() > 0, 60.0), "predictor process not discovered"
        pub_desc.publish(String(data=text))
        spin_until(executor, lambda: False, 1.0)
        for _ in range(30):  # 0.3 s of live states at 100 Hz
            pub_js.publish(S.valid_joint_state(S.UR5_JOINTS, UR5_Q, UR5_V, node.get_clock().now().to_msg()))
            spin_until(executor, lambda: False, 0.01)
        pub_estop.publish(Bool(data=False))
        pub_js.publish(S.valid_joint_state(S.UR5_JOINTS, UR5_Q, UR5_V, node.get_clock().now().to_msg()))
        pub_estop.publish(Bool(data=True))
        ok = spin_until(executor, lambda: any(p.scenario_id.startswith("estop-") for p in predictions)
                        or proc.poll() is not None, WAIT_S)
        assert proc.poll() is None, f"the predictor process died (exit code {proc.returncode}) after the description"
        if not ok:
            died = proc.poll() is not None or spin_until(executor, lambda: proc.poll() is not None, 30.0)
            state = f"it died later (exit code {proc.returncode})" if died else "the process is alive but deaf"
            raise AssertionError(f"no prediction within {WAIT_S} s of a genuine E-stop after the description; {state}")
        pred = next(p for p in predictions if p.scenario_id.startswith("estop-"))
        assert pred.success and pred.model_name == "ur5", f"E-stop after the description: {pred.message!r}"
    finally:
        executor.remove_node(node)
        node.destroy_node()
        executor.shutdown()
        rclpy.try_shutdown()
        stop_process(proc)
        log.close()

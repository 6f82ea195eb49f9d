"""The predictor's prediction worker without ROS (nodes/stop_worker.py): a job in, a result with its provenance out;
the refusals with their reasons; one answer per job when the deadline is overrun. The clocks are plain numbers."""

import os
import threading

import numpy as np
import pytest
from sensor_msgs.msg import JointState

from vtm_dynamics.core.estop import StopSettings, predict_stop
from vtm_dynamics.nodes.model_slot import ModelSlot, build_model
from vtm_dynamics.nodes.model_source import load_urdf_text
from vtm_dynamics.nodes.state_intake import StateIntake
from vtm_dynamics.nodes.stop_session import StartLimits, StopSession
from vtm_dynamics.nodes.stop_worker import PredictionSettings, StopWorker, predict

BRAKES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "ur5_test_brakes.yaml")
JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
          "wrist_3_joint"]
Q = np.array([0.1, -1.2, 1.4, -1.0, -1.57, 0.2])
V = np.array([1.2, -0.8, 0.9, 0.8, -0.7, 1.2])
SETTINGS = PredictionSettings(category=0, horizon=5.0, step=0.005, deceleration=3.0, deadline=2.0,
                              tcp_frame="tool0", robot_name="ur5")


@pytest.fixture(scope="module")
def ur5():
    return build_model(load_urdf_text("ur5"), BRAKES, "ur5", warm=False)


class Rig:
    """A model slot, an intake fed at node time 1000 s, a session and the worker, on clocks the test sets."""

    def __init__(self, model) -> None:
        self.node, self.monotonic = 1000.0, 50.0
        self.models = ModelSlot(False)
        if model is not None:
            self.models.install(model)
        self.intake = StateIntake(16, lambda: self.node, 0.05, wall=lambda: 5000.0, monotonic=lambda: self.monotonic)
        if model is not None:
            self.intake.reset(model.robot)
        self.session = StopSession()
        self.worker = StopWorker(self.models, self.intake, SETTINGS, StartLimits(0.05, 0.05, 0.05), lambda: self.node,
                                 monotonic=lambda: self.monotonic)
        # the prediction's own duration on the rig's clock too: on a slow or busy machine the first prediction of
        # the process (the kernels loading) took over the 2 s deadline in real time and failed the test
        self.worker.predict = lambda *args, **kwargs: predict(*args, clock=lambda: self.monotonic, **kwargs)

    def feed(self, stamp: float) -> None:
        msg = JointState(name=JOINTS, position=list(Q), velocity=list(V))
        msg.header.stamp.sec, msg.header.stamp.nanosec = int(stamp), int(round((stamp % 1) * 1e9))
        assert not self.intake.receive(msg, 5000.0).rejected

    def job(self, instant: float = 1000.0, stamped: bool = True, problem: str = ""):
        self.session.trigger(instant=instant, stamped=stamped, received=5000.0, wall=self.monotonic, source="test",
                             problem=problem)
        return self.session.take_job()


def test_a_job_gives_the_core_prediction_with_the_model_and_start_state_it_came_from(ur5):
    rig = Rig(ur5)
    rig.feed(999.99)
    job = rig.job()
    rig.monotonic += 1.0  # no state stamped at the instant came within state_wait_timeout: the newest older one
    res = rig.worker.run(job)
    assert res.reason == "" and not res.wait and res.late is None and res.model is ur5
    assert res.choice.sample.stamp == pytest.approx(999.99) and res.choice.age == pytest.approx(0.01)
    oracle = predict_stop(ur5.robot, ur5.brakes, Q, V, tcp_frame="tool0", settings=StopSettings(step=0.005, t_max=5.0))
    assert np.allclose(res.result.q_final, oracle.q_final, rtol=0, atol=1e-12)


@pytest.mark.parametrize("case, reason", [
    ("no model", "no robot model yet (waiting for robot_description)"),
    ("problem", "brake_events: engage_delay[elbow_joint]: 5 exceeds the bound 2 (max_engage_delay)"),
    ("no state", "no complete joint state received before the trigger"),
    ("stale", "start state is 0.300 s older than the trigger instant (max_start_state_age 0.05 s)"),
])
def test_a_job_that_cannot_be_trusted_is_a_result_with_the_reason(ur5, case, reason):
    rig = Rig(None if case == "no model" else ur5)
    if case == "stale":
        rig.feed(999.7)
    job = rig.job(problem=reason if case == "problem" else "")
    rig.monotonic += 1.0  # waited longer than state_wait_timeout
    res = rig.worker.run(job)
    assert res.result is None and res.reason == reason and not res.wait


def test_a_stamped_job_whose_state_has_not_come_yet_says_wait(ur5):
    rig = Rig(ur5)
    rig.feed(999.9)
    res = rig.worker.run(rig.job(instant=1000.0))
    assert res.wait and res.result is None


def test_a_job_over_its_deadline_is_answered_once_by_the_failure_published_for_it(ur5):
    rig = Rig(ur5)
    rig.feed(1000.0)
    job = rig.job()
    entered, release = threading.Event(), threading.Event()
    inner = rig.worker.predict

    def slow(*args, **kwargs):
        entered.set()
        release.wait(10.0)
        return inner(*args, **kwargs)

    rig.worker.predict = slow
    result = []
    thread = threading.Thread(target=lambda: result.append(rig.worker.run(job)))
    thread.start()
    assert entered.wait(10.0)
    assert rig.worker.overdue() is None  # within the deadline
    rig.monotonic += 2.5
    assert rig.worker.overdue() == job
    assert rig.worker.claim_late(job, "the failure")
    assert rig.worker.overdue() is None  # answered
    release.set()
    thread.join(10.0)
    assert result[0].late == "the failure"
    assert not rig.worker.claim_late(job, "too late")  # it no longer runs: no second answer


def test_the_prediction_call_never_raises(ur5):
    state = type("State", (), {"q": Q, "v": V})()
    no_brakes = build_model(ur5.text, "/nonexistent.yaml", "ur5", warm=False)
    assert predict(no_brakes, no_brakes.robot, state, SETTINGS).reason == no_brakes.brake_error
    bad = type("State", (), {"q": Q[:3], "v": V})()
    out = predict(ur5, ur5.robot, bad, SETTINGS)
    assert out.result is None and out.reason and "\n" not in out.reason
    ticks = iter([0.0, 3.0])
    late = predict(ur5, ur5.robot, state, SETTINGS, clock=lambda: next(ticks))
    assert late.result is None and late.reason == "prediction took 3.00 s, over prediction_deadline 2 s"

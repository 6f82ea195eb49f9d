"""Continuous predictions in a child process (nodes/prediction_process.py): the same answer as the node's own
prediction call, the robot sent once, the child at a lower priority, and a child that dies, hangs or is closed
makes a call a failure naming it - never an exception, never a wait without end.

Why: in the node's own threads continuous work held the interpreter lock the E-stop path needs whenever the
operating system preempted it (the E-stop p95 grew by 3-25 ms under a joint-state flood; bench_estop_latency).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf
from vtm_dynamics.nodes.prediction_process import CHILD_NICE, MAX_ROBOTS, PredictionProcess, RobotShelf
from vtm_dynamics.nodes.stop_worker import PredictionSettings, predict_with_brakes

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SETTINGS = PredictionSettings(category=0, horizon=5.0, step=1e-3, deceleration=1.0, deadline=60.0,
                              tcp_frame="tool0")
Q = np.array([0.3, -1.2, 1.4, -0.6, 1.2, 0.2])
V = np.array([0.8, -0.6, 0.7, 0.5, -0.4, 0.9])
# a child that says it is ready and then never answers
HANGING = [sys.executable, "-c", "import sys, time, pickle, struct; d = pickle.dumps(('ready',)); "
           "sys.stdout.buffer.write(struct.pack('<Q', len(d)) + d); sys.stdout.flush(); time.sleep(60)"]


@pytest.fixture(scope="module")
def ur5():
    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    brakes = brakes_from_config(robot, os.path.join(REPO, "config", "ur5_brakes.yaml"))
    return robot, brakes, SimpleNamespace(brakes=brakes, brake_error="")


@pytest.fixture(scope="module")
def process():
    with PredictionProcess(SETTINGS, 20.0) as p:
        p.start()
        yield p


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_the_child_answers_what_the_node_would_compute(ur5, process):
    robot, brakes, model = ur5
    state = SimpleNamespace(q=Q, v=V)
    want = predict_with_brakes(robot, brakes, state, SETTINGS)
    got = process.predict(model, robot, state)
    assert got.reason == "" and want.reason == "", (got.reason, want.reason)
    assert got.result.stop_time == pytest.approx(want.result.stop_time, abs=1e-12)
    np.testing.assert_allclose(got.result.q_final, want.result.q_final, rtol=0, atol=1e-12)
    assert got.result.tcp_straight_distance == pytest.approx(want.result.tcp_straight_distance, abs=1e-12)
    scaled = brakes.scaled(torque_factor=0.9, delay_factor=1.5)  # the envelope passes its brakes
    want = predict_with_brakes(robot, scaled, state, SETTINGS)
    got = process.predict(model, robot, state, brakes=scaled)
    assert got.result.stop_time == pytest.approx(want.result.stop_time, abs=1e-12)


def test_the_robot_is_sent_once_and_again_to_a_new_child(ur5, process):
    robot, _, model = ur5
    state = SimpleNamespace(q=Q, v=V)
    process.predict(model, robot, state)
    tokens = set(process._sent)
    process.predict(model, robot, state)
    assert process._sent == tokens  # nothing new was sent


def test_the_child_computes_only_on_a_core_nothing_else_wants(process):
    assert process.pid is not None
    if hasattr(os, "SCHED_IDLE"):
        assert os.sched_getscheduler(process.pid) == os.SCHED_IDLE
    else:
        assert os.getpriority(os.PRIO_PROCESS, process.pid) == min(19, os.getpriority(os.PRIO_PROCESS, 0)
                                                                   + CHILD_NICE)


def test_a_robot_is_warmed_up_once_when_it_reaches_the_child_before_its_first_prediction():
    """prediction_deadline bounds a prediction, not the loading of the compiled engine: the child warms up each
    robot it is sent (with the brakes it came with) before answering for it, and not again while it keeps it.
    Before: nothing was warmed up, and the first continuous round of a fresh node on a loaded machine was a
    deadline failure (3.47 s against 2 s in a full test run)."""
    warmed = []
    shelf = RobotShelf(warm=lambda robot, brakes: warmed.append((robot, brakes)))
    assert shelf.get(1, "arm", "brakes") == "arm" and warmed == [("arm", "brakes")]
    assert shelf.get(1, None, "other brakes") == "arm" and warmed == [("arm", "brakes")]  # kept: not again
    assert shelf.get(2, None, "brakes") is None  # never sent: the node sends it again
    for token in range(3, 3 + MAX_ROBOTS):  # the oldest robots make room
        shelf.get(token, f"arm {token}", None)
    assert shelf.get(1, None, None) is None and len(warmed) == 1 + MAX_ROBOTS


def test_a_warm_up_that_fails_leaves_the_answer_to_the_prediction():
    def broken(robot, brakes):
        raise ValueError("no such joint")

    assert RobotShelf(warm=broken).get(1, "arm", "brakes") == "arm"


def test_a_call_pauses_first_for_estop_work(ur5, process):
    robot, _, model = ur5
    calls = []
    process.before_call = lambda: calls.append(threading.current_thread().name)
    try:
        assert process.predict(model, robot, SimpleNamespace(q=Q, v=V)).reason == ""
    finally:
        process.before_call = None
    assert calls == [threading.current_thread().name]


def test_a_dead_child_is_a_failure_then_a_new_child_after_the_backoff(ur5):
    robot, _, model = ur5
    state = SimpleNamespace(q=Q, v=V)
    with PredictionProcess(SETTINGS, 20.0, restart_backoff=0.2) as p:
        assert p.predict(model, robot, state).reason == ""
        first = p.pid
        os.kill(first, 9)
        failed = p.predict(model, robot, state)
        assert failed.result is None and "prediction process" in failed.reason and "ended" in failed.reason
        assert not _alive(first)
        again = p.predict(model, robot, state)  # within the backoff: refused without a start
        assert again.result is None and "unavailable" in again.reason
        time.sleep(0.25)
        ok = p.predict(model, robot, state)  # a new child; the robot is sent to it again
        assert ok.reason == "" and p.pid not in (None, first)


def test_a_child_that_does_not_answer_is_ended_and_the_call_fails_in_time(ur5):
    robot, _, model = ur5
    with PredictionProcess(SETTINGS, 0.5, command=HANGING, start_timeout=0.5) as p:
        start = time.monotonic()
        got = p.predict(model, robot, SimpleNamespace(q=Q, v=V))
        waited = time.monotonic() - start
        pid_gone = p.pid is None
    assert got.result is None and "no answer in time" in got.reason
    assert pid_gone and waited < 0.5 + 0.5 + 10.0  # the call's bound (with a first call's allowance)


def test_after_close_calls_fail_and_the_child_is_gone(ur5):
    robot, _, model = ur5
    p = PredictionProcess(SETTINGS, 20.0, command=HANGING)
    p.start()
    pid = p.pid
    p.close()
    assert not _alive(pid)
    got = p.predict(model, robot, SimpleNamespace(q=Q, v=V))
    assert got.result is None and "shutting down" in got.reason


def test_no_brakes_is_the_models_reason_without_a_child(ur5):
    robot, _, _ = ur5
    p = PredictionProcess(SETTINGS, 20.0)
    got = p.predict(SimpleNamespace(brakes=None, brake_error="brakes: no file"), robot, SimpleNamespace(q=Q, v=V))
    assert got.result is None and got.reason == "brakes: no file" and p.pid is None


def test_an_oversized_frame_from_the_child_is_refused(ur5):
    robot, _, model = ur5
    liar = [sys.executable, "-c", "import sys, struct; sys.stdout.buffer.write(struct.pack('<Q', 1 << 62)); "
            "sys.stdout.flush(); import time; time.sleep(30)"]
    with PredictionProcess(SETTINGS, 5.0, command=liar, start_timeout=5.0) as p:
        got = p.predict(model, robot, SimpleNamespace(q=Q, v=V))
    assert got.result is None and "over" in got.reason


def test_close_ends_a_call_in_progress_at_once(ur5):
    robot, _, model = ur5
    got = []
    p = PredictionProcess(SETTINGS, 30.0, command=HANGING, start_timeout=30.0)
    caller = threading.Thread(target=lambda: got.append(p.predict(model, robot, SimpleNamespace(q=Q, v=V))))
    caller.start()
    for _ in range(500):  # the call is under way (it holds the lock while it talks to the child)
        if p._lock.locked():
            break
        time.sleep(0.01)
    time.sleep(0.3)
    start = time.monotonic()
    p.close()
    caller.join(10.0)
    assert not caller.is_alive() and time.monotonic() - start < 10.0  # not the call's 60 s bound
    assert got[0].result is None


ENVELOPE = {"stopping_envelope": True, "stopping_envelope_torque_min": 0.9, "stopping_envelope_torque_max": 1.1,
            "stopping_envelope_delay_min": 1.0, "stopping_envelope_delay_max": 1.5,
            "stopping_envelope_payload_max": 2.0, "stopping_envelope_random": 2, "unrelated": "not sent"}


def test_the_envelope_in_one_call_is_the_nodes_own(ur5, process):
    """Every case of the live stopping distance's envelope predicted in the child in one call: the same worst
    values as LiveStopping.evaluate with the node's prediction call in this process."""
    from vtm_dynamics.nodes.live_stopping import LiveStopping

    robot, brakes, model = ur5
    state = SimpleNamespace(q=Q, v=V)
    nominal = predict_with_brakes(robot, brakes, state, SETTINGS).result
    want = LiveStopping().evaluate(robot, brakes, nominal, ENVELOPE, "tool0",
                                   lambda r, b: predict_with_brakes(r, b, state, SETTINGS))
    got = process.envelope(model, robot, state, nominal, ENVELOPE, "tool0")
    assert want.error == "" and got.error == "" and got.cases == want.cases == 1 + 4 * 2 + 2
    for field in ("distance", "path_length", "time", "worst_distance", "worst_path_length", "worst_time"):
        assert getattr(got, field) == pytest.approx(getattr(want, field), abs=1e-12), field
    np.testing.assert_allclose(got.worst_rest, want.worst_rest, rtol=0, atol=1e-12)


def test_an_envelope_without_a_child_is_a_failure_naming_it(ur5):
    robot, brakes, model = ur5
    state = SimpleNamespace(q=Q, v=V)
    nominal = predict_with_brakes(robot, brakes, state, SETTINGS).result
    p = PredictionProcess(SETTINGS, 20.0)
    p.close()
    got = p.envelope(model, robot, state, nominal, ENVELOPE, "tool0")
    assert "shutting down" in got.error and got.distance == pytest.approx(nominal.tcp_straight_distance)


def _state_letter(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split(") ")[1][0]


def test_the_child_is_stopped_while_estop_work_runs_and_goes_on_after(ur5, process):
    robot, _, model = ur5
    pid = process.pid
    process.suspend(True)
    try:
        for _ in range(200):
            if _state_letter(pid) == "T":
                break
            time.sleep(0.005)
        assert _state_letter(pid) == "T"  # stopped: it computes nothing beside the E-stop path
    finally:
        process.suspend(False)
    assert process.predict(model, robot, SimpleNamespace(q=Q, v=V)).reason == ""


# a child that answers each request 0.3 s late with a canned failure
SLOW = [sys.executable, "-c", "import sys, time; from vtm_dynamics.nodes.prediction_channel import read_frame, "
        "write_frame; from vtm_dynamics.nodes.stop_worker import Outcome; out = sys.stdout.buffer; "
        "write_frame(out, ('ready',))\nwhile True:\n    read_frame(0); time.sleep(0.3); "
        "write_frame(out, ('answer', Outcome(None, 'canned', 0.0)))"]


def test_time_the_child_spends_stopped_does_not_count_against_a_call(ur5):
    robot, _, model = ur5
    with PredictionProcess(SETTINGS, 0.5, command=SLOW, start_timeout=30.0) as p:
        assert p.predict(model, robot, SimpleNamespace(q=Q, v=V)).reason == "canned"  # the first (start allowance)
        stopper = threading.Timer(0.05, p.suspend, args=(True,))
        goer = threading.Timer(0.85, p.suspend, args=(False,))
        stopper.start()
        goer.start()
        start = time.monotonic()
        got = p.predict(model, robot, SimpleNamespace(q=Q, v=V))  # 0.3 s of work + 0.8 s stopped > 0.5 s
        stopper.join()
        goer.join()
        assert got.reason == "canned" and time.monotonic() - start > 0.8


# a child that takes 1 s over each request that brings a robot (its warm-up) and answers the others at once
WARMING = [sys.executable, "-c", "import sys, time; from vtm_dynamics.nodes.prediction_channel import read_frame, "
           "write_frame; from vtm_dynamics.nodes.stop_worker import Outcome; out = sys.stdout.buffer; "
           "write_frame(out, ('ready',))\nwhile True:\n    robot = read_frame(0)[2]; time.sleep(1.0 if robot else 0); "
           "write_frame(out, ('answer', Outcome(None, 'canned', 0.0)))"]


def test_a_call_that_brings_the_child_a_new_robot_may_take_the_start_allowance_for_its_warm_up(ur5):
    """The child warms up each robot it is sent before predicting for it; a robot sent to a child that has
    answered before (the model replaced) takes that time within the start allowance, not the call's own bound.
    Before: only the child's first answer had the allowance, and a slow warm-up of a new robot ended the child
    (and the next child the same way)."""
    _, _, model = ur5
    state = SimpleNamespace(q=Q, v=V)
    with PredictionProcess(SETTINGS, 0.5, command=WARMING, start_timeout=30.0) as p:
        assert p.predict(model, "first robot", state).reason == "canned"
        pid = p.pid
        assert p.predict(model, "second robot", state).reason == "canned"  # 1 s of warm-up > 0.5 s
        # the same child goes on answering for it
        assert p.predict(model, "second robot", state).reason == "canned" and p.pid == pid


def test_the_urgent_flag_reports_when_it_goes_up_and_down():
    from vtm_dynamics.nodes.work_priority import UrgentWork

    changes = []
    urgent = UrgentWork(on_change=changes.append)
    urgent.raise_()
    urgent.raise_()  # already up: no second report
    epoch = urgent.epoch
    urgent.settle(epoch - 1)  # work raised since: stays up
    urgent.settle(epoch)
    urgent.release()  # already down
    assert changes == [True, False]

"""Continuous mode without ROS (nodes/continuous_mode.py): each round predicts from the newest state, hands the
registered outputs their value with the input's age at publication and the reason a stale one must not be a value,
and publishes nothing once a trigger has come. The prediction call and the clocks are the test's."""

from types import SimpleNamespace

import pytest
from sensor_msgs.msg import JointState

from vtm_dynamics.nodes.continuous_mode import ContinuousMode, ContinuousOutput
from vtm_dynamics.nodes.live_freshness import ContinuousGate
from vtm_dynamics.nodes.model_slot import ModelSlot
from vtm_dynamics.nodes.model_source import load_urdf_text, model_from_urdf_text
from vtm_dynamics.nodes.state_intake import StateIntake
from vtm_dynamics.nodes.stop_session import StartLimits, StopSession
from vtm_dynamics.nodes.stop_worker import Outcome
from vtm_dynamics.nodes.work_priority import UrgentWork


@pytest.fixture
def rig():
    robot = model_from_urdf_text(load_urdf_text("planar_3r"))
    clock = SimpleNamespace(node=1000.0)
    models = ModelSlot(False)
    models.install(SimpleNamespace(robot=robot, aux=robot, name="planar_3r"))
    intake = StateIntake(8, lambda: clock.node, 0.05, wall=lambda: 5000.0)
    intake.reset(robot)
    session = StopSession()
    gate = ContinuousGate(lambda: session.active)
    predicted = []

    def predict(model, robot_, state):
        predicted.append(state)
        return Outcome("the nominal result", "", 0.001)

    mode = ContinuousMode(gate, UrgentWork(), intake, models, StartLimits(0.05, 0.05, 0.05), predict,
                          lambda: clock.node, wall=lambda: 5000.0)
    published = []
    mode.add(ContinuousOutput("nominal", lambda r: ("nominal", r.outcome.result),
                              lambda r, value, age, stale: published.append((value, age, stale))))
    return SimpleNamespace(clock=clock, intake=intake, session=session, mode=mode, published=published,
                           predicted=predicted, gate=gate)


def _feed(rig, stamp: float) -> None:
    msg = JointState(name=["joint1", "joint2", "joint3"], position=[0.1, 0.2, 0.3], velocity=[0.5, 0.5, 0.5])
    msg.header.stamp.sec, msg.header.stamp.nanosec = int(stamp), int(round((stamp % 1) * 1e9))
    rig.intake.receive(msg, 4999.99)


def test_a_round_predicts_from_the_newest_state_and_publishes_each_output_with_its_input_age(rig):
    _feed(rig, 999.99)
    later = []
    rig.mode.add(ContinuousOutput("later", lambda r: "later", lambda r, v, age, stale: later.append(age)))
    rig.mode.run()
    assert len(rig.predicted) == 1 and rig.published == [(("nominal", "the nominal result"),
                                                          pytest.approx(0.01), "")]
    assert later == [pytest.approx(0.01)] and rig.mode.rate.last_seconds >= 0


def test_an_output_whose_input_grew_too_old_is_handed_the_reason_instead_of_being_a_value(rig):
    _feed(rig, 999.99)
    slow = ContinuousOutput("slow", lambda r: setattr(rig.clock, "node", 1000.3) or "late value",
                            lambda r, v, age, stale: rig.published.append((v, age, stale)))
    rig.mode.add(slow)
    rig.mode.run()
    value, age, stale = rig.published[-1]
    assert value == "late value" and age == pytest.approx(0.31)
    assert stale == "input state is 0.310 s old at publication (max_start_state_age 0.05 s, the E-stop's limit): " \
                    "no value"


def test_nothing_continuous_is_published_once_a_trigger_came_during_the_round(rig):
    _feed(rig, 999.99)
    second = []

    def trigger_meanwhile(r):
        with rig.gate.trigger():
            rig.session.trigger(instant=1000.0, stamped=False, received=5000.0, wall=0.0, source="test")
        return "computed"

    rig.mode.outputs.insert(0, ContinuousOutput("first", trigger_meanwhile, lambda *a: second.append(a)))
    rig.mode.run()
    assert second == [] and rig.published == [] and rig.gate.dropped == 1
    rig.mode.run()  # a stop is active: no round at all
    assert len(rig.predicted) == 1


def test_a_start_state_the_estop_would_refuse_gives_no_prediction_but_its_reason(rig):
    _feed(rig, 999.0)  # a second old
    rig.mode.outputs[0] = ContinuousOutput("nominal", lambda r: r.outcome,
                                           lambda r, value, age, stale: rig.published.append(value))
    rig.mode.run()
    assert rig.predicted == [] and rig.published[0].result is None
    assert rig.published[0].reason.startswith("start state is 1.000 s older than the trigger instant")


def test_a_disabled_output_is_skipped_and_no_state_means_no_round(rig):
    rig.mode.run()
    assert rig.predicted == [] and rig.published == []
    _feed(rig, 999.99)
    rig.mode.outputs[0] = ContinuousOutput("off", lambda r: 1, lambda *a: rig.published.append(a), lambda: False)
    rig.mode.run()
    assert rig.published == [] and len(rig.predicted) == 1

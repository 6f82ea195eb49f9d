"""What the E-stop line, brake events and lock events do to the predictor's stops, without ROS
(nodes/stop_triggers.py): each input gives a step (a trigger, the end of a stop, work to wake) the node acts on."""

from types import SimpleNamespace

import numpy as np
import pytest
from sensor_msgs.msg import JointState

from vtm_dynamics.nodes.estop_line import EstopLine
from vtm_dynamics.nodes.live_freshness import ContinuousGate
from vtm_dynamics.nodes.model_source import load_urdf_text, model_from_urdf_text
from vtm_dynamics.nodes.state_intake import StateIntake
from vtm_dynamics.nodes.stop_session import StopSession
from vtm_dynamics.nodes.stop_triggers import StopTriggers

JOINTS = ["joint1", "joint2", "joint3"]


@pytest.fixture(scope="module")
def robot():
    return model_from_urdf_text(load_urdf_text("planar_3r"))


@pytest.fixture
def rig(robot):
    intake = StateIntake(16, lambda: 1000.0, 0.05, wall=lambda: 5000.0)
    intake.reset(robot)
    session = StopSession()
    gate = ContinuousGate(lambda: session.active)
    triggers = StopTriggers(session, EstopLine(), gate, intake, wall=lambda: 50.0)
    return SimpleNamespace(intake=intake, session=session, gate=gate, triggers=triggers)


def _feed(rig, stamp: float, received: float) -> None:
    msg = JointState(name=JOINTS, position=[0.1, 0.2, 0.3], velocity=[1.0, 1.0, 1.0])
    msg.header.stamp.sec, msg.header.stamp.nanosec = int(stamp), int(round((stamp % 1) * 1e9))
    assert rig.intake.receive(msg, received).sample is not None


def test_a_rising_edge_starts_a_stop_from_the_state_received_before_it_and_the_release_ends_it(rig):
    _feed(rig, 999.98, 4999.98)
    ticket = rig.gate.ticket()
    step = rig.triggers.line_value("plc", True, received=4999.99, source="estop topic")
    assert step.kind == "new" and step.wake and step.stop.number == 1 and not step.stop.stamped
    assert step.stop.at_receipt.received == 4999.98 and step.stop.instant == pytest.approx(999.99)
    with rig.gate.publishing(ticket) as allowed:
        assert not allowed  # nothing continuous computed before the trigger is published after it
    assert rig.triggers.line_value("plc", True, 5000.0, "estop topic").kind == ""  # a repeated true is no edge
    step = rig.triggers.line_value("other", False, 5000.0, "estop topic")
    assert step.kind == "" and rig.session.active  # another publisher's false is no release
    rig.session.current.last_prediction = "the last prediction"
    rig.session.current.published, rig.session.current.dirty = 1, False
    step = rig.triggers.line_value("plc", False, 5000.0, "estop topic")
    assert step.kind == "ended" and step.final == "the last prediction" and not rig.session.active


def test_a_false_while_the_line_was_not_stopping_does_not_end_a_stop_a_brake_event_started(rig):
    step = rig.triggers.engage(instant=1000.0, stamped=True, received=5000.0, overrides={}, problem="",
                               source="brake event")
    assert step.kind == "new" and step.stop.stamped and step.stop.at_receipt is None
    assert rig.triggers.line_value("plc", False, 5000.0, "estop topic").kind == ""
    assert rig.session.active
    assert rig.triggers.end().kind == "ended" and not rig.session.active
    assert rig.triggers.end().kind == ""  # nothing left to end


def test_an_engage_with_new_brake_values_during_a_stop_revises_it(rig):
    rig.triggers.engage(instant=1000.0, stamped=True, received=5000.0, overrides={}, problem="", source="b")
    job = rig.session.take_job()
    rig.session.record(job, True, "result", "prediction")
    step = rig.triggers.engage(instant=1000.0, stamped=True, received=5000.0,
                               overrides={"joint1": {"sliding_torque": 1.0}}, problem="", source="b")
    assert step.kind == "revised" and step.wake


def _predicted(rig, stop_times) -> None:
    """A stop whose prediction has the joints come to rest at ``stop_times`` [s]."""
    rig.triggers.engage(instant=1000.0, stamped=True, received=5000.0, overrides={}, problem="", source="b")
    job = rig.session.take_job()
    rig.session.record(job, True, SimpleNamespace(joint_stop_times=np.array(stop_times)), "prediction")


def test_a_lock_of_a_joint_still_moving_revises_the_stop_and_one_at_rest_changes_nothing(rig, robot):
    _predicted(rig, [0.2, 0.05, 0.3])
    assert rig.triggers.lock(1000.1, ["joint2"], robot, horizon=5.0).wake is False  # at rest from 0.05 s
    step = rig.triggers.lock(1000.1, ["joint1"], robot, horizon=5.0)
    assert step.wake and rig.session.current.locks[0].time == pytest.approx(0.1)
    assert rig.triggers.lock(1010.0, ["joint3"], robot, horizon=5.0).wake is False  # after the horizon
    early = rig.triggers.lock(999.0, ["joint3"], robot, horizon=5.0)
    assert not early.wake and early.warning == "lock_events: LOCK stamped 1.0000 s before the E-stop ignored"


def test_a_lock_before_the_prediction_is_known_waits_for_it(rig, robot):
    rig.triggers.engage(instant=1000.0, stamped=True, received=5000.0, overrides={}, problem="", source="b")
    job = rig.session.take_job()
    assert not rig.triggers.lock(1000.1, ["joint1"], robot, horizon=5.0).wake  # deferred
    rig.session.record(job, True, SimpleNamespace(joint_stop_times=np.array([0.2, 0.2, 0.2])), "prediction")
    step = rig.triggers.after_result(job, True, robot, horizon=5.0)
    assert step.wake and len(rig.session.current.locks) == 1


def test_without_a_stop_a_lock_changes_nothing(rig, robot):
    assert rig.triggers.lock(1000.0, ["joint1"], robot, horizon=5.0).kind == ""

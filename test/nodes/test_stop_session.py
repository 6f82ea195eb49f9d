"""The stop-session rules of estop_predictor without ROS: the E-stop line, stops and revisions, start states."""

import math

import pytest

from vtm_dynamics.nodes.stop_session import (
    EstopLine,
    StartLimits,
    StateHistory,
    StateSample,
    StopSession,
    choose_start_state,
)


# ---------------------------------------------------------------------------------------------- the E-stop line
def test_a_cyclic_false_publisher_neither_masks_nor_fakes_another_publishers_edge():
    line = EstopLine()
    edges = 0
    for k in range(10):
        for _ in range(100):
            assert not line.update("plc", False)
        edges += line.update("button", True)
        assert line.stopping
        assert not line.update("plc", False) and line.stopping  # another publisher's false does not re-arm
        assert not line.update("button", True)  # a repeated true is no edge
        line.update("button", False)
        assert not line.stopping
    assert edges == 10


def test_a_new_publisher_starting_true_is_an_edge_and_the_line_stops_while_any_is_true():
    line = EstopLine()
    assert line.update("a", True)
    assert line.update("b", True)
    line.update("a", False)
    assert line.stopping
    line.update("b", False)
    assert not line.stopping


def test_the_publisher_table_is_bounded_and_forgets_the_least_recently_heard_non_holder():
    line = EstopLine(max_publishers=3)
    for k in range(1000):
        line.update(k, False)
    assert line.publishers == 3 and not line.stopping
    assert line.update("plc", True)
    for k in range(5):
        line.update(("y", k), False)
    assert line.stopping and line.publishers == 3  # "plc" holds the line: never evicted
    assert not line.update("plc", True)  # its cyclic true is no new edge


def test_only_the_holder_releases_the_line_whatever_other_publishers_send():
    """64 other publishers each sending false once while a PLC holds the line (before: the PLC's entry was
    evicted, the line released, and the PLC's next true started a second stop)."""
    line = EstopLine(max_publishers=64)
    assert line.update("plc", True)
    for k in range(64):
        assert not line.update(("other", k), False)
        assert line.stopping
    assert not line.update("plc", True)  # no spurious second edge
    line.update("plc", False)
    assert not line.stopping


def test_a_table_full_of_holders_still_sees_a_new_edge_and_releases_nothing_for_strangers():
    line = EstopLine(max_publishers=2)
    assert line.update("a", True) and line.update("b", True)
    assert line.update("c", True)  # a new publisher's true: an edge, counted unrecorded
    assert line.unrecorded == 1 and line.publishers == 2
    assert not line.update("d", False) and line.stopping
    line.update("a", False)
    assert line.stopping  # "b" still holds it
    line.update("b", False)
    assert not line.stopping


# ---------------------------------------------------------------------------------------------- start states
def _history(stamps, received=None):
    h = StateHistory()
    for i, t in enumerate(stamps):
        h.add(StateSample(stamp=t, received=received[i] if received else t, state=i))
    return h


LIMITS = StartLimits(max_age=0.05, future_tolerance=0.05, wait_timeout=0.05)


def test_a_stamped_trigger_after_a_gap_in_joint_states_is_refused_with_the_age():
    h = _history([100.0, 100.002, 100.004])
    c = choose_start_state(h, instant=100.304, stamped=True, received=100.304, now=100.36, waited=0.06, limits=LIMITS)
    assert not c.ok and c.sample.state == 2
    assert math.isclose(c.age, 0.3, abs_tol=1e-9)
    assert "0.300 s older than the trigger instant" in c.reason and "max_start_state_age" in c.reason


def test_a_stamped_trigger_waits_for_a_state_at_its_instant_then_uses_the_newest_before_it():
    h = _history([100.0, 100.002])
    c = choose_start_state(h, instant=100.003, stamped=True, received=100.003, now=100.004, waited=0.001,
                           limits=LIMITS)
    assert c.wait
    h.add(StateSample(stamp=100.004, received=100.004, state=2))
    c = choose_start_state(h, instant=100.003, stamped=True, received=100.003, now=100.005, waited=0.002,
                           limits=LIMITS)
    assert c.ok and c.sample.state == 1 and math.isclose(c.age, 0.001, abs_tol=1e-9)


def test_a_trigger_stamped_in_the_future_is_refused():
    h = _history([100.0])
    c = choose_start_state(h, instant=1e6, stamped=True, received=100.0, now=100.0, waited=1.0, limits=LIMITS)
    assert not c.ok and "in the future" in c.reason and "future_stamp_tolerance" in c.reason


def test_an_unstamped_trigger_uses_the_state_received_before_it_not_the_newest():
    h = _history([100.0, 100.01, 100.02], received=[5.0, 5.01, 5.02])
    c = choose_start_state(h, instant=100.012, stamped=False, received=5.015, now=100.05, waited=0.04,
                           limits=LIMITS)
    assert c.ok and c.sample.state == 1 and math.isclose(c.age, 0.002, abs_tol=1e-9)


def test_no_state_before_an_unstamped_trigger_is_refused():
    h = _history([100.0], received=[6.0])
    c = choose_start_state(h, instant=99.0, stamped=False, received=5.0, now=100.0, waited=0.0, limits=LIMITS)
    assert not c.ok and "no complete joint state" in c.reason


# ---------------------------------------------------------------------------------------------- stops
def _trigger(s, t, **kw):
    return s.trigger(instant=t, stamped=kw.pop("stamped", False), received=t, wall=t, source="test", **kw)


def test_triggers_during_a_stop_join_it_and_changed_brakes_revise_it_merged():
    s = StopSession()
    kind, stop = _trigger(s, 1.0)
    assert kind == "new" and stop.number == 1
    job = s.take_job()
    assert job.scenario == "estop-1" and s.take_job() is None
    assert _trigger(s, 1.1)[0] == "joined"  # outcome unknown yet: held in case it fails
    s.record(job, True, None, None, StateSample(1.0, 1.0, None))
    assert _trigger(s, 1.2, overrides={"j": {"engage_delay": 0.1}})[0] == "revised"
    assert _trigger(s, 1.3, overrides={"j": {"engage_delay": 0.2}})[0] == "revised"
    job = s.take_job()
    assert job.scenario == "estop-1-rev1" and job.overrides == {"j": {"engage_delay": 0.2}}  # merged: newest
    assert s.take_job() is None
    assert s.rearm() == (stop, False) and not s.active  # a prediction still runs: it will be the final one
    assert s.record(job, True, None, None) == "final"  # the stop has ended: this one stands
    assert _trigger(s, 2.0)[0] == "new" and s.current.number == 2
    assert s.triggers == 5


def test_a_trigger_joining_a_stop_whose_prediction_fails_starts_its_own_stop():
    s = StopSession()
    _trigger(s, 1.0, overrides={"j": {"engage_delay": 1e6}})
    job = s.take_job()
    assert _trigger(s, 1.5)[0] == "joined"
    s.record(job, False, None, None, None)
    assert s.current.number == 2 and s.current.overrides == {}
    second = s.take_job()
    assert second.scenario == "estop-2"
    s.record(second, False, None, None)  # a trigger after a failed prediction starts a new stop directly
    assert _trigger(s, 3.0)[0] == "new" and s.current.number == 3


@pytest.mark.parametrize("stamped", [True, False])
def test_a_stamped_engage_gives_an_unstamped_stop_its_instant(stamped):
    s = StopSession()
    _trigger(s, 1.0, at_receipt=StateSample(0.99, 0.99, None))
    job = s.take_job()
    s.record(job, True, None, None, StateSample(0.99, 0.99, None))
    kind, stop = _trigger(s, 0.995, stamped=stamped)
    assert kind == ("revised" if stamped else "joined")
    assert stop.stamped is stamped
    if stamped:  # the revision chooses its start state by the stamp, not the Bool's state at receipt
        job = s.take_job()
        assert job.instant == 0.995 and job.at_receipt is None


def test_a_stamped_engage_at_the_start_states_own_stamp_still_republishes_the_stop_at_its_instant():
    """The Bool's prediction already started from the state stamped at the engage instant, but it names the Bool's
    receipt instant as the trigger: the stop is revised so that the published prediction carries the engage stamp
    (a listener matching predictions to its E-stop by that stamp waited for one that never came)."""
    s = StopSession()
    _trigger(s, 1.0, at_receipt=StateSample(0.99, 0.99, None))
    s.record(s.take_job(), True, None, None, StateSample(0.99, 0.99, None))
    kind, stop = _trigger(s, 0.99, stamped=True)
    assert kind == "revised"
    job = s.take_job()
    assert job.instant == 0.99 and job.scenario == "estop-1-rev1"


def test_a_late_state_closer_to_a_stamped_instant_revises_the_stop_from_that_state():
    """The wait for a state at the E-stop instant timed out (a loaded machine): the first prediction started from
    a state 32 ms older. When the state stamped at the instant arrives, the stop is revised from it; states that
    bring nothing closer, or are stamped after the instant, do not revise it; an unstamped (Bool) stop keeps the
    state it had at receipt."""
    s = StopSession()
    h = _history([99.968])
    _trigger(s, 100.0, stamped=True)
    job = s.take_job()
    first = choose_start_state(h, instant=job.instant, stamped=True, received=100.0, now=100.06, waited=0.06,
                               limits=LIMITS, at_receipt=job.at_receipt)
    assert first.ok and first.sample.state == 0
    s.record(job, True, None, None, first.sample)
    assert s.closer_start_state(StateSample(99.968, 100.07, None), 100.07) is None  # the same state again
    assert s.closer_start_state(StateSample(100.002, 100.07, None), 100.07) is None  # after the instant
    assert s.closer_start_state(StateSample(99.970, 100.07, None), 100.07) is None  # 2 ms closer, not half the age
    late = StateSample(stamp=100.0, received=100.08, state=1)
    h.add(late)
    assert s.closer_start_state(late, 100.08) is s.current
    job = s.take_job()
    assert job.scenario == "estop-1-rev1" and job.at_receipt is None
    second = choose_start_state(h, instant=job.instant, stamped=True, received=100.0, now=100.09, waited=0.09,
                                limits=LIMITS, at_receipt=job.at_receipt)
    assert second.ok and second.sample is late and second.age == 0.0
    s.record(job, True, None, None, second.sample)
    assert s.closer_start_state(StateSample(100.0, 100.1, None), 100.1) is None and s.take_job() is None

    b = StopSession()  # Bool: the state received before the trigger stands
    _trigger(b, 200.0, at_receipt=StateSample(199.97, 199.97, None))
    b.record(b.take_job(), True, None, None, StateSample(199.97, 199.97, None))
    assert b.closer_start_state(StateSample(200.0, 200.05, None), 200.05) is None and b.take_job() is None


def test_a_late_state_stamped_before_the_instant_but_holding_a_later_value_does_not_revise_the_stop():
    """E-stop at 100.000 s, predicted from a state of 99.968 s. A gripper message stamped 99.998 s arrives late,
    after the arm's 100.006 s one: the merged state is stamped 99.998 s (its oldest moving value) but holds arm
    values of 100.006 s, 6 ms after the E-stop. Before, it revised the stop from those values; a state whose
    values all hold by the instant still does."""
    s = StopSession()
    _trigger(s, 100.0, stamped=True)
    s.record(s.take_job(), True, None, None, StateSample(99.968, 99.97, None))
    mixed = StateSample(stamp=99.998, received=100.07, state="gripper 99.998 s, arm 100.006 s", latest=100.006)
    assert s.closer_start_state(mixed, 100.07) is None and s.take_job() is None
    by_instant = StateSample(stamp=99.998, received=100.08, state="gripper 99.998 s, arm 99.999 s", latest=99.999)
    assert s.closer_start_state(by_instant, 100.08) is s.current


def test_the_values_of_a_stamped_start_state_all_hold_by_the_instant_and_its_age_is_that_of_its_oldest():
    """States merged from a 500 Hz arm and a moving 50 Hz gripper: stamped with the gripper's value (100.000 s),
    holding arm values up to ``latest``. For an E-stop at 100.005 s the state whose newest value is 100.004 s is
    taken (age 5 ms, the gripper's); before, the newest state stamped 100.000 s, holding arm values of 100.018 s."""
    h = StateHistory()
    for k in range(10):
        h.add(StateSample(stamp=100.0, received=100.0 + 0.002 * k, state=k, latest=100.0 + 0.002 * k))
    c = choose_start_state(h, instant=100.005, stamped=True, received=100.005, now=100.02, waited=0.015,
                           limits=LIMITS)
    assert c.ok and c.sample.state == 2 and math.isclose(c.age, 0.005, abs_tol=1e-9)


def test_every_revision_of_a_stop_carries_the_time_of_its_trigger_beside_the_time_it_was_requested():
    """A revision is requested later than the trigger (here a closer state 0.7 s after it); the job names both
    instants, so that a latency can be stated from the trigger as well as from the request."""
    s = StopSession()
    s.trigger(instant=100.0, stamped=True, received=100.0, wall=500.0, source="test")
    first = s.take_job()
    assert (first.wall, first.trigger_wall) == (500.0, 500.0)
    s.record(first, True, None, None, StateSample(99.9, 100.0, None))
    assert s.closer_start_state(StateSample(100.0, 100.7, None), 500.7) is s.current
    revision = s.take_job()
    assert revision.scenario == "estop-1-rev1"
    assert (revision.wall, revision.trigger_wall) == (500.7, 500.0)


def test_a_stop_ended_before_its_prediction_ran_is_still_predicted():
    s = StopSession()
    _trigger(s, 1.0)
    stop, republish = s.rearm()  # a short pulse: true then false before the worker took the job
    assert stop.number == 1 and not republish and not s.active
    _trigger(s, 1.1)
    first, second = s.take_job(), s.take_job()
    assert (first.scenario, second.scenario) == ("estop-1", "estop-2")  # the ended stop first
    assert s.record(first, True, None, None) == "final" and s.record(second, True, None, None) == "current"
    assert s.closing == []


def test_rearming_after_a_published_prediction_asks_to_republish_it_as_final():
    s = StopSession()
    _trigger(s, 1.0)
    job = s.take_job()
    s.record(job, True, "result", "prediction")
    stop, republish = s.rearm()
    assert republish and stop.last_prediction == "prediction"
    assert s.rearm() == (None, False)


def test_estimated_velocities_of_unstamped_states_are_refused():
    h = StateHistory()
    h.add(StateSample(stamp=100.0, received=5.0, state=0, estimated=("j1",), unstamped=True))
    c = choose_start_state(h, instant=100.001, stamped=False, received=5.001, now=100.01, waited=0.0, limits=LIMITS)
    assert not c.ok and "velocity" in c.reason and "unstamped" in c.reason

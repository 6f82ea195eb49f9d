"""`vtm-predict --payload M --envelope N`: the payload is carried once; the envelope's nominal case is the main
prediction and every case states the total payload it really used."""

from __future__ import annotations

import math

from vtm_dynamics.cli.predict import run_prediction


def test_envelope_nominal_case_is_the_main_prediction_with_the_given_payload():
    summary, _, _ = run_prediction("ur5", payload=5.0, envelope=2)
    p, env = summary.prediction, summary.envelope
    assert env.nominal.payload == 5.0
    assert all(c.payload == 5.0 for c in env.cases)
    assert math.isclose(env.nominal.stop_time, p.stop_time, rel_tol=1e-12, abs_tol=1e-12)
    assert math.isclose(env.nominal.tcp_straight_distance, p.tcp_straight_distance, rel_tol=1e-12, abs_tol=1e-12)


def test_default_ur5_envelope_spans_no_payload_to_rated_payload_and_its_nominal_is_the_main_prediction():
    summary, _, _ = run_prediction("ur5", envelope=1)
    p, env = summary.prediction, summary.envelope
    assert {c.payload for c in env.cases} >= {0.0, 5.0}
    assert env.nominal.payload == 0.0
    assert math.isclose(env.nominal.stop_time, p.stop_time, rel_tol=1e-12, abs_tol=1e-12)


def test_category_one_envelope_uses_the_given_ramp_and_its_nominal_is_the_main_prediction():
    """``--category 1 --decel 6 --envelope``: the envelope ramped at the default 3 rad/s^2, its nominal case
    stopped after 1.0 s and 0.818 m where the main prediction (and max|v| / a = 3 / 6) gives 0.5 s and 0.485 m;
    with ``--max-duration 0.1`` the envelope ignored the power cut (1.0 s against 0.181 s)."""
    for options in ({"deceleration": 6.0}, {"max_duration": 0.1}):
        summary, _, _ = run_prediction("ur5", category=1, envelope=1, **options)
        p, env = summary.prediction, summary.envelope
        assert math.isclose(env.nominal.stop_time, p.stop_time, abs_tol=1e-9)
        assert math.isclose(env.nominal.tcp_straight_distance, p.tcp_straight_distance, abs_tol=1e-9)
    summary, _, _ = run_prediction("ur5", category=1, deceleration=6.0, envelope=1)
    assert math.isclose(summary.envelope.nominal.stop_time, 3.0 / 6.0, abs_tol=1e-9)  # demo state: max|v| 3 rad/s


def test_the_envelope_inputs_say_where_its_payload_hangs():
    """Without --payload the UR5 envelope carries 0-5 kg on tool0, but its inputs named no frame (the main
    prediction's payload_frame is None when it carries none)."""
    from vtm_dynamics.cli.prediction_inputs import inputs_lines

    summary, _, _ = run_prediction("ur5", tcp_frame="wrist_3_link", envelope=1)
    assert summary.inputs["payload_frame"] is None
    assert summary.inputs["envelope"]["payload_frame"] == "tool0"
    assert any("payload 0-5 kg at tool0" in line for line in inputs_lines(summary.inputs))


def test_a_urdf_given_as_a_file_takes_the_payload_frame_the_named_robot_has():
    """Given by file, the UR5 could only carry its payload on --tcp-frame: with wrist_3_link and 5 kg it stopped in
    0.1355 s where the named UR5 (payload on tool0) stops in 0.1598 s. --payload-frame names the flange."""
    import pytest

    from vtm_dynamics.core.robot.catalogue import ROBOTS

    spec = ROBOTS["ur5"]
    named, _, _ = run_prediction("ur5", tcp_frame="wrist_3_link", payload=5.0)
    by_file, _, _ = run_prediction(None, urdf=spec.urdf_path(), brakes_path=spec.brakes_path(),
                                   q=spec.state("demo").q, v=spec.state("demo").v, tcp_frame="wrist_3_link",
                                   payload=5.0, payload_frame="tool0")
    assert by_file.prediction.stop_time == named.prediction.stop_time
    assert by_file.prediction.tcp_straight_distance == named.prediction.tcp_straight_distance
    assert by_file.inputs["payload_frame"] == "tool0"
    with pytest.raises(ValueError, match=r"^payload_frame: the model has no frame 'gripper'"):
        run_prediction("ur5", payload=5.0, payload_frame="gripper")

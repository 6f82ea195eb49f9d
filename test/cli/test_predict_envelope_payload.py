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

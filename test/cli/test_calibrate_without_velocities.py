"""vtm-calibrate on recordings without joint velocities: the right brake model is accepted, a wrong one is not.

Without velocities the state at each trigger comes from a quadratic through the positions of the 50 ms before it,
about 9 times less certain in velocity than from recorded velocities, and its error shifts every later sample of
the stop alike. The fit's residual carries it, the noise (encoder noise and timestamp jitter) does not: the true
brake model was refused as an inadequate fit (status 4, 7.6 x the noise on the stops below). The recordings here
are the realistic set's stops (test/recordings/recordings_testdata.py: the independent fixed-step plant, per-joint
delays of 13-24 ms that the prior does not know, viscous terms, capacities that decide slips) seen through the
driver-like sensor and written with positions only."""

from __future__ import annotations

import os

import numpy as np
import pytest
import yaml

from test.recordings.recordings_testdata import REALISTIC, SHIPPED_PRIOR
from vtm_dynamics.cli import calibrate
from vtm_dynamics.recordings.bag_files import read_recording
from vtm_dynamics.recordings.simulated import sample_stops, write_simulated_bag

MAIN = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint")


def _bag(realistic, path: str, velocities: bool) -> str:
    robot, _, plant = realistic
    samples = sample_stops(plant, robot.joint_names, sensor=REALISTIC.sensor, seed=11)
    if not velocities:
        samples["joint"] = [(stamp, measured, q, np.zeros(0)) for stamp, measured, q, _ in samples["joint"]]
    return write_simulated_bag(path, samples, "mcap")


@pytest.fixture(scope="module")
def positions_only(realistic, tmp_path_factory):
    """The realistic set's twelve stops as an MCAP bag whose joint states carry positions only."""
    path = _bag(realistic, str(tmp_path_factory.mktemp("positions") / "positions_only"), velocities=False)
    assert read_recording(path).joints.v is None
    return path


def _run(bag: str, out, *options: str) -> calibrate.CalibrationRun:
    argv = [bag, "--robot", "ur5", "--payload", "5", "--holdout", str(REALISTIC.held), "--out",
            str(out / "fitted.yaml"), *options]
    return calibrate.run(calibrate.build_parser().parse_args(argv), say=lambda _text: None)


@pytest.fixture(scope="module")
def correct_model(positions_only, tmp_path_factory):
    """The fit from the shipped prior without the extended terms: the plant's brake model (30-60 s)."""
    return _run(positions_only, tmp_path_factory.mktemp("correct"), "--prior", SHIPPED_PRIOR)


def test_the_right_brake_model_is_accepted_from_a_recording_without_velocities(correct_model):
    assert correct_model.status == 0, correct_model.verdicts
    assert not correct_model.verdicts
    ident = correct_model.ident
    # what the tool judged: the trigger states of the stops free within their uncertainty, not the bare residual
    assert ident.state_free_residual_rms is not None
    assert ident.state_free_residual_rms < 2.0 * ident.noise < ident.residual_rms


def test_the_values_accepted_lie_within_their_stated_uncertainty_of_the_truth(realistic, correct_model):
    """Four sigma, as for the recordings with velocities (test/core/estop/test_identification.py): this set's
    plant step biases the best-determined torques by up to 3.6 sigma. Every capacity the stops bound contains the
    truth."""
    truth = {b.joint: b for b in realistic[1].brakes}
    est = correct_model.ident.estimates
    for e in est:
        if e.identifiable and e.field != "holding_torque":
            error = e.value - getattr(truth[e.joint], e.field)
            assert abs(error) <= 4.0 * e.sigma, (e.joint, e.field, error / e.sigma)
    # not a vacuous pass: the delays of every joint and the friction of the main joints are identified (from
    # positions only less tightly than with velocities: J0's sliding torque 67 +- 4 N m for a truth of 62)
    by_key = {(e.joint, e.field): e for e in est}
    assert all(by_key[(j, "engage_delay")].identifiable for j in truth)
    assert all(by_key[(j, f)].identifiable for j in MAIN for f in ("sliding_torque", "viscous"))
    for c in correct_model.ident.capacities:
        if c.loaded:
            assert c.lower <= truth[c.joint].holding_torque <= c.upper, c


def test_a_capacity_no_stop_loads_is_written_at_the_static_friction_of_the_file(correct_model):
    """The least value the stops accept, at the file's own friction, also after the fit was polished with a
    capacity whose end the re-fit moved (here the elbow's): the shoulder pan's was left at its static friction
    from before that polish, 67.33 N m where the file's sliding torque is 66.61, a capacity no stop shows."""
    caps = {c.joint: c for c in correct_model.ident.capacities}
    untested = [b for b in correct_model.ident.brakes if not (caps[b.joint].loaded or caps[b.joint].undecided)]
    assert untested  # not vacuous
    for b in untested:
        static = b.breakaway_torque if b.breakaway_torque is not None else b.sliding_torque
        assert b.holding_torque == pytest.approx(static, rel=1e-9), b


def test_brakes_15_percent_too_strong_are_still_refused_without_velocities(realistic, positions_only,
                                                                          tmp_path_factory):
    """Sliding, viscous and holding torques 15 % above the truth, only the delays and capacities fitted: the
    model cannot reproduce the stops, and no trigger state within its uncertainty makes up for it (5-6 x the
    noise with the trigger states free)."""
    out = tmp_path_factory.mktemp("strong")
    joints = {b.joint: {"sliding_torque": 1.15 * b.sliding_torque, "viscous": 1.15 * b.viscous,
                        "holding_torque": 1.15 * b.holding_torque, "engage_delay": 0.01}
              for b in realistic[1].brakes}
    prior = out / "strong.yaml"
    prior.write_text(yaml.safe_dump({"brakes": {"joints": joints}}))
    result = _run(positions_only, out, "--prior", str(prior), "--fields", "engage_delay", "holding_torque")
    assert result.status == calibrate.EXIT_UNCONVERGED, result.verdicts
    assert any(line.startswith(("inadequate fit:", "model:")) for line in result.verdicts), result.verdicts
    assert not os.path.exists(out / "fitted.yaml")


def test_with_recorded_velocities_the_fit_is_judged_by_its_residual_as_before(realistic, tmp_path_factory):
    """Nothing changes for recordings with velocities: no stop is judged with its trigger state free."""
    out = tmp_path_factory.mktemp("velocities")
    bag = _bag(realistic, str(out / "with_velocities"), velocities=True)
    result = _run(bag, out, "--prior", SHIPPED_PRIOR, "--starts", "2")
    ident = result.ident
    assert ident.state_free_residual_rms is None and ident.adequacy_residual == ident.residual_rms
    assert result.status == 0, result.verdicts

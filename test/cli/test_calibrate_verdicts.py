"""vtm-calibrate's verdicts: an unconverged fit is said to be one and gets status 4, never advice to change the brake
model (the tool used to answer a fit stuck in a wrong basin with "try breakaway_torque stribeck_velocity"); a
cross-validated stop shorter than recorded beyond the tolerance gets status 3; either may be accepted explicitly."""

import dataclasses
import math

import numpy as np

from vtm_dynamics.cli.calibrate import EXIT_NONCONSERVATIVE, EXIT_UNCONVERGED, verdicts
from vtm_dynamics.core.estop.identification import Identification, ParameterEstimate
from vtm_dynamics.core.estop.output_error import StartResult
from vtm_dynamics.core.estop.stop_comparison import StopComparison


def _ident(agreeing: list[bool], residual: float) -> Identification:
    starts = tuple(StartResult(f"s{k}", np.zeros(1), np.zeros(1), 1.0, "", a) for k, a in enumerate(agreeing))
    return Identification("ur5", (), (), (), (), residual, residual, 100, 10, 1.0, "", starts, 1e-4, 0.95)


def _stop(label: str, time_ratio: float) -> StopComparison:
    angles = np.array([0.5, 0.0])
    return StopComparison(label, angles, angles, 0.3, 0.3 * time_ratio, 0.2, 0.2, 1e-4, np.zeros(0), np.zeros((0, 2)))


def test_an_unconverged_fit_gets_status_4_and_no_advice_to_change_the_model():
    lines, status = verdicts(_ident([True, False, False], 1e-2), [_stop("a", 1.0)], 0.05, 1e-4, False, False)
    assert status == EXIT_UNCONVERGED
    assert lines[0].startswith("not converged: only 1 of 3 starts")
    assert not any("breakaway" in line or "stribeck" in line for line in lines)


def test_a_converged_fit_with_a_residual_over_twice_the_noise_names_the_model_terms_and_is_refused():
    """A model that lacks an effect moves its fitted values to make up for it, beyond their intervals (a torque rise
    left out came back as engagement delays 10-30 sigma late, with exit 0 and the file written): status 4 and no
    file, as for an unconverged fit, unless accepted."""
    lines, status = verdicts(_ident([True, True], 2.5e-4), [_stop("a", 1.0)], 0.05, 1e-4, False, False)
    model = [line for line in lines if line.startswith("model:")]
    assert status == EXIT_UNCONVERGED and len(model) == 1
    assert "breakaway_torque" in model[0] and "the brake file is not written" in model[0]
    lines, status = verdicts(_ident([True, True], 2.5e-4), [_stop("a", 1.0)], 0.05, 1e-4, False, True)
    assert status == 0 and any(line.startswith("model:") and "accepted" in line for line in lines)


def test_a_converged_fit_the_noise_explains_gets_no_model_verdict():
    lines, status = verdicts(_ident([True, True], 1.5e-4), [_stop("a", 1.0)], 0.05, 1e-4, False, False)
    assert status == 0 and lines == []


def test_a_stop_predicted_short_beyond_the_tolerance_gets_status_3_unless_accepted():
    stops = [_stop("a", 1.02), _stop("b", 0.93), _stop("c", 0.97)]
    lines, status = verdicts(_ident([True, True], 1e-4), stops, 0.05, 1e-4, False, False)
    assert status == EXIT_NONCONSERVATIVE and lines[0].startswith("non-conservative: 1 cross-validated")
    assert "worst b stop time -7.0 %" in lines[0]
    _, status = verdicts(_ident([True, True], 1e-4), stops, 0.05, 1e-4, True, False)
    assert status == 0
    _, status = verdicts(_ident([True, True], 1e-4), stops, 0.08, 1e-4, False, False)
    assert status == 0 and math.isfinite(stops[0].relative("time"))


def test_starts_that_agree_on_an_optimum_far_from_the_data_are_no_fit_to_use():
    """Every start can fall into the same wrong basin: a residual three times the noise gets status 4 and is not
    blamed on the brake model alone."""
    lines, status = verdicts(_ident([True, True, True], 5e-4), [_stop("a", 1.0)], 0.05, 1e-4, False, False)
    assert status == EXIT_UNCONVERGED and lines[0].startswith("inadequate fit: the residual RMS 0.0005 rad is 5.0 x")
    assert not any(line.startswith("model:") for line in lines)
    _, status = verdicts(_ident([True, True, True], 5e-4), [_stop("a", 1.0)], 0.05, 1e-4, False, True)
    assert status == 0


def test_a_conservative_file_with_an_unidentified_delay_is_refused_unless_accepted():
    """A later engagement lengthens the stop, and the stops give no upper bound for a delay they do not identify:
    the conservative file cannot be at its lengthening end, so it is one line naming the joint and field, status 3
    and no file unless accepted. The nominal file makes no such claim."""
    unknown = ParameterEstimate("wrist_2_joint", "engage_delay", None, None, False, 0.01, "not fitted")
    ident = dataclasses.replace(_ident([True, True], 1e-4), estimates=(unknown,))
    lines, status = verdicts(ident, [_stop("a", 1.0)], 0.05, 1e-4, False, False, True)
    assert status == EXIT_NONCONSERVATIVE and len(lines) == 1 and "wrist_2_joint.engage_delay" in lines[0], lines
    _, status = verdicts(ident, [_stop("a", 1.0)], 0.05, 1e-4, True, False, True)
    assert status == 0
    lines, status = verdicts(ident, [_stop("a", 1.0)], 0.05, 1e-4, False, False, False)
    assert status == 0 and not lines


def test_stops_recorded_without_velocities_are_judged_with_their_trigger_states_free():
    """A residual 7.6 x the noise that the trigger states derived from positions explain (the fit with them free
    within their uncertainty leaves 1.4 x) is the right model, not an inadequate fit; what is left with them free
    is judged by the same thresholds as before."""
    explained = dataclasses.replace(_ident([True, True, True], 7.6e-4), state_free_residual_rms=1.4e-4)
    lines, status = verdicts(explained, [_stop("a", 1.0)], 0.05, 1e-4, False, False)
    assert status == 0 and lines == []
    for left, verdict in ((2.5e-4, "model:"), (5e-4, "inadequate fit:")):
        misfit = dataclasses.replace(_ident([True, True, True], 7.6e-4), state_free_residual_rms=left)
        lines, status = verdicts(misfit, [_stop("a", 1.0)], 0.05, 1e-4, False, False)
        assert status == EXIT_UNCONVERGED and lines[0].startswith(verdict), lines
        assert "0.00076 rad" in lines[0] and "free within their uncertainty" in lines[0], lines

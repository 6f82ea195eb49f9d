"""The jackknife floor of the fit's covariance (core/estop/fit_uncertainty.py) on a linear least-squares problem
whose leave-one-stop-out refits are known in closed form: errors shared by all samples of a stop (as a model
misfit or a trigger-state error gives) are not white, and the Gauss-Newton covariance understates them."""

import numpy as np
import pytest

from vtm_dynamics.core.estop.fit_uncertainty import MISFIT, gauss_newton_covariance, jackknife_floor
from vtm_dynamics.core.estop.output_error import FitParameter


class LinearStops:
    """r(x) = A x - y, rows grouped into stops; the shape of OutputError that the refits use."""

    def __init__(self, A: np.ndarray, y: np.ndarray, sizes: list[int]) -> None:
        self.A, self.y, self.sizes = A, y, sizes
        self.stops = list(range(len(sizes)))
        self.params = [FitParameter(f"j{i}", "sliding_torque") for i in range(A.shape[1])]
        self.scale = np.ones(A.shape[1])
        self.offsets = np.concatenate(([0], np.cumsum(sizes)))

    def brake_set(self, x: np.ndarray) -> np.ndarray:
        return x

    def residuals_of(self, x: np.ndarray, keep) -> list[np.ndarray]:
        r = self.A @ x - self.y
        return [r[self.offsets[k]:self.offsets[k + 1]] for k in keep]


def _problem(stop_offset: float, seed: int = 3, stops: int = 10, samples: int = 40):
    rng = np.random.default_rng(seed)
    t = np.tile(np.linspace(0.0, 1.0, samples), stops)
    A = np.column_stack([np.ones_like(t), t, np.repeat(rng.uniform(0.5, 1.5, stops), samples) * t])
    truth = np.array([2.0, 3.0, 1.5])
    y = A @ truth + 1e-3 * rng.standard_normal(t.size) + np.repeat(stop_offset * rng.standard_normal(stops), samples)
    problem = LinearStops(A, y, [samples] * stops)
    x = np.linalg.lstsq(A, y, rcond=None)[0]
    return problem, x, A, A @ x - y


def test_under_a_misfit_no_sigma_is_below_the_jackknife_of_exact_leave_one_stop_out_refits():
    problem, x, J, r = _problem(stop_offset=0.02)
    cov = gauss_newton_covariance(J, r)
    floored = jackknife_floor(problem, x, [0, 1, 2], J, r, cov, noise=1e-3)
    n = len(problem.stops)
    refits = []
    for k in range(n):  # independent formulation: each stop's rows removed and the least squares solved again
        keep = np.concatenate([np.arange(problem.offsets[i], problem.offsets[i + 1]) for i in range(n) if i != k])
        refits.append(np.linalg.lstsq(problem.A[keep], problem.y[keep], rcond=None)[0])
    refits = np.array(refits)
    jack = np.sqrt((n - 1) / n * np.sum((refits - refits.mean(axis=0)) ** 2, axis=0))
    sigma = np.sqrt(np.diag(floored))
    assert np.all(jack > 2.0 * np.sqrt(np.diag(cov)))  # the shared errors: Gauss-Newton understates them
    assert sigma == pytest.approx(jack, rel=1e-6)
    # the correlations of the model covariance are kept
    corr = lambda c: c / np.sqrt(np.outer(np.diag(c), np.diag(c)))  # noqa: E731
    assert corr(floored) == pytest.approx(corr(cov), abs=1e-9)


def test_a_residual_the_noise_explains_leaves_the_covariance_as_it_is():
    problem, x, J, r = _problem(stop_offset=0.0)
    rms = np.sqrt(np.mean(r**2))
    cov = gauss_newton_covariance(J, r)
    assert rms < MISFIT * 1e-3
    assert np.array_equal(jackknife_floor(problem, x, [0, 1, 2], J, r, cov, noise=1e-3), cov)

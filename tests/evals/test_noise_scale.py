"""The forecast's noise scale measures the scatter of the points, not the curve's shape. Scatter around a running
median of 5 was biased both ways: on a 40-point rise with noise sd 0.03 it read 0.014 (the median of 5 follows the
noise), and on a noise-free straight rise with uneven steps 0.096 (the window's slope read as noise)."""

from __future__ import annotations

import numpy as np
import pytest

from evals.forecast import MIN_SIGMA, noise_scale, sigmoid_curve


def _noise_free(n: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.linspace(0, 100, n)
    y = sigmoid_curve(x, 0.1, 0.55, 1.5, 20.0)
    return x, (y - y.min()) / (y.max() - y.min())  # the fit's [0, 1] scale: the rise is the whole range


@pytest.mark.parametrize("n", [11, 21, 41])
def test_a_noise_free_rising_curve_is_not_read_as_noisy(n):
    assert noise_scale(*reversed(_noise_free(n))) < 0.02


def test_more_points_of_a_noise_free_curve_never_read_noisier():
    sigmas = [noise_scale(*reversed(_noise_free(n))) for n in (4, 6, 11, 21, 41)]
    assert sigmas == sorted(sigmas, reverse=True)


def test_a_straight_rise_has_the_floor_at_any_spacing():
    x = np.array([0.0, 1.0, 3.0, 4.0, 10.0, 11.0])
    assert noise_scale(0.05 * x, x) == MIN_SIGMA


@pytest.mark.parametrize("n", [10, 40, 200])
def test_white_noise_is_measured_at_its_scale(n):
    rng = np.random.default_rng(n)
    estimates = [noise_scale(0.5 + rng.normal(0, 0.05, n)) for _ in range(300)]
    assert np.median(estimates) == pytest.approx(0.05, rel=0.12)


def test_noise_on_a_rise_is_measured_as_the_noise_alone():
    rng = np.random.default_rng(3)
    x = np.arange(1, 41, dtype=float)
    clean = sigmoid_curve(x, 0.0, 1.0, 2.0, 15.0)
    estimates = [noise_scale(clean + rng.normal(0, 0.03, len(x)), x) for _ in range(200)]
    assert np.median(estimates) == pytest.approx(0.03, rel=0.2)

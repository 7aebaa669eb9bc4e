"""Forecasting the final RL accuracy from the early curve: R(C) = R0 + (A - R0) / (1 + (Cmid / C)^B).

Why a grid posterior and not least squares: early RL curves are short, noisy and often still mid-rise, so A and
Cmid are weakly identified and a least-squares fit extrapolates wildly (it loses to persistence on real curves).
For fixed (B, Cmid, A) the curve is linear in R0, so R0 is profiled exactly (0 <= R0 <= A) and the rest is a
dense grid over (B, Cmid, A) with a Student-t likelihood (robust to eval glitches), a noise scale measured from
the data itself (robust scale of second-difference pseudo-residuals, at least one point of accuracy), and weak
priors: log B ~ N(log 1.5, 1), log Cmid ~ N(log C_last_seen, 1), and a half-normal on A above the best value seen. The
forecast is the posterior mean, which shrinks uncertain extrapolations toward what was observed.

The scale of that half-normal is the gain still to come, and it is pooled over an experiment (empirical Bayes):
a sigmoid in log-compute gains as much after its midpoint as before, so one run's rise so far (10-90% quantile
range of its fit window, at least 0.05) estimates it, noisily; runs of one CSV share the task and compute axis,
so `fit_experiment` gives every run the median of those scales over all runs, each measured on the run's own
fit window only. A run still flat at its fit fraction then gets room to rise when its siblings rose, and a run
whose window caught a noisy jump gets less. Pooling the shape (B, Cmid) as well was measured and made the
back-test worse (median error at 20%: 0.061 vs 0.045, with the earlier noise scale): a shared shape sharpens every run onto the joint mode
and drops the slower-rise hypotheses that the still-rising runs need.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

B_GRID = np.exp(np.linspace(math.log(0.3), math.log(8.0), 16))
N_CMID = 60
A_GRID = np.linspace(0.0, 1.0, 101)
STUDENT_NU = 4.0
MIN_SIGMA = 0.01  # one point of accuracy: eval sets of a few hundred problems resolve no better


@dataclass(frozen=True)
class Priors:
    """Weak priors on the sigmoid parameters (see the module docstring)."""

    log_b_mean: float = math.log(1.5)
    log_b_sd: float = 1.0
    log_cmid_sd: float = 1.0
    a_above_max_rel: float = 1.0  # sd of A above the best value seen, relative to the rise seen so far
    a_above_max_min: float = 0.05  # ... and at least this (a flat start says little about the rise to come)
    cmid_span: float = 20.0  # the Cmid grid reaches this multiple of the last compute seen


def a_prior_sd(y: np.ndarray, priors: Priors) -> float:
    """Scale of the half-normal on A above the best value seen: the rise seen so far (10-90% quantile range).

    A sigmoid in log-compute is symmetric about Cmid: at the midpoint the gain still to come equals the gain so
    far, and past it less remains, so the rise already seen is the natural scale for the rise to come.
    """
    rise = float(np.quantile(y, 0.9) - np.quantile(y, 0.1)) if len(y) else 0.0
    return max(priors.a_above_max_min, priors.a_above_max_rel * rise)


def sigmoid_curve(c: np.ndarray | float, r0: float, a: float, b: float, cmid: float) -> np.ndarray:
    """R(C) = R0 + (A - R0) / (1 + (Cmid / C)^B); R(0) = R0."""
    c = np.asarray(c, dtype=float)
    return r0 + (a - r0) * _shape(c, b, cmid)


def _shape(c: np.ndarray, b: np.ndarray | float, cmid: np.ndarray | float) -> np.ndarray:
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        ratio = np.power(cmid / np.maximum(c, 1e-300), b)
        return np.where(c > 0, 1.0 / (1.0 + ratio), 0.0)


def noise_scale(y: np.ndarray, x: np.ndarray | None = None) -> float:
    """Per-point noise of a curve, at least MIN_SIGMA: robust scale of its pseudo-residuals.

    Each inner point's distance from the line through its two neighbours (at compute X; evenly spaced without
    it), scaled to unit variance under independent noise: a straight or gently curved rise cancels out. Scatter
    around a running median of 5 read a noisy rise as too smooth (sd 0.03 as 0.014) and an uneven straight one as
    noisy; with 6 points or fewer, curvature and noise still cannot be told apart.
    """
    y = np.asarray(y, dtype=float)
    if len(y) < 4:
        return max(MIN_SIGMA, 0.02)
    x = np.arange(len(y), dtype=float) if x is None else np.asarray(x, dtype=float)
    gap = x[2:] - x[:-2]
    w = np.where(gap > 0, (x[2:] - x[1:-1]) / np.where(gap > 0, gap, 1.0), 0.5)
    resid = (y[1:-1] - (w * y[:-2] + (1 - w) * y[2:])) / np.sqrt(1 + w**2 + (1 - w) ** 2)
    return max(MIN_SIGMA, 1.4826 * float(np.median(np.abs(resid))))


@dataclass
class SigmoidFit:
    """A fitted curve: MAP parameters (refined off the grid), posterior samples (weighted grid points), and the
    posterior's medians and 5-95% intervals of A, B, Cmid (which always hold the medians). Forecasts and bands use
    the posterior; `params()` reports the MAP, `estimates()` the posterior medians."""

    r0: float
    a: float
    b: float
    cmid: float
    sigma: float
    scale: tuple[float, float]  # (lo, hi): the fit ran on (y - lo) / (hi - lo)
    samples: np.ndarray  # (k, 4) normalized (r0, a, b, cmid)
    weights: np.ndarray  # (k,)
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)  # posterior 5-95%, own units
    medians: dict[str, float] = field(default_factory=dict)  # posterior medians of R0, A, B, Cmid, own units
    n_points: int = 0

    def _unscale(self, values: np.ndarray) -> np.ndarray:
        lo, hi = self.scale
        return lo + (hi - lo) * values

    def curves(self, c: np.ndarray | float) -> np.ndarray:
        """Posterior sample curves at compute C, shape (k, len(C)), in the curve's own units."""
        c = np.atleast_1d(np.asarray(c, dtype=float))
        r0, a, b, cmid = (self.samples[:, i : i + 1] for i in range(4))
        return self._unscale(r0 + (a - r0) * _shape(c[None, :], b, cmid))

    def predict(self, c: np.ndarray | float) -> np.ndarray:
        """Posterior-mean forecast at compute C."""
        return self.weights @ self.curves(c)

    def band(self, c: np.ndarray, low: float = 0.05, high: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Pointwise posterior quantiles of the curve (the plotted band)."""
        curves = self.curves(c)
        order = np.argsort(curves, axis=0)
        cum = np.cumsum(self.weights[order], axis=0)
        cols = np.arange(curves.shape[1])
        lo = curves[order[np.argmax(cum >= low, axis=0), cols], cols]
        hi = curves[order[np.argmax(cum >= high, axis=0), cols], cols]
        return lo, hi

    def params(self) -> dict[str, float]:
        """MAP parameters in the curve's own units."""
        lo, hi = self.scale
        return {"R0": lo + (hi - lo) * self.r0, "A": lo + (hi - lo) * self.a, "B": self.b, "Cmid": self.cmid}

    def estimates(self) -> dict[str, float]:
        """Posterior medians of R0, A, B, Cmid in the curve's own units: the point each interval is about."""
        return dict(self.medians)


def value_range(y: np.ndarray) -> tuple[float, float]:
    """The range a curve's metric lives in: [0, 1] accuracies, [-1, 1] mean rewards, [0, 100] percentages."""
    lo = 0.0 if y.min() >= 0 else (-1.0 if y.min() >= -1 else float(y.min()))
    hi = 1.0 if y.max() <= 1 else (100.0 if y.max() <= 100 else 2.0 * float(y.max()))
    return lo, hi


def _log_posterior(x: np.ndarray, y: np.ndarray, sigma: float, priors: Priors, a_sd: float) -> tuple:
    """Log posterior over the (B, Cmid, A) grid with R0 profiled; returns (logp, r0, cmid_grid)."""
    positive = x[x > 0]
    c_lo = positive.min() / 2 if len(positive) else 1.0
    c_last = max(float(x.max()), c_lo * 2)
    cmid_grid = np.exp(np.linspace(math.log(c_lo), math.log(c_last * priors.cmid_span), N_CMID))
    logp = np.empty((len(B_GRID), N_CMID, len(A_GRID)))
    r0_all = np.empty_like(logp)
    a32 = A_GRID.astype(np.float32)
    y32 = y.astype(np.float32)
    for i, b in enumerate(B_GRID):  # one B at a time keeps memory at N_CMID x len(A) x n
        s = _shape(x[None, :], b, cmid_grid[:, None])  # (nC, n)
        u = 1.0 - s
        # Least-squares R0 for each (Cmid, A): y - A s = R0 (1 - s).
        r0 = ((u * y).sum(-1)[:, None] - A_GRID[None, :] * (u * s).sum(-1)[:, None]) / np.maximum(
            (u * u).sum(-1)[:, None], 1e-12
        )
        r0 = np.clip(r0, 0.0, A_GRID[None, :])  # RL curves rise: R0 <= A
        # float32 and in-place ops: this (nC, nA, n) block is the whole cost of a fit.
        z = y32 - r0.astype(np.float32)[..., None] * u.astype(np.float32)[:, None, :]
        z -= a32[None, :, None] * s.astype(np.float32)[:, None, :]
        z *= np.float32(1.0 / (sigma * math.sqrt(STUDENT_NU)))
        np.square(z, out=z)
        np.log1p(z, out=z)
        logp[i] = -(STUDENT_NU + 1) / 2 * z.sum(-1, dtype=np.float64)
        r0_all[i] = r0
    logp += (-0.5 * ((np.log(B_GRID) - priors.log_b_mean) / priors.log_b_sd) ** 2)[:, None, None]
    logp += (-0.5 * ((np.log(cmid_grid) - math.log(c_last)) / priors.log_cmid_sd) ** 2)[None, :, None]
    excess = np.maximum(A_GRID - float(y.max()), 0.0)
    logp += (-0.5 * (excess / a_sd) ** 2)[None, None, :]
    return logp, r0_all, cmid_grid


def _grid_fit(x: np.ndarray, y: np.ndarray, sigma: float, priors: Priors, a_sd: float, keep: float = 1e-7):
    logp, r0, cmid_grid = _log_posterior(x, y, sigma, priors, a_sd)
    w = np.exp(logp - logp.max())
    w /= w.sum()
    ib, ic, ia = np.nonzero(w > keep * w.max())
    samples = np.stack([r0[ib, ic, ia], A_GRID[ia], B_GRID[ib], cmid_grid[ic]], axis=1)
    weights = w[ib, ic, ia] / w[ib, ic, ia].sum()
    best = int(np.argmax(weights))
    # (5%, 50%, 95%) of each marginal, on [0, 1] for A
    quantiles = {
        "A": _grid_quantiles(w.sum(axis=(0, 1)), A_GRID, log=False),
        "B": _grid_quantiles(w.sum(axis=(1, 2)), B_GRID, log=True),
        "Cmid": _grid_quantiles(w.sum(axis=(0, 2)), cmid_grid, log=True),
    }
    return samples, weights, samples[best], quantiles


def _grid_quantiles(
    mass: np.ndarray, grid: np.ndarray, log: bool, levels: tuple[float, ...] = (0.05, 0.5, 0.95)
) -> tuple[float, ...]:
    """Quantiles of a posterior marginal on a grid, each grid point's mass spread evenly over its cell (halfway to
    its neighbours; the end cells stop at the end points, A's at 0 and 1). Continuous: a marginal on one grid
    point still has that cell's width, never [v, v] (the bootstrap's intervals had zero width on flat curves,
    whose residual resamples were all alike)."""
    axis = np.log(grid) if log else grid
    mid = (axis[1:] + axis[:-1]) / 2
    edges = np.concatenate([[axis[0]], mid, [axis[-1]]])
    cdf = np.concatenate([[0.0], np.cumsum(mass) / mass.sum()])
    values = np.interp(levels, cdf, edges)  # cdf rises through each cell: linear within it
    return tuple(float(v) for v in (np.exp(values) if log else values))


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    order = np.argsort(values)
    cum = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cum, 0.5 * cum[-1])])


def _neg_log_posterior(theta, x, y, sigma, priors: Priors, c_last: float, y_max: float, a_sd: float) -> float:
    r0, a, log_b, log_c = theta
    z = (y - (r0 + (a - r0) * _shape(x, math.exp(log_b), math.exp(log_c)))) / sigma
    nll = (STUDENT_NU + 1) / 2 * float(np.log1p(z * z / STUDENT_NU).sum())
    nll += 0.5 * ((log_b - priors.log_b_mean) / priors.log_b_sd) ** 2
    nll += 0.5 * ((log_c - math.log(c_last)) / priors.log_cmid_sd) ** 2
    nll += 1e4 * max(r0 - a, 0.0) ** 2  # the grid's R0 <= A, kept off the grid too
    return nll + 0.5 * (max(a - y_max, 0.0) / a_sd) ** 2


def _refine(x, y, start, sigma: float, priors: Priors, a_sd: float) -> np.ndarray:
    """Continuous MAP from a grid point (the grid is coarse: ~24% steps in B, ~15% in Cmid)."""
    from scipy.optimize import minimize

    positive = x[x > 0]
    c_lo = positive.min() / 2 if len(positive) else 1.0
    c_last = max(float(x.max()), c_lo * 2)
    theta0 = [start[0], start[1], math.log(start[2]), math.log(start[3])]
    bounds = [
        (0, 1),
        (0, 1),
        # B on the grid's range, as Cmid (and A on [0, 1]): a MAP off it lay where the posterior has no mass
        # (B 20 for a jump the grid caps at 8), outside every interval taken from that posterior.
        (math.log(float(B_GRID[0])), math.log(float(B_GRID[-1]))),
        (math.log(c_lo), math.log(c_last * priors.cmid_span)),
    ]
    args = (x, y, sigma, priors, c_last, float(y.max()), a_sd)
    result = minimize(
        _neg_log_posterior,
        theta0,
        args=args,
        method="Nelder-Mead",
        bounds=bounds,
        options={"xatol": 1e-4, "fatol": 1e-6},
    )
    theta = result.x if result.fun <= _neg_log_posterior(theta0, *args) else np.array(theta0)
    return np.array([theta[0], theta[1], math.exp(theta[2]), math.exp(theta[3])])


def _fit_window(x, y, skip_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """The points a fit uses: all but the first `skip_fraction` (at least the last 3)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    start = int(math.floor(skip_fraction * len(x)))
    if len(x) - start < 3:
        start = max(0, len(x) - 3)
    return x[start:], y[start:]


def pooled_gain_sd(runs: list[tuple[np.ndarray, np.ndarray]], skip_fraction: float, priors: Priors) -> float:
    """Empirical-Bayes scale of the gain still to come, shared by the runs of one experiment.

    Each run's own scale is the rise it has shown in its fit window (`a_prior_sd`, on its [0, 1] range); the
    experiment's is the median over its runs. Only the points handed in (the seen windows) are used.
    """
    scales = []
    for x, y in runs:
        _, yw = _fit_window(x, y, skip_fraction)
        if len(yw):
            lo, hi = value_range(yw)
            scales.append(a_prior_sd((yw - lo) / (hi - lo), priors))
    return float(np.median(scales)) if scales else priors.a_above_max_min


def fit_experiment(
    runs: list[tuple[np.ndarray, np.ndarray]],
    skip_fraction: float = 0.0,
    n_boot: int = 0,
    seed: int = 0,
    priors: Priors | None = None,
) -> list[SigmoidFit]:
    """Fit the runs of one experiment (the run columns of one CSV): each gets its own curve, and the prior on
    the gain still to come has the scale pooled over all of them (`pooled_gain_sd`)."""
    priors = priors or Priors()
    gain_sd = pooled_gain_sd(runs, skip_fraction, priors)
    return [fit_sigmoid(x, y, skip_fraction, n_boot, seed, priors, gain_sd=gain_sd) for x, y in runs]


def fit_sigmoid(
    x: np.ndarray,
    y: np.ndarray,
    skip_fraction: float = 0.0,
    n_boot: int = 0,
    seed: int = 0,
    priors: Priors | None = None,
    gain_sd: float | None = None,
) -> SigmoidFit:
    """Fit R(C) to accuracy y at compute x, leaving out the first `skip_fraction` of the points.

    Args:
        x, y: compute (steps, tokens, GPU-hours) and accuracy; any scale (mapped onto [0, 1] for the fit).
        skip_fraction: early fraction of the points left out of the fit (R0 stays free either way).
        n_boot, seed: not used (kept for callers): the intervals on A, B and Cmid are the posterior's 5-95%
            quantiles, computed with every fit. A residual bootstrap around the MAP made them too narrow, of zero
            width on flat curves, and often without the reported value.
        gain_sd: scale of the prior on A above the best value seen, in units of the curve's range (default:
            this curve's own rise, `a_prior_sd`; `fit_experiment` passes the scale pooled over its runs).
    """
    priors = priors or Priors()
    x, y = _fit_window(x, y, skip_fraction)
    if len(x) < 2:
        raise ValueError("a forecast needs at least 2 points")
    lo, hi = value_range(y)
    yn = (y - lo) / (hi - lo)
    sigma = noise_scale(yn, x)
    a_sd = gain_sd if gain_sd is not None else a_prior_sd(yn, priors)
    samples, weights, best, quantiles = _grid_fit(x, yn, sigma, priors, a_sd)
    best = _refine(x, yn, best, sigma, priors, a_sd)
    r0, a, b, cmid = (float(v) for v in best)
    unscale = {"A": lambda v: lo + (hi - lo) * v, "B": float, "Cmid": float}
    intervals = {key: (unscale[key](q[0]), unscale[key](q[2])) for key, q in quantiles.items()}
    medians = {key: unscale[key](q[1]) for key, q in quantiles.items()}
    medians = {"R0": lo + (hi - lo) * _weighted_median(samples[:, 0], weights), **medians}
    return SigmoidFit(
        r0,
        a,
        b,
        cmid,
        sigma=sigma,
        scale=(lo, hi),
        samples=samples,
        weights=weights,
        intervals=intervals,
        medians=medians,
        n_points=len(x),
    )

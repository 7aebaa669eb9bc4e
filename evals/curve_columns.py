"""Which columns of a curve CSV are accuracies (`is_accuracy_column`: not a length, reward, loss, compute axis
or a setting such as `kl`), which a `--column` picks, and the range a column's metric lives in (`column_unit`).

Split from `evals.curves` (which re-exports these names): telling columns apart is apart from reading files.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

# The columns `eval rl-probe` tracks in a probe's validation.csv beside its accuracies: left out of a forecast
# without a `skipped column` line (a 9-run sweep printed the same line 9 times); a user CSV's still get one.
PROBE_TRACKED = frozenset(
    {
        "Step",
        "rollouts",
        "mean_response_length",
        "truncated_fraction",
        "train_reward",
        "train_response_length",
    }
)


def is_probe_tracked(source: str, name: str) -> bool:
    """Whether column NAME of file SOURCE is one a probe's validation.csv tracks (not an accuracy, by design)."""
    return Path(source).name == "validation.csv" and name in PROBE_TRACKED


# Words that say a column is not an accuracy (the forecast fits accuracies; lengths are tracked, not forecast).
# Matched as whole words of the metric's name (`_`, `/`, spaces and other non-alphanumerics separate words), plural
# or not: a run called `base_40Btokens` or `longtime_run` is an accuracy; `mean_response_length`, `Wall Time` and
# verl's `critic/rewards/mean` are not. Compute axes (`gpu_hours`, `total_flops`, `consumed_samples`, `epoch`) are
# here too: a GPU-hours column next to the accuracies was forecast as a run in percent and pooled into their prior.
_NOT_ACCURACY = (
    "length",
    "lengths",
    "compute",
    "token",
    "tokens",
    "rollout",
    "rollouts",
    "hour",  # gpu_hours, GPU Hours, gpu-hours
    "minute",
    "flop",  # flops, total_flops
    "tflop",
    "pflop",
    "petaflop",
    "sample",  # samples, consumed_samples
    "iteration",
    "reward",
    "truncated",
    "seconds",
    "loss",
    "epoch",
    "time",  # W&B's Wall Time / Relative Time
    "runtime",  # W&B's _runtime
    "timestamp",  # W&B's _timestamp
    "global_step",
    "learning_rate",
    "grad_norm",
    "entropy",
)
_NOT_ACCURACY_RE = re.compile(r"(?<![a-z0-9])(" + "|".join(_NOT_ACCURACY) + r")(?:s|es)?(?![a-z0-9])")
# Metrics that are also the settings runs are named after (`run_lr_1e-6`, `qwen_kl0.001`): a word of a metric path
# component that holds no number (verl's `actor/kl_loss`, `actor/ppo_kl`, `actor/lr`, `train/kl`), or the whole
# metric (`kl`, `lr`). A name without `/` is one run's name unless it is the word itself (`run_lr_high` is a run).
_SETTING_METRICS = ("kl", "lr")
_WORD_SPLIT_RE = re.compile(r"[^a-z0-9]+")
# `--scale`: the range a curve's metric lives in; "auto" takes it from the whole column as read (`column_unit`).
SCALES = {"fraction": (0.0, 1.0), "percent": (0.0, 100.0), "reward": (-1.0, 1.0)}


def metric_part(name: str) -> str:
    """The metric of a W&B column "RUN - metric"; the whole name where there is no " - "."""
    return name.rsplit(" - ", 1)[-1]


def _setting_metric(metric: str) -> str | None:
    """`kl` or `lr` where METRIC is that metric (`train/kl`, `actor/kl_coef`, `lr`), not a run named by its value."""
    components = [part.strip() for part in metric.split("/")]
    if (
        len(components) == 1
    ):  # a plain column: a run's name (`run_lr_1e-6`, `qwen_kl_high`) unless the word itself
        return components[0] if components[0] in _SETTING_METRICS else None
    for component in components:
        if any(ch.isdigit() for ch in component):  # `lr_1e-6`, `kl0.001`: a setting's value, not a metric
            continue
        word = next((w for w in _WORD_SPLIT_RE.split(component) if w in _SETTING_METRICS), None)
        if word is not None:
            return word
    return None


def non_accuracy_word(name: str) -> str | None:
    """The word of a column's metric that says it holds no accuracy (`length`, `reward`, `time`, ...), or None."""
    # W&B names a column "RUN - metric": only the metric says what it holds (a run may be called *_long_time).
    metric = metric_part(name).lower()
    match = _NOT_ACCURACY_RE.search(metric)
    return match.group(1) if match else _setting_metric(metric)


def is_accuracy_column(name: str) -> bool:
    """True for a column that holds an accuracy/score curve (not a length, loss or compute column)."""
    return non_accuracy_word(name) is None


def column_matches(text: str | None, name: str) -> bool:
    """`--column TEXT`: whether a run's column name contains TEXT, case aside (None matches every column).

    W&B names the metric `val/test_score/MATH500` where the file is `acc_math500.csv` and the probe logs
    `math500`: `--column math500` found nothing in the export."""
    return text is None or text.lower() in name.lower()


def column_unit(y: np.ndarray, scale: str = "auto") -> tuple[float, float] | None:
    """The range a column's metric lives in, from the whole column as read (not only the part a forecast fits).

    "auto": [0, 1] (fractions), [0, 100] (percentages) or [-1, 1] (rewards), the narrowest that holds every value
    of the column, as `evals.forecast.value_range` picks them; a column beyond those ranges gets None (the fit
    takes the range of its fitted points, as before: such a column's maximum is a value, not a unit).
    "fraction", "percent", "reward" force one; a value outside it is a ValueError.
    """
    from evals.forecast import value_range

    y = np.asarray(y, dtype=float)
    if scale == "auto":
        lo, hi = value_range(y)
        return (lo, hi) if (lo, hi) in SCALES.values() else None  # not [-1, 100]: no such unit
    if scale not in SCALES:
        raise ValueError(f"--scale must be auto, {', '.join(SCALES)} (got {scale!r})")
    lo, hi = SCALES[scale]
    if len(y) and (float(y.min()) < lo or float(y.max()) > hi):
        raise ValueError(
            f"values from {y.min():g} to {y.max():g}, outside [{lo:g}, {hi:g}] (--scale {scale})"
        )
    return lo, hi

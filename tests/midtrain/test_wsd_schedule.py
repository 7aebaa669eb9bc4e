"""The WSD schedule: exact values at every phase boundary and inside each decay shape."""

from __future__ import annotations

import math

import pytest

from midtrain.schedule import wsd_lr


def test_warmup_stable_decay_exact_values():
    kw = dict(
        peak_lr=1.0, total_tokens=100, warmup_tokens=10, decay_tokens=40, shape="linear", floor_ratio=0.1
    )
    assert wsd_lr(0, **kw) == 0.0
    assert wsd_lr(5, **kw) == 0.5
    assert wsd_lr(10, **kw) == 1.0  # warmup ends at the peak
    assert wsd_lr(59, **kw) == 1.0  # still stable just before the decay window
    assert wsd_lr(60, **kw) == 1.0  # decay starts at the peak
    assert wsd_lr(80, **kw) == pytest.approx(0.55)  # halfway: 1 - 0.9 * 0.5
    assert wsd_lr(100, **kw) == pytest.approx(0.1)  # the floor
    assert wsd_lr(120, **kw) == pytest.approx(0.1)  # past the end it stays at the floor


def test_decay_shapes():
    kw = dict(peak_lr=3e-5, total_tokens=1000, decay_tokens=1000, floor_ratio=0.1)
    floor = 3e-6
    assert wsd_lr(250, shape="cosine", **kw) == pytest.approx(
        floor + 2.7e-5 * 0.5 * (1 + math.cos(math.pi / 4))
    )
    assert wsd_lr(500, shape="cosine", **kw) == pytest.approx(floor + 2.7e-5 * 0.5)
    assert wsd_lr(1000, shape="cosine", **kw) == pytest.approx(floor)
    assert wsd_lr(250, shape="1-sqrt", **kw) == pytest.approx(floor + 2.7e-5 * 0.5)  # 1 - sqrt(1/4)
    assert wsd_lr(640, shape="1-sqrt", **kw) == pytest.approx(floor + 2.7e-5 * 0.2)  # 1 - sqrt(0.64)
    assert wsd_lr(0, shape="linear", **kw) == 3e-5


def test_stable_stage_never_decays_and_bad_shape_fails():
    assert wsd_lr(10**12, peak_lr=2.0, total_tokens=10**9) == 2.0
    with pytest.raises(ValueError, match="unknown decay shape"):
        wsd_lr(5, peak_lr=1.0, total_tokens=10, decay_tokens=10, shape="exp")  # type: ignore[arg-type]

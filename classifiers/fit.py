"""Fitting the fastText model: each try in a fresh process, with fallbacks for this wheel's NaN failures.

Apart from `classifiers.train` (which re-exports FIT_SCRIPT as `_FIT_SCRIPT`) so the training flow reads alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from classifiers.train import TrainSettings


# Runs in a fresh interpreter (see `fit_fasttext`): train with the JSON kwargs in argv[1], save to argv[2].
FIT_SCRIPT = (
    "import fasttext, json, sys; fasttext.train_supervised(**json.loads(sys.argv[1])).save_model(sys.argv[2])"
)


def fit_fasttext(train_file: Path, out: Path, s: TrainSettings, min_count: int) -> dict:
    """Train in a fresh process and save to `out`; returns the lr and word n-grams that trained.

    This fastText wheel raises "Encountered NaN" on easily separable data with unigram features (any lr), and
    after a failure later trainings in the same process can fail too. So each try runs in its own process
    (which also makes reruns give the same model), and the fallbacks are: half the lr, then word bigrams.
    """
    import subprocess
    import sys

    errors = []
    tries = [(s.lr, s.word_ngrams), (s.lr / 2, s.word_ngrams)]
    if s.word_ngrams < 2:
        tries += [(s.lr, 2), (s.lr / 2, 2)]
    for lr, ngrams in tries:
        kwargs = dict(
            input=str(train_file),
            dim=s.dim,
            lr=lr,
            wordNgrams=ngrams,
            minCount=min_count,
            epoch=s.epoch,
            bucket=s.bucket,
            thread=s.threads,
            seed=s.seed,
            verbose=0,
        )
        cmd = [sys.executable, "-c", FIT_SCRIPT, json.dumps(kwargs), str(out)]
        out.unlink(missing_ok=True)  # a file left by a killed run is not this try's model
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode == 0 and out.is_file():
            return {"lr_used": lr, "word_ngrams_used": ngrams}
        errors.append((proc.stderr.strip().splitlines() or ["?"])[-1])
    raise RuntimeError(f"fastText training failed for lr/word n-grams {tries}: {errors}")

"""Recipe stage `classifier`: train the fastText math classifier that the web stage scores with.

Writes RUN/classifier/model.bin, model.card.json, model.train-pages.tsv and summary.json (last). Defaults are
the `small` preset (see `classifiers.cli.PRESETS`) because a recipe's seed set is small (the quickstart has ~30
pages); minCount drops to 1 on its own under 2,000 examples, so rare formula words still count.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from curate.summary import write_summary
from pipelines.stages import StageContext

PRODUCES_DOCUMENTS = False
FOLDER = "classifier"


class Config(BaseModel):
    """Classifier stage settings; paths may contain `{run_dir}`."""

    model_config = ConfigDict(extra="forbid")

    positives: list[str] = Field(
        default_factory=lambda: ["{run_dir}/sample/html/math", "{run_dir}/sample/bench/math/train.jsonl"]
    )
    negatives: list[str] = Field(default_factory=lambda: ["{run_dir}/sample/html/nonmath"])
    llm_seeds: list[str] = Field(default_factory=list)
    llm_threshold: float = 3.0
    max_docs_per_input: int = Field(2000, ge=0, description="sample at most this many documents per input")
    preset: str = "small"
    dim: int | None = Field(None, ge=1)
    lr: float | None = Field(None, gt=0)
    word_ngrams: int | None = Field(None, ge=1)
    min_count: int | None = Field(None, ge=1)
    epoch: int | None = Field(None, ge=1)
    bucket: int = Field(100_000, ge=1000)
    holdout: float = Field(0.2, ge=0, lt=1)
    target_precision: float = Field(0.95, gt=0, le=1)
    seed: int = 0


def _paths(paths: list[str], run_dir: Path | str) -> list[Path]:
    return [Path(p.replace("{run_dir}", str(run_dir))) for p in paths]


def preflight(config: Config, run_dir: Path | str, plan: list[dict] | None = None) -> None:
    """What the stage reads that no earlier stage writes, checked by `mathmix run` before its first stage and in
    --dry-run, as the stage refuses them at its start (without reading a page): a `positives`/`negatives` input
    missing, a file of a kind it does not read, a folder holding none it reads, a file reached through both
    classes, neither class given; an `llm_seeds` input missing. The dry run said `will run` for each and the run
    failed at once. Inputs in the run folder (the default seed set, the quickstart's sample) are left to the stage."""
    from classifiers.data import KINDS, InputError, input_files, is_input_file, stage_data
    from classifiers.training_inputs import check_classes_apart
    from pipelines.prerun_checks import written_by_earlier_stage

    inside_run = Path(run_dir).expanduser().resolve()

    def own(paths: list[str]) -> list[Path]:
        """PATHS but those an earlier stage writes, and those in the run folder (the defaults: the sample that
        `mathmix quickstart` writes there before its run), left to the stage."""
        return [
            p
            for p in _paths(paths, run_dir)
            if not written_by_earlier_stage(p, plan, FOLDER)
            and inside_run not in p.expanduser().resolve().parents
        ]

    if not config.llm_seeds and not (config.positives and config.negatives):
        raise ValueError("give math inputs (-p) and non-math inputs (-n), or --llm-seeds (both classes)")
    positives, negatives = own(config.positives), own(config.negatives)
    for given in [*positives, *negatives]:
        path = stage_data(given)
        files = input_files(path)  # a missing one: `X: no such file or folder`
        if path.is_file() and not is_input_file(path):
            raise InputError(f"{path}: expected {KINDS}, or a folder of them")
        if path.is_dir() and not files:
            held = sorted(f.relative_to(path).as_posix() for f in path.rglob("*") if f.is_file())
            shown = f" (it holds {', '.join(held[:3])}{', ...' if len(held) > 3 else ''})" if held else ""
            raise InputError(f"{path}: folder holds no {KINDS}{shown}")
    check_classes_apart(positives, negatives)
    for seeds in own(config.llm_seeds):
        if not stage_data(seeds).exists():
            raise InputError(f"{stage_data(seeds)}: no such file or folder")


def inputs_read(
    config: Config, run_dir: Path | str, inputs: list[str], previous: Mapping[str, Path]
) -> list[str]:
    """The files the stage trains on: each page, archive and corpus file of `positives` and `negatives`, and each
    corpus file of `llm_seeds` (a folder: the files in it the stage reads). The recipe stage's record holds them
    with their sizes, as web's holds its inputs (INPUTS, the recipe's, are none: the stage comes first): it held
    none, so pages replaced, added or removed in place left the classifier "already complete" with the model of
    the old ones, which upstream.json cannot catch for the first stage. A path that cannot be read is recorded as
    given (with no size): the stage itself names it."""
    from classifiers.data import input_files, is_corpus_file
    from mathmix.paths import unique_files

    def files(path: Path, seeds: bool = False) -> list[Path]:
        try:
            found = input_files(path)
        except (OSError, ValueError):  # missing, or a folder of stage folders
            return [path]
        return [f for f in found if not seeds or not path.is_dir() or is_corpus_file(f)]

    pages = [f for p in _paths([*config.positives, *config.negatives], run_dir) for f in files(p)]
    seeds = [f for p in _paths(config.llm_seeds, run_dir) for f in files(p, seeds=True)]
    return [str(f) for f in unique_files([*pages, *seeds])]


def run_stage(config: Config, ctx: StageContext) -> dict:
    """Train, write the model and its card, then summary.json."""
    from classifiers.cli import PRESETS, load_training_data
    from classifiers.train import TrainSettings, train_model

    if config.preset not in PRESETS:
        raise ValueError(
            f"stages.classifier.preset: unknown preset {config.preset!r}; one of {list(PRESETS)}"
        )
    start = time.time()
    given = {k: getattr(config, k) for k in ("dim", "lr", "word_ngrams", "min_count", "epoch")}
    hyper = {**PRESETS[config.preset], **{k: v for k, v in given.items() if v is not None}}
    settings = TrainSettings(
        **hyper,
        bucket=config.bucket,
        holdout=config.holdout,
        target_precision=config.target_precision,
        seed=config.seed,
    )
    data = load_training_data(
        _paths(config.positives, ctx.run_dir),
        _paths(config.negatives, ctx.run_dir),
        _paths(config.llm_seeds, ctx.run_dir),
        config.llm_threshold,
        config.max_docs_per_input,
        config.seed,
    )
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    model_path = ctx.out_dir / "model.bin"
    card = train_model(data, model_path, settings)
    n_docs = len(data.positives) + len(data.negatives)
    summary = {
        # The classifier consumes its seed documents and emits a model, not documents: nothing is dropped.
        "docs_in": n_docs,
        "docs_out": n_docs,
        "dropped": {},
        "seconds": round(time.time() - start, 2),
        "model": str(model_path),
        "threshold": card["threshold"],
        "positive_docs": len(data.positives),
        "negative_docs": len(data.negatives),
        "skipped": card["counts"]["skipped"],  # what the seed inputs held that was not read, by reason
        "heldout": card["metrics"]["heldout"],
    }
    write_summary(ctx.out_dir, summary)
    return summary

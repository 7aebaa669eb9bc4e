"""`mathmix classifier train|eval|recall|score`: the fastText math classifier from the command line."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from classifiers.training_inputs import (
    check_classes_apart,
    check_output_not_input,
    check_plot_not_input,
    load_training_data,
)
from mathmix.cli_util import check_output, console, fail, make_folder

# The inputs' and outputs' checks and reading the training data are in classifiers.training_inputs (split off);
# imported from here too, as before.
__all__ = [
    "PRESETS",
    "check_classes_apart",
    "check_output_file",
    "check_output_not_input",
    "check_plot_not_input",
    "group",
    "load_training_data",
    "os_error_message",
    "register",
    "warn",
    "warn_skipped",
]

group = typer.Typer(
    help="fastText math classifier: train on positives/negatives, evaluate on unseen pages, iterate recall "
    "by domain, score texts.",
    no_args_is_help=True,
)

PRESETS = {
    # DeepSeekMath's settings, for seed sets of hundreds of thousands of documents.
    "deepseekmath": {"dim": 256, "lr": 0.1, "word_ngrams": 3, "min_count": 3, "epoch": 3},
    # A few thousand examples: 3 epochs barely train. Unigrams, lr 0.1, 50 epochs: held-out pages (two folds)
    # F1 0.89 vs 0.86 at lr 0.25/25 epochs and 0.69 with bigrams.
    "small": {"dim": 64, "lr": 0.1, "word_ngrams": 1, "min_count": 3, "epoch": 50},
}


@group.command("train")
def train_cmd(
    output: Path = typer.Option(..., "-o", "--output", help="model file to write (e.g. model.bin)"),
    positives: list[Path] = typer.Option([], "--positives", "-p", help="math inputs (repeat the option)"),
    negatives: list[Path] = typer.Option([], "--negatives", "-n", help="non-math inputs (repeat the option)"),
    llm_seeds: list[Path] = typer.Option([], help="corpus with a 0-5 `math_score_llm` column"),
    llm_threshold: float = typer.Option(
        3.0, min=0, max=5, help="`math_score_llm` (0-5) >= this is math, below is non-math"
    ),
    max_docs_per_input: int = typer.Option(
        0, min=0, help="sample at most this many documents per input (0: all)"
    ),
    preset: str = typer.Option("deepseekmath", help=f"hyperparameter defaults: {', '.join(PRESETS)}"),
    dim: int = typer.Option(None, help="vector size (preset default)"),
    lr: float = typer.Option(None, help="learning rate (preset default)"),
    word_ngrams: int = typer.Option(None, help="word n-grams (preset default)"),
    min_count: int = typer.Option(None, help="minimum word count (preset default; 1 under 2,000 examples)"),
    epoch: int = typer.Option(None, help="epochs (preset default)"),
    bucket: int = typer.Option(200_000, help="hash buckets for n-grams"),
    min_doc_freq: int = typer.Option(
        2, help="words found in fewer training documents than this become <unk>"
    ),
    bench_weight: float = typer.Option(0.1, help="examples of a benchmark input, relative to a page input"),
    holdout: float = typer.Option(0.2, help="share of each source's pages held out to choose the threshold"),
    target_precision: float = typer.Option(0.95, help="precision the threshold is chosen for"),
    seed: int = typer.Option(0),
) -> None:
    """Train a classifier. Reads Parquet/JSONL corpora (`text`), folders of .html pages (run through the
    extractor), benchmark JSONL (problem+solution, question+answer). Writes the model (-o) and two files named
    after it, a .bin or .ftz suffix replaced, any other appended (-o c/m.bin: c/m.card.json with inputs, counts,
    hyperparameters, threshold, held-out metrics; c/m.train-pages.tsv with the pages used in training; -o
    c/m.v1: c/m.v1.card.json, c/m.v1.train-pages.tsv). The output may not be an input file or lie in an input
    folder, nor take the card of another model (m.ftz next to m.bin)."""
    from classifiers.data import InputError
    from classifiers.model import ModelError, check_card_free
    from classifiers.train import SettingError, TrainSettings, train_model

    if preset not in PRESETS:
        fail(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    given = {"dim": dim, "lr": lr, "word_ngrams": word_ngrams, "min_count": min_count, "epoch": epoch}
    hyper: dict[str, Any] = {**PRESETS[preset], **{k: v for k, v in given.items() if v is not None}}
    try:
        settings = TrainSettings(
            **hyper,
            bucket=bucket,
            min_doc_freq=min_doc_freq,
            bench_weight=bench_weight,
            holdout=holdout,
            target_precision=target_precision,
            seed=seed,
        )
    except SettingError as err:
        fail(f"--{err.name.replace('_', '-')} {err.message}")
    check_output_file(output)
    inputs = {"positive": positives, "negative": negatives, "LLM seed": llm_seeds}
    try:
        check_output_not_input(output, inputs)
        check_card_free(output)
    except (ValueError, ModelError) as err:
        fail(str(err))
    try:
        data = load_training_data(positives, negatives, llm_seeds, llm_threshold, max_docs_per_input, seed)
        card = train_model(data, output, settings)
    except (InputError, ValueError, RuntimeError) as err:
        fail(str(err))
    except OSError as err:
        fail(os_error_message(err))
    held = card["metrics"]["heldout"] or {}
    console.print(f"wrote {output} (threshold {card['threshold']:.3f}); held-out pages: " + _fmt(held))
    warn_skipped(card["counts"]["skipped"])


def check_output_file(path: Path, example: str = "model.bin") -> None:
    """Fail (one line) when a file cannot be written at `path`: checked before hours of reading and training."""
    if path.is_dir():
        fail(f"{path}: is a folder; give a file name (e.g. {path}/{example})")
    try:
        make_folder(path.parent)  # removed again if the command then fails while it is empty
    except OSError as err:
        fail(f"{path}: cannot create its folder {path.parent} ({err.strerror or err})")
    if not os.access(path.parent, os.W_OK):
        fail(f"{path}: folder {path.parent} is not writable")


def os_error_message(err: OSError) -> str:
    """`FILE: reason` for an OSError (a file that cannot be read or written)."""
    return f"{err.filename}: {err.strerror}" if err.filename else str(err)


def _fmt(m: dict) -> str:
    keys = ("precision", "recall", "f1", "roc_auc")
    return ", ".join(f"{k} {m[k]:.3f}" for k in keys if isinstance(m.get(k), float)) or "-"


@group.command("eval")
def eval_cmd(
    model: Path = typer.Argument(..., help="model file"),
    math: list[Path] = typer.Option([], "--math", help="math inputs"),
    nonmath: list[Path] = typer.Option([], "--nonmath", help="non-math inputs"),
    ood_math: list[Path] = typer.Option([], help="out-of-distribution math inputs"),
    ood_nonmath: list[Path] = typer.Option([], help="out-of-distribution non-math inputs"),
    # Checked below, not with typer's min/max: those print an inclusive [0<=x<=1] in --help, and 0 is refused.
    target_precision: float = typer.Option(
        0.95, help="report the threshold reaching this precision, in (0, 1]"
    ),
    top_percent: float = typer.Option(
        10.0, help="report the threshold keeping this top share (percent), in (0, 100]"
    ),
    plot: Path = typer.Option(
        None,
        help="PR-curve PNG (default: m.pr.png for m.bin, m.v1.pr.png for m.v1); not an input, nor in an input folder",
    ),
    json_out: bool = typer.Option(
        False, "--json", help="print only the JSON metrics at the model's threshold"
    ),
) -> None:
    """Evaluate on documents not used in training (a document whose text or origin, its URL or file, is listed in
    the model's m.train-pages.tsv, for m.bin, is left out; a class given and left empty is an error). Reads the
    same inputs as train; prints precision, recall, F1, ROC-AUC, thresholds for a precision and a keep rate, a
    per-source breakdown; writes a PR-curve PNG."""
    from classifiers.data import InputError
    from classifiers.evaluate import evaluate_model
    from classifiers.model import ModelError, pr_plot_path

    if not math and not nonmath:
        fail("give --math and/or --nonmath inputs")
    if not 0 < target_precision <= 1:
        fail(f"--target-precision must be in (0, 1] (got {target_precision})")
    if not 0 < top_percent <= 100:
        fail(f"--top-percent must be in (0, 100] (got {top_percent})")
    try:
        check_classes_apart(math, nonmath, ("--math", "--nonmath"))
        check_classes_apart(ood_math, ood_nonmath, ("--ood-math", "--ood-nonmath"))
    except InputError as err:
        fail(str(err))
    plot = plot or pr_plot_path(model)
    given = {"math": math, "non-math": nonmath, "OOD math": ood_math, "OOD non-math": ood_nonmath}
    try:  # a plot in a page folder was read as one of its files by the next eval or train
        check_plot_not_input(plot, given)
    except ValueError as err:
        fail(str(err))
    check_output_file(
        plot, pr_plot_path(model).name
    )  # not a folder, nor under a file: before all the scoring
    try:
        result = evaluate_model(
            model,
            math,
            nonmath,
            ood_math,
            ood_nonmath,
            target_precision,
            top_percent,
            plot,
        )
    except (InputError, ModelError) as err:
        fail(str(err))
    except OSError as err:
        fail(os_error_message(err))
    for name, options in (("heldout", "--math/--nonmath: "), ("ood", "--ood-math/--ood-nonmath: ")):
        warn_skipped(result.get(name, {}).get("skipped"), options)
    for warning in result.get("warnings", []):
        warn(warning)
    if json_out:
        keys = ("precision", "recall", "f1", "threshold", "n_math", "n_nonmath")
        print(json.dumps({k: result["heldout"][k] for k in keys}))
        return
    _print_report(result)


def _print_report(result: dict) -> None:
    from rich.table import Table

    for name in ("heldout", "ood"):
        if name not in result:
            continue
        r = result[name]
        console.print(
            f"[bold]{name}[/] ({r['n_math']} math, {r['n_nonmath']} non-math; "
            f"{r['left_out_seen_in_training']} left out as seen in training)"
        )
        console.print(f"  at threshold {r['threshold']:.3f}: " + _fmt(r))
        for key, value in r.items():
            if key.startswith("threshold_for"):
                console.print(f"  {key}: {value if value is None else round(value, 4)}")
        table = Table("source", "label", "n", "mean score", "called math")
        for src, s in r["by_source"].items():
            table.add_row(
                src, s["label"], str(s["n"]), f"{s['mean_score']:.3f}", f"{s['predicted_math']:.1%}"
            )
        console.print(table)
    if "pr_curve" in result:
        console.print(f"PR curve: {result['pr_curve']}")


@group.command("recall")
def recall_cmd(
    model: Path = typer.Argument(..., help="model file"),
    corpus: list[Path] = typer.Option(..., "--corpus", help="scored corpus with `url` (Parquet/JSONL)"),
    output: Path = typer.Option(..., "-o", "--output", help="folder for domains.json and candidates.jsonl"),
    threshold: float = typer.Option(None, min=0, max=1, help="math threshold (default: the model's)"),
    domain_share: float = typer.Option(
        0.1, min=0, max=1, help="a domain is math when more than this share scores high"
    ),
    min_pages: int = typer.Option(3, min=1, help="ignore domains with fewer pages"),
) -> None:
    """One round of iterative recall: reads a corpus with URLs, writes OUT/domains.json (math domains and URL
    patterns) and OUT/candidates.jsonl (their pages the model missed, for review), and records the round in the
    model's card (m.card.json for m.bin)."""
    from classifiers.data import InputError
    from classifiers.model import ModelError
    from classifiers.recall import recall_round

    check_output(output)  # not a file, a run folder or a recipe's stage folder; other output: recall_round
    try:
        summary = recall_round(model, corpus, output, threshold, domain_share, min_pages)
    except (InputError, ModelError, ValueError) as err:
        fail(str(err))
    except OSError as err:
        fail(os_error_message(err))
    console.print(
        f"{summary['math_domains']} math domains of {summary['domains']}, "
        f"{summary['candidates']} candidates -> {output}/candidates.jsonl"
    )
    warn_skipped(summary["skipped"])


@group.command("score")
def score_cmd(
    model: Path = typer.Argument(..., help="model file"),
    inputs: list[Path] = typer.Argument(..., help="inputs (corpus, html folder, benchmark JSONL)"),
) -> None:
    """Print `score<TAB>source<TAB>page` for every document of the inputs (reads them like train)."""
    from classifiers.data import InputError, Skipped, read_input
    from classifiers.model import MathClassifier, ModelError

    skipped = Skipped()
    try:
        clf = MathClassifier(model)
        docs = [d for p in inputs for d in read_input(p, skipped)]
    except (InputError, ModelError) as err:
        fail(str(err))
    except OSError as err:
        fail(os_error_message(err))
    if clf.card_warning:
        warn(clf.card_warning)
    if not docs:
        warn(f"no documents to score in {', '.join(str(p) for p in inputs)}")
    for doc, score in zip(docs, clf.score([d.text for d in docs]), strict=True):
        print(f"{score:.4f}\t{doc.source}\t{doc.page}")
    warn_skipped(skipped.as_dict())


def warn(message: str) -> None:
    """One `warning: ...` line on stderr."""
    console.print(f"[yellow]warning:[/] {escape(message)}", soft_wrap=True)


def warn_skipped(skipped: dict | None, what: str = "") -> None:
    """One stderr line naming what the inputs held that was not read (`Skipped.as_dict()`; nothing when empty)."""
    from classifiers.skips import describe

    if skipped:
        warn(f"{what}{describe(skipped)}")


def register(app: typer.Typer) -> None:
    """Add the `classifier` group to the root app."""
    app.add_typer(group, name="classifier")

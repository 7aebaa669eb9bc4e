"""What the classifier commands read and write, checked before any work: the inputs of the two classes kept
apart, the outputs kept out of the inputs; and the training data read from the inputs (`load_training_data`).

Split off `classifiers.cli` (the commands), which re-exports every name here; no typer in this module.
"""

from __future__ import annotations

from pathlib import Path


def check_output_not_input(output: Path, inputs: dict[str, list[Path]]) -> None:
    """ValueError when the model, its card or its training pages is an input file, or lies in an input folder.

    `-o in/pos.jsonl -p in/pos.jsonl` overwrote the positives with the model; `-o posdir/m.bin -p posdir` made
    the next run read m.card.json as a bad file and m.bin and m.train-pages.tsv as unsupported ones.
    """
    from classifiers.model import card_path, train_pages_path
    from pipelines.job_record import check_output_outside_inputs

    written = {p.resolve(): p for p in (output, card_path(output), train_pages_path(output))}
    for what, paths in inputs.items():
        check_output_outside_inputs(output, paths, what)
        for given in paths:
            mine = written.get(Path(given).resolve())
            if mine == output:
                raise ValueError(
                    f"-o {output} is the {what} input {given}: the training would overwrite it with the model; "
                    "write the model elsewhere"
                )
            if mine is not None:
                raise ValueError(
                    f"-o {output} writes {mine}, the {what} input {given}: the training would overwrite it; "
                    "name the model differently"
                )


def check_plot_not_input(plot: Path, inputs: dict[str, list[Path]]) -> None:
    """ValueError when eval's `--plot` is an input file or lies in an input folder, as train refuses its `-o`
    (`check_output_not_input`): the next run would read the PNG among the pages (an `unsupported_file`), and
    `--plot in/math.jsonl --math in/math.jsonl` would overwrite the input."""
    from pipelines.job_record import check_output_outside_inputs

    for what, paths in inputs.items():
        try:
            check_output_outside_inputs(plot, paths, f"{what} input")
        except ValueError as err:
            raise ValueError(f"--plot {err}") from None
        for given in paths:
            if Path(given).resolve() == plot.resolve():
                raise ValueError(
                    f"--plot {plot} is the {what} input {given}: the PR curve would overwrite it; "
                    "write the plot elsewhere"
                )


def load_training_data(positives, negatives, llm_seeds, llm_threshold, max_docs_per_input=0, seed=0):
    """Read every input into a TrainData (LLM seeds split into both classes by threshold).

    A file reached through both classes is refused (the same folder as -p and -n trained on a coin toss), a file
    reached twice in one class is read once, and what the inputs held that was not read is kept for the card.
    """
    import random

    from classifiers.data import Skipped, llm_seed_split, read_input
    from classifiers.train import TrainData

    if not llm_seeds and not (positives and negatives):
        # refused before reading: an only -p training read every input and then said "got 700 and 0 documents"
        raise ValueError("give math inputs (-p) and non-math inputs (-n), or --llm-seeds (both classes)")
    check_classes_apart(positives, negatives)
    skipped, seen = Skipped(), set()

    def read(path):
        docs = read_input(path, skipped, seen)
        if max_docs_per_input and len(docs) > max_docs_per_input:
            docs = random.Random(seed).sample(docs, max_docs_per_input)
        return docs

    pos = [d for p in positives for d in read(p)]
    neg = [d for p in negatives for d in read(p)]
    for path in llm_seeds:
        p, n = llm_seed_split(path, llm_threshold)
        pos += p
        neg += n
    inputs = {
        "positives": [str(p) for p in positives],
        "negatives": [str(p) for p in negatives],
        "llm_seeds": [str(p) for p in llm_seeds],
        "llm_threshold": llm_threshold,
    }
    if not pos or not neg:
        given = (("math", "-p", positives, pos), ("non-math", "-n", negatives, neg))
        empty = "; ".join(
            f"no {name} document in {', '.join(f'{option} {p}' for p in paths) or 'the inputs'}"
            + (f" or --llm-seeds {', '.join(str(p) for p in llm_seeds)}" if llm_seeds else "")
            for name, option, paths, docs in given
            if not docs
        )
        why = f" ({skipped.describe()})" if skipped else ""
        raise ValueError(
            f"need positives and negatives with text; got {len(pos)} and {len(neg)} documents: {empty}{why}"
        )
    return TrainData(pos, neg, inputs, skipped.as_dict())


def check_classes_apart(
    positives, negatives, names: tuple[str, str] = ("math (-p/positives)", "non-math (-n/negatives)")
) -> None:
    """Raise InputError when a file is an input of both classes (the same folder, or a file inside the other's);
    NAMES: how the two classes are given (eval: `--math`, `--nonmath`)."""
    from classifiers.data import InputError, input_files

    # Keyed and looked up by the resolved file: `-p X -n X/sub` given as relative paths names the same file twice.
    math = {f.resolve(): p for p in positives for f in input_files(p)}
    both = [(f, math[f.resolve()], n) for n in negatives for f in input_files(n) if f.resolve() in math]
    if both:
        file, p, n = both[0]
        more = f", and {len(both) - 1} more" if len(both) > 1 else ""
        raise InputError(
            f"{len(both)} file(s) are inputs of both {names[0]} and {names[1]}: {file} "
            f"(through {p} and {n}){more}; a page cannot be both: give each file to one class"
        )

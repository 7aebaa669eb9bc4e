"""Checks of a rewrite job run before anything is read or written: each a one-line ValueError naming the fix."""

from __future__ import annotations

import importlib.util
from pathlib import Path

# The server kinds that datatrove starts from an optional package, and mathmix's extra that installs it.
SERVER_PACKAGES = {"vllm": ("vllm", "gpu"), "sglang": ("sglang", "sglang")}


def check_server_package(server: str) -> None:
    """ValueError when SERVER needs a package that is not installed (datatrove found out inside the job, with a
    traceback, after OUT held a job.json and logs, and the message said to rerun)."""
    if server not in SERVER_PACKAGES:
        return
    package, extra = SERVER_PACKAGES[server]
    if importlib.util.find_spec(package) is None:
        raise ValueError(
            f"server '{server}' needs the {package} package, which is not installed here: "
            f"pip install 'mathmix[{extra}]' (on the machine that starts the job)"
        )


def check_longcot_inputs(inputs: list[str], text_key: str = "text") -> None:
    """ValueError, naming the input file, when `longcot` would be asked about whole pages: an input without a
    question column (`tasks.QUESTION_KEYS`) has its text taken for the question, and a web page made a row
    `Question: <12,000 characters of forum page>`. Inputs whose text is the question (`--text-key problem`)
    pass; so does a file that names no columns (an empty JSONL file: nothing to ask about)."""
    from curate.rewrite.inputs import input_sources
    from curate.rewrite.tasks import QUESTION_KEYS

    if text_key in QUESTION_KEYS:
        return
    for folder, pattern, _ in input_sources(inputs):
        for path in sorted(p for p in folder.glob(pattern) if p.is_file()):
            columns = _columns(path)
            if columns is None or "metadata" in columns or columns & set(QUESTION_KEYS):
                continue  # unreadable (the reader counts it), nested metadata, or questions
            raise ValueError(
                f"{path}: longcot needs questions, and this input has no {' / '.join(QUESTION_KEYS)} column "
                f"(columns: {', '.join(sorted(columns)[:8])}): its {text_key!r}, a whole page, would be the question; "
                'give it questions: the qa branch (in a recipe, task_inputs: {longcot: ["{run_dir}/branches/qa"]}; '
                "mathmix rewrite RUN/branches/qa --task longcot), or problems with --text-key problem"
            )


def _columns(path: Path) -> set[str] | None:
    """The column names of a Parquet file, or the keys of the first JSON object among a JSONL file's first
    lines; None when it names none (unreadable, empty)."""
    import json

    if path.name.endswith(".parquet"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            return set(pq.read_schema(path).names)
        except (pa.ArrowException, OSError):
            return None
    import fsspec

    try:
        with fsspec.open(str(path), "rt", compression="infer", encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f):
                if i >= 100:
                    break
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict):
                    return set(row)
    except (OSError, ValueError, EOFError):
        return None
    return None

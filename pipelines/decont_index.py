"""The decont stage's benchmark index: built once by the stage, saved in OUT/work/, read by every task.

`DecontFilter` builds its index in each task process (~10 s for all of ../shared/data/bench), after the stage
built it once already for its summary. Shipping the index inside the pipeline would pickle it (~50 MB) into
every task; the saved file is read once per process instead (~0.1 s), by local, Slurm and Ray tasks alike
(they share OUT).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from curate.decont import MATCHER, BenchmarkIndex, DecontFilter

INDEX_FILE = "benchmark_index.pkl"

_LOADED: dict[tuple[str, int], BenchmarkIndex] = {}  # the index of this process (the last one saved or read)


def save_index(index: BenchmarkIndex, path: Path) -> None:
    """Write INDEX to PATH (atomically); this process reads it back from memory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as handle:
        pickle.dump(index, handle, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path)
    _LOADED.clear()
    _LOADED[(str(path), path.stat().st_mtime_ns)] = index


def load_saved_index(path: str | Path) -> BenchmarkIndex:
    """The index `save_index` wrote to PATH (read once per process and file version)."""
    key = (str(path), Path(path).stat().st_mtime_ns)
    if key not in _LOADED:
        with open(path, "rb") as handle:
            index = pickle.load(handle)  # written by this stage into its own folder
        if getattr(index, "matcher", None) != MATCHER:  # pickled by another mathmix: other tokens
            raise ValueError(f"{path}: a benchmark index of another matcher; delete it to build it again")
        _LOADED.clear()
        _LOADED[key] = index
    return _LOADED[key]


class SavedIndexFilter(DecontFilter):
    """`DecontFilter` that reads the index the stage saved instead of building it again in each task."""

    def __init__(self, index_file: str | Path, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.index_file = str(index_file)

    def run(self, data, rank: int = 0, world_size: int = 1):
        # DecontFilter.filter takes a built index where it would take benchmark paths
        self.benchmarks = load_saved_index(self.index_file)  # type: ignore[assignment]
        yield from super().run(data, rank, world_size)

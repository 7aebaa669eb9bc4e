"""The stage registry: which module implements each recipe stage, in the order `mathmix run` runs them.

A stage module defines `Config` (a pydantic model, extra keys forbidden) and
`run_stage(config, ctx: StageContext) -> dict` returning the stage summary (docs_in, docs_out, dropped, ...).
`run_stage` writes OUT/summary.json last (atomically, `curate.summary.write_summary`): its presence marks the stage
complete. Optional module attributes: `FOLDER` (output folder name under the run folder, default the stage name)
and `PRODUCES_DOCUMENTS` (False for stages whose output is not the next stage's input, e.g. classifier, audit).
What a finished stage read is in its `recipe-stage.json` (pipelines.runner.stage_identity): its inputs with their
sizes, or what the module's optional `inputs_read(config, run_dir, inputs, previous)` names where the stage does
not read the previous stage's data/ (the classifier's pages, eval's model and benchmark folders), and the digests of
the files its optional `files_read(config, run_dir, previous)` names besides them (web's model, train's recipe).
A module's optional `preflight(config, run_dir, plan=None)` (PLAN: the runner's steps) checks, cheaply, what the stage reads that no earlier stage writes
(decont's benchmarks), raising OSError or ValueError: `mathmix run` calls it for every stage it is to run before the
first one starts, and in --dry-run (pipelines.runner.preflight). `SETTINGS_AS_FILES`: settings a recipe stage's
record holds as the files they name (`files_read`), not as typed (decont's benchmarks).
Stage inputs default to the previous document-producing stage's `data/` folder; `{run_dir}` in a stage's
`inputs` is replaced by the run folder.
Modules are imported lazily so that a recipe with only curation stages never imports torch.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from pipelines.executors import ExecutorConfig

# stage name -> module path; the order here is the order stages run in.
STAGES: dict[str, str] = {
    "classifier": "pipelines.classify",  # trains the math classifier the web stage scores with
    "web": "pipelines.web",
    "dedup": "pipelines.dedup",
    "decont": "pipelines.decont",
    "rewrite": "pipelines.rewrite",
    "shards": "pipelines.tokenize",
    "train": "pipelines.train",
    "eval": "pipelines.evaluate",
    "audit": "pipelines.audit",
}


@dataclass
class StageContext:
    """What a stage needs besides its own config: where to read, where to write, how to execute."""

    run_dir: Path
    out_dir: Path
    inputs: list[str]
    executor: ExecutorConfig
    previous: dict[str, Path] = field(
        default_factory=dict
    )  # stage name -> output folder of stages already run
    dry_run: bool = False


def stage_module(name: str) -> ModuleType:
    """Import the module implementing stage `name` (a clear error for unknown names)."""
    if name not in STAGES:
        raise KeyError(f"unknown stage {name!r}; known stages: {', '.join(STAGES)}")
    return importlib.import_module(STAGES[name])


def parse_stage_config(name: str, raw: dict[str, Any] | None) -> Any:
    """Validate one stage's settings against its module's `Config`."""
    return stage_module(name).Config.model_validate(raw or {})

"""Recipe stage `train`: mid-train the tiny model on the run's own shards, stable then one decay branch, and
export the decayed model as a Hugging Face folder (RUN/train/export/) for the eval stage.

The train recipe (default recipes/tiny-cpu.yaml) names its mixture sources by shard folder; this stage takes the
vocabulary, EOS and tokenizer from RUN/shards/manifest.json. A mixture source of a stage to train that the run has
no shards for is refused (before the first stage of `mathmix run` where the shards it will have are known, else
when the stage starts), unless the train block says `missing_sources: drop`: then it is dropped, the others'
weights renormalised, a warning names them, and the summary lists them (`missing_sources`). The quickstart drops
(its run has no `refine` branch; recipes/tiny-cpu.yaml names one). Dropping silently turned the 3B recipe's
decay-long into 100% web on a run with only corpus and qa shards.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pipelines.stages import StageContext

FOLDER = "train"
PRODUCES_DOCUMENTS = False  # a model, not documents
READS = "{run_dir}/shards (its manifest) and the train recipe"  # what --dry-run shows
REPO = Path(__file__).resolve().parents[1]


class Config(BaseModel):
    """Settings of the `train` stage."""

    model_config = ConfigDict(extra="forbid")

    recipe: str = Field("recipes/tiny-cpu.yaml", description="train recipe (relative: cwd, then the repo)")
    stages: list[str] | None = Field(
        None, description="stages to run (default: the first stable + first decay)"
    )
    export_stage: str | None = Field(
        None, description="stage whose final checkpoint is exported (default: last)"
    )
    export_dtype: str = "float32"  # CPU evals of the tiny model run faster and exactly in fp32
    # One thread: the tiny model's matmuls gain little from a second one, and on a busy machine spinning OpenMP
    # threads made steps ~4x slower (measured). `null` keeps torch's default.
    threads: int | None = Field(1, ge=1, description="torch CPU threads during the stage")
    missing_sources: Literal["refuse", "drop"] = Field(
        "refuse",
        description="mixture sources the run has no shards for: refuse, or drop them (the others' weights "
        "renormalised, with a warning)",
    )


def former_default_forms(settings: dict, forms: list[dict]) -> list[dict]:
    """FORMS as a stage record from before `missing_sources` holds them (runner.earlier_stage_identities): that
    mathmix dropped missing sources without a setting, so its record, without the key, is this stage's where the
    block now says `missing_sources: drop` (a finished quickstart run is skipped after the upgrade). Where the
    block says nothing (refuse), such a record matches as it is, and `preflight` refuses it if it dropped any."""
    if settings.get("missing_sources") != "drop":
        return []
    return [
        {**form, "settings": {k: v for k, v in form.get("settings", {}).items() if k != "missing_sources"}}
        for form in forms
    ]


def _recipe_path(name: str) -> Path:
    path = Path(name)
    return path if path.is_absolute() or path.is_file() else REPO / path


def preflight(config: Config, run_dir: Path | str, plan: list[dict[str, Any]] | None = None) -> None:
    """What the stage reads that no earlier stage writes, checked by `mathmix run` before its first stage and in
    --dry-run: the train recipe, validated as the stage loads it, and each mixture file it names. A typo'd recipe
    key was found only after web, dedup, decont, rewrite and shards had run in full.

    And the mixture sources of the stages to train that the run has no shards for (`missing_sources`), where that
    is known: a finished train stage by what its summary says it dropped; else the run's shards by their
    manifest; else, given PLAN (the runner's steps: stage, config, output), the shards the plan's shards stage
    will write (the corpus and each rewrite task's branch, and branches already in the run folder)."""
    from midtrain.config import load_train_recipe
    from shards.mixture import MixtureConfig

    recipe = load_train_recipe(_recipe_path(config.recipe))
    for stage in recipe.stages:
        if isinstance(stage.mixture, str):  # read relative to the working folder, as prepare_recipe reads it
            MixtureConfig.from_yaml(stage.mixture)
    run_dir = Path(run_dir)
    steps = {step["stage"]: step for step in plan or []}
    train_dir = Path(steps["train"]["output"]) if "train" in steps else run_dir / FOLDER
    names = config.stages or default_stages(recipe)
    try:
        finished = json.loads((train_dir / "summary.json").read_text())
    except (OSError, ValueError):
        finished = None
    if isinstance(finished, dict):  # trained: what it dropped is done; an earlier mathmix dropped unasked
        dropped = finished.get("missing_sources") or {}
        dropped = {n: v for n, v in dropped.items() if v} if isinstance(dropped, dict) else {}
        if dropped and config.missing_sources == "refuse":
            raise ValueError(
                f"train: the finished stage in {train_dir} was trained without mixture sources the run had no "
                f"shards for ({_named(dropped)}; an earlier mathmix dropped them without asking). Set "
                f"`missing_sources: drop` in the run recipe's train block to keep it, or delete {train_dir} to "
                "train again with every source (once its shards exist)"
            )
        return
    shards_dir = Path(steps["shards"]["output"]) if "shards" in steps else run_dir / "shards"
    have = (
        _shards_of(shards_dir)
        if (shards_dir / "manifest.json").is_file()
        else _planned_shards(steps, run_dir)
    )
    if have is None:  # no shards and no shards stage to make them: the stage says so when it starts
        return
    missing: dict[str, list[str]] = {}
    for stage in recipe.stages:
        if stage.name not in names:
            continue
        mixture = stage.build_mixture(str(run_dir))
        lost = [s.name for s in mixture.sources if not all(str(Path(p).resolve()) in have for p in s.paths)]
        if lost:
            missing[stage.name] = lost
        if len(lost) == len(mixture.sources):
            raise ValueError(
                f"train: stage {stage.name} has no shards in {shards_dir} (the run's: {_listed(have)})"
            )
    if missing and config.missing_sources == "refuse":
        raise ValueError(
            _refusal(config, missing, have, planned=not (shards_dir / "manifest.json").is_file())
        )


def _shards_of(shards_dir: Path) -> set[str]:
    """The source folders RUN/shards/manifest.json lists, resolved (as prepare_recipe compares them)."""
    try:
        manifest = rebase_manifest(json.loads((shards_dir / "manifest.json").read_text()), shards_dir)
        return {str(Path(s["path"]).resolve()) for s in manifest["sources"].values()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # not a manifest: the stage names it
        return set()


def _planned_shards(steps: Mapping[str, dict[str, Any]], run_dir: Path) -> set[str] | None:
    """The source folders the plan's shards stage will write (pipelines.tokenize.find_sources): the corpus, and a
    branch for each rewrite task and each branch already in the run folder, less `skip_branches`; None without a
    shards stage in the plan."""
    if "shards" not in steps:
        return None
    shards = steps["shards"]["config"]
    out = Path(steps["shards"]["output"])
    names = {shards.corpus_name}
    if shards.branches:
        branches = Path(steps["rewrite"]["output"]) if "rewrite" in steps else run_dir / "branches"
        tasks = set(steps["rewrite"]["config"].tasks) if "rewrite" in steps else set()
        if branches.is_dir():
            tasks |= {p.name for p in branches.iterdir() if (p / "data").is_dir()}
        names |= tasks - set(shards.skip_branches)
    return {str((out / name).resolve()) for name in names}


def _listed(have: set[str]) -> str:
    return ", ".join(sorted(Path(p).name for p in have)) or "none"


def _named(missing: Mapping[str, list[str]]) -> str:
    return "; ".join(f"stage {stage}: {', '.join(sources)}" for stage, sources in missing.items())


def _refusal(config: Config, missing: Mapping[str, list[str]], have: set[str], planned: bool = False) -> str:
    whose = "the shards this run will have" if planned else "the run's shards"
    return (
        f"train: no shards for mixture sources of {config.recipe}: {_named(missing)} ({whose}: {_listed(have)}). "
        "Make them (a rewrite task per branch), or set `missing_sources: drop` in the run recipe's train block "
        "to train without them, the other sources' weights renormalised"
    )


def files_read(
    config: Config, run_dir: Path | str, previous: Mapping[str, Path] | None = None
) -> dict[str, str]:
    """Files the stage reads besides its shards, whose contents the recipe stage's record holds (see
    pipelines.web.files_read): the train recipe, each mixture file it names and the pretrained model folder it
    starts from (`model.path`, by its weights). Left out, a recipe edited in place (another learning rate, another
    mixture) left the stage "already complete" with the model of the old one. The YAML files count by what they
    say, not their comments (`job_record.yaml_digest`). A recipe that cannot be read is recorded alone: the stage
    itself names what is wrong with it."""
    from midtrain.config import load_train_recipe

    path = _recipe_path(config.recipe)
    found = {"recipe": str(path.resolve())}
    try:
        recipe = load_train_recipe(path)
    except (OSError, ValueError):
        return found
    for stage in recipe.stages:
        if isinstance(stage.mixture, str):  # read relative to the working folder, as prepare_recipe reads it
            found[f"mixture {stage.name}"] = str(Path(stage.mixture).resolve())
    if recipe.model.path is not None:
        found["model.path"] = recipe.model.path
    return found


def inputs_read(
    config: Config, run_dir: Path | str, inputs: list[str], previous: Mapping[str, Path]
) -> list[str]:
    """The shard folders the stage trains on, those RUN/shards/manifest.json lists (`rebase_manifest`d), which
    the recipe stage's record holds with their sizes in place of INPUTS, the recipe's (the previous document
    stage's data/, which train does not read); the manifest itself where it cannot be read (the stage names it)."""
    import json

    shards_dir = Path(previous.get("shards", Path(run_dir) / "shards"))
    try:
        manifest = rebase_manifest(json.loads((shards_dir / "manifest.json").read_text()), shards_dir)
        return [str(source["path"]) for source in manifest["sources"].values()]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # missing, or not a manifest
        return [str(shards_dir / "manifest.json")]


def rebase_manifest(manifest: dict[str, Any], shards_dir: Path) -> dict[str, Any]:
    """MANIFEST with the paths it holds under the folder it was written in moved to SHARDS_DIR, where that
    folder was copied or moved (the manifest records absolute paths: a copied run trained on, or failed to find,
    the original's shards)."""
    sources = [Path(s["path"]) for s in manifest.get("sources", {}).values()]
    written_in = {p.parent for p in sources}
    if len(written_in) != 1 or (old := written_in.pop()).resolve() == shards_dir.resolve():
        return manifest

    def moved(value: str) -> str:
        path = Path(value)
        return str(shards_dir / path.relative_to(old)) if path.is_relative_to(old) else value

    out = dict(manifest, sources={k: dict(v, path=moved(v["path"])) for k, v in manifest["sources"].items()})
    if isinstance(manifest.get("tokenizer"), str):
        out["tokenizer"] = moved(manifest["tokenizer"])
    return out


def prepare_recipe(config: Config, ctx: StageContext):
    """The train recipe bound to this run: output under RUN/train, vocab/EOS/tokenizer from the shards; and
    {stage: [mixture sources the run has no shards for]}, dropped from the bound recipe.

    Raises:
        ValueError: a stage to train (`config.stages`, default `default_stages`) names such a source and the
            block does not say `missing_sources: drop` (where it does, a warning on stderr names what is dropped
            and the weights left).
        FileNotFoundError: no shards, or a stage none of whose sources has any.
    """
    from mathmix.cli_util import console
    from midtrain.config import TrainRecipe, load_train_recipe

    shards_dir = ctx.previous.get("shards", ctx.run_dir / "shards")
    if not (shards_dir / "manifest.json").is_file():
        raise FileNotFoundError(
            f"{shards_dir}/manifest.json: no shards to train on (run the shards stage first)"
        )
    manifest = rebase_manifest(json.loads((shards_dir / "manifest.json").read_text()), shards_dir)
    recipe = load_train_recipe(_recipe_path(config.recipe))
    raw = recipe.model_dump(mode="json")
    raw.update(output_dir=str(ctx.out_dir), run_dir=str(ctx.run_dir))
    if raw["model"]["config"] is not None:
        raw["model"]["config"].update(vocab_size=manifest["vocab_size"], eos_token_id=manifest["eos_id"])
    raw["model"]["tokenizer"] = manifest["tokenizer"]
    have = {str(Path(s["path"]).resolve()) for s in manifest["sources"].values()}
    missing: dict[str, list[str]] = {}
    shares: dict[str, str] = {}  # stage: the weights left, as the warning gives them
    for stage in raw["stages"]:
        mixture = stage["mixture"]
        if isinstance(
            mixture, str
        ):  # a mixture file: read in, so its sources the run has no shards for drop too
            from shards.mixture import MixtureConfig

            mixture = stage["mixture"] = MixtureConfig.from_yaml(mixture).model_dump(mode="json")
        keep = []
        for source in mixture["sources"]:
            paths = [p.replace("{run_dir}", str(ctx.run_dir)) for p in source["paths"]]
            if all(str(Path(p).resolve()) in have for p in paths):
                keep.append(source)
            else:
                missing.setdefault(stage["name"], []).append(source["name"])
        if not keep:
            raise FileNotFoundError(
                f"train: stage {stage['name']} has no shards in {shards_dir} ({list(have)})"
            )
        shares[stage["name"]] = _shares(mixture["sources"], keep)
        mixture["sources"] = keep
    names = config.stages or default_stages(recipe)
    trained = {name: sources for name, sources in missing.items() if name in names}
    if trained and config.missing_sources == "refuse":
        raise ValueError(_refusal(config, trained, have))
    if trained:
        from rich.markup import escape

        dropped = "; ".join(f"stage {n}: {', '.join(v)} (left: {shares[n]})" for n, v in trained.items())
        console.print(
            f"[yellow]train: warning: no shards for mixture sources of {escape(config.recipe)}, dropped "
            f"(missing_sources: drop): {escape(dropped)}[/]",
            soft_wrap=True,
        )
    return TrainRecipe.model_validate(raw), missing


def _shares(sources: list[dict[str, Any]], keep: list[dict[str, Any]]) -> str:
    """The kept sources' weights as shares of the weighted ones, before -> after the drop (token budgets as
    they are): `corpus 0.5 -> 0.625, qa 0.3 -> 0.375`."""
    before = sum(s["weight"] for s in sources if s.get("weight") is not None) or 1.0
    after = sum(s["weight"] for s in keep if s.get("weight") is not None) or 1.0
    return ", ".join(
        f"{s['name']} {s['weight'] / before:.3g} -> {s['weight'] / after:.3g}"
        if s.get("weight") is not None
        else f"{s['name']} {s['tokens']:,} tokens"
        for s in keep
    )


def default_stages(recipe) -> list[str]:
    stable = next(s.name for s in recipe.stages if s.kind == "stable")
    decay = next((s.name for s in recipe.stages if s.kind == "decay" and s.start_from == stable), None)
    return [stable] + ([decay] if decay else [])


def run_stage(config: Config, ctx: StageContext) -> dict[str, Any]:
    """Train the stages, export the last one to RUN/train/export/, write RUN/train/summary.json."""
    import torch
    import yaml

    from curate.summary import write_summary
    from midtrain.export import export_checkpoint
    from midtrain.trainer import train_recipe

    start = time.time()
    threads_before = torch.get_num_threads()
    if config.threads:
        torch.set_num_threads(config.threads)
    recipe, missing = prepare_recipe(config, ctx)
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    (ctx.out_dir / "recipe.yaml").write_text(yaml.safe_dump(recipe.model_dump(mode="json"), sort_keys=False))
    names = config.stages or default_stages(recipe)
    stages = train_recipe(recipe, names)
    export_stage = config.export_stage or names[-1]
    export = export_checkpoint(
        recipe.stage_dir(export_stage), ctx.out_dir / "export", dtype=config.export_dtype
    )
    torch.set_num_threads(threads_before)  # later stages (eval) choose their own
    summary = {
        "docs_in": 0,  # not a document stage: nothing is read as documents or dropped
        "docs_out": 0,
        "dropped": {},
        "seconds": round(time.time() - start, 2),
        "recipe": str(_recipe_path(config.recipe)),
        "stages": {
            n: {k: s[k] for k in ("kind", "steps", "tokens", "final_loss", "seconds")}
            for n, s in stages.items()
        },
        "missing_sources": missing,
        "export": str(ctx.out_dir / "export"),
        "export_stage": export_stage,
        "tokenizer": export["tokenizer"],
    }
    write_summary(ctx.out_dir, summary)
    return summary

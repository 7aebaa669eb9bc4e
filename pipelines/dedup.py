"""The dedup stage: exact URL / text dedup, then MinHash LSH in datatrove's four stages, every boundary on disk.

Jobs, in order (each a datatrove executor; `N` = tasks, one per input shard):
  1. exact hashes (N)   reader -> IdRecorder -> ExactDedupHasher       -> work/exact_hashes/RANK.npy, work/ids/
  2. exact groups (1)   ExactDedupIndex                                -> work/exact_groups/RANK.exact.npy
  3. signatures (N)     reader -> ExactDedupFilter -> FastMinhashSignature -> work/signatures/bucket_XXX/*.sig
  4. buckets (bands)    datatrove MinhashDedupBuckets (one task per band) -> work/buckets/*.dups
  5. clusters (1)       MinhashClusterByRule                           -> work/clusters/RANK.{remove,clusters,sizes}
  6. filter (N)         reader -> ExactDedupFilter -> MinhashClusterFilter -> ParquetWriter -> data/*.parquet
Stages 3 and 6 read the same input with the same tasks, so the document index a signature carries is the
document's position in stage 6's stream. The summary comes from stage 6's stats; `clusters.jsonl` lists every
exact group and MinHash cluster with the kept id and the removed ids.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

FOLDER = "dedup"
# The number guard's default limit: problem-sized texts. 99.3% of the 42,850 benchmark problems in ../shared/data
# have at most 256 tokens (GSM8K at most 184, MATH 99% under 303), and 83% of the 333 real pages have more (median
# 792); it was 512, which kept apart short pages that differ in a view count or a copyright year.
NUMBER_GUARD_TOKENS = 256
EXTRA_COLUMNS = [
    ("exact_group_size", pa.int64()),
    ("minhash_cluster_id", pa.int64()),
    ("minhash_cluster_size", pa.int64()),
]


class Config(BaseModel):
    """Settings of the dedup stage (the `dedup:` block of a recipe)."""

    model_config = ConfigDict(extra="forbid")

    inputs: list[str] = Field(
        default_factory=list, description="Parquet/JSONL with id, text (default: web/data)"
    )
    exact_url: bool = Field(True, description="drop documents whose canonical URL was already seen")
    exact_text: bool = Field(True, description="drop documents whose normalised text was already seen")
    minhash: bool = Field(True, description="MinHash LSH near-duplicate removal after the exact dedup")
    n_grams: int = Field(5, ge=1, description="word shingle size")
    bands: int = Field(11, ge=1, description="LSH bands (buckets)")
    rows: int = Field(10, ge=1, description="hashes per band")
    seed: int = 1
    keep_rule: list[Literal["math_score", "length", "first"]] = Field(
        default_factory=lambda: ["math_score", "length"],  # type: ignore[arg-type]
        description="which document a cluster keeps: keys in order (ties: the first document)",
    )
    number_guard_tokens: int = Field(
        NUMBER_GUARD_TOKENS,
        ge=0,
        description="never merge two docs of at most this many tokens whose numbers, operators or one-letter "
        "variables differ (0: off)",
    )
    score_key: str = Field("math_score", description="metadata field holding the score used by the keep rule")
    tasks: int | None = Field(None, ge=1, description="datatrove tasks (default: the executor's)")
    write_rejects: bool = Field(True, description="write dropped documents to OUT/rejects/ with their reason")


def former_default_forms(settings: dict, forms: list[dict]) -> list[dict]:
    """FORMS as a record from before the guard's default was 256 holds them (runner.earlier_stage_identities):
    a block that says `number_guard_tokens: 256` was recorded with it, and today's default is left out."""
    if "number_guard_tokens" in settings:
        return []
    return [
        {**form, "settings": {**form.get("settings", {}), "number_guard_tokens": NUMBER_GUARD_TOKENS}}
        for form in forms
    ]


def refuse_mixed_signatures(signatures: Path, logs: Path, tasks: int) -> None:
    """Refuse to finish a signature stage that an earlier mathmix began: its ranks hashed other tokens (letters and
    digits only, no shingle sets kept), so the ranks done now and then would be compared as if alike. Such ranks
    are known by a `meta/RANK.npy` without its `shingles/RANK.sizes.npy`; once every rank is done (a finished job)
    they are all alike and the job goes on."""
    old = [m for m in sorted((signatures / "meta").glob("*.npy")) if not (signatures / "shingles" /
                                                                            f"{m.stem}.sizes.npy").is_file()]  # fmt: skip
    done = len(list((logs / "completions").glob("*"))) if (logs / "completions").is_dir() else 0
    if old and done < tasks:
        raise ValueError(
            f"{signatures.parent.parent}: its MinHash signatures were begun by an earlier mathmix, which hashed "
            f"other tokens ({len(old)} of {tasks} tasks done): delete the folder and run again"
        )


def _settings(config: Config):
    from curate.minhash import MinhashSettings

    return MinhashSettings(config.n_grams, config.bands, config.rows, config.seed)


OUTPUTS = (
    "data",
    "logs",
    "rejects",
    "work",
    "clusters.jsonl",
    "clusters.tmp",
)  # cleared when another job takes
# over a folder where this one finished nothing (a killed run's 0-byte Parquet stayed beside the new job's)


def run_dedup(config: Config, inputs: list[str], out_dir: Path, executor) -> dict:
    """Run the six dedup jobs over `inputs` into `out_dir`; returns (and writes) the summary."""
    from curate.dedup_exact import ExactDedupHasher, ExactDedupIndex
    from curate.dedup_ids import IdRecorder
    from curate.dedup_io import build_readers, document_files, minimal_schema, output_schema
    from curate.summary import ensure_data_file, write_summary
    from pipelines.job_record import check_output_outside_inputs
    from pipelines.output_folder import stage_seconds as whole_stage_seconds

    out_dir, start = Path(out_dir), time.time()
    check_output_outside_inputs(
        out_dir, inputs
    )  # `dedup ddin -o ddin/out` worked once, then every rerun failed
    files = document_files(inputs)
    work, logs = out_dir / "work", out_dir / "logs"
    tasks = max(1, min(config.tasks or executor.tasks, len(files[0]) + len(files[1])))
    _check_dedup_job(config, files, out_dir, tasks)
    rule = list(config.keep_rule)

    stage_seconds: dict[str, float] = {}

    def run(name: str, pipeline: list, n: int) -> None:
        t0 = time.time()
        # one-task stages run in this process (workers=1): no process pool to start for them
        workers = 1 if n == 1 else None
        executor.run(
            executor.build(pipeline, logs / name, job_name=f"mathmix-dedup-{name}", tasks=n, workers=workers)
        )
        stage_seconds[name] = round(time.time() - t0, 2)

    run(
        "1_exact_hashes",
        [
            *build_readers(files, work),
            IdRecorder(work / "ids"),
            ExactDedupHasher(work / "exact_hashes", config.score_key),
        ],
        tasks,
    )
    run(
        "2_exact_groups",
        [
            ExactDedupIndex(
                work / "exact_hashes", work / "exact_groups", rule, config.exact_url, config.exact_text
            )
        ],
        1,
    )
    if config.minhash:
        _run_minhash_stages(config, files, work, logs, tasks, rule, run)
    schema = output_schema(files[0], EXTRA_COLUMNS, files[1])
    run("6_filter", _filter_pipeline(config, files, out_dir, schema), tasks)
    ensure_data_file(out_dir / "data", schema or minimal_schema(EXTRA_COLUMNS))
    summary = _dedup_summary(config, out_dir, start, stage_seconds)
    # Slurm without waiting: the tasks ran under earlier submissions, so the stage's seconds, not this rerun's
    if getattr(executor, "kind", "") == "slurm":
        summary["seconds"] = round(whole_stage_seconds(out_dir, start, executor), 2)
    write_summary(out_dir, summary)
    return summary


def _check_dedup_job(config: Config, files, out_dir: Path, tasks: int) -> None:
    """Record the dedup job in OUT/job.json (`check_job`), or refuse OUT holding another job's work."""
    from curate.dedup_io import file_split_field
    from pipelines.job_record import check_job, job_identity

    # the stages that read the input files: one of an earlier mathmix that dealt them otherwise is not resumed
    reading = ["logs/1_exact_hashes", *(["logs/3_signatures"] * config.minhash), "logs/6_filter"]
    split = file_split_field(out_dir, reading, tasks)
    identity = job_identity(
        [*files[0], *files[1]], config, out_dir.parent, command="dedup", tasks=tasks, **split
    )
    before_command = {k: v for k, v in identity.items() if k != "command"}  # records from before the command
    check_job(
        out_dir,
        identity,
        "dedup run",
        outputs=OUTPUTS,
        earlier=[before_command, *former_default_forms(identity["settings"], [identity, before_command])],
    )


def _run_minhash_stages(
    config: Config,
    files,
    work: Path,
    logs: Path,
    tasks: int,
    rule: list,
    run: Callable[[str, list, int], None],
) -> None:
    """Jobs 3-5 (see the module docstring): signatures of what exact dedup keeps, LSH buckets, clusters."""
    from datatrove.pipeline.dedup.minhash import MinhashDedupBuckets

    from curate.dedup_exact import ExactDedupFilter
    from curate.dedup_io import build_readers
    from curate.minhash import FastMinhashSignature
    from curate.minhash_cluster import MinhashClusterByRule

    refuse_mixed_signatures(work / "signatures", logs / "3_signatures", tasks)
    exact = ExactDedupFilter(work / "exact_groups")
    sign = FastMinhashSignature(work / "signatures", _settings(config), config.score_key)
    run("3_signatures", [*build_readers(files, work), exact, sign], tasks)
    buckets = MinhashDedupBuckets(
        str(work / "signatures"), str(work / "buckets"), config=_settings(config).datatrove_config()
    )
    run("4_buckets", [buckets], config.bands)
    run(
        "5_clusters",
        [
            MinhashClusterByRule(
                work / "buckets",
                work / "signatures",
                work / "clusters",
                rule,
                config.number_guard_tokens,
                threshold=_settings(config).threshold,
            )
        ],
        1,
    )


def _dedup_summary(config: Config, out_dir: Path, start: float, stage_seconds: dict[str, float]) -> dict:
    """The summary: job 6's stats, the clusters' report, each job's seconds and the MinHash counts and settings."""
    from curate.dedup_ids import duplicate_ids
    from curate.summary import summarize_logs

    work, logs = out_dir / "work", out_dir / "logs"
    summary = summarize_logs(logs / "6_filter", seconds=time.time() - start)
    summary.update(_report(work / "report", out_dir / "clusters.jsonl"))
    summary["stage_seconds"] = stage_seconds
    summary.update(_minhash_counts(logs))
    if shared := duplicate_ids(work / "ids"):  # clusters.jsonl and rejects name documents by id
        summary["duplicate_ids"] = shared
    summary["minhash"] = (
        {"n_grams": config.n_grams, "bands": config.bands, "rows": config.rows} if config.minhash else None
    )
    return summary


def _filter_pipeline(config: Config, files, out_dir: Path, schema) -> list:
    from curate.dedup_exact import ExactDedupFilter
    from curate.dedup_io import build_readers, build_rejects_writer, build_writer
    from curate.minhash_cluster import MinhashClusterFilter

    work = out_dir / "work"
    rejects = out_dir / "rejects"
    steps = [
        *build_readers(files, work),
        ExactDedupFilter(
            work / "exact_groups",
            report_folder=work / "report",
            exclusion_writer=build_rejects_writer(rejects, "exact_${rank}.parquet")
            if config.write_rejects
            else None,
        ),
    ]
    if config.minhash:
        steps.append(
            MinhashClusterFilter(
                work / "clusters",
                report_folder=work / "report",
                exclusion_writer=build_rejects_writer(rejects, "near_${rank}.parquet")
                if config.write_rejects
                else None,
            )
        )
    steps.append(build_writer(out_dir / "data", schema))
    return steps


def _report(report_dir: Path, out_path: Path) -> dict:
    """Merge the per-task report rows into one line per group/cluster; returns counts for the summary."""
    groups: dict[tuple[str, int], dict] = {}
    for path in sorted(report_dir.glob("*.jsonl")):
        kind = "exact" if path.name.endswith(".exact.jsonl") else "minhash"
        for line in path.read_text().splitlines():
            row = json.loads(line)
            cid = row.get("group_id", row.get("cluster_id"))
            entry = groups.setdefault(
                (kind, cid),
                {"kind": kind, "cluster_id": cid, "size": row["size"], "kept": None, "removed": []},
            )
            if row["kept"]:
                entry["kept"] = row["id"]
            else:
                entry["removed"].append(row["id"])
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for key in sorted(groups):
            f.write(json.dumps(groups[key], ensure_ascii=False) + "\n")
    tmp.replace(out_path)
    exact = [g for (k, _), g in groups.items() if k == "exact"]
    near = [g for (k, _), g in groups.items() if k == "minhash"]
    return {
        "exact_groups": len(exact),
        "minhash_clusters": len(near),
        "largest_cluster": max((g["size"] for g in near), default=0),
        "report": out_path.name,  # in the stage folder: a copy of the folder, or -o spelled otherwise, says the same
    }


def _minhash_counts(logs: Path) -> dict:
    """Kept documents too short for one shingle (no signature); distinct LSH candidate pairs, those the number
    guard kept apart and those of short documents below the Jaccard threshold."""
    from curate.summary import read_step_stats

    counts = {}
    for folder, label, key in (
        ("3_signatures", "docs_too_short_for_minhash", "too_short_for_minhash"),
        ("5_clusters", "candidate_pairs", "candidate_pairs"),
        ("5_clusters", "pairs_blocked_by_numbers", "pairs_blocked_by_numbers"),
        ("5_clusters", "pairs_below_threshold", "pairs_below_threshold"),
    ):
        if (logs / folder / "stats").is_dir():
            counts[key] = int(sum(stats.get(label, 0) for _, stats in read_step_stats(logs / folder)))
    return counts


def run_stage(config: Config, ctx) -> dict:
    """Recipe stage `dedup`: reads the previous stage's data/ (or `inputs`), writes RUN/dedup/."""
    return run_dedup(config, ctx.inputs, ctx.out_dir, ctx.executor)

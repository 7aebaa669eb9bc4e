"""Executor settings from a recipe, built into datatrove executors (local, Slurm or Ray).

Steps never know where they run: a stage hands its list of datatrove steps to `ExecutorConfig.build`, and the
recipe decides whether that becomes a LocalPipelineExecutor, a SlurmPipelineExecutor or a RayPipelineExecutor.
"""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mathmix.cli_util import console
from pipelines.local_forks import _ctrl_c_kept_across_forks, _processes_end_with_mathmix
from pipelines.ray_cluster import _speaks_grpc, start_ray
from pipelines.slurm_queue import (
    NEVER_STARTS,
    QUEUE_PATIENCE_S,
    SUBMITTED_FILE,
    SlurmQueueError,
    _current_venv,
    _sbatch_reason,
    live_submissions,
    slurm_job_name,
    slurm_jobs,
    wait_for_slurm_jobs,
)

# Moved out, still importable from here: slurm_queue (squeue, scancel, sbatch), local_forks (a local run's
# processes and Ctrl-C), ray_cluster (connecting to Ray).
__all__ = [
    "NEVER_STARTS",
    "QUEUE_PATIENCE_S",
    "SUBMITTED_FILE",
    "ExecutorConfig",
    "JobsSubmitted",
    "SlurmQueueError",
    "_ctrl_c_kept_across_forks",
    "_processes_end_with_mathmix",
    "_sbatch_reason",
    "_speaks_grpc",
    "live_submissions",
    "slurm_job_name",
    "slurm_jobs",
    "start_ray",
    "wait_for_slurm_jobs",
]


class JobsSubmitted(Exception):
    """Slurm jobs were submitted without waiting (`wait: false`), or are still queued from an earlier submission:
    the stage has no result yet, so nothing after it can run. Rerun the same command once they have finished."""


class ExecutorConfig(BaseModel):
    """Where a stage's datatrove pipeline runs."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["local", "slurm", "ray"] = "local"
    tasks: int = Field(2, ge=1, description="number of datatrove tasks (input shards) per stage")
    workers: int = Field(-1, description="tasks run at once (-1: all)")
    # slurm
    partition: str | None = None
    time: str = "01:00:00"
    cpus_per_task: int = Field(1, ge=1)
    mem_per_cpu_gb: float = Field(2, gt=0)
    qos: str | None = None
    sbatch_args: dict[str, str] = Field(default_factory=dict)
    venv_path: str | None = None
    wait: bool = Field(True, description="slurm: block until the stage's jobs leave the queue")
    poll_seconds: float = Field(2.0, gt=0)
    # ray
    ray_address: str | None = Field(None, description="ray: cluster address (default: RAY_ADDRESS or local)")

    @field_validator("workers")
    @classmethod
    def _workers(cls, value: int) -> int:
        if value == 0 or value < -1:
            raise ValueError("workers must be -1 (all tasks at once) or at least 1")
        return value

    @model_validator(mode="after")
    def _slurm_needs_a_partition(self) -> ExecutorConfig:
        # checked when the recipe is read (--dry-run included), not when the first stage submits
        if self.kind == "slurm" and not self.partition:
            raise ValueError("executor.partition is required when executor.kind is 'slurm'")
        return self

    def unused_keys(self) -> list[str]:
        """Keys given in the recipe that this executor kind never reads (a `partition` under `kind: local`): the
        recipe still loads, so that switching `kind` is a one-line edit, but they are named in a warning."""
        read_by = {
            "local": {"kind", "tasks", "workers"},
            "slurm": {"kind", "tasks", "workers", "partition", "time", "cpus_per_task", "mem_per_cpu_gb", "qos",
                      "sbatch_args", "venv_path", "wait", "poll_seconds"},
            "ray": {"kind", "tasks", "workers", "cpus_per_task", "mem_per_cpu_gb", "ray_address"},
        }  # fmt: skip
        return sorted(self.model_fields_set - read_by[self.kind])

    def build(
        self,
        pipeline: list[Any],
        logging_dir: Path | str,
        job_name: str = "mathmix",
        tasks: int | None = None,
        workers: int | None = None,
        depends: Any = None,
    ) -> Any:
        """Return a datatrove executor for `pipeline`, with completion markers under `logging_dir`."""
        n_tasks = tasks or self.tasks
        n_workers = self.workers if workers is None else workers
        logging_dir = str(logging_dir)
        if self.kind == "local":
            from datatrove.executor import LocalPipelineExecutor

            return LocalPipelineExecutor(
                pipeline=pipeline,
                tasks=n_tasks,
                workers=n_workers,
                logging_dir=logging_dir,
                depends=depends,
                skip_completed=True,
            )
        if self.kind == "slurm":
            from datatrove.executor import SlurmPipelineExecutor

            if not self.partition:
                raise ValueError("executor.partition is required when executor.kind is 'slurm'")
            if self.venv_path and not Path(self.venv_path).is_file():
                raise ValueError(
                    f"executor.venv_path {self.venv_path}: no such file (the venv's bin/activate)"
                )
            # datatrove writes whole gigabytes (--mem-per-cpu=NG): given in megabytes, 0.5 or 1.5 GB is kept
            sbatch_args = {"mem-per-cpu": f"{round(self.mem_per_cpu_gb * 1024)}M", **self.sbatch_args}
            return SlurmPipelineExecutor(
                pipeline=pipeline,
                tasks=n_tasks,
                workers=n_workers,
                time=self.time,
                partition=self.partition,
                cpus_per_task=self.cpus_per_task,
                mem_per_cpu_gb=max(1, math.ceil(self.mem_per_cpu_gb)),
                qos=self.qos or "normal",
                logging_dir=logging_dir,
                depends=depends,
                sbatch_args=sbatch_args or None,
                venv_path=self.venv_path or _current_venv(),
                job_name=slurm_job_name(job_name, logging_dir),
                skip_completed=True,
                mail_type="NONE",
            )
        from datatrove.executor.ray import RayPipelineExecutor

        return RayPipelineExecutor(
            pipeline=pipeline,
            tasks=n_tasks,
            workers=n_workers,
            logging_dir=logging_dir,
            depends=depends,
            cpus_per_task=self.cpus_per_task,
            mem_per_cpu_gb=self.mem_per_cpu_gb,
            skip_completed=True,
        )

    def run(self, executor: Any) -> None:
        """Run an executor built by `build`; for Slurm, wait until its jobs have left the queue.

        Raises:
            ValueError: the cluster cannot run the jobs as configured (sbatch refused them, a pending reason that
                never clears, an unreachable Ray address, more CPUs or memory per task than any Ray node has).
            JobsSubmitted: Slurm jobs submitted with `wait: false`, or still queued from an earlier submission.
            RuntimeError: tasks ran and did not complete (their logs are named).
        """
        if self.kind == "ray":
            start_ray(self)
        logs = Path(str(executor.logging_dir.path))
        if self.kind == "slurm":
            self._check_earlier_submission(executor, logs)
        pending = executor.get_incomplete_ranks()  # none: datatrove submits nothing
        try:
            with _processes_end_with_mathmix() if self.kind == "local" else contextlib.nullcontext():
                executor.run()
        except subprocess.CalledProcessError as err:
            raise ValueError(
                f"sbatch refused the job (exit {err.returncode}): {_sbatch_reason(err, logs)}"
            ) from None
        if self.kind == "slurm" and pending:
            (logs / SUBMITTED_FILE).write_text(json.dumps({"job_name": executor.job_name, "ranks": pending}))
        if self.kind == "slurm" and not self.wait and pending:
            raise JobsSubmitted(
                f"submitted {executor.job_name} to Slurm without waiting (wait: false); rerun the same command once "
                "the jobs have finished: finished tasks are skipped"
            )
        if self.kind == "slurm":
            wait_for_slurm_jobs(executor.job_name, self.poll_seconds)
            (logs / SUBMITTED_FILE).unlink(missing_ok=True)
        incomplete = executor.get_incomplete_ranks()
        if incomplete:
            if self.kind == "slurm":
                subprocess.run(["scancel", "--name", executor.job_name], check=False)
            raise RuntimeError(_incomplete_message(self.kind, executor, logs, incomplete))

    def _check_earlier_submission(self, executor: Any, logs: Path) -> None:
        """Before submitting: jobs of an earlier submission still queued stop the stage (JobsSubmitted); tasks of an
        earlier submission that ended without completing are reported once (RuntimeError), and the next rerun
        submits them again.

        A failed array task leaves datatrove's stats job pending on DependencyNeverSatisfied for ever: it is
        cancelled here, or a rerun would be told to wait for it without end.
        """
        try:
            jobs = slurm_jobs(executor.job_name)
        except SlurmQueueError as err:
            raise ValueError(f"{err}; nothing was submitted: rerun once squeue answers") from None
        if jobs and {reason.strip() for _, reason in jobs} != {"DependencyNeverSatisfied"}:
            if not self.wait:
                raise JobsSubmitted(
                    f"jobs {executor.job_name} of an earlier submission are still in the Slurm queue (squeue "
                    f"--name {executor.job_name}); rerun once they have finished"
                )
            # wait: true (a run killed while it waited): wait for those jobs, then go on as that run would have
            console.print(
                f"waiting for the jobs of an earlier submission still in the Slurm queue ({executor.job_name})",
                markup=False,
                soft_wrap=True,
            )
            wait_for_slurm_jobs(executor.job_name, self.poll_seconds)
            jobs = slurm_jobs(executor.job_name)
        if jobs:
            subprocess.run(["scancel", "--name", executor.job_name], check=False)
        marker = logs / SUBMITTED_FILE
        if not marker.is_file():
            return
        marker.unlink()
        incomplete = executor.get_incomplete_ranks()
        if incomplete:
            raise RuntimeError(
                _incomplete_message(self.kind, executor, logs, incomplete, earlier=True)
                + "; rerun to submit them again"
            )


def _incomplete_message(kind: str, executor: Any, logs: Path, ranks: list[int], earlier: bool = False) -> str:
    """ "N of M tasks did not complete (ranks ...); see the task logs under ...", with the end of the first one's log."""
    where = f"{logs / 'slurm_logs'} (Slurm's) and {logs / 'logs'}" if kind == "slurm" else str(logs)
    what = f"{len(ranks)} of {executor.world_size} tasks"
    message = (
        f"{what} {'submitted earlier ' if earlier else ''}did not complete (ranks {ranks[:10]}); "
        f"see the task logs under {where}"
    )
    tail = _log_tail(logs, ranks[0])
    return message + (f"\nend of {tail[0]}:\n{tail[1]}" if tail else "")


def _log_tail(logs: Path, rank: int, lines: int = 8) -> tuple[Path, str] | None:
    """The newest log of task `rank` (datatrove's task log, or Slurm's output of the array task that ran it) and its
    last lines; None when the task left no log."""
    candidates = [logs / "logs" / f"task_{rank:05d}.log"]
    try:
        ranks = json.loads((logs / "ranks_to_run.json").read_text())
        index = ranks.index(rank)
        candidates += (logs / "slurm_logs").glob(f"*_{index}.out")
    except (OSError, ValueError):
        pass
    found = [path for path in candidates if path.is_file()]
    if not found:
        return None
    newest = max(found, key=lambda path: path.stat().st_mtime)
    text = [line for line in newest.read_text(errors="replace").splitlines() if line.strip()]
    return newest, "\n".join(text[-lines:])

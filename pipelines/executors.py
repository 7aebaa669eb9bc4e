"""Executor settings from a recipe, built into datatrove executors (local, Slurm or Ray).

Steps never know where they run: a stage hands its list of datatrove steps to `ExecutorConfig.build`, and the
recipe decides whether that becomes a LocalPipelineExecutor, a SlurmPipelineExecutor or a RayPipelineExecutor.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


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
            sbatch_args = dict(self.sbatch_args)
            return SlurmPipelineExecutor(
                pipeline=pipeline,
                tasks=n_tasks,
                workers=n_workers,
                time=self.time,
                partition=self.partition,
                cpus_per_task=self.cpus_per_task,
                mem_per_cpu_gb=int(self.mem_per_cpu_gb),
                qos=self.qos or "normal",
                logging_dir=logging_dir,
                depends=depends,
                sbatch_args=sbatch_args or None,
                venv_path=self.venv_path or _current_venv(),
                job_name=f"{job_name}-{hashlib.sha1(logging_dir.encode()).hexdigest()[:6]}",
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
        """Run an executor built by `build`; for Slurm, wait until its jobs have left the queue."""
        if self.kind == "ray":
            import ray

            if not ray.is_initialized():
                ray.init(address=self.ray_address, ignore_reinit_error=True)
        executor.run()
        if self.kind == "slurm" and self.wait:
            wait_for_slurm_jobs(executor.job_name, self.poll_seconds)
        incomplete = executor.get_incomplete_ranks()
        if incomplete and (self.kind != "slurm" or self.wait):
            if self.kind == "slurm":
                subprocess.run(["scancel", "--name", executor.job_name], check=False)
            logs = Path(str(executor.logging_dir.path))
            raise RuntimeError(
                f"{len(incomplete)} of {executor.world_size} tasks did not complete (ranks {incomplete[:10]}); "
                f"see the task logs under {logs}"
            )


def _current_venv() -> str | None:
    """The activate script of the virtual environment this process runs in, so Slurm jobs use the same Python."""
    activate = Path(sys.prefix) / "bin" / "activate"
    return str(activate) if sys.prefix != sys.base_prefix and activate.is_file() else None


def wait_for_slurm_jobs(job_name: str, poll_seconds: float = 2.0) -> None:
    """Block until no job named `job_name` (array tasks and datatrove's stats job) is left in `squeue`.

    The jobs are found by name because the Debian single-node setup has no accounting (no `sacct`).
    """
    while True:
        out = subprocess.run(
            ["squeue", "-h", "--name", job_name, "-o", "%i %r"], capture_output=True, text=True, check=False
        )
        lines = out.stdout.strip().splitlines()
        if out.returncode != 0 or not lines:
            return
        if all(
            "DependencyNeverSatisfied" in line for line in lines
        ):  # the array failed: the stats job never runs
            return
        time.sleep(poll_seconds)

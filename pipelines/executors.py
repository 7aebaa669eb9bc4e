"""Executor settings from a recipe, built into datatrove executors (local, Slurm or Ray).

Steps never know where they run: a stage hands its list of datatrove steps to `ExecutorConfig.build`, and the
recipe decides whether that becomes a LocalPipelineExecutor, a SlurmPipelineExecutor or a RayPipelineExecutor.
"""

from __future__ import annotations

import subprocess
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
                job_name=job_name,
                logging_dir=logging_dir,
                depends=depends,
                sbatch_args=sbatch_args or None,
                venv_path=self.venv_path,
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
            wait_for_slurm_job(getattr(executor, "job_id", None), self.poll_seconds)


def wait_for_slurm_job(job_id: str | None, poll_seconds: float = 2.0) -> None:
    """Block until `job_id` (and its array tasks) no longer appear in `squeue` (no accounting: no sacct)."""
    if not job_id:
        return
    while True:
        out = subprocess.run(
            ["squeue", "-h", "-j", str(job_id), "-o", "%i"], capture_output=True, text=True, check=False
        )
        if out.returncode != 0 or not out.stdout.strip():
            return
        time.sleep(poll_seconds)

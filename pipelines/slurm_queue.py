"""Slurm's queue as the executors see it: the jobs of a name (`slurm_jobs`), waiting for them to leave
(`wait_for_slurm_jobs`), the markers of jobs submitted without waiting (`live_submissions`) and sbatch's refusals.

Apart from `executors` because a stage folder's checks (`stage_records`) ask the queue too, without building an
executor; everything here goes through squeue, scancel or sbatch.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

# squeue reasons for a pending job that will never start as submitted: waiting on them would hang forever.
NEVER_STARTS = {"PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit", "BadConstraints", "InvalidQOS",
                "InvalidAccount", "QOSMaxCpuPerJobLimit", "QOSMaxMemoryPerJob", "QOSMaxWallDurationPerJobLimit",
                "AssocMaxCpuPerJobLimit", "AssocMaxWallDurationPerJobLimit", "DependencyNeverSatisfied"}  # fmt: skip


SUBMITTED_FILE = (
    "mathmix-submitted.json"  # {job_name, ranks}: Slurm tasks submitted and not yet seen finished
)


def live_submissions(out_dir: Path) -> list[str]:
    """Names of the Slurm jobs submitted for a stage folder (its executors' SUBMITTED_FILE markers) that are still in
    the queue. A queue that cannot be read counts none: the executor says so itself before it submits."""
    return list(live_submission_jobs(out_dir))


def live_submission_jobs(out_dir: Path, strict: bool = False) -> dict[str, list[tuple[str, str]]]:
    """{job name: its (job id, pending reason) in squeue} for each Slurm job submitted for a stage folder (its
    executors' SUBMITTED_FILE markers) still in the queue (`live_submissions` names them).

    STRICT: a squeue that is there but fails (a busy slurmctld timing out) raises SlurmQueueError instead of
    counting no jobs; no squeue at all (a folder copied off the cluster) still counts none."""
    found: dict[str, list[tuple[str, str]]] = {}
    for marker in sorted(Path(out_dir).glob(f"**/{SUBMITTED_FILE}")):
        try:
            name = json.loads(marker.read_text())["job_name"]
            if name not in found and (jobs := slurm_jobs(name)):
                found[name] = jobs
        except SlurmQueueError as err:
            if strict and not err.missing:
                raise
            continue
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def writing_jobs(out_dir: Path) -> list[str]:
    """The ids (an array's base id once) of the Slurm jobs of earlier submissions for OUT that are still queued or
    running and may write into it; a failed array's stats job, pending on DependencyNeverSatisfied for ever, writes
    nothing (the executor cancels it before it submits again). SlurmQueueError where squeue is there but fails
    and the folder holds submission markers: the queue is unknown, so the folder may not be taken over."""
    ids: list[str] = []
    for jobs in live_submission_jobs(out_dir, strict=True).values():
        if {reason.strip() for _, reason in jobs} == {"DependencyNeverSatisfied"}:
            continue
        for job_id, _ in jobs:
            base = job_id.split("_", 1)[0]
            if base not in ids:
                ids.append(base)
    return sorted(ids, key=lambda i: (len(i), i))


def _current_venv() -> str | None:
    """The activate script of the virtual environment this process runs in, so Slurm jobs use the same Python."""
    activate = Path(sys.prefix) / "bin" / "activate"
    return str(activate) if sys.prefix != sys.base_prefix and activate.is_file() else None


def slurm_job_name(prefix: str, logging_dir: Path | str) -> str:
    """`prefix-` and 6 hex digits of the resolved logging folder: unique per stage folder, whatever the cwd (a
    relative output_dir gave two runs started from two folders the same job name, and each waited on or cancelled
    the other's jobs)."""
    resolved = str(Path(logging_dir).expanduser().resolve())
    return f"{prefix}-{hashlib.sha1(resolved.encode()).hexdigest()[:6]}"


class SlurmQueueError(RuntimeError):
    """squeue did not answer (absent, or it failed: a busy slurmctld times out): the queue is unknown, not empty.
    `missing`: squeue is not installed (no Slurm here), as opposed to one that failed."""

    def __init__(self, message: str, missing: bool = False):
        super().__init__(message)
        self.missing = missing


def slurm_jobs(job_name: str) -> list[tuple[str, str]]:
    """(job id, pending reason) of every job named `job_name` in `squeue`.

    The jobs are found by name because the Debian single-node setup has no accounting (no `sacct`).

    Raises:
        SlurmQueueError: squeue is missing or failed. Read as "no jobs", one timed-out call ended a wait and
            cancelled the running jobs.
    """
    try:
        out = subprocess.run(
            ["squeue", "-h", "--name", job_name, "-o", "%i %r"], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise SlurmQueueError(
            "squeue: command not found (Slurm's client tools are not on PATH)", missing=True
        ) from None
    if out.returncode != 0:
        detail = (out.stderr or out.stdout).strip().splitlines()
        raise SlurmQueueError(f"squeue failed (exit {out.returncode}{': ' + detail[-1] if detail else ''})")
    return [(*line.split(None, 1), "")[:2] for line in out.stdout.strip().splitlines() if line.strip()]  # type: ignore[misc]


QUEUE_PATIENCE_S = 600.0  # how long squeue may keep failing while we wait before the wait gives up


def wait_for_slurm_jobs(
    job_name: str, poll_seconds: float = 2.0, patience_s: float = QUEUE_PATIENCE_S
) -> None:
    """Block until no job named `job_name` (array tasks and datatrove's stats job) is left in `squeue`.

    A failed array leaves datatrove's stats job pending on DependencyNeverSatisfied: done. Jobs that can never start
    as submitted (`NEVER_STARTS`, e.g. more CPUs than any node of the partition has) are cancelled: ValueError.
    A failing squeue is retried for `patience_s`, then RuntimeError; the jobs are left as they are.
    """
    failing_since: float | None = None
    while True:
        try:
            jobs = slurm_jobs(job_name)
            failing_since = None
        except SlurmQueueError as err:
            now = time.monotonic()
            failing_since = now if failing_since is None else failing_since
            if now - failing_since >= patience_s:
                raise RuntimeError(
                    f"{err}, for {patience_s:g} s while waiting for {job_name}; its jobs were left as they are: "
                    "rerun the same command to wait for them again"
                ) from None
            time.sleep(poll_seconds)
            continue
        if not jobs:
            return
        reasons = {reason.strip() for _, reason in jobs}
        if reasons == {"DependencyNeverSatisfied"}:
            return
        never = reasons & (NEVER_STARTS - {"DependencyNeverSatisfied"})
        if never and reasons - {"Dependency"} <= NEVER_STARTS:  # the stats job waits on the array: Dependency
            subprocess.run(["scancel", "--name", job_name], check=False)
            raise ValueError(
                f"Slurm will never start {job_name} as submitted (pending reason {', '.join(sorted(never))}: e.g. "
                "more cpus_per_task, memory or time than the partition allows); the jobs were cancelled"
            )
        time.sleep(poll_seconds)


def _sbatch_reason(err: subprocess.CalledProcessError, logs: Path) -> str:
    """Why sbatch refused: its stderr when captured, else what `sbatch --test-only` says of the saved launch script
    (datatrove runs sbatch without capturing stderr, so the reason was only in the lines printed above)."""
    detail = err.stderr or err.output or ""
    text = detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)
    script = logs / "launch_script.slurm"
    if not text.strip() and script.is_file():
        try:
            test = subprocess.run(
                ["sbatch", "--test-only", str(script)], capture_output=True, text=True, timeout=60
            )
            text = test.stderr if test.returncode != 0 else ""
        except (OSError, subprocess.TimeoutExpired):
            text = ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " ".join(lines[-3:]) if lines else "see sbatch's message above"

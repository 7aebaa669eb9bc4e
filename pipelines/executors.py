"""Executor settings from a recipe, built into datatrove executors (local, Slurm or Ray).

Steps never know where they run: a stage hands its list of datatrove steps to `ExecutorConfig.build`, and the
recipe decides whether that becomes a LocalPipelineExecutor, a SlurmPipelineExecutor or a RayPipelineExecutor.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mathmix.cli_util import console, first_line


class JobsSubmitted(Exception):
    """Slurm jobs were submitted without waiting (`wait: false`), or are still queued from an earlier submission:
    the stage has no result yet, so nothing after it can run. Rerun the same command once they have finished."""


# squeue reasons for a pending job that will never start as submitted: waiting on them would hang forever.
NEVER_STARTS = {"PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit", "BadConstraints", "InvalidQOS",
                "InvalidAccount", "QOSMaxCpuPerJobLimit", "QOSMaxMemoryPerJob", "QOSMaxWallDurationPerJobLimit",
                "AssocMaxCpuPerJobLimit", "AssocMaxWallDurationPerJobLimit", "DependencyNeverSatisfied"}  # fmt: skip


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


@contextlib.contextmanager
def _processes_end_with_mathmix() -> Iterator[None]:
    """Around a LocalPipelineExecutor's run: every process its pool starts dies with its parent, up to this one
    (`curate.proc_guard`), and pool workers leave Ctrl-C to this process, which ends them. Child processes the run
    leaves (a Manager whose start Ctrl-C interrupted: datatrove never shuts it down, and the exit of `mathmix`
    waited on it for ever after printing 'interrupted') are ended when it returns or raises.

    Through stdlib hooks, not a datatrove subclass: datatrove starts its Manager process and its pool inside
    `run()` with no initializer to pass, so its Manager is reached by a fork hook (`os.register_at_fork`) and its
    pool workers by the forkserver's preload (`set_forkserver_preload`).
    """
    import multiprocess

    from curate.proc_guard import forks_die_with_parent, use_guarded_forkserver

    use_guarded_forkserver()
    before = set(multiprocess.active_children())
    try:
        with forks_die_with_parent(), _ctrl_c_kept_across_forks():
            yield
    finally:
        left = [child for child in multiprocess.active_children() if child not in before]
        for child in left:
            child.terminate()
        for child in left:
            child.join(5)
            if child.is_alive():
                child.kill()
                child.join(5)


@contextlib.contextmanager
def _ctrl_c_kept_across_forks() -> Iterator[None]:
    """Within: a Ctrl-C that lands while this process forks (datatrove's Manager process) stops the run.

    Python runs its at-fork hooks (logging's, loguru's, filelock's: Python functions) before and after the fork,
    and an exception raised in one is printed as 'Exception ignored in: ...' and dropped. A SIGINT that arrived
    during the fork (a few ms) raised its KeyboardInterrupt in one of them, and the run went on: 7 of 240 Ctrl-Cs
    sent in the first 0.3 s of a local stage with 2 workers, 54 of 240 sent 20-100 ms in. It also cut those hooks
    short (loguru's locks released unacquired; in the child, `curate.proc_guard`'s die_with_parent).

    Here `os.fork` in the main thread runs with a SIGINT handler that only notes the signal (blocking SIGINT in
    this thread would not do: the kernel hands it to another thread, and Python still runs the handler in the
    main thread, in a hook). Once the hooks are done the handler before it is restored and called for a signal it
    noted (KeyboardInterrupt), after ending the child the fork made (no Process object holds it: its start was cut
    short). A SIGINT ignored or left to C (SIG_IGN, SIG_DFL) is left alone, and so are forks from other threads
    (only the main thread may set handlers). In the child the handler is restored and a Ctrl-C noted there is
    dropped: the parent got it too, and ends it. SIGTERM alike where a Python handler is set for it
    (`mathmix.signals.sigterm_as_ctrl_c` raises KeyboardInterrupt on it, and lost it the same way).
    """
    import os
    import signal
    import threading

    real_fork = os.fork

    def fork() -> int:
        if threading.current_thread() is not threading.main_thread():
            return real_fork()
        # SIGINT, and SIGTERM where `sigterm_as_ctrl_c` made it raise too: Python-level handlers only
        previous = {
            sig: handler
            for sig in (signal.SIGINT, signal.SIGTERM)
            if callable(handler := signal.getsignal(sig))
        }
        if not previous:
            return real_fork()
        noted: list[tuple[Any, Any]] = []

        def restore_and_deliver() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if noted:
                signum, frame = noted[0]
                previous[signum](signum, frame)  # the default SIGINT handler raises KeyboardInterrupt

        for sig in previous:
            signal.signal(sig, lambda signum, frame: noted.append((signum, frame)))
        try:
            pid = None if noted else real_fork()
        except BaseException:
            restore_and_deliver()
            raise
        if pid == 0:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            return 0
        try:
            restore_and_deliver()
        except BaseException:
            if pid:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            raise
        if pid is None:  # noted before the fork, and the handler let it go: fork now
            return fork()
        return pid

    os.fork = fork
    try:
        yield
    finally:
        os.fork = real_fork


SUBMITTED_FILE = (
    "mathmix-submitted.json"  # {job_name, ranks}: Slurm tasks submitted and not yet seen finished
)


def live_submissions(out_dir: Path) -> list[str]:
    """Names of the Slurm jobs submitted for a stage folder (its executors' SUBMITTED_FILE markers) that are still in
    the queue. A queue that cannot be read counts none: the executor says so itself before it submits."""
    names = []
    for marker in sorted(Path(out_dir).glob(f"**/{SUBMITTED_FILE}")):
        try:
            name = json.loads(marker.read_text())["job_name"]
            if slurm_jobs(name):
                names.append(name)
        except (OSError, ValueError, KeyError, TypeError, SlurmQueueError):
            continue
    return names


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
    """squeue did not answer (absent, or it failed: a busy slurmctld times out): the queue is unknown, not empty."""


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
        raise SlurmQueueError("squeue: command not found (Slurm's client tools are not on PATH)") from None
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


def start_ray(config: ExecutorConfig) -> None:
    """Connect to (or start) Ray, failing in seconds where it would hang: an address that does not answer, or
    tasks asking for more CPUs or memory than any node has (Ray waits for such a node forever)."""
    try:
        import ray
    except ImportError:
        raise ValueError("executor.kind ray needs Ray: pip install 'mathmix[ray]'") from None
    if not ray.is_initialized():
        address = config.ray_address
        if address and address != "auto" and ":" in address and not address.startswith("ray://"):
            import socket

            host, _, port = address.rpartition(":")
            try:
                conn = socket.create_connection((host, int(port)), timeout=5)
            except (OSError, ValueError):
                raise ValueError(f"executor.ray_address {address}: nothing answers there") from None
            with conn:
                if not _speaks_grpc(conn):  # ray.init would retry against it without end
                    raise ValueError(
                        f"executor.ray_address {address}: something answers there, but not a Ray cluster (no gRPC: "
                        "give the head's GCS address, by default HOST:6379)"
                    )
        try:
            ray.init(address=address, ignore_reinit_error=True)
        except (ConnectionError, RuntimeError) as err:  # a dead head, an auth token missing: one line, not 40
            raise ValueError(
                f"executor.ray_address {address or '(local)'}: Ray did not connect: {first_line(err)}"
            ) from None
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    need_mem = config.cpus_per_task * config.mem_per_cpu_gb * 2**30
    if nodes and not any(
        r.get("CPU", 0) >= config.cpus_per_task and r.get("memory", 0) >= need_mem for r in nodes
    ):
        biggest = max(nodes, key=lambda r: r.get("CPU", 0))
        raise ValueError(
            f"no Ray node can run a task of cpus_per_task={config.cpus_per_task} and "
            f"{config.cpus_per_task * config.mem_per_cpu_gb:g} GB (largest: {biggest.get('CPU', 0):g} CPUs, "
            f"{biggest.get('memory', 0) / 2**30:.1f} GB)"
        )


def _speaks_grpc(conn: Any, timeout: float = 5.0) -> bool:
    """Whether the peer answers the HTTP/2 connection preface with a SETTINGS frame, as Ray's GCS (gRPC) does.

    Only the TCP port used to be checked, and `ray.init` against another service (slurmctld's port, a web server)
    hung for minutes retrying its GCS connection.
    """
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # + empty SETTINGS
    conn.settimeout(timeout)
    try:
        conn.sendall(preface)
        header = b""
        while len(header) < 9:
            chunk = conn.recv(9 - len(header))
            if not chunk:
                return False
            header += chunk
    except OSError:
        return False
    return header[3] == 4  # frame type 4: SETTINGS

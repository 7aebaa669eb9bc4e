"""The quickstart's curation stages on a real single-node Slurm and a local Ray cluster give the local run's output.

Slurm is started by scripts/slurm-up.sh (Debian's slurm-wlm + munge, daemons started by hand); the tests skip with
the reason where it cannot be installed or started (not root, no apt). Ray needs the `ray` extra.
"""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines.recipe import load_recipe
from pipelines.runner import run_recipe
from pipelines.sample import write_sample

REPO = Path(__file__).resolve().parents[2]
CURATION = """
stages:
  web: {inputs: ["{run_dir}/sample/pages.warc.gz"]}
  dedup: {}
  decont: {benchmarks: ["{run_dir}/sample/bench"]}
"""


def _run(tmp: Path, name: str, executor: str) -> Path:
    run_dir = tmp / name
    shutil.copytree(tmp / "sample", run_dir / "sample")
    recipe_file = tmp / f"{name}.yaml"
    recipe_file.write_text(f"name: {name}\noutput_dir: {run_dir}\nexecutor: {executor}\n{CURATION}")
    run_recipe(load_recipe(recipe_file))
    return run_dir


def _docs(run_dir: Path, stage: str) -> list[tuple[str, str]]:
    data = run_dir / stage / "data"
    if not data.exists() or not any(data.glob("*.parquet")):
        return []
    table = pq.read_table(data, columns=["id", "text"]).to_pylist()
    return sorted((r["id"], r["text"]) for r in table)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cluster")
    write_sample(tmp / "sample")
    return tmp, _run(tmp, "local", "{kind: local, tasks: 2, workers: 2}")


def _assert_same(run_dir: Path, local_dir: Path) -> None:
    for stage in ("web", "dedup", "decont"):
        expected = _docs(local_dir, stage)
        assert expected, f"the local run produced no {stage} output"
        got = _docs(run_dir, stage)
        assert len({i for i, _ in got}) == len(got), f"{stage}: a document twice"
        assert got == expected, f"{stage}: output differs from the local run"


@pytest.fixture(scope="module")
def slurm():
    if os.geteuid() != 0:
        pytest.skip("starting Slurm needs root (apt-get install and daemons)")
    if shutil.which("apt-get") is None and shutil.which("slurmctld") is None:
        pytest.skip("no apt-get and no slurmctld: Slurm cannot be installed here")
    proc = subprocess.run(["bash", str(REPO / "scripts" / "slurm-up.sh")], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"Slurm could not be started here: {proc.stderr.strip()[-300:]}")


def test_slurm_run_equals_local_run(local_run, slurm):
    tmp, local_dir = local_run
    run_dir = _run(
        tmp, "slurm", "{kind: slurm, partition: debug, tasks: 2, cpus_per_task: 1, mem_per_cpu_gb: 2}"
    )
    assert list((run_dir / "web" / "logs").glob("launch_script.slurm")), (
        "the web stage did not go through sbatch"
    )
    _assert_same(run_dir, local_dir)


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'mathmix[ray]')")
    ray_bin = Path(ray.__file__).parents[3].parent / "bin" / "ray"
    ray_cmd = str(ray_bin) if ray_bin.exists() else shutil.which("ray")
    if ray_cmd is None:
        pytest.skip("the ray command is not on PATH")
    subprocess.run([ray_cmd, "stop", "--force"], capture_output=True)
    started = subprocess.run(
        [ray_cmd, "start", "--head", "--num-cpus", "2", "--include-dashboard=false", "--disable-usage-stats"],
        capture_output=True,
        text=True,
    )
    if started.returncode != 0:
        pytest.skip(f"ray start --head failed: {started.stderr[-300:]}")
    os.environ["RAY_ADDRESS"] = "auto"
    yield
    os.environ.pop("RAY_ADDRESS", None)
    if ray.is_initialized():
        ray.shutdown()
    subprocess.run([ray_cmd, "stop", "--force"], capture_output=True)


def test_ray_run_equals_local_run(local_run, ray_cluster):
    tmp, local_dir = local_run
    run_dir = _run(tmp, "ray", "{kind: ray, tasks: 2, workers: 2, cpus_per_task: 1, mem_per_cpu_gb: 1}")
    _assert_same(run_dir, local_dir)


def test_slurm_memory_is_asked_in_megabytes_not_truncated_gigabytes():
    from pipelines.executors import ExecutorConfig

    for gb, asked in ((0.5, "512M"), (1.5, "1536M"), (2, "2048M")):
        config = ExecutorConfig(kind="slurm", partition="debug", mem_per_cpu_gb=gb)
        executor = config.build([], "/tmp/unused-logs", tasks=1)
        assert executor.get_sbatch_args()["mem-per-cpu"] == asked  # int(0.5) asked for 0G


def _recipe(tmp: Path, name: str, executor: str) -> Path:
    run_dir = tmp / name
    shutil.copytree(tmp / "sample", run_dir / "sample")
    recipe_file = tmp / f"{name}.yaml"
    recipe_file.write_text(f"name: {name}\noutput_dir: {run_dir}\nexecutor: {executor}\n{CURATION}")
    return recipe_file


def test_slurm_without_waiting_stops_after_the_stage_and_reruns_go_on(local_run, slurm):
    import time

    tmp, local_dir = local_run
    recipe = _recipe(
        tmp, "nowait", "{kind: slurm, partition: debug, tasks: 2, mem_per_cpu_gb: 1, wait: false}"
    )
    run_dir = tmp / "nowait"
    assert run_recipe(load_recipe(recipe)) == {}  # submitted: no stage has a result yet
    assert not (run_dir / "web" / "summary.json").exists()
    # the next stage must not start on a half-written web/ (it did, and kept 0 documents)
    deadline, summaries = time.monotonic() + 900, {}  # a loaded machine runs the jobs slowly
    try:
        while "decont" not in summaries and time.monotonic() < deadline:
            # as a user would: rerun now and then; a failed task raises StageFailed with its log
            time.sleep(3)
            summaries = run_recipe(load_recipe(recipe))
        state = _slurm_state()
    finally:  # jobs left queued would fail the next test's empty-queue check
        subprocess.run(["scancel", "-u", getpass.getuser()], check=False)
    assert "decont" in summaries, f"the submitted stages did not finish within 15 minutes\n{state}"
    _assert_same(run_dir, local_dir)


def _queue() -> str:
    return subprocess.run(
        ["squeue", "-h", "-o", "%i %j %T %r"], capture_output=True, text=True
    ).stdout.strip()


def _slurm_state() -> str:
    """The queue with pending reasons and the node's state and reason: what a hang in CI needs to be read."""
    node = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N %T %E"], capture_output=True, text=True
    ).stdout.strip()
    return f"queue (id name state reason):\n{_queue() or '(empty)'}\nnode (name state reason): {node}"


def test_slurm_without_waiting_a_failed_task_is_reported_then_resubmitted(local_run, slurm):
    """A failed array task leaves datatrove's stats job pending forever (DependencyNeverSatisfied): a rerun used to
    say "still in the Slurm queue, rerun once they have finished" for ever. It must name the failed task, clear the
    queue, and the next rerun must submit the task again."""
    import time

    from pipelines.runner import StageFailed

    tmp, _ = local_run
    activate = Path(sys.prefix) / "bin" / "activate"
    if sys.prefix == sys.base_prefix or not activate.is_file():
        pytest.skip(
            "the tests do not run in a virtual environment: the Slurm job has no activate script to wrap"
        )
    marker, flaky = tmp / "failed-once", tmp / "flaky-activate"
    flaky.write_text(
        f'if [ ! -e {marker} ]; then touch {marker}; echo "first try fails on purpose" >&2; exit 3; fi\n'
        f"source {activate}\n"
    )
    run_dir = tmp / "nowaitfail"
    shutil.copytree(tmp / "sample", run_dir / "sample")
    recipe = tmp / "nowaitfail.yaml"
    recipe.write_text(
        f"name: nowaitfail\noutput_dir: {run_dir}\nexecutor: {{kind: slurm, partition: debug, tasks: 1, "
        f"mem_per_cpu_gb: 1, wait: false, venv_path: {flaky}}}\n"
        'stages:\n  web: {inputs: ["{run_dir}/sample/pages.warc.gz"]}\n'
    )
    try:
        assert run_recipe(load_recipe(recipe)) == {}
        deadline, failure = time.monotonic() + 600, None
        while failure is None and time.monotonic() < deadline:
            time.sleep(2)
            try:
                assert run_recipe(load_recipe(recipe)) == {}, "the failed task was taken as done"
            except StageFailed as err:
                failure = str(err)
        assert failure is not None, f"a rerun never reported the failed task\n{_slurm_state()}"
        assert "1 of 1 tasks submitted earlier did not complete" in failure and "slurm_logs" in failure, (
            failure
        )
        assert "first try fails on purpose" in failure, "the failed task's log is not quoted"
        assert not _queue(), "the stats job that can never start was left in the queue"
        summaries: dict = {}
        assert run_recipe(load_recipe(recipe)) == {}, "the rerun did not submit the failed task again"
        while "web" not in summaries and time.monotonic() < deadline:
            time.sleep(2)
            summaries = run_recipe(load_recipe(recipe))
        assert "web" in summaries, f"the resubmitted task did not finish\n{_slurm_state()}"
        assert summaries["web"]["docs_out"] > 0
    finally:
        subprocess.run(["scancel", "-u", getpass.getuser()], check=False)


def test_slurm_queued_jobs_count_as_work_and_a_waiting_rerun_waits_for_them(local_run, slurm):
    """A recipe edited while its jobs were queued used to be taken as a new job (the stage then kept the old jobs'
    output under the new settings); a `wait: true` rerun after a kill used to exit 0 with nothing finished."""
    import time

    from pipelines.runner import StageFailed

    tmp, _ = local_run
    run_dir = tmp / "queued"
    shutil.copytree(tmp / "sample", run_dir / "sample")
    recipe = tmp / "queued.yaml"

    def write(wait: str, web: str = "") -> None:
        recipe.write_text(
            f"name: queued\noutput_dir: {run_dir}\nexecutor: {{kind: slurm, partition: debug, tasks: 1, "
            f"mem_per_cpu_gb: 1, wait: {wait}}}\n"
            f'stages:\n  web: {{inputs: ["{{run_dir}}/sample/pages.warc.gz"]{web}}}\n'
        )

    cpus = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    blocker = subprocess.run(  # holds every CPU of the node: the stage's job stays pending behind it
        ["sbatch", "-p", "debug", "-c", cpus, "--mem=100M", "-o", "/dev/null", "--wrap", "sleep 25"],
        capture_output=True,
        text=True,
    )
    assert blocker.returncode == 0, blocker.stderr
    try:
        write("false")
        assert run_recipe(load_recipe(recipe)) == {}
        write("false", ", min_words: 200")
        with pytest.raises(StageFailed, match=r"still queued .*min_words.*scancel --name mathmix-web-"):
            run_recipe(load_recipe(recipe))
        write("true")
        start = time.monotonic()
        summaries = run_recipe(
            load_recipe(recipe)
        )  # waits for the queued jobs, then gives the stage's result
        assert "web" in summaries and summaries["web"]["docs_out"] > 0, f"no result\n{_slurm_state()}"
        assert time.monotonic() - start < 600
        assert not _queue()
    finally:
        subprocess.run(["scancel", "-u", getpass.getuser()], check=False)


def test_slurm_refusal_says_why(local_run, slurm):
    from pipelines.runner import StageFailed

    tmp, _ = local_run
    recipe = _recipe(tmp, "badpart", "{kind: slurm, partition: nosuchpartition, tasks: 1}")
    # datatrove runs sbatch without capturing stderr: the line used to be "sbatch refused the job (exit 1)"
    with pytest.raises(StageFailed, match=r"sbatch refused the job \(exit 1\): .*[Ii]nvalid partition"):
        run_recipe(load_recipe(recipe))


def test_slurm_jobs_that_can_never_start_fail_the_stage(local_run, slurm):
    from pipelines.runner import StageFailed

    tmp, _ = local_run
    recipe = _recipe(tmp, "toobig", "{kind: slurm, partition: debug, tasks: 1, cpus_per_task: 512}")
    with pytest.raises(StageFailed, match="stage web: .*(never start|sbatch refused)"):
        run_recipe(load_recipe(recipe))
    assert not subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout.strip()


def test_ray_asks_are_checked_against_the_cluster(local_run, ray_cluster):
    from pipelines.runner import StageFailed

    tmp, _ = local_run
    with pytest.raises(StageFailed, match="no Ray node can run a task of cpus_per_task=64"):
        run_recipe(load_recipe(_recipe(tmp, "raybig", "{kind: ray, tasks: 1, cpus_per_task: 64}")))


def test_an_unreachable_ray_address_fails_at_once(tmp_path):
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'mathmix[ray]')")
    import time

    from pipelines.executors import ExecutorConfig, start_ray

    if ray.is_initialized():  # connected by an earlier test
        ray.shutdown()
    start = time.time()
    with pytest.raises(ValueError, match="127.0.0.1:1: nothing answers there"):
        start_ray(ExecutorConfig(kind="ray", ray_address="127.0.0.1:1"))
    assert time.time() - start < 30

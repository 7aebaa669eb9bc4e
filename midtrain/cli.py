"""`mathmix train`: run a train recipe (stable + decay stages), export checkpoints, plot curves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from mathmix.cli_util import DefaultCommandGroup, console, fail, print_summary, write_json

STOP_GRACE_S = 120  # torchrun's default, 30 s, is short for saving a large model's checkpoint

train_app = typer.Typer(
    cls=DefaultCommandGroup,
    help="Mid-train a causal LM on shards: warmup -> stable -> decay branches (WSD); export to Hugging Face.",
    no_args_is_help=True,
)


@train_app.command("run")
def run_cmd(
    recipe: Annotated[Path, typer.Argument(help="train recipe YAML (model, trainer, stages)")],
    stage: Annotated[list[str] | None, typer.Option("--stage", "-s", help="run only these stages")] = None,
    nproc: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="processes: >1 relaunches itself under torchrun (default 1; with --emit megatron: GPUs per "
            "node in the command, default 8)",
        ),
    ] = None,
    emit: Annotated[str | None, typer.Option(help="print an equivalent command instead: 'megatron'")] = None,
    output_dir: Annotated[Path | None, typer.Option("-o", help="override the recipe's output_dir")] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="no progress bar")] = False,
) -> None:
    """Train every stage of RECIPE in order, resuming from each stage's latest checkpoint.

    Reads the recipe and the shard mixtures it names. Writes OUTPUT_DIR/STAGE/{metrics.jsonl,
    checkpoints/step_N/, done.json, job.json, blend_index/}. Launch with `torchrun --nproc_per_node N -m midtrain train RECIPE` (or
    `--nproc N`) for several processes; `--emit megatron` prints the Megatron-LM pretrain_gpt.py commands.
    """
    from midtrain.config import TrainRecipeError, load_train_recipe

    overrides = {"output_dir": str(output_dir)} if output_dir else None
    try:
        config = load_train_recipe(recipe, overrides)
    except TrainRecipeError as err:
        fail(str(err))
    if emit is not None:
        if emit != "megatron":
            fail(f"--emit {emit!r}: only 'megatron' is known")
        from midtrain.megatron import emit as emit_megatron
        from midtrain.preflight import select_stages

        try:
            select_stages(config, stage or None)
            typer.echo(emit_megatron(config, stage or None, nproc=nproc or 8))
        except (FileNotFoundError, ValueError) as err:  # TrainRecipeError, or an unknown model_type
            fail(str(err))
        return
    from midtrain.preflight import check_run
    from midtrain.trainer import train_recipe

    nproc = nproc or 1
    if nproc > 1 and "WORLD_SIZE" not in os.environ:
        try:  # here once, rather than as one error per process under torchrun
            check_run(config, stage or None, world_size=nproc, notes=False)  # rank 0 prints the notes
        except TrainRecipeError as err:
            fail(str(err))
        args = [sys.executable, "-m", "midtrain.torchrun", "--standalone", f"--nproc_per_node={nproc}"]
        # the grace torchrun gives its workers after forwarding SIGTERM, before SIGKILL: time to checkpoint
        args += [f"--shutdown-timeout={os.environ.get('TORCH_ELASTIC_SHUTDOWN_TIMEOUT', STOP_GRACE_S)}"]
        # SIGUSR1 too (Slurm's --signal=USR1@N, or a kill of the launcher's process group): by default it killed
        # torchrun, and its workers trained on, orphaned, to the end of the recipe
        args += ["--signals-to-handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"]
        args += ["-m", "midtrain", "train", str(recipe)] + sum((["--stage", s] for s in stage or []), [])
        args += ["-o", str(output_dir)] if output_dir else []
        args += ["--no-progress"] if no_progress else []
        raise typer.Exit(_launch(args))

    from mathmix.signals import exit_stopped
    from midtrain.stop import TrainingStopped

    try:
        summaries = train_recipe(config, stage or None, progress=not no_progress)
    except TrainingStopped as stopped:  # SIGTERM/SIGUSR1 (preemption): checkpointed; exit as the signal would
        _shutdown()
        exit_stopped(stopped, show=int(os.environ.get("RANK", "0")) == 0)
    except TrainRecipeError as err:
        fail(str(err))
    if int(os.environ.get("RANK", "0")) == 0:
        for name, summary in summaries.items():
            print_summary(summary, title=f"train {name}")
    _shutdown()


def _launch(args: list[str]) -> int:
    """Run torchrun and return its exit code; it dies with this process, and Ctrl-C reaches it.

    Killed with SIGKILL, this process cannot stop its child: on Linux the kernel sends torchrun SIGTERM when its
    parent dies (PR_SET_PDEATHSIG), and torchrun forwards it to its workers, so no run outlives its launcher.
    SIGTERM or SIGUSR1 here (a preemption) is passed on as SIGTERM, which torchrun forwards and the workers answer
    by checkpointing their step (midtrain.stop); this process waits for them and exits 128 + the signal.
    """
    preexec = None
    if sys.platform.startswith("linux"):
        import ctypes

        # resolved before the fork: the child only calls it
        prctl, parent, sigterm = ctypes.CDLL(None, use_errno=True).prctl, os.getpid(), int(signal.SIGTERM)

        def die_with_parent() -> None:
            prctl(1, sigterm)  # PR_SET_PDEATHSIG
            if os.getppid() != parent:  # the launcher died before prctl: nobody would signal us
                os.kill(os.getpid(), sigterm)

        preexec = die_with_parent
    proc = subprocess.Popen(args, preexec_fn=preexec)
    received: list[int] = []

    def pass_on(signum: int, frame) -> None:
        if not received:  # torchrun stops its workers on the first; a repeat would cut their grace short
            proc.send_signal(signal.SIGTERM)
        received.append(signum)

    previous = {sig: signal.signal(sig, pass_on) for sig in (signal.SIGTERM, signal.SIGUSR1)}
    try:
        code = proc.wait()
    except KeyboardInterrupt:  # a terminal's Ctrl-C reached torchrun too; kill -INT reached only this process
        proc.send_signal(signal.SIGINT)
        proc.wait()  # torchrun stops its workers; a second Ctrl-C leaves, and PDEATHSIG ends it
        return 128 + signal.SIGINT
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        return 128 + received[0]
    return code if code >= 0 else 128 - code


def _shutdown() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


@train_app.command("export")
def export_cmd(
    checkpoint: Annotated[
        Path, typer.Argument(help="checkpoint folder step_N/, or a stage folder (its latest)")
    ],
    out: Annotated[Path, typer.Option("-o", "--out", help="output Hugging Face model folder")],
    tokenizer: Annotated[
        str | None, typer.Option(help="tokenizer.json or HF folder (default: the run's)")
    ] = None,
    dtype: Annotated[
        str,
        typer.Option(
            help="bfloat16 | float32 | float16. The default, bfloat16, rounds the fp32 trained weights (what is "
            "usually published and served); float32 keeps them, and so the trained logits, exactly"
        ),
    ] = "bfloat16",
) -> None:
    """Export a training checkpoint as a Hugging Face model folder.

    Reads CHECKPOINT (DCP shards, config.json, trainer_state.json). Writes OUT/{config.json,
    model.safetensors, generation_config.json, tokenizer files, export.json}.

    The default --dtype bfloat16 rounds the fp32 trained weights to bf16 (the logits move slightly);
    --dtype float32 gives the trained logits exactly.
    """
    from midtrain.export import EXPORT_FILE, check_export_dir, export_checkpoint, resolve_checkpoint

    if dtype not in ("bfloat16", "float32", "float16"):
        fail(f"--dtype {dtype!r}: use bfloat16, float32 or float16")
    try:
        replace = check_export_dir(out, resolve_checkpoint(checkpoint))
        info = export_checkpoint(checkpoint, out, tokenizer=tokenizer, dtype=dtype, replace=replace)
    except (OSError, ValueError) as err:
        fail(str(err))
    write_json(out / EXPORT_FILE, info)
    print_summary({k: v for k, v in info.items() if k not in ("files", "warning")}, title="export")
    if info.get("warning"):
        console.print(f"[yellow]warning:[/] {escape(info['warning'])}", soft_wrap=True)


@train_app.command("plot")
def plot_cmd(
    run: Annotated[Path, typer.Argument(help="a train output folder (all stages) or one stage folder")],
    out: Annotated[Path | None, typer.Option("-o", help="PNG path (default RUN/curves.png)")] = None,
) -> None:
    """Plot loss and learning rate against tokens for every stage.

    Reads RUN/*/metrics.jsonl (or RUN/metrics.jsonl). Writes a PNG (default RUN/curves.png).
    """
    from midtrain.metrics import plot_run

    try:
        path = plot_run(run, out or run / "curves.png")
    except FileNotFoundError as err:
        fail(str(err))
    console.print(f"wrote {path}")


def register(app: typer.Typer) -> None:
    app.add_typer(train_app, name="train")

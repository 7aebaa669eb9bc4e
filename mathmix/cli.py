"""The `mathmix` command line: one root app; each package registers its own subcommand group.

Each package's CLI module exposes `register(app)`. Heavy imports (torch, datatrove, transformers) happen inside
the commands, so `mathmix --help` stays fast.
"""

from __future__ import annotations

import importlib
import os

# A failed datatrove task logs its exception through loguru, which by default prints every frame with the values of
# its variables (190 lines for one missing folder, document text included): plain tracebacks on stderr and in the
# task logs instead. Set either variable to override. Set before anything imports loguru.
os.environ.setdefault("LOGURU_DIAGNOSE", "NO")
os.environ.setdefault("LOGURU_BACKTRACE", "NO")

import typer  # noqa: E402

# Modules that add subcommands, in the order they appear in --help.
COMMAND_MODULES = [
    "pipelines.run_cli",  # run, quickstart
    "pipelines.web_cli",  # web, web extract
    "classifiers.cli",  # classifier train|eval|recall|score
    "pipelines.dedup_cli",  # dedup, decont
    "pipelines.rewrite_cli",  # rewrite
    "shards.cli",  # shards build|train-tokenizer|inspect|validate|mix
    "midtrain.cli",  # train, train export|plot
    "evals.cli",  # eval bench|rl-probe|forecast|compare|sweep|sweep-fit
    "curate.audit_cli",  # audit sql|schema|report|sample
]

# Commands that answer SIGTERM themselves: they checkpoint the step in flight and exit 128 + the signal
# (mathmix.signals.StopOnSignal). Every other command takes SIGTERM as Ctrl-C (`_sigterm_as_ctrl_c`).
STOP_ON_SIGNAL = {("train", "run"), ("eval", "rl-probe")}

app = typer.Typer(
    name="mathmix",
    help="Math mid-training data pipeline: web crawl -> math corpus -> LLM branches -> Megatron shards -> "
    "WSD mid-training -> RL-readiness evals.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _one_line_usage_error(err) -> None:
    """A bad command line as one line, as mathmix's own checks write theirs (typer's is a usage line, a hint and a
    boxed message): `error: Invalid value for '--workers': ... (see 'mathmix web run --help')`."""
    if err.__class__.__name__ == "NoArgsIsHelpError":  # the help was printed already (typer skips these too)
        return
    import sys

    ctx = getattr(err, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    message = " ".join(err.format_message().split())
    sys.stderr.write(f"error: {message}{hint}\n")


def _plain_usage_errors() -> None:
    """Route typer's usage errors (bad option values, unknown options, missing arguments) to one line; exit 2 stays."""
    from typer import rich_utils

    rich_utils.rich_format_error = _one_line_usage_error  # type: ignore[assignment]  # looked up at each error


@app.callback()
def _each_command() -> None:
    from mathmix.cli_util import forget_created_outputs

    forget_created_outputs()  # a command refused later removes only the empty folders it made itself


def _register_all() -> None:
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            # A package whose CLI is not there (yet) simply adds no commands; any other import error is a bug.
            if err.name == name:
                continue
            raise
        module.register(app)


def _sigterm_as_ctrl_c(group: typer.Typer, path: tuple[str, ...] = ()) -> None:
    """Make every command of `group` but those in STOP_ON_SIGNAL take SIGTERM as Ctrl-C: it stops at once, its
    datatrove pool and inference server are ended, finished work is kept, exit 130. With a plain SIGTERM (a
    scheduler's, `kill`, `timeout`) `mathmix web`, `dedup`, `rewrite`... died with nothing ending what they had
    started. All of them rather than a list of long-running ones, so that a new command cannot be left out."""
    from typer.main import get_command_name

    from mathmix.signals import ctrl_c_on_sigterm

    for command in group.registered_commands:
        if command.callback is None:
            continue
        name = command.name or get_command_name(command.callback.__name__)
        if (*path, name) not in STOP_ON_SIGNAL:
            command.callback = ctrl_c_on_sigterm(command.callback)
    for sub in group.registered_groups:
        if sub.typer_instance is not None and sub.name is not None:
            _sigterm_as_ctrl_c(sub.typer_instance, (*path, sub.name))


_register_all()
_sigterm_as_ctrl_c(app)
_plain_usage_errors()


def main() -> None:
    try:
        app()
    except SystemExit as done:  # typer turns Ctrl-C into exit 130, silently
        if done.code == 130:
            from mathmix.cli_util import console, interrupt_note
            from mathmix.signals import exit_now_if_held

            console.print(interrupt_note())
            exit_now_if_held(130)
        raise

"""Checks of a rewrite job run before anything is read or written: each a one-line ValueError naming the fix."""

from __future__ import annotations

import importlib.util

# The server kinds that datatrove starts from an optional package, and mathmix's extra that installs it.
SERVER_PACKAGES = {"vllm": ("vllm", "gpu"), "sglang": ("sglang", "sglang")}


def check_server_package(server: str) -> None:
    """ValueError when SERVER needs a package that is not installed (datatrove found out inside the job, with a
    traceback, after OUT held a job.json and logs, and the message said to rerun)."""
    if server not in SERVER_PACKAGES:
        return
    package, extra = SERVER_PACKAGES[server]
    if importlib.util.find_spec(package) is None:
        raise ValueError(
            f"server '{server}' needs the {package} package, which is not installed here: "
            f"pip install 'mathmix[{extra}]' (on the machine that starts the job)"
        )

"""The audit commands on an app of their own, for CliRunner (the fixtures are in conftest.py)."""

from __future__ import annotations

import typer

from curate.audit_cli import register


def audit_cli() -> typer.Typer:
    """The audit commands on an app of their own, for CliRunner."""
    app = typer.Typer()
    register(app)
    return app

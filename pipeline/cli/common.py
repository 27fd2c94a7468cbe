"""Helpers every CLI command shares: error handling, the workspace, JSON output."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any

import click

from pipeline.core.errors import TelemetryBenchError, UnknownCorpusError, disk_full
from pipeline.core.workspace import Workspace


def handle_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Project errors become one line on stderr and exit status 1; --debug shows the traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        try:
            return func(*args, **kwargs)
        except TelemetryBenchError as exc:
            if ctx.find_root().params.get("debug"):
                raise
            message = exc.for_command("release" in ctx.params) if isinstance(exc, UnknownCorpusError) else exc
            click.echo(f"error: {message}", err=True)
            sys.exit(1)
        except Exception as exc:  # a full disk met by a writer that knew no path to name: still one line
            full = disk_full(exc, getattr(exc, "filename", None) or "a file being written")
            if full is None or ctx.find_root().params.get("debug"):
                raise
            click.echo(f"error: {full}", err=True)
            sys.exit(1)

    return wrapper


def workspace(ctx: click.Context) -> Workspace:
    params = ctx.find_root().params
    return Workspace.from_root(params.get("root"), params.get("artifacts"))


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False))

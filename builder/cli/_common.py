"""Shared Click plumbing: the application context, shared options, output helpers.

Human output goes to stderr (rich); ``--json`` prints exactly one JSON document on stdout.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from rich.console import Console

    from builder.config import Config

F = TypeVar("F", bound=Callable[..., Any])


@dataclasses.dataclass
class AppContext:
    """Per-invocation state: output mode and the (lazily loaded) configuration."""

    json_output: bool = False
    debug: bool = False
    root_option: str | None = None
    _config: Config | None = None

    @property
    def config(self) -> Config:
        if self._config is None:
            from builder.config import find_root, load_config

            root = Path(self.root_option) if self.root_option else find_root(Path.cwd())
            self._config = load_config(root, os.environ)
        return self._config


def app_context() -> AppContext:
    ctx = click.get_current_context()
    obj = ctx.find_object(AppContext)
    if obj is None:  # a command invoked outside the root group (tests)
        obj = AppContext()
        ctx.obj = obj
    return obj


def json_option(f: F) -> F:
    """``--json`` on a command: same as the global ``builder --json``."""

    def callback(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            obj = ctx.find_object(AppContext)
            if obj is None:
                ctx.obj = obj = AppContext()
            obj.json_output = True

    return click.option(
        "--json",
        "json_flag",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=callback,
        help="Print one JSON document on stdout (for CI).",
    )(f)


@functools.cache
def console() -> Console:
    """The rich console for human output (stderr)."""
    import shutil

    from rich.console import Console

    con = Console(stderr=True, highlight=False, soft_wrap=False)
    if not con.is_terminal:  # CI logs and pipes: wide enough for digests and tables
        con.width = max(shutil.get_terminal_size((160, 24)).columns, 160)
    return con


def emit(payload: Any, human: Callable[[], None] | str | None = None) -> None:
    """Print the command's result: JSON on stdout with ``--json``; else ``human`` on stderr."""
    app = app_context()
    if app.json_output:
        sys.stdout.write(json.dumps(payload, indent=2, default=_default) + "\n")
        return
    if callable(human):
        human()
    elif human is not None:
        console().print(human)


def _default(o: Any) -> Any:
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return dataclasses.asdict(o)
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return str(o)


def echo_command(argv: list[str]) -> None:
    """Echo an external command before it runs (house style: every external command is shown)."""
    import shlex

    from rich.markup import escape

    console().print(f"[dim]+ {escape(shlex.join(argv))}[/]")

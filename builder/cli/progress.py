"""BuildKit progress during builds: the current step of each variant being built.

``--progress`` (build and run): ``tty``: a live display (rich ``Progress``), one line per variant
being built with its current ``#N [stage] step``; ``plain``: every ``PLAIN_EVERY_S`` seconds one
line per variant being built with its current step (CI logs); ``quiet``: no steps and no
per-variant event lines except failures; ``auto``: ``tty`` when stderr is a terminal, else
``plain``. The steps come from the build's ``step`` events (``builder.build.variant``: BuildKit's
plain progress lines, https://docs.docker.com/reference/cli/docker/buildx/build/#progress).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Literal

import click

if TYPE_CHECKING:
    from types import TracebackType

    from rich.console import Console
    from rich.progress import Progress, TaskID

Mode = Literal["auto", "tty", "plain", "quiet"]
MODES: tuple[Mode, ...] = ("auto", "tty", "plain", "quiet")
#: seconds between two plain progress lines of a variant being built
PLAIN_EVERY_S = 10.0
#: build events that end a variant's build
DONE = ("built", "failed", "up-to-date", "retagged")

progress_option = click.option(
    "--progress",
    "progress_mode",
    type=click.Choice(MODES),
    default="auto",
    show_default=True,
    help="Build steps while building: a live display (tty), a line every 10 s (plain), none (quiet).",
)


class BuildSteps:
    """The current step of every variant being built, shown as ``mode`` says; a context manager
    (the live display or the plain ticker runs inside it). ``event(variant, event, detail)``
    takes the build's events (``building``, ``step``, ``built``, ...); it answers whether the
    caller should still print its own line for the event (False for steps, and in quiet mode for
    everything but failures)."""

    def __init__(self, mode: Mode, console: Console, *, every_s: float = PLAIN_EVERY_S) -> None:
        if mode == "auto":
            mode = "tty" if console.is_terminal else "plain"
        self.mode = mode
        self._console = console
        self._every_s = every_s
        self._steps: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._live: Progress | None = None
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> BuildSteps:
        if self.mode == "tty":
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
            from rich.table import Column

            self._live = Progress(
                SpinnerColumn(),
                # ids never cut; steps are plain text (``[stage 2/4]`` is no markup), cut to fit in _show
                TextColumn("{task.fields[variant]}", style="cyan", markup=False, table_column=Column(no_wrap=True)),
                TimeElapsedColumn(),
                TextColumn("{task.description}", style="dim", markup=False, table_column=Column(no_wrap=True)),
                console=self._console,
                transient=True,
            )
            self._live.start()
        elif self.mode == "plain":
            self._ticker = threading.Thread(target=self._tick_forever, name="build-steps", daemon=True)
            self._ticker.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        if self._live is not None:
            self._live.stop()

    def event(self, variant: str, event: str, detail: str) -> bool:
        """Record one build event (see the class); True: the caller prints its line for it."""
        event = event.removeprefix("build:")
        with self._lock:
            if event == "step":
                self._steps[variant] = " ".join(detail.split())  # `RUN set -eux;     export` on one line
            elif event == "building":
                self._steps[variant] = "starting"
            elif event in DONE:
                self._steps.pop(variant, None)
            if self._live is not None:
                self._show(variant, event)
        if event == "step":
            return False
        return self.mode != "quiet" or event.endswith(("failed", "denied", "error"))

    @property
    def shown(self) -> list[str]:
        """The steps the live display shows now (tty mode; empty otherwise)."""
        return [t.description for t in self._live.tasks] if self._live is not None else []

    def _show(self, variant: str, event: str) -> None:
        live = self._live
        if live is None:
            return
        task = self._tasks.get(variant)
        if variant in self._steps:
            longest = max([len(variant)] + [len(v) for v in self._tasks])
            room = max(20, self._console.width - longest - 16)  # spinner, elapsed time, padding
            step = self._steps[variant]
            step = step if len(step) <= room else step[: room - 1] + "…"
            if task is None:
                self._tasks[variant] = live.add_task(step, total=None, variant=variant)
            else:
                live.update(task, description=step)
        elif task is not None and event in DONE:
            live.remove_task(self._tasks.pop(variant))

    def tick(self) -> None:
        """One plain progress line per variant being built: ``  step  VARIANT  #N [stage] step``."""
        from rich.markup import escape

        with self._lock:
            steps = sorted(self._steps.items())
        for variant, step in steps:
            self._console.print(f"[dim]{'step':>10} {escape(variant)}  {escape(step)}[/]", highlight=False)

    def _tick_forever(self) -> None:
        while not self._stop.wait(self._every_s):
            self.tick()


__all__ = ["MODES", "PLAIN_EVERY_S", "BuildSteps", "Mode", "progress_option"]

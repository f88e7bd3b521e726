"""The ``builder`` command line: a thin Click layer over the core modules.

Commands are imported lazily (only the one being run), so ``builder --help`` and
``builder --version`` stay instant and need no Docker daemon. Each command module exposes one
Click command or group; COMMANDS maps the name to ``module:attribute`` and a one-line summary.
Errors: every ``BuilderError`` is caught here (and only here) and turned into its exit code.
"""

from __future__ import annotations

import atexit
import contextlib
import gc as collector  # not `gc`: the `builder gc` command module, once loaded, is this package's `gc`
import importlib
import io
import json
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

from builder import __version__, process
from builder.cli._common import AppContext, PathParam, console, echo_external_commands, json_option, show_lock_waits
from builder.cli.terminal import HELP_MAX_WIDTH, quiet_third_parties
from builder.errors import BuilderError

#: name -> (module:attribute, one-line help). Keep alphabetical within a section.
COMMANDS: dict[str, tuple[str, str]] = {
    # matrix, knowledge, rendering
    "matrix": ("builder.cli.matrix:matrix", "List and validate the variants of the matrices."),
    "compat": ("builder.cli.compat:compat", "Can an image's CUDA run on a driver and GPU? Verdict and minimum driver."),
    "render": (
        "builder.cli.render:render",
        "Render every variant's Dockerfile (--check: fail if committed renders are stale).",
    ),
    "lock": ("builder.cli.render:lock", "Resolve each variant's Python dependencies to a hashed lock file."),
    "bases": ("builder.cli.build:bases", "Resolve base-image tags to digests and update the committed lock."),
    # build and sign
    "build": ("builder.cli.build:build", "Build and push variants under write-once content tags (skips what exists)."),
    "keys": ("builder.cli.sign:keys", "Generate or import a cosign-compatible signing key pair."),
    "sign": ("builder.cli.sign:sign", "Sign an image digest (cosign signature format)."),
    "attest": ("builder.cli.sign:attest", "Attach a signed in-toto attestation to an image digest."),
    "verify": ("builder.cli.sign:verify", "Verify an image's signatures and attestations (key or keyless)."),
    # checks
    "hostinfo": (
        "builder.cli.check:hostinfo",
        "Probe this host's GPUs, driver, toolkit and engine (or read saved output).",
    ),
    "check": ("builder.cli.check:check", "Run device checks in a fresh container, or --static compatibility checks."),
    "diagnose": ("builder.cli.check:diagnose", "Name the layer at fault for a GPU/container error message."),
    "inspect": (
        "builder.cli.inspect:inspect",
        "Read an image's GPU code (SASS/PTX/gfx) and installed GPU stack from its layers.",
    ),
    "diff": ("builder.cli.diff:diff", "Compare two images: GPU stack, minimum driver, GPU targets, packages."),
    "sbom": (
        "builder.cli.sbom:sbom",
        "CycloneDX SBOM of an image (packages, GPU libraries); --key attaches it signed.",
    ),
    # promotion
    "policy": ("builder.cli.promote:policy", "Validate promotion policies."),
    "approve": ("builder.cli.promote:approve", "Record a signed approval of a digest for a stage."),
    "promote": ("builder.cli.promote:promote", "Plan (default) or apply a promotion of digests into a stage."),
    "rollback": ("builder.cli.promote:rollback", "Point a stage back at its previous digest."),
    "status": ("builder.cli.promote:status", "Show which digest each stage holds for each variant."),
    "history": ("builder.cli.promote:history", "Show the promotion history of a variant and stage."),
    "resolve": ("builder.cli.resolve:resolve", "Print the validated repo@digest of a variant in a stage."),
    "report": (
        "builder.cli.report:report",
        "Evidence of a variant's digests per stage and its benchmark over time (sparkline, SVG chart).",
    ),
    "fleet": ("builder.cli.fleet:fleet", "Re-check the digests in every stage against the current fleet files."),
    "gc": ("builder.cli.gc:gc", "Delete old pending and content tags no stage needs (dry run by default)."),
    "ledger": ("builder.cli.ledger:ledger", "Verify the audit ledger's hash chain against the registry."),
    # whole pipeline
    "run": ("builder.cli.run:run", "Render, build, sign, check and promote: the whole pipeline."),
    "doctor": ("builder.cli.doctor:doctor", "Check that the engine, buildx, registry and cosign are reachable."),
}


class LazyGroup(click.Group):
    """A group whose sub-commands are imported only when invoked."""

    def list_commands(self, ctx: click.Context) -> list[str]:  # noqa: ARG002 - click.Group's signature
        return [name for name in COMMANDS if _available(name)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:  # noqa: ARG002 - as above
        if cmd_name not in COMMANDS or not _available(cmd_name):
            return None
        target, _ = COMMANDS[cmd_name]
        module_name, attr = target.split(":")
        cmd = getattr(importlib.import_module(module_name), attr)
        if not isinstance(cmd, click.Command):  # pragma: no cover - programming error
            raise TypeError(f"{target} is not a click command")
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _available(name: str) -> bool:
    import importlib.util

    module_name = COMMANDS[name][0].split(":")[0]
    return importlib.util.find_spec(module_name) is not None


@click.group(
    cls=LazyGroup,
    # help wrapped to the terminal (COLUMNS or its real width), at most HELP_MAX_WIDTH cells
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": HELP_MAX_WIDTH},
)
@click.version_option(__version__, "--version", prog_name="builder")
@click.option("--json", "json_output", is_flag=True, help="Print one JSON document on stdout (for CI).")
@click.option("--debug", is_flag=True, help="Show tracebacks and every external command.")
@click.option(
    "-C",
    "--root",
    type=PathParam(file_okay=False, exists=True),
    default=None,
    help="Project root holding builder.toml (default: nearest above the current directory).",
)
@click.pass_context
def cli(ctx: click.Context, json_output: bool, debug: bool, root: Path | None) -> None:
    """builder: turn a CUDA/ROCm x framework matrix into signed, tested container images
    and promote their digests through stages (dev -> staging -> prod) under policy.

    \b
    Typical flow:
      builder matrix list                 what the matrices expand to
      builder render --check              are committed Dockerfiles current?
      builder build --select 'jax*'       build and push what changed
      builder check REF                   device checks, signed as evidence
      builder promote VARIANT --to staging --confirm
      builder resolve VARIANT --stage prod
      builder run --matrix matrices/demo.yaml   all of it

    Exit codes are listed in docs/exit-codes.md.
    """
    if ctx.meta.pop(RESUME_COLLECTOR, False):  # start-up is over: the command's own work collects
        collector.freeze()
        collector.enable()
    ctx.obj = AppContext(json_output=json_output, debug=debug, root_option=None if root is None else str(root))
    ctx.call_on_close(ctx.obj.close)
    echo_external_commands(debug)
    show_lock_waits()
    quiet_third_parties(debug)


#: the environment variable of Click's shell completion (``_BUILDER_COMPLETE=bash_source builder``)
COMPLETE_VAR = "_BUILDER_COMPLETE"


#: ``ctx.meta`` key: the process paused the cyclic garbage collector for start-up (``builder.__main__``)
RESUME_COLLECTOR = "builder.resume_collector"


def main(argv: list[str] | None = None, *, resume_collector: bool = False) -> None:
    """Run the CLI, map errors to exit codes (``builder.__main__.run`` calls it for a process).

    With ``--json`` every failure, usage errors and bugs included, prints one JSON document
    ``{"error": {...}}`` on stdout; human messages always go to stderr.

    ``argv`` None: the process's own command line (the ``builder`` script, ``python -m builder``).
    Then the interpreter's closing cyclic garbage collection is skipped (``gc.freeze`` at exit,
    https://docs.python.org/3/library/gc.html#gc.freeze): it walks every object of every imported
    module only for the operating system to free the memory a moment later (25-80 ms of a 0.2 s
    ``resolve``; issue 19). Files, locks and connections builder writes are closed by a ``with``
    or explicitly before then; every atexit handler (logging, thread pools) still runs.

    ``resume_collector``: the caller paused the cyclic garbage collector while builder imported
    (``builder.__main__``); it is frozen (``gc.freeze``) and resumed once the invoked command's module
    is imported, before the command's own work.

    A reader that went away (stdout or stderr: ``builder status 2>&1 | head -2``) stops builder
    quietly with ``READER_GONE`` (141) when the command would have succeeded; a failing command
    keeps its own exit code (what it could still write was written)."""
    if argv is None:
        atexit.register(collector.freeze)
    args = sys.argv[1:] if argv is None else argv
    try:
        _main(args, resume_collector=resume_collector)
    except SystemExit as stop:
        if not _delivered() and stop.code in (0, None):  # `--help | head`: the reader went away
            sys.exit(READER_GONE)
        raise
    except BrokenPipeError:  # raised by any write (rich console, click.echo, print), either stream
        _silence_outputs()
        sys.exit(READER_GONE)
    if not _delivered():  # the last buffered output could not be written
        sys.exit(READER_GONE)


#: the exit status when the reader of builder's output (stdout or stderr) went away before it was
#: all written (`builder status 2>&1 | head -2`): 128 + SIGPIPE, as a shell reports a Unix tool
#: stopped by a closed pipe (https://tldp.org/LDP/abs/html/exitcodes.html)
READER_GONE = 128 + signal.SIGPIPE


def _delivered() -> bool:
    """Flush stdout and stderr; False (and both silenced) when a reader went away."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        _silence_outputs()
        return False
    return True


def _silence_outputs() -> None:
    """Point each of stdout and stderr whose reader went away at /dev/null, so nothing builder
    still writes there (the interpreter's closing flush included) raises again
    (https://docs.python.org/3/library/signal.html#note-on-sigpipe); the other stream still
    carries the message. A pipe without a reader polls as an error (POLLERR, poll(2))."""
    import select

    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for stream in (sys.stdout, sys.stderr):
            try:
                fd = stream.fileno()
            except (AttributeError, ValueError, io.UnsupportedOperation):
                continue  # an in-process caller's captured stream: not a pipe of this process
            poller = select.poll()
            poller.register(fd, select.POLLOUT)
            if any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0)):
                os.dup2(devnull, fd)
                if stream is sys.stderr:
                    console().quiet = True
    finally:
        os.close(devnull)


@contextlib.contextmanager
def _reader_may_be_gone() -> Iterator[None]:
    """Around reporting a failure: when the reader went away meanwhile, stop writing and keep
    the failure's own exit code (it says more than 141)."""
    try:
        yield
    except BrokenPipeError:
        _silence_outputs()


def _main(args: list[str], *, resume_collector: bool = False) -> None:
    """``main`` for ``args``: every outcome but success leaves by ``sys.exit``."""
    if os.environ.get(COMPLETE_VAR):  # shell completion (docs/commands.md): Click answers and exits
        cli.main(list(args), prog_name="builder", complete_var=COMPLETE_VAR)
    app: AppContext | None = None
    made: click.Context | None = None
    previous = _install_signal_handlers()
    try:
        with cli.make_context("builder", list(args)) as ctx:
            app = ctx.obj
            made = ctx
            ctx.meta[RESUME_COLLECTOR] = resume_collector
            cli.invoke(ctx)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        with _reader_may_be_gone():
            exc.show()
            if _json_mode(app, args):
                _print_json_error("usage", exc.exit_code, exc.format_message(), "see `builder COMMAND --help`")
            _annotate("usage", exc.format_message())
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:  # Click turns an interrupt during a prompt into Abort
        signum = process.interrupted()
        with _reader_may_be_gone():
            if signum is not None:
                _report_interrupt(process.Interrupted(signum), app, args)
            console().print("[red]aborted[/]")
        sys.exit(128 + (signum or signal.SIGINT))
    except BuilderError as raised:
        owner = made.obj if made is not None else None  # the root command made the AppContext
        error = owner.explain(raised) if isinstance(owner, AppContext) else raised  # a variant REF never built
        with _reader_may_be_gone():
            _report(error, app, args)
        sys.exit(error.exit_code)
    except KeyboardInterrupt as exc:
        interrupt = exc if isinstance(exc, process.Interrupted) else process.Interrupted(signal.SIGINT)
        with _reader_may_be_gone():
            _report_interrupt(interrupt, app, args)
        sys.exit(interrupt.exit_code)
    except BrokenPipeError:
        raise  # the reader went away: main stops quietly with READER_GONE
    except Exception as exc:  # a bug: traceback always, and still one JSON document with --json
        import traceback

        with _reader_may_be_gone():
            traceback.print_exc()
            if _json_mode(app, args):
                _print_json_error(
                    "unexpected",
                    1,
                    f"{type(exc).__name__}: {exc}",
                    "this is a bug in builder: report it with the traceback",
                )
            _annotate("unexpected", f"{type(exc).__name__}: {exc}")
        sys.exit(1)
    finally:
        _restore_signal_handlers(previous)


#: the signals that stop builder the way Ctrl-C does: children stopped, locks released (every
#: lock is held in a ``with``), what was left reported, exit 128 + signal number
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _on_stop_signal(signum: int, _frame: object) -> None:
    """Stop every child, then unwind the main thread with ``Interrupted`` (once: a second signal
    while unwinding only re-sends SIGTERM to the children, so clean-up is not cut short)."""
    first = process.interrupted() is None
    process.interrupt(signum)
    if first:
        raise process.Interrupted(signum)


def _install_signal_handlers() -> dict[int, object]:
    """Install ``_on_stop_signal`` for STOP_SIGNALS (main thread only; Python allows no other);
    return the previous handlers for ``_restore_signal_handlers``."""
    process.reset_interrupt()
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {int(sig): signal.signal(sig, _on_stop_signal) for sig in STOP_SIGNALS}


def _restore_signal_handlers(previous: dict[int, object]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)  # type: ignore[arg-type]  # what signal.signal returned


def _report_interrupt(exc: process.Interrupted, app: AppContext | None, args: list[str]) -> None:
    """``interrupted by SIGTERM: 2 of 5 variants not built`` on stderr (and the JSON error)."""
    name = signal.Signals(exc.signum).name
    message = f"interrupted by {name}" + (": " + "; ".join(exc.left) if exc.left else "")
    if _json_mode(app, args):
        _print_json_error(
            "interrupted", exc.exit_code, message, "rerun the same command: work already done is kept and skipped"
        )
    from builder.cli.plaintext import escape

    console().print(f"[red]{escape(message)}[/]", highlight=False)
    _annotate("interrupted", message)


def _json_mode(app: AppContext | None, args: list[str]) -> bool:
    return (app is not None and app.json_output) or "--json" in args


def _print_json_error(kind: str, code: int, message: str, hint: str) -> None:
    doc = {"error": {"kind": kind, "exit_code": code, "message": message, "hint": hint, "details": {}}}
    print(json.dumps(doc, indent=2))


def _report(exc: BuilderError, app: AppContext | None, args: list[str]) -> None:
    debug = (app is not None and app.debug) or "--debug" in args
    if debug:
        import traceback

        traceback.print_exc()
    if _json_mode(app, args):
        with _reader_may_be_gone():  # `builder verify --json | head`: the message and exit code still tell
            print(json.dumps({"error": exc.to_json()}, indent=2, default=str), flush=True)
    from builder.cli.plaintext import escape  # messages quote outside text (engine stderr: `capabilities: [[gpu]]`)

    con = console()
    error, hint = f"error: {exc.message}", f"  hint: {exc.hint}" if exc.hint else ""
    if con.is_terminal:  # a person reads it: folded at spaces (references stay whole); logs keep one line
        from builder.cli.terminal import fold

        error, hint = fold(error, con.width), fold(hint.lstrip(), con.width, indent="  ", hang=4) if hint else ""
    con.print(f"[bold red]error:[/]{escape(error[6:])}", highlight=False, markup=True)
    if hint:
        con.print(f"  [yellow]hint:[/]{escape(hint[7:])}", highlight=False)
    _annotate(exc.kind, exc.message, exc.details)


def _annotate(kind: str, message: str, details: dict[str, object] | None = None) -> None:
    """GitHub Actions (``GITHUB_ACTIONS=true``): the failure and each located problem as ``::error``."""
    from builder.cli.github import report_failure

    report_failure(kind, message, details)


__all__ = ["COMMANDS", "AppContext", "cli", "json_option", "main"]
